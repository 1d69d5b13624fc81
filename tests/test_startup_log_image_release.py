"""The release an engine image's tag names anywhere in a log, where no version line or serve
command names one (``memprof.probes.startup_log._image_named``): a run report's "engine image:
`vllm/vllm-openai:v0.30.0`" (published row 1717, verbatim), an issue comment's
"lmsysorg/sglang:v0.4.8.post1-rocm630-srt" (row 402)."""

from __future__ import annotations

import json
from pathlib import Path

from memprof.probes.startup_log import parse_log

_ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).with_name("data") / "published.json").read_text(encoding="utf-8"))["rows"]}
# published row 1640's KV line, verbatim: a vLLM V1 log
_LOAD = ("(EngineCore pid=239) INFO 10-05 05:47:49 [gpu_worker.py:563] Available KV cache "
         "memory: 10.74 GiB\n")


def test_row_1717_names_its_release_by_the_image_it_ran() -> None:
    log = parse_log(_ROWS[1717]["quote"])
    assert log.version == "0.30.0"
    assert any("'vllm/vllm-openai:v0.30.0'" in n and "0.30.0" in n for n in log.notes)


def test_an_sglang_image_tag_with_a_platform_suffix() -> None:
    log = parse_log(_ROWS[402]["quote"])
    assert log.engine == "sglang" and log.version == "0.4.8.post1"


def test_a_version_line_wins_over_an_image_tag() -> None:
    log = parse_log("engine image: `vllm/vllm-openai:v0.30.0`\n"
                    "INFO 09-24 22:06:59 [api_utils.py:347]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version "
                    "0.29.0\n" + _LOAD)
    assert log.version == "0.29.0"


def test_no_release_from_latest_another_engine_or_two_tags() -> None:
    assert parse_log("image `vllm/vllm-openai:latest`\n" + _LOAD).version is None
    assert parse_log(_LOAD).engine == "vllm"
    # another engine's image (the log is vLLM's), a URL's port, a path without a tag
    assert parse_log("the router runs lmsysorg/sglang:v0.5.19 beside it; "
                     "http://10.0.0.1:8000/v1 ; /m/vllm/vllm-openai\n" + _LOAD).version is None
    two = parse_log("tried vllm/vllm-openai:v0.29.0, then vllm/vllm-openai:v0.30.0\n" + _LOAD)
    assert two.version is None
    assert any("2 releases" in n for n in two.notes)
