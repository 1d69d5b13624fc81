"""A settings line that the page quoting a log wrapped over several lines reads as the one
line the engine printed (``memprof.probes.startup_log._unwrapped``): vLLM's "non-default args:
{…}" and "args: Namespace(…)", SGLang's "server_args=ServerArgs(…)". The lines are published
rows' quotes, verbatim (row 1728 as its page wraps it; rows 1216 and 1201 wrapped here)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from memprof.probes.startup_log import parse_log

_ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).with_name("data") / "published.json").read_text(encoding="utf-8"))["rows"]}

# published row 1728's quote as its page prints it: the args dict broken over three lines
_ROW_1728 = """\
(APIServer pid=51) INFO 09-09 12:07:22 [api_utils.py:272] non-default args:
  {'model_tag': 'Qwen/Qwen2.5-7B-Instruct-AWQ', 'model': 'Qwen/Qwen2.5-7B-Instruct-AWQ',
   'max_model_len': 8192, 'quantization': 'awq', 'gpu_memory_utilization': 0.9}
(EngineCore pid=671) INFO 09-09 12:08:48 [gpu_worker.py:578] Available KV cache memory: 13.42 GiB
(EngineCore pid=671) INFO 09-09 12:08:48 [kv_cache_utils.py:1869] GPU KV cache size: 251,344 tokens,
   Maximum concurrency for 8,192 tokens per request: 30.68x
"""


def _line(row: int, marker: str) -> str:
    return next(ln for ln in _ROWS[row]["quote"].splitlines() if marker in ln)


def _wrapped(line: str) -> str:
    """``line`` as a page 100 columns wide sets it: broken at blanks, continuations indented."""
    return "\n".join(textwrap.wrap(line, 100, subsequent_indent="    ",
                                   break_long_words=False, break_on_hyphens=False))


def _settings(text: str) -> dict[str, Any]:
    return dict(parse_log(text).settings)


def test_row_1728_reads_its_wrapped_non_default_args() -> None:
    assert _ROW_1728 in _ROWS[1728]["quote"] + "\n"  # the row's quote, verbatim
    log = parse_log(_ROW_1728)
    assert log.settings["quantization"] == "awq"
    assert log.settings["max_model_len"] == 8192
    assert log.settings["gpu_memory_utilization"] == 0.9
    assert log.model == "Qwen/Qwen2.5-7B-Instruct-AWQ"
    assert log.get("kv_tokens") == 251_344  # the figures around it are read as before


def test_row_1728_wrapped_reads_as_the_line_the_engine_printed() -> None:
    one = _ROW_1728.replace("non-default args:\n  {", "non-default args: {").replace(
        "-AWQ',\n   'max", "-AWQ', 'max")
    assert _settings(one) == _settings(_ROW_1728)


@pytest.mark.parametrize(("row", "marker", "want"), [
    # vLLM 0.6.4.post1's "args: Namespace(…)" (row 1216)
    (1216, "args: Namespace(", {"tp": 2, "gpu_memory_utilization": 0.9, "max_num_seqs": 256}),
    # SGLang 0.4.3.post4's "server_args=ServerArgs(…)" (row 1201, cut by its page mid-line)
    (1201, "server_args=ServerArgs(", {"tp": 4, "mem_fraction_static": 0.85}),
])
def test_every_form_reads_the_same_wrapped(row: int, marker: str, want: dict[str, Any]) -> None:
    line = _line(row, marker)
    whole = _settings(line)
    assert want.items() <= whole.items()
    assert len(_wrapped(line).splitlines()) > 5
    assert _settings(_wrapped(line)) == whole


def test_a_log_record_after_an_unclosed_line_is_not_joined() -> None:
    # a dict its quote elides and leaves open: the next record is a line of its own (its
    # figure read); an indented line after a closed dict continues nothing (its 8 not read).
    # Two logs: one log with two different argument lists is refused as two start-ups
    log = parse_log("INFO 08-07 21:32:22 [api_utils.py:273] non-default args: "
                    "{'max_num_seqs': 256, ...\nINFO 08-07 21:40:02 [gpu_worker.py:578] "
                    "Available KV cache memory: 13.42 GiB\n")
    assert log.get("available_kv_bytes") is not None
    log = parse_log("INFO 08-07 21:32:22 [api_utils.py:273] non-default args: "
                    "{'max_model_len': 8192}\n   'max_num_seqs': 8}\n")
    assert log.settings["max_model_len"] == 8192
    assert "max_num_seqs" not in log.settings
