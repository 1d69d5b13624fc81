"""SGLang 0.5.19 and later log their settings as ``server_args={…}``, the dict of
``ServerArgs.resolved_dict()`` (0.5.19 ``python/sglang/srt/entrypoints/engine.py``:
``logger.info(f"server_args={server_args.resolved_dict()}")``; 0.5.23 the same dict through
``_server_args_for_logging``), where older releases print the dataclass repr
``server_args=ServerArgs(…)``. ``memprof/probes/sglang_log.py`` reads the dict as it reads the
repr: its fields are the deployment, and its field set places the release.

The lines are built as the engine builds them: an f-string of a dict is the dict's ``repr``.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from memprof.cli import run
from memprof.probes.sglang_log import release_fields, split_dict_fields
from memprof.probes.startup_log import parse_log

NEWER = ("0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")
# the phases of the resolved cuda_graph_config as resolved_dict expands it (0.5.19
# model_executor/cuda_graph_config.py: per phase backend, max_bs, bs, ...)
GRAPHS = {"decode": {"backend": "full", "max_bs": 48, "bs": [1, 2, 4, 8, 16, 24, 32, 40, 48],
                     "tc_compiler": "eager"},
          "prefill": {"backend": "breakable", "max_bs": 1024, "bs": [4, 8, 12, 16],
                      "tc_compiler": "eager"}}


def server_args_line(release: str, **values: Any) -> str:
    """The line ``release`` prints: every field of its ServerArgs (``configs/
    sglang_server_args.json``), the given ones set, the rest ``None``."""
    d: dict[str, Any] = {name: None for name in sorted(release_fields()[release])}
    unknown = set(values) - set(d)
    assert not unknown, unknown
    d.update(values)
    return f"[2026-11-02 10:00:00] server_args={d}"


def deployment(release: str) -> str:
    return "\n".join([
        server_args_line(release, model_path="Qwen/Qwen3-8B", tp_size=2, context_length=32768,
                         mem_fraction_static=0.83, chunked_prefill_size=8192, page_size=1,
                         max_running_requests=None, cuda_graph_config=GRAPHS),
        "[2026-11-02 10:00:09 TP0] Load weight end. elapsed=3.01 s, type=Qwen3ForCausalLM, "
        "avail mem=70.00 GB, mem usage=7.70 GB.",
        "[2026-11-02 10:00:10 TP0] KV Cache is allocated. #tokens: 500000, K size: 34.33 GB, "
        "V size: 34.33 GB",
    ])


@pytest.mark.parametrize("release", NEWER)
def test_the_dict_is_the_deployment_and_places_the_release(release: str) -> None:
    log = parse_log(deployment(release))
    assert log.engine == "sglang"
    assert log.model == "Qwen/Qwen3-8B"
    s = log.settings
    assert (s["tp"], s["max_model_len"], s["mem_fraction_static"], s["chunked_prefill_size"],
            s["block_size"]) == (2, 32768, 0.83, 8192, 1)
    # the decode phase's batch, not the prefill phase's 1024
    assert s["cuda_graph_max_bs"] == 48
    # named by nothing: its field set is the release's own (the date is after 0.5.23's build)
    assert s["engine_version"] == release
    assert any(f"match SGLang {release}'s" in n for n in log.notes), log.notes


def test_a_disabled_decode_phase_gives_no_graph_batch() -> None:
    off = {**GRAPHS, "decode": {**GRAPHS["decode"], "backend": "disabled"}}
    log = parse_log(server_args_line("0.5.19", tp_size=1, cuda_graph_config=off))
    assert "cuda_graph_max_bs" not in log.settings
    assert log.settings["tp"] == 1


def test_nested_keys_are_not_fields() -> None:
    body = ("'model_path': 'm', 'model_loader_extra_config': {'tp_size': 99}, "
            "'json_model_override_args': '{\"tp_size\": 7}', 'tp_size': 4, "
            "'cuda_graph_config': {'decode': {'max_bs': 8}}}")
    got = split_dict_fields(body)
    assert got == {"model_path": "'m'", "model_loader_extra_config": "{'tp_size': 99}",
                   "json_model_override_args": "'{\"tp_size\": 7}'", "tp_size": "4",
                   "cuda_graph_config": "{'decode': {'max_bs': 8}}"}
    assert parse_log(f"server_args={{{body}\nKV Cache is allocated. #tokens: 1000, "
                     "K size: 0.07 GB, V size: 0.07 GB").settings["tp"] == 4


def test_a_line_cut_short_keeps_only_whole_pairs() -> None:
    # a quote or a log viewer that cuts the line: the last pair may be cut ('tp_size': 1 of 16)
    assert split_dict_fields("'model_path': 'm', 'context_length': 4096, 'tp_size': 1") == {
        "model_path": "'m'", "context_length": "4096"}
    # an elided quote ("..., 'tp_size': 2, ...") keeps the pairs it shows
    assert split_dict_fields("'model_path': 'm', ..., 'tp_size': 2, ...}") == {
        "model_path": "'m'", "tp_size": "2"}


def test_the_old_repr_is_still_read_beside_it() -> None:
    text = ("[2025-07-01 10:00:00] server_args=ServerArgs(model_path='m', tp_size=2, "
            "mem_fraction_static=0.8)\n"
            "[2025-07-01 10:00:09] KV Cache is allocated. #tokens: 20000, K size: 1.00 GB, "
            "V size: 1.00 GB\n")
    s = parse_log(text).settings
    assert (s["tp"], s["mem_fraction_static"]) == (2, 0.8)


def test_explain_rebuilds_a_0_5_21_log_at_0_5_21(tmp_path: Path) -> None:
    path = tmp_path / "sglang-0.5.21.log"
    path.write_text(deployment("0.5.21"), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(["explain", str(path), "-m", "qwen3-8b", "--gpu", "H100", "-f", "json"])
    assert code in (0, 1), err.getvalue()
    doc = json.loads(out.getvalue())
    dep = doc["deployment"]
    assert dep["engine_version"] == "0.5.21"
    assert (dep["tensor_parallel_size"], dep["max_model_len"], dep["mem_fraction_static"]) == (
        2, 32768, 0.83)
