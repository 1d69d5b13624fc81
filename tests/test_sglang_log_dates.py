"""An SGLang log that names no release is placed by its date (issue 26): SGLang stamps every
line ``[%Y-%m-%d %H:%M:%S{prefix}]`` (``configure_logger``: ``sglang/srt/utils.py`` in the 0.4.3
wheel, ``sglang/srt/utils/common.py`` in the 0.5.23 wheel, ``.%(msecs)03d`` added under
``SGLANG_LOG_MS``), read by ``memprof.probes.log_dates.read_date``; the log is placed at the
newest SGLang release (never a source snapshot) whose PyPI upload is 14 hours or more before the
stamp (``log_dates.published_by``, ``memprof.core.releases.PUBLISHED``), with a note; a release
the log names wins; a stamp that is no date is refused with one ``error:`` and one ``hint:``.
"""

from __future__ import annotations

import contextlib
import io
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.releases import PUBLISHED, SGLANG_DATED, SGLANG_SNAPSHOTS
from memprof.probes.log_dates import ZONE_SLACK, read_date, release_dates
from memprof.probes.sglang_log import place_by_date
from memprof.probes.startup_log import parse_log

KV = "KV Cache is allocated. #tokens: 400000, K size: 24.41 GB, V size: 24.41 GB"
LOAD = ("Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.52 GB, "
        "mem usage=14.99 GB.")


def _log(stamp: str, *head: str) -> str:
    return "\n".join([*head, f"[{stamp} TP0] {LOAD}", f"[{stamp} TP0] {KV}", ""])


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


def _explain(tmp_path: Path, text: str) -> tuple[int, str, str]:
    log = tmp_path / "sglang.log"
    log.write_text(text, encoding="utf-8")
    return invoke(["explain", str(log), "-m", "llama-3.1-8b", "--gpu", "H100", "-f", "json"])


def test_the_table_is_sglang_s_releases_without_the_snapshots() -> None:
    table = release_dates("sglang")
    assert table is not None
    assert list(table) == [n for n, _, _ in SGLANG_DATED if n not in SGLANG_SNAPSHOTS]
    assert not set(SGLANG_SNAPSHOTS) & set(table) and len(SGLANG_SNAPSHOTS) == 2
    assert list(table.values()) == sorted(table.values())  # oldest first
    assert table["0.4.8.post1"] == datetime(2025, 6, 26, 9, 21, 36)  # modelled on its own
    assert PUBLISHED["sglang"][-1] == ("0.5.23", "2026-10-30T01:34:33Z")


@pytest.mark.parametrize("stamp", ["2025-04-28 12:00:00", "2025-04-28 12:00:00.123",
                                   "2025-04-28 12:00:00 TP0", "2025-04-28 12:00:00.123 DP1 TP3"])
def test_sglang_s_stamps_are_read(stamp: str) -> None:
    when = read_date([f"[{stamp}] {KV}"])
    assert when is not None
    assert (when.year, when.month, when.day, when.clock) == (2025, 4, 28, (12, 0, 0))


def test_the_zone_margin() -> None:
    """0.4.6 was uploaded 2025-04-27T21:07:31Z: out in every zone from 2025-04-28 11:07:31."""
    before = read_date([f"[2025-04-28 11:07:30 TP0] {KV}"])
    after = read_date([f"[2025-04-28 11:07:31 TP0] {KV}"])
    assert before is not None and after is not None
    assert place_by_date(before)[0] == "0.4.5"
    assert place_by_date(after)[0] == "0.4.6"


@pytest.mark.parametrize(("stamp", "release", "snapshot"), [
    ("2026-08-23 12:00:00", "0.5.18", "main@d315eb7"),  # committed 2026-08-22T14:34:57Z
    ("2026-07-09 20:00:00", "0.5.14", "deepseek-v4-hopper@2026-07"),  # in use 2026-07-09
])
def test_a_source_snapshot_is_never_the_placement(stamp: str, release: str,
                                                  snapshot: str) -> None:
    when = read_date([f"[{stamp}] {KV}"])
    assert when is not None
    placed, note = place_by_date(when)
    assert placed == release and snapshot not in note


def test_before_every_release_is_the_oldest() -> None:
    when = read_date([f"[2024-12-04 23:50:03] {KV}"])
    assert when is not None
    placed, note = place_by_date(when)
    assert placed == "0.4.3" and "before SGLang 0.4.3 was published (2025-02-14" in note


def test_explain_places_and_says_so(tmp_path: Path) -> None:
    code, out, err = _explain(tmp_path, _log("2025-04-29 10:11:12"))
    assert code in (0, 1), err
    d = json.loads(out)
    assert d["deployment"]["engine_version"] == "0.4.6"
    assert any("0.4.6 is the newest SGLang release published before 2025-04-29, the log's "
               "date (line 1: '2025-04-29 10:11:12'" in n for n in d["log"]["notes"]), d["log"]


def test_a_release_the_log_names_wins_over_its_date(tmp_path: Path) -> None:
    code, out, err = _explain(tmp_path, _log("2025-10-07 10:11:12", "pip install sglang==0.4.3"))
    assert code in (0, 1), err
    d = json.loads(out)
    assert d["deployment"]["engine_version"] == "0.4.3"
    assert not any("published before" in n for n in d["log"]["notes"])


def test_an_engine_version_given_wins(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text(_log("2025-04-29 10:11:12"), encoding="utf-8")
    code, out, err = invoke(["explain", str(log), "-m", "llama-3.1-8b", "--gpu", "H100",
                             "--engine", "sglang", "--engine-version", "0.5.10", "-f", "json"])
    assert code in (0, 1), err
    assert json.loads(out)["deployment"]["engine_version"] == "0.5.10"


_T0 = datetime(2024, 12, 1)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 800 * 24 * 3600))
def test_the_placement_is_the_newest_release_out_in_every_zone(seconds: int) -> None:
    t = _T0 + timedelta(seconds=seconds)
    when = read_date([f"[{t:%Y-%m-%d %H:%M:%S} TP0] {KV}"])
    assert when is not None
    placed, _ = place_by_date(when)
    table = release_dates("sglang")
    assert table is not None
    out = [r for r, at in table.items() if at + ZONE_SLACK <= t]
    assert placed == (out[-1] if out else "0.4.3")


_BAD = st.one_of(
    st.tuples(st.integers(2024, 2027), st.sampled_from([0, 13, 19, 99]), st.integers(1, 28),
              st.integers(0, 23)),
    st.tuples(st.integers(2024, 2027), st.sampled_from([2, 4, 6, 9, 11]), st.integers(31, 39),
              st.integers(0, 23)),
    st.tuples(st.sampled_from([2025, 2026]), st.just(2), st.sampled_from([29, 30]),
              st.integers(0, 23)),
    st.tuples(st.integers(2024, 2027), st.integers(1, 12), st.integers(1, 28),
              st.integers(24, 99)),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_BAD)
def test_a_stamp_that_is_no_date_is_one_error_and_a_hint(
        tmp_path: Path, bad: tuple[int, int, int, int]) -> None:
    year, month, day, hour = bad
    stamp = f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:11:12"
    code, out, err = _explain(tmp_path, _log(stamp))
    lines = err.strip().splitlines()
    assert code == 2 and out == "", err
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert "is no date" in lines[0] and "Traceback" not in err


def test_a_damaged_stamp_is_refused_before_placement() -> None:
    with pytest.raises(BadInput, match="no date"):
        parse_log(_log("2025-02-29 10:11:12"))
