"""The estimate's table without rich (``memprof/report/plain.py``) is byte for byte what rich
draws: for random paragraphs and tables (hypothesis), and for the estimates of every bundled
model on the gate's scenarios at widths from 60 to 200 columns. Where ``plain`` declines
(``None``), the reporter hands the whole report to rich, so only its answers are compared; a
test also bounds how often it declines at the widths a pipe gets."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

import memprof.report.table as table_reporter
from memprof.cli import run
from memprof.report import plain

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from compare_estimates import cases  # noqa: E402  (every bundled model × the gate's scenarios)

WIDTHS = (60, 79, 80, 100, 132, 200)
# what the reports print, and characters plain declines (wide, zero-width, tab, markup)
ALPHABET = st.sampled_from([*"ab xy  09.,()=×†‡…¹ᵃ→−█▓·Δ:[]", "\n", "\t", "中", "\u200b"])


def _rich(renderable: Any, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, force_terminal=False,
            highlight=False).print(renderable)
    return buf.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.text(ALPHABET, max_size=160), st.integers(1, 90))
def test_wrap_is_richs_text(text: str, width: int) -> None:
    lines = plain.wrap(text, width)
    if lines is not None:
        assert "\n".join(lines) + "\n" == _rich(Text(text), width)


CELL = st.text(st.sampled_from(list("abc 0.9×†…%")), max_size=14).map(str.strip)


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from(list("rank 0(),:→=ab")), max_size=70),
       st.lists(st.tuples(CELL, st.sampled_from(plain.JUSTIFY)), min_size=1, max_size=6),
       st.data(), st.integers(10, 120))
def test_table_is_richs_simple_head_table(title: str, columns: list[tuple[str, str]],
                                          data: st.DataObject, width: int) -> None:
    rows = data.draw(st.lists(st.tuples(*[CELL] * len(columns)), min_size=1, max_size=5))
    lines = plain.table(title, columns, rows, width)
    if lines is None:
        return
    t = Table(title=title or None, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
              pad_edge=False, collapse_padding=True)
    for head, justify in columns:
        t.add_column(head, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for row in rows:
        t.add_row(*row)
    assert "\n".join(lines) + "\n" == _rich(t, width)


def _reports(argvs: list[list[str]]) -> list[Any]:
    """The ``EstimateReport`` each ``memprof estimate ARGV`` renders."""
    got: list[Any] = []
    patch = pytest.MonkeyPatch()
    patch.setattr(table_reporter, "render_table",
                  lambda report, width=None, *, color=False: got.append(report) or "")
    try:
        for argv in argvs:
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                run(["estimate", *argv, "-f", "table"])
    finally:
        patch.undo()
    return got


def _check(reports: list[Any], widths: tuple[int, ...] = WIDTHS) -> int:
    """Compares plain's layout of each report with rich's at each of ``widths``; returns how
    many renderings plain declined at 80 columns or more."""
    declined = 0
    for report in reports:
        for width in widths:
            lines = table_reporter.plain_lines(table_reporter.blocks(report, width), width)
            if lines is None:
                declined += width >= 80
                continue
            assert "\n".join(lines) + "\n" == table_reporter.render_with_rich(report, width)
    return declined


EXTRA = [["--model", "qwen3-32b", "--gpu", "H100", "--compare", "max_num_seqs=64"],
         ["--model", "deepseek-r1", "--gpu", "H100", "-tp", "8", "--compare",
          "gpu_memory_utilization=0.8"],
         ["--model", "llama-3.1-70b", "--gpu", "L4"]]  # does not fit: remedies


SAMPLE = 10  # every tenth gate case, drawn at all six widths here and left out of the shards


def test_estimates_on_a_sample_of_the_gate_cases_match_rich() -> None:
    reports = _reports(EXTRA + [argv for _, argv in cases()[::SAMPLE]])
    assert len(reports) >= 20
    assert _check(reports) == 0


SHARDS = 6  # the cases in six parts, so that pytest-xdist's workers share them


def test_the_shards_cover_every_gate_case() -> None:
    every = [argv for _, argv in cases()]
    assert len(every) >= 150
    rest = [argv for i, argv in enumerate(every) if i % SAMPLE]
    assert sorted(x for k in range(SHARDS) for x in map(str, rest[k::SHARDS])) == sorted(
        map(str, rest))
    assert sorted(map(str, rest + every[::SAMPLE])) == sorted(map(str, every))


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(SHARDS))
def test_estimates_on_every_gate_case_match_rich(shard: int) -> None:
    # every case at the narrow and the usual terminal, where lines wrap (the sample above takes
    # all six widths, the wide ones too, and its cases are not estimated again here), which
    # keeps the suite's CPU time within its budget as the bundled models grow
    rest = [argv for i, (_, argv) in enumerate(cases()) if i % SAMPLE][shard::SHARDS]
    reports = _reports(rest)
    assert len(reports) >= 150 // SHARDS - 150 // SHARDS // SAMPLE
    assert _check(reports, (60, 80)) == 0
