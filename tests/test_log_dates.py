"""``memprof/probes/log_dates.py``: a start-up log's date, the table of vLLM release dates
(``configs/vllm_release_dates.json``, PyPI's upload times), and explain placing a log that names
no release (or a development build) by its date; a stamp that is no date is one ``error:`` and
one ``hint:``, never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.models.load import configs_dir
from memprof.core.releases import VLLM_RELEASES
from memprof.probes.log_dates import (
    LogDate,
    among,
    dev_build,
    published_by,
    read_date,
    release_dates,
)
from memprof.probes.log_deployment import rebuild
from memprof.probes.startup_log import parse_log

TABLE = configs_dir() / "vllm_release_dates.json"
KV = "GPU KV cache size: 100,000 tokens"


def _date(text: str) -> LogDate | None:
    return read_date(text.splitlines())


# --- the table ------------------------------------------------------------------------------


def test_the_table_is_pypi_s_upload_times() -> None:
    doc = json.loads(TABLE.read_text(encoding="utf-8"))
    assert "pypi.org/pypi/vllm/json" in doc["_source"]
    rel = doc["releases"]
    # PyPI's first upload of each release (https://pypi.org/pypi/vllm/json)
    assert rel["0.7.3"] == "2025-02-20T18:01:55Z"
    assert rel["0.6.0"] == "2024-09-05T04:26:12Z"
    assert rel["0.10.1.1"] == "2025-08-20T23:17:09Z"
    assert rel["0.33.0"] == "2026-11-02T10:12:56Z"
    assert "0.7.0" in rel  # a release memprof maps to 0.7.1, dated all the same
    assert list(rel.values()) == sorted(rel.values())  # oldest first
    assert TABLE.stat().st_size < 4096


def test_every_modelled_release_has_a_date() -> None:
    table = release_dates("vllm")
    assert table is not None
    assert set(VLLM_RELEASES) <= set(table)
    assert next(iter(table)) == "0.6.0" and list(table)[-1] == VLLM_RELEASES[-1]
    assert release_dates("no-such-engine") is None  # no table: never placed by date


# --- reading the date -----------------------------------------------------------------------


def test_vllm_s_stamp_has_no_year() -> None:
    d = _date("(EngineCore_0 pid=1) INFO 08-16 09:49:18 [gpu_worker.py:276] Available KV cache "
              "memory: 1 GiB")
    assert d is not None
    assert (d.month, d.day, d.year, d.clock, d.line) == (8, 16, None, (9, 49, 18), 1)
    assert d.day_text == "08-16"


@pytest.mark.parametrize(("line", "want"), [
    ("2025-08-16T09:49:18.123456789Z " + KV, (2025, 8, 16)),  # docker logs -t
    ("[2025-10-07 23:17:19 TP0] " + KV, (2025, 10, 7)),
    ("2025-08-16 09:49:18,123\tINFO worker.py:1 -- " + KV, (2025, 8, 16)),  # Ray / asctime
    ("Sat Aug 16 09:49:18 2025", (2025, 8, 16)),  # nvidia-smi's header
    ("Sat Aug 16 09:49:18 UTC 2025", (2025, 8, 16)),  # date(1)
])
def test_a_stamp_with_its_year(line: str, want: tuple[int, int, int]) -> None:
    d = _date(line)
    assert d is not None and (d.year, d.month, d.day) == want


def test_the_year_comes_from_another_stamp() -> None:
    # the vLLM stamp is the date; nvidia-smi's header, taken days later, gives the year
    d = _date("Mon Jan  5 10:00:00 2026\nINFO 12-31 23:59:59 [gpu_worker.py:276] x")
    assert d is not None and (d.year, d.month, d.day, d.line) == (2025, 12, 31, 2)


@pytest.mark.parametrize("text", [
    "GPU KV cache size: 1,000 tokens",  # no date
    "INFO 25-08-16 09:49:18 [gpu_worker.py:276] x",  # a two-digit year: no stamp memprof reads
    "25-08-16 09:49:18 " + KV,
    "model=/models/gpt-4o-2024-08-06 " + KV,  # a date in a name, no time: not a stamp
    "torch 2.7.0.dev20250310 " + KV,
])
def test_no_date(text: str) -> None:
    d = _date(text)
    assert d is None or d.year is None


def test_february_29th() -> None:
    d = _date("INFO 02-29 10:00:00 [core.py:1] x")  # a date in a leap year
    assert d is not None and d.on(2024) is not None and d.on(2025) is None


@pytest.mark.parametrize(("line", "why"), [
    ("INFO 13-01 10:00:00 [core.py:1] x", "no month 13"),
    ("INFO 00-10 10:00:00 [core.py:1] x", "no month 0"),
    ("INFO 02-30 10:00:00 [core.py:1] x", "Feb has no day 30"),
    ("INFO 04-31 10:00:00 [core.py:1] x", "Apr has no day 31"),
    ("INFO 04-00 10:00:00 [core.py:1] x", "Apr has no day 0"),
    ("INFO 04-10 25:00:00 [core.py:1] x", "no time"),
    ("2025-02-29 10:00:00 " + KV, "Feb has no day 29 in 2025"),
    ("[2025-13-07 23:17:19 TP0] " + KV, "no month 13"),
    ("0000-01-01 00:00:00 " + KV, "before any clock"),
])
def test_a_stamp_that_is_no_date_is_an_error(line: str, why: str) -> None:
    with pytest.raises(BadInput) as exc:
        parse_log(line + "\n" + KV)
    assert why in exc.value.message and "line 1" in exc.value.message
    assert "damaged or edited" in exc.value.hint


def _explain(tmp_path: Path, text: str, *more: str) -> tuple[int, str, str]:
    log = tmp_path / "x.log"
    log.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(["explain", str(log), "-m", "qwen3-8b", "--gpu", "H100", *more])
    return code, out.getvalue(), err.getvalue()


_FIELD = st.one_of(st.integers(0, 99).map(lambda n: f"{n:02d}"), st.text("0123456789", max_size=3))


@settings(max_examples=150, deadline=None)
@given(month=_FIELD, day=_FIELD, hh=_FIELD, year=st.one_of(st.none(), st.integers(0, 9999)))
def test_fuzzed_stamps_never_crash(month: str, day: str, hh: str, year: int | None) -> None:
    """Any month, day, hour and year in a stamp: a date, no date, or one BadInput."""
    stamp = (f"INFO {month}-{day} {hh}:10:10 [gpu_worker.py:276] " if year is None
             else f"{year:04d}-{month}-{day} {hh}:10:10 ")
    try:
        d = read_date([stamp + KV])
    except BadInput as exc:
        assert exc.message and exc.hint
        return
    if d is not None:
        assert datetime(d.year or 2000, d.month, d.day, *d.clock)  # a real date and time


@pytest.mark.parametrize("stamp", ["INFO 02-30 10:00:00 [gpu_worker.py:276] ",
                                   "2025-13-01 10:00:00 ", "INFO 99-99 99:99:99 "])
def test_explain_refuses_a_stamp_that_is_no_date(tmp_path: Path, stamp: str) -> None:
    code, out, err = _explain(tmp_path, stamp + KV + "\n")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert "Traceback" not in err


# --- placing by date ------------------------------------------------------------------------


def _at(text: str) -> LogDate:
    d = _date(text)
    assert d is not None
    return d


def test_a_year_places_the_newest_release_out_by_then() -> None:
    # 0.10.1 was uploaded on 2025-08-19, after the log's 2025-08-16
    p = published_by("vllm", _at("2025-08-16 09:49:18 x"))
    assert p is not None and p.release == "0.10.0"
    assert "2025-08-16, the log's date" in p.note
    # 0.10.1.1 was uploaded at 23:17 UTC on 2025-08-20: not out at 18:04 local in every zone
    p = published_by("vllm", _at("2025-08-20 18:04:10 x"))
    assert p is not None and p.release == "0.10.1"
    p = published_by("vllm", _at("2025-08-22 00:00:00 x"))
    assert p is not None and p.release == "0.10.1.1"
    assert published_by("vllm", _at("2024-01-01 00:00:00 x")) is None  # before 0.6.0
    assert published_by("vllm", _at("INFO 08-16 09:49:18 x")) is None  # no year
    late = published_by("vllm", _at("2027-06-01 00:00:00 x"))
    assert late is not None and late.release == VLLM_RELEASES[-1] and "newer one" in late.note


def test_a_month_day_among_the_releases_the_tags_fit() -> None:
    # 0.7.2 (2025-02-06) and 0.7.3 (2025-02-20), current from 0.7.1 (02-01) to 0.8.0 (03-18)
    p = among("vllm", ["0.7.2", "0.7.3"], _at("INFO 02-11 07:40:45 x"))
    assert p is not None and p.release == "0.7.2" and "2025-02-11" in p.note
    p = among("vllm", ["0.7.2", "0.7.3"], _at("INFO 03-01 07:40:45 x"))
    assert p is not None and p.release == "0.7.3"
    # before them all: a build on the way to the first
    p = among("vllm", ["0.8.0", "0.8.1", "0.8.2"], _at("INFO 03-14 20:43:52 x"))
    assert p is not None and p.release == "0.8.0" and "on the way to 0.8.0" in p.note
    # outside the span the releases were current in: the date does not choose
    assert among("vllm", ["0.7.2", "0.7.3"], _at("INFO 05-11 07:40:45 x")) is None
    # the newest release memprof knows: no release after it bounds the span
    assert among("vllm", ["0.32.0", "0.33.0"], _at("INFO 11-20 07:40:45 x")) is None


def test_a_year_among_the_releases_the_tags_fit() -> None:
    p = among("vllm", ["0.7.2", "0.7.3"], _at("2025-02-25 07:40:45 x"))
    assert p is not None and p.release == "0.7.3"
    # past the publication of the release after them (0.8.0), or before that of the release
    # before them (0.7.1, 2025-02-01): the tags decide
    assert among("vllm", ["0.7.2", "0.7.3"], _at("2025-06-01 07:40:45 x")) is None
    assert among("vllm", ["0.7.2", "0.7.3"], _at("2024-06-01 07:40:45 x")) is None
    p = among("vllm", ["0.7.2", "0.7.3"], _at("2025-02-03 07:40:45 x"))
    assert p is not None and p.release == "0.7.2" and "on the way to 0.7.2" in p.note


def test_a_development_build_by_its_date() -> None:
    # published row 122: v0.7.3.dev233 on 02-26, after 0.7.3 (2025-02-20)
    p = dev_build("vllm", "0.7.3.dev233+gad5a35c2", _at("INFO 02-26 09:53:52 x"))
    assert p is not None and p.release == "0.7.3" and "2025-02-26" in p.note
    # before 0.7.3 was out: memprof.core.release_names' mapping stands
    assert dev_build("vllm", "0.7.3.dev12", _at("INFO 02-10 09:53:52 x")) is None
    assert dev_build("vllm", "0.7.4.dev12", _at("INFO 03-01 09:53:52 x")) is None  # no 0.7.4
    assert dev_build("vllm", "0.7.3", _at("INFO 02-26 09:53:52 x")) is None  # no dev build


# --- explain --------------------------------------------------------------------------------

_TAGGED_072 = ("{stamp} [executor_base.py:110] # CUDA blocks: 30218, # CPU blocks: 3819\n"
               "{stamp} [executor_base.py:115] Maximum concurrency for 16384 tokens per "
               "request: 29.51x\n")


def test_a_tag_that_pins_a_release_wins_over_a_date() -> None:
    """Published row 802's lines (0.7.2's alone), stamped in June 2025 when 0.9.1 was out."""
    text = _TAGGED_072.replace("[", "").format(stamp="2025-06-12T10:00:00Z INFO 06-12 10:00:00")
    log = parse_log(text)
    assert log.date is not None and log.date.year == 2025
    rb = rebuild(log, model="qwen3-8b", gpu="H100", gpu_memory=None)
    assert rb.deployment.engine_version == "0.7.2"


def test_a_log_with_a_year_and_no_tag(tmp_path: Path) -> None:
    log = parse_log("2025-08-16T09:49:18Z " + KV)
    rb = rebuild(log, model="qwen3-8b", gpu="H100", gpu_memory=None)
    assert rb.deployment.engine_version == "0.10.0"
    assert any("newest vLLM release published before 2025-08-16" in n
               for n in rb.notes), rb.notes


def test_a_month_day_alone_says_the_release_is_unknown() -> None:
    log = parse_log("INFO 08-16 09:49:18 " + KV)
    rb = rebuild(log, model="qwen3-8b", gpu="H100", gpu_memory=None)
    assert rb.deployment.engine_version is None  # the newest modelled, as before
    assert any("dated 08-16 with no year" in n and "the release is unknown" in n
               and f"estimated at {VLLM_RELEASES[-1]}" in n for n in rb.notes), rb.notes


def test_an_undated_copy_keeps_the_patch_base() -> None:
    """Published row 106's line without its stamp: 0.10.1 and 0.10.1.1 alike, the base taken."""
    log = parse_log("(EngineCore_0 pid=5839) [gpu_model_runner.py:2007] Model loading took "
                    "65.9651 GiB and 12.799889 seconds")
    assert log.date is None
    rb = rebuild(log, model="qwen3-8b", gpu="H100", gpu_memory=None)
    assert rb.deployment.engine_version == "0.10.1"
    assert any("patch re-release 0.10.1.1" in n for n in rb.notes), rb.notes
