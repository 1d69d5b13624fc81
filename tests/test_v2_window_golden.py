"""What the GPU golden of vLLM 0.27.1's profile window shows (reports/gpu/v2-window/README.md,
recorders/gpu_v2_window.py; one H100, torch 2.11): the caching allocator and the driver charge
nothing to the budget at TP1 that they do not at TP2, so they are not where the single-GPU Model
Runner V2 logs keep their 0.5-1.6 GiB beyond V2's own terms (docs/model-runner-v2.md,
memprof/core/engines/vllm_runner.py), and V2's pinned host buffers are not in the free memory the
0.27.0+ budget line reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memprof.base.units import GiB, MiB
from memprof.core.engines.vllm_runner import sampler_state_bytes

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "reports/gpu/v2-window/v2-window-h100.json"
MODULE = ROOT / "reports/gpu/v2-window/v2-module-h100.json"
QWEN3_32B_VOCAB = 151936


def _cases() -> dict[str, Any]:
    cases: dict[str, Any] = json.loads(GOLDEN.read_text())["cases"]
    return cases


def _row_observed(rid: int) -> dict[str, Any]:
    rows = json.loads((ROOT / "tests/data/published.json").read_text())["rows"]
    obs: dict[str, Any] = next(r for r in rows if r["id"] == rid)["observed"]
    return obs


def test_the_golden_is_the_recorded_run() -> None:
    g = json.loads(GOLDEN.read_text())
    assert g["torch"].startswith("2.11") and "H100" in g["gpu"]
    assert set(g["cases"]) == {"uva", "tp1-eager", "tp2-eager", "tp1-compiled", "tp2-compiled"}
    for name in ("tp1-compiled", "tp2-compiled"):
        c = g["cases"][name]
        assert c["compiled"] and c["tokens"] == 8192 and c["rows"] == 1024


def test_pinned_host_memory_is_not_in_the_free_memory() -> None:
    uva = _cases()["uva"]
    assert uva["pinned_bytes"] == GiB
    # the device tensor's 2 MiB segment and one more: not the gigabyte pinned on the host
    assert uva["free_drop"] <= 4 * MiB


def test_the_v2_state_made_before_the_window_is_memprofs_formula() -> None:
    # the recorder made the penalties, the structured outputs and the logit-bias state's
    # 3 x [R, 1024] 4-byte words, and the two input buffers [T] int32 / int64; memprof's
    # sampler state (vllm_runner.sampler_state_bytes) also holds what it left out: the stop
    # token ids [R, 128], the bad words [R, 1024] + [R, 129] and the logprob token ids [R, 128]
    c = _cases()["tp1-compiled"]
    rows, tokens = c["rows"], c["tokens"]
    left_out = rows * (128 + 1024 + 129 + 128) * 4
    want = sampler_state_bytes(rows, QWEN3_32B_VOCAB) - left_out + tokens * (4 + 8)
    assert c["v2_state_bytes"] == want


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_nothing_is_kept_or_pinned_at_tp1_that_is_not_at_tp2(mode: str) -> None:
    c1, c2 = _cases()[f"tp1-{mode}"], _cases()[f"tp2-{mode}"]
    for key in ("persistent_from_window", "reserved_free_after", "reserved_free_before_window",
                "non_torch_increase", "v2_state_bytes"):
        assert c1[key] == c2[key], key
    # what the window keeps allocated: the first matmul's cuBLAS workspace (32 MiB on sm90)
    assert c1["persistent_from_window"] == 32 * MiB
    # the overheads differ by the transient peak alone (the activations' TP split)
    assert (c1["overhead_0271"] - c2["overhead_0271"]
            == c1["transient_peak_headroom"] - c2["transient_peak_headroom"])


def test_an_eager_forward_pins_one_activation_segment_and_a_compiled_one_none() -> None:
    cases = _cases()
    eager, compiled = cases["tp1-eager"], cases["tp1-compiled"]
    # eager: the workspace is carved out of a freed 80 MiB activation segment, which stays
    # reserved past empty_cache (the mechanism vLLM 0.31.0's profile-run split limit names)
    assert eager["reserved_free_after"] - eager["reserved_free_before_window"] == 48 * MiB
    assert {"size": 80 * MiB, "active": 32 * MiB, "stream": 0} in eager["held_segments"]
    # compiled: only the load's reserved-free bytes remain
    assert compiled["reserved_free_after"] == compiled["reserved_free_before_window"]


def test_the_reproduced_window_matches_the_tp2_log_and_not_the_tp1_one() -> None:
    c1, c2 = _cases()["tp1-compiled"], _cases()["tp2-compiled"]
    budget = 0.426 * 95.01  # rows 901 / 902: --gpu-memory-utilization 0.426 of 95.01 GiB
    o901, o902 = _row_observed(901), _row_observed(902)
    logged_901 = budget - o901["weights_gib"] - o901["kv_cache_gib"]
    logged_902 = budget - o902["weights_gib"] - o902["kv_cache_gib"]
    assert logged_901 == pytest.approx(3.86, abs=0.01)
    assert logged_902 == pytest.approx(1.66, abs=0.01)
    # TP2: within 0.1 GiB of the log; TP1: over 1.5 GiB below it
    assert c2["overhead_0271"] / GiB == pytest.approx(logged_902, abs=0.1)
    assert logged_901 - c1["overhead_0271"] / GiB > 1.5


def test_compiling_the_module_as_vllm_does_copies_no_weight() -> None:
    g = json.loads(MODULE.read_text())
    assert g["torch"].startswith("2.11") and "H100" in g["gpu"]
    cases = g["cases"]
    assert set(cases) == {"module-tp1-eager", "module-tp1-compiled", "module-tp2-compiled",
                          "module-tp1-compiled-grad"}
    for c in cases.values():
        assert c["tokens"] == 2048 and c["rows"] == 256
        assert c["allocs_256mib_plus"] == []  # the [V, H] table is 1,002 MiB: never copied
        assert c["kept_first"] == 32 * MiB and c["kept_second"] == 0
    tp1 = cases["module-tp1-compiled"]
    assert tp1["embed_bytes"] == 128256 * 4096 * 2
    # the cold first call: the forward, the cuBLAS workspace and one 50 MiB buffer (the H100's
    # L2, the benchmarker's flush buffer)
    assert tp1["first_call_peak"] - tp1["second_call_peak"] - tp1["kept_first"] == 50 * MiB
    assert cases["module-tp1-compiled-grad"]["first_call_peak"] == tp1["first_call_peak"]
    # against the ~1.03 GiB that row 1211's compiled start implies (docs/model-runner-v2.md)
    assert tp1["first_call_peak"] < 0.3 * GiB
