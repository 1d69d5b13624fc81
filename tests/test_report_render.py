"""``memprof.report.render``, the one reporter entry: every registered (kind, format) names a
function that exists and whose calling convention is known; ``--markdown FILE`` writes what
``--format markdown`` prints, checked before any work; the one width policy."""

from __future__ import annotations

import importlib
import io
from pathlib import Path

import pytest

from memprof.base.errors import BadInput
from memprof.report import _CALLS, FORMATS, REGISTRY, formats, output_width, render
from tests.cli_helpers import invoke, one_error

ESTIMATE = ["estimate", "-m", "qwen3-0.6b", "--gpu", "H100"]


@pytest.mark.parametrize(("key", "where"), sorted(REGISTRY.items()), ids=lambda v: str(v))
def test_every_registered_reporter_exists(key: tuple[str, str], where: str) -> None:
    module, _, name = where.partition(":")
    assert callable(getattr(importlib.import_module(module), name))
    assert where in _CALLS and key[1] in FORMATS


def test_markdown_is_registered_only_where_a_renderer_exists() -> None:
    for (kind, fmt), where in REGISTRY.items():
        if fmt == "markdown":
            assert "markdown" in where.rsplit(":", 1)[1], kind
    assert formats("EstimateReport") == ("table", "json", "markdown")


def test_an_unregistered_pair_is_bad_input() -> None:
    with pytest.raises(BadInput, match="no csv rendering of ReplayResult"):
        render(type("ReplayResult", (), {})(), "csv")


def test_markdown_file_holds_what_format_markdown_prints(tmp_path: Path) -> None:
    code, printed, err = invoke([*ESTIMATE, "-f", "markdown"])
    assert code == 0, err
    md = tmp_path / "estimate.md"
    code, table, err = invoke([*ESTIMATE, "--markdown", str(md)])
    assert code == 0, err
    assert md.read_text() == printed and table != printed and table.strip()


def test_a_bad_markdown_path_fails_before_any_work(tmp_path: Path) -> None:
    code, out, err = invoke([*ESTIMATE, "--markdown", str(tmp_path / "nodir" / "x.md")])
    assert code == 2 and out == ""
    one_error(err, "--markdown")
    assert not (tmp_path / "nodir").exists()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_one_width_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert output_width(io.StringIO()) == 100
    monkeypatch.setenv("COLUMNS", "72")
    assert output_width(io.StringIO()) == 72
    assert output_width(_Tty()) is None  # a terminal: its own width
    monkeypatch.setenv("COLUMNS", "wide")
    assert output_width(io.StringIO()) == 100


@pytest.mark.parametrize("columns", ["60", "100", "140"])
def test_piped_tables_follow_the_policy(monkeypatch: pytest.MonkeyPatch, columns: str) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    for argv in (ESTIMATE, ["gpus"], ["models"]):
        code, out, err = invoke(argv)
        assert code == 0, err
        assert max(len(line) for line in out.splitlines()) <= int(columns), argv
