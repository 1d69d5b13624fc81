"""vLLM's start-up banner names the release where newer releases print no "API server version"
line: ``[utils.py:299] ▄▄ ▄█ █ █ █ ▀▄▀ █  version 0.19.0`` (published rows 133 and 145 quote
it); ``memprof explain`` reads the release from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.probes.startup_log import parse_log

ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "published.json").read_text(
        encoding="utf-8"))["rows"]}


@pytest.mark.parametrize(("row", "release"), [(133, "0.19.0"), (145, "0.25.1")])
def test_the_banner_names_the_release(row: int, release: str) -> None:
    assert parse_log(ROWS[row]["quote"]).version == release


def test_a_version_word_without_the_logo_is_not_a_release() -> None:
    log = ("INFO the model version 3.1.4 of the tokenizer\n"
           "INFO [gpu_model_runner.py:1] Model loading took 1.12 GiB and 2.0 seconds")
    assert parse_log(log).version is None
