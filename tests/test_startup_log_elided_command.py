"""A quoted serve command with a line of its own elided (``  ... \\``) stays one command
(``memprof/probes/startup_log.py`` ``_shell_lines``): the flags after the elision are the
command's, as published row 134's ``vllm serve`` shows ``--gpu-memory-utilization 0.9`` after
``  ... \\``."""

from __future__ import annotations

import json
from pathlib import Path

from memprof.probes.startup_log import parse_log

_ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).with_name("data") / "published.json").read_text(encoding="utf-8"))["rows"]}
# published row 134's load line, verbatim
_LOAD = "Model loading took 48.5 GiB memory and 10.090812 seconds\n"


def test_row_134_reads_the_flag_after_its_elision() -> None:
    log = parse_log(_ROWS[134]["quote"])
    assert log.settings["gpu_memory_utilization"] == 0.9
    assert log.settings["max_model_len"] == 131072
    assert log.settings["enforce_eager"] is True
    assert log.model == "google/gemma-4-26B-A4B"


def test_an_elision_without_its_backslash_continues_too() -> None:
    # the document cut the elided lines with their backslashes (published row 162's form)
    log = parse_log("vllm serve Qwen/Qwen3-8B \\\n  --max-model-len 16384 \\\n  ...\n"
                    "  --gpu-memory-utilization 0.85\n" + _LOAD)
    assert log.settings["max_model_len"] == 16384
    assert log.settings["gpu_memory_utilization"] == 0.85


def test_a_log_line_after_an_elision_ends_the_command() -> None:
    log = parse_log("vllm serve Qwen/Qwen3-8B \\\n  --max-model-len 16384 \\\n  ...\n"
                    "INFO 04-17 15:09:15 [api_server.py:1034] vLLM API server version 0.8.4\n"
                    + _LOAD)
    assert log.settings["max_model_len"] == 16384
    assert log.version == "0.8.4"


def test_an_elision_outside_a_command_continues_nothing() -> None:
    log = parse_log("INFO 04-17 15:09:15 [api_server.py:1034] vLLM API server version 0.8.4\n"
                    "  ...\n  --max-model-len 4096\n" + _LOAD)
    assert "max_model_len" not in log.settings
