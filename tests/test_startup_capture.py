"""CUDA-graph capture at start-up (memprof/core/startup_capture.py) and the memory other
processes held, read from torch's OOM line (``memprof.core.explain._in_use_at_oom``): the
verdict of a rank whose graphs do not fit when start-up ends, and row 1103 of
tests/data/published.json (vLLM 0.17.1 on an RTX 3090 with a desktop on the card)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from cli_helpers import invoke

from memprof.base.units import GiB, MiB
from memprof.core.components import Component
from memprof.core.deployment import Deployment
from memprof.core.engines import engine_of
from memprof.core.estimate import estimate
from memprof.core.explain import LOG_ROUNDING_BYTES, in_use_from_log
from memprof.core.startup_capture import capture_overflow
from memprof.probes.startup_log import parse_log

# the OOM line of row 1103 (TheBuccaneer/vllm-offload-profiles,
# fixd_llama_gmem090_offload0_failed.log)
OOM_LINE = (
    "(EngineCore_DP0 pid=44265) ERROR 07-26 10:24:28 [core.py:1100] torch.OutOfMemoryError: CUDA "
    "out of memory. Tried to allocate 126.00 MiB. GPU 0 has a total capacity of 23.54 GiB of which "
    "139.75 MiB is free. Process 4257 has 83.54 MiB memory in use. Process 11017 has 133.29 MiB "
    "memory in use. Including non-PyTorch memory, this process has 21.72 GiB memory in use.")

LLAMA_3090 = Deployment(engine="vllm", engine_version="0.17.1", max_model_len=8192)


def _comp(name: str, category: str, size: int, where: str) -> Component:
    return Component(name=name, category=category, bytes=size, where=where)  # type: ignore[arg-type]


def _ranks(in_use: int, **changes: object) -> tuple[str, int]:
    e = estimate("llama-3.1-8b", LLAMA_3090.with_(gpu_memory_in_use=in_use, **changes),
                 gpu_name="RTX-3090")
    r = e.ranks[0]
    return r.verdict, r.headroom_bytes


def test_overflow_is_baseline_envelope_and_graphs_only() -> None:
    engine = engine_of(LLAMA_3090)
    base, envelope, total = 1 * GiB, 20 * GiB, 22 * GiB
    comps = [_comp("ctx", "non_torch", base, "baseline"),
             _comp("weights", "weights", 15 * GiB, "budget"),
             _comp("graph pool", "cudagraph", 700 * MiB, "runtime"),
             _comp("slack", "allocator", 900 * MiB, "runtime")]
    # 1 + 20 GiB + 700 MiB fits 22 GiB; the slack (run time only) does not count at start-up
    assert capture_overflow(engine, comps, base, envelope, total) is None
    comps[2] = _comp("graph pool", "cudagraph", 1100 * MiB, "runtime")
    over = capture_overflow(engine, comps, base, envelope, total)
    assert over is not None
    assert over.held_bytes == base + envelope + 1100 * MiB
    assert over.over_bytes == 76 * MiB
    assert [c.name for c in over.graphs] == ["graph pool"]


def test_no_graph_memory_outside_the_budget_is_no_capture_overflow() -> None:
    engine = engine_of(LLAMA_3090)
    comps = [_comp("weights", "weights", 30 * GiB, "budget"),
             _comp("graph pool", "cudagraph", 0, "runtime")]
    assert capture_overflow(engine, comps, 0, 20 * GiB, 10 * GiB) is None


def test_graphs_that_do_not_fit_at_start_are_a_startup_failure() -> None:
    # 0.9 of the RTX 3090 with 1.68 GiB held by other processes (row 1103): the graph pool
    # memprof predicts does not fit beside the budget when start-up ends
    verdict, headroom = _ranks(1724 * MiB)
    assert verdict == "startup_oom" and headroom < 0
    e = estimate("llama-3.1-8b", LLAMA_3090.with_(gpu_memory_in_use=1724 * MiB),
                 gpu_name="RTX-3090")
    assert "CUDA-graph capture at start-up does not fit" in e.ranks[0].reasons[0]
    # eager: no graphs, nothing captured; the same memory in use leaves it room to start
    assert _ranks(1724 * MiB, enforce_eager=True)[0] == "fits"
    # nothing held by other processes: it fits with graphs too
    assert _ranks(0)[0] == "fits"


def test_oom_line_is_parsed_with_its_units() -> None:
    log = parse_log(OOM_LINE)
    got = {k: f.value for k, f in log.figures.items() if k.startswith("oom_")}
    assert got["oom_total_bytes"] == round(23.54 * GiB)
    assert got["oom_free_bytes"] == round(139.75 * MiB)  # MiB, not GiB
    assert got["oom_process_bytes"] == round(21.72 * GiB)


def test_in_use_at_oom_is_total_less_free_less_this_process() -> None:
    e = estimate("llama-3.1-8b", LLAMA_3090, gpu_name="RTX-3090")
    measured = {"oom_total_bytes": 23.54 * GiB, "oom_free_bytes": 139.75 * MiB,
                "oom_process_bytes": 21.72 * GiB}
    took = in_use_from_log(measured, e)
    assert took is not None
    assert took[0] == int(23.54 * GiB - 139.75 * MiB - 21.72 * GiB)  # 1.68 GiB
    assert "OOM line" in took[1]
    # within the figures' rounding: nobody else on the card
    tight = dict(measured, oom_free_bytes=23.54 * GiB - 21.72 * GiB - LOG_ROUNDING_BYTES)
    assert in_use_from_log(tight, e) is None
    # one of the three figures missing: nothing read
    assert in_use_from_log({k: v for k, v in measured.items() if k != "oom_process_bytes"},
                           e) is None
    # a free figure before load wins over the OOM line
    before = dict(measured, free_at_start_bytes=e.gpu.total_bytes)
    assert in_use_from_log(before, e) is None


def _published() -> ModuleType:
    path = Path(__file__).with_name("test_published_distribution.py")
    spec = importlib.util.spec_from_file_location("_published_rows_capture", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("row_id", [1103])
def test_row_1103_fails_at_start_with_the_oom_lines_other_processes(row_id: int) -> None:
    pub = _published()
    row = next(r for r in pub.ROWS if r["id"] == row_id)
    out = pub.outcome(row)
    assert out.verdict == (True, True)
    assert abs(out.in_use - 1.68 * GiB) < 16 * MiB
    assert out.errors["kv"] < 0.01  # the KV cache is sized before the capture, as logged


ROW_1103_LOG = "\n".join([
    "(APIServer pid=44025) INFO 07-26 10:23:47 [utils.py:238] non-default args: {'model_tag': "
    "'meta-llama/Llama-3.1-8B-Instruct', 'model': 'meta-llama/Llama-3.1-8B-Instruct', "
    "'max_model_len': 8192}",
    "(EngineCore_DP0 pid=44265) INFO 07-26 10:24:16 [gpu_model_runner.py:4364] Model loading "
    "took 14.99 GiB memory and 18.543273 seconds",
    "(EngineCore_DP0 pid=44265) INFO 07-26 10:24:21 [gpu_worker.py:424] Available KV cache "
    "memory: 5.61 GiB",
    "(EngineCore_DP0 pid=44265) INFO 07-26 10:24:21 [kv_cache_utils.py:1314] GPU KV cache size: "
    "45,968 tokens",
    OOM_LINE,
    "(EngineCore_DP0 pid=44265) ERROR 07-26 10:24:28 [core.py:1100] RuntimeError: CUDA out of "
    "memory occurred when warming up sampler with 256 dummy requests.", ""])


def test_explain_takes_the_oom_lines_other_processes(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(ROW_1103_LOG, encoding="utf-8")
    code, out, err = invoke(["explain", str(log), "--model", "llama-3.1-8b", "--gpu",
                             "RTX-3090", "--format", "json"])
    assert code == 1, err  # memprof predicts the failure the log ends in
    doc = json.loads(out)
    assert doc["verdict"] == "startup_oom"
    assert any("OOM line leaves 1.68 GiB" in n for n in doc["notes"])
    keys = {f["key"] for f in doc["figures"]}
    assert "oom_free_bytes" not in keys and "oom_process_bytes" not in keys
    # told that nothing else was on the card, memprof predicts the start the log did not get
    code, out, err = invoke(["explain", str(log), "--model", "llama-3.1-8b", "--gpu",
                             "RTX-3090", "--gpu-memory-in-use", "0", "--format", "json"])
    assert code == 0, err
    assert json.loads(out)["verdict"] == "fits"


def test_sglang_request_table_is_allocated_at_start_up() -> None:
    # SGLang builds ReqToTokenPool in init_memory_pool, right after the KV pool (0.4.5 / 0.5.5
    # model_runner.py): a table that does not fit beside the budget fails the start, as row 119's
    # Llama-4-Scout log (SGLang 0.4.5, 80.04 GiB asked in ReqToTokenPool.__init__) does
    engine = engine_of(LLAMA_3090.with_(engine="sglang", engine_version="0.4.5"))
    table = _comp("request-to-token table", "scratch", 2 * GiB, "runtime")
    comps = [_comp("weights", "weights", 8 * GiB, "budget"), table]
    over = capture_overflow(engine, comps, 0, 20 * GiB, 21 * GiB)
    assert over is not None and over.graphs == (table,)
    assert over.what == "request-to-token table"
    # other run-time scratch is not a start-up allocation
    lazy = _comp("decode scratch", "scratch", 2 * GiB, "runtime")
    assert capture_overflow(engine, [comps[0], lazy], 0, 20 * GiB, 21 * GiB) is None
