"""vLLM's environment report (``python collect_env.py``, vllm/collect_env.py), which bug reports
paste beside their logs, names the release: ``vLLM Version                 : 0.11.0`` under its
"vLLM Info" heading, ``vLLM Version: 0.5.4`` in older releases. ``memprof explain`` reads the
release from it (published row 160 quotes it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.probes.startup_log import parse_log

ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "published.json").read_text(
        encoding="utf-8"))["rows"]}
LOAD = "INFO [gpu_model_runner.py:1] Model loading took 1.12 GiB and 2.0 seconds"


@pytest.mark.parametrize(("line", "release"), [
    ("vLLM Version                 : 0.11.0", "0.11.0"),
    ("vLLM Version: 0.5.4", "0.5.4"),
    ("vLLM Version                 : 0.10.2rc3.dev12+g1a2b3c4", "0.10.2rc3.dev12+g1a2b3c4"),
])
def test_the_environment_report_names_the_release(line: str, release: str) -> None:
    log = f"ROCM Version                 : Could not collect\n{line}\n{LOAD}"
    assert parse_log(log).version == release


def test_row_160_quotes_its_release() -> None:
    assert parse_log(ROWS[160]["quote"]).version == "0.11.0"


def test_the_api_server_line_wins_over_the_report() -> None:
    log = ("vLLM Version: 0.9.2\n"
           "INFO [api_server.py:1] vLLM API server version 0.10.1\n" + LOAD)
    assert parse_log(log).version == "0.10.1"


@pytest.mark.parametrize("line", [
    "the vLLM Version: 0.11.0 fixed it",  # prose, not the report's line
    "vLLM Version                 : Could not collect",
    "vLLM Version                 : N/A (dev)",
])
def test_no_release_where_the_report_names_none(line: str) -> None:
    assert parse_log(f"{line}\n{LOAD}").version is None
