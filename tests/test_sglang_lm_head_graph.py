"""SGLang's decode graphs hold the logits processor's lm_head GEMM (memprof/core/engines/
sglang_graphs.py ``SGLANG_GRAPH_LM_HEAD`` / ``lm_head_stages``): its [bs, vocab] output is a
graph-pool tensor, measured on one H100 by a torch-level reproduction of SGLang's capture window
(reports/gpu/sglang-capture-window/sglang-capture-window-h100.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memprof.alloc.monotone import pool_reserved_by_stages
from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang_graphs import lm_head_stages
from memprof.core.estimate import estimate

GOLDEN = (Path(__file__).parent.parent / "reports" / "gpu" / "sglang-capture-window"
          / "sglang-capture-window-h100.json")


def _golden() -> dict[str, dict[bool, dict[str, Any]]]:
    data = json.loads(GOLDEN.read_text())
    runs: dict[str, dict[bool, dict[str, Any]]] = {}
    for run in data["runs"]:
        runs.setdefault(run["grid"], {})[run["lm_head"]] = run
    return runs


def _after(run: dict[str, Any], what: str) -> int:
    step = next(s for s in run["steps"] if s["step"] == "after")
    if what == "pool":
        return int(sum(b for k, b in step["segments"].items() if k.startswith("graph pool")))
    return int(step[what])


def _stand_in_stages(bs: int) -> tuple[tuple[int, ...], ...]:
    # the recorder's decoder (bf16, hidden 4,096, qkv 6,144, intermediate 12,288): a layer's
    # attention and MLP live sets, as the replica takes live sets
    h, s = 4096, 2
    attn = (bs * h * s, bs * h * s, bs * 6144 * s, bs * h * s, bs * h * s)
    mlp = (bs * h * s, bs * h * s, bs * 2 * 12288 * s, bs * 12288 * s, bs * 12288 * s,
           bs * h * s, bs * h * s)
    return ((bs * h * s,), attn, mlp)


def test_the_lm_head_output_is_one_pool_segment_in_the_window() -> None:
    runs = _golden()
    dep = Deployment(engine="sglang", engine_version="0.5.10")
    for grid, bs, segment in (("bs256", 256, 79_691_776), ("bs8", 8, 20 * MiB)):
        on, off = runs[grid][True], runs[grid][False]
        measured = int(on["window_bytes"]) - int(off["window_bytes"])
        assert measured == _after(on, "pool") - _after(off, "pool") == segment, grid
        assert _after(on, "non_torch") == _after(off, "non_torch"), grid  # no driver memory
        # memprof's replica: the stand-in's live sets, then the logits processor's stage
        logits, _ = lm_head_stages(dep, 151_936, 4096, bs, 2)
        live = _stand_in_stages(bs)
        assert pool_reserved_by_stages(live + logits) - pool_reserved_by_stages(live) \
            == measured, grid


def test_lm_head_stages_by_tp() -> None:
    dep = Deployment(engine="sglang", engine_version="0.5.10")
    one, words = lm_head_stages(dep, 151_655, 2048, 8, 2)  # padded to 151,680 (64)
    assert one == ((8 * 2048 * 2, 8 * 151_680 * 2),)
    assert "[8, 151,680]" in words
    four, words = lm_head_stages(dep.with_(tp=4), 152_064, 5120, 80, 2)
    local, whole = 80 * 38_016 * 2, 80 * 152_064 * 2
    assert four == ((80 * 5120 * 2, local, whole, whole), (80 * 5120 * 2, whole))
    assert "all-gather [4, 80, 38,016]" in words


def _decode(model: str, version: str, gpu: str, **kw: Any) -> tuple[int, str]:
    dep = Deployment(engine="sglang", engine_version=version, **kw)
    e = estimate(model, dep, gpu_name=gpu)
    comp = next(c for c in e.ranks[0].components if c.name == "CUDA-graph estimate")
    return comp.bytes, comp.formula


def test_the_logits_segment_adds_to_a_first_capture_and_not_after_the_prefill_pool() -> None:
    # 0.5.10 on a B200 captures the decode graphs first (up to bs 512): the [512, 151,936]
    # bf16 lm_head output is a pool segment of its own
    _, formula = _decode("qwen3-8b", "0.5.10", "B200", mem_fraction_static=0.85)
    assert "the lm_head output [512, 151,936] in it" in formula
    # 0.5.19 captures them after the prefill graphs on one stream, whose freed blocks hold the
    # decode live sets, the lm_head output among them
    _, formula = _decode("qwen3-32b", "0.5.19", "H100", mem_fraction_static=0.9,
                         max_model_len=8192)
    assert "lm_head" not in formula


def test_only_the_last_pipeline_stage_captures_the_lm_head() -> None:
    # SGLang 0.5.10 models/qwen3.py ``forward``: the logits processor runs where
    # ``pp_group.is_last_rank``; the other stages return their hidden states
    dep = Deployment(engine="sglang", engine_version="0.5.10", pp=2, mem_fraction_static=0.85)
    e = estimate("qwen3-8b", dep, gpu_name="B200")
    by_stage = {r.coord.pp_stage: next(c for c in r.components if c.name == "CUDA-graph estimate")
                for r in e.ranks}
    assert set(by_stage) == {0, 1}
    assert "lm_head output" not in by_stage[0].formula
    assert "the lm_head output [512, 151,936] in it" in by_stage[1].formula
