"""memprof.core.terms.attn_capture: FlashInfer's per-size decode wrappers inside Model Runner V2's
capture window (vLLM 0.23.0-0.28.x), the backend an fp8 KV cache runs on a card without
FlashAttention 3, and FlashInfer's workspace inside the CUDA-graph estimate (0.28.0 on).

Hand count, Llama-3.1-8B on an A100 (sm80: cuBLAS workspace 8 MiB + 128 KiB in a 20 MiB segment),
max_num_seqs 256 (vLLM's default), --kv-cache-dtype fp8 at 0.24.0: FlashAttention 2 reads no fp8
KV cache, so the FULL decode graphs run FlashInfer. The 35 FULL sizes (1, 2, 4, 8, 16, ..., 256)
each get a wrapper; 16's was made by the warm-up before the window, so 34 are made inside it,
largest first. Each holds an 8 MiB int workspace: the first (256) fills the workspace segment's
11.875 MiB remainder, the other 33 take a 20 MiB segment per pair: 17 segments, 340 MiB. Their
qo_indptr tensors (at most 257 x 4 B each) share one 2 MiB small-pool segment: 342 MiB in all.
"""

from __future__ import annotations

from typing import Any

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate, rank_context
from memprof.core.graph_log import logged_graph
from memprof.core.terms.attn_capture import (
    ATTN_CAPTURE_RULES,
    FLASHINFER_DECODE_WRAPPERS,
    FLASHINFER_WORKSPACE_IN_ESTIMATE,
    decode_wrapper_bytes,
    estimate_window_workspace,
    flashinfer_workspace_bytes,
    full_graph_backend,
    gqa_backend,
    wrapper_sizes_in_window,
)
from memprof.core.terms.cudagraph import cudagraph_model, graph_modes
from memprof.core.terms.runner_v2_graphs import v2_graph_estimate
from memprof.core.version_diff import all_rules
from memprof.core.versions import value_at

HAND_COUNT = 17 * 20 * MiB + 2 * MiB
PART = "attention backend's capture buffers"


def _est(version: str = "0.24.0", kv: str = "fp8", gpu: str = "A100-80GB",
         **kw: Any) -> Estimate:
    return estimate("llama-3.1-8b", Deployment(engine_version=version, max_model_len=4096,
                                               kv_cache_dtype=kv, **kw), gpu_name=gpu)


def _parts(e: Estimate) -> dict[str, int]:
    g = logged_graph(e, e.ranks[0])
    assert g is not None
    return {n: b for n, b, _w in g.parts}


def test_fp8_kv_on_sm80_runs_flashinfer_auto_runs_flash_attention() -> None:
    fp8 = _est()
    auto = _est(kv="auto")
    assert full_graph_backend(rank_context(fp8, fp8.ranks[0])) == "flashinfer"
    assert full_graph_backend(rank_context(auto, auto.ranks[0])) != "flashinfer"


def test_fp8_kv_on_sm90_keeps_flash_attention_3() -> None:
    e = _est(gpu="H100")
    assert full_graph_backend(rank_context(e, e.ranks[0])) != "flashinfer"
    assert PART not in _parts(e)


def test_wrapper_sizes_by_hand() -> None:
    e = _est()
    ctx = rank_context(e, e.ranks[0])
    full = graph_modes(e.deployment)["FULL"]
    sizes = wrapper_sizes_in_window(ctx, full)
    assert (len(full), max(full)) == (35, 256)
    assert len(sizes) == 34 and 16 not in sizes and sizes[0] == 256


def test_wrapper_bytes_by_hand() -> None:
    e = _est()
    assert _parts(e)[PART] == HAND_COUNT


def test_the_workspace_remainder_takes_the_first_wrapper_only_before_sm90() -> None:
    # H100: the 32 MiB workspace fills its segment exactly, so 34 wrappers take 17 segments
    # of their own too; on sm80 the remainder took 256's and the other 33 need 17 as well
    a100 = _est()
    h100 = _est(gpu="H100")
    sizes = list(range(34, 0, -1))
    assert decode_wrapper_bytes(rank_context(a100, a100.ranks[0]), sizes) == HAND_COUNT
    assert decode_wrapper_bytes(rank_context(h100, h100.ranks[0]), sizes) == HAND_COUNT
    assert decode_wrapper_bytes(rank_context(a100, a100.ranks[0]), sizes[:1]) == 2 * MiB
    assert decode_wrapper_bytes(rank_context(h100, h100.ranks[0]), sizes[:1]) == 22 * MiB


def test_few_sequences_skip_the_warmup_exemption() -> None:
    # max_num_seqs 8: FULL sizes 1, 2, 4, 8, none made before the window (the 16-token warm-up
    # is 8 requests of two tokens, not a pure decode)
    e = _est(max_num_seqs=8)
    ctx = rank_context(e, e.ranks[0])
    assert wrapper_sizes_in_window(ctx, graph_modes(e.deployment)["FULL"]) == [8, 4, 2, 1]


@pytest.mark.parametrize("version", ["0.22.0", "0.29.0"])
def test_outside_the_releases_read(version: str) -> None:
    assert PART not in _parts(_est(version=version))


def test_auto_kv_adds_nothing() -> None:
    assert PART not in _parts(_est(kv="auto"))


def test_the_fp8_rows_difference() -> None:
    # the study rows' fp8 figure is 0.32 GiB above their default-KV one (0.88 against 0.56)
    fp8, auto = _est(), _est(kv="auto")
    diff = sum(_parts(fp8).values()) - sum(_parts(auto).values())
    assert diff == HAND_COUNT
    assert abs(diff / 2**30 - 0.32) < 0.02


def test_rules_in_the_rulebook() -> None:
    book = all_rules()
    assert all(r in book and r.source.strip() for rules in ATTN_CAPTURE_RULES for r in rules)
    assert value_at(FLASHINFER_DECODE_WRAPPERS, "0.28.0", False) is True


def test_blackwell_decodes_through_trtllm_without_wrappers() -> None:
    # sm100: FlashInfer is the default GQA backend, but decodes go through TRT-LLM's kernels
    # (TRTLLMDecode metadata), which keep no per-size wrapper
    e = _est(gpu="B200")
    ctx = rank_context(e, e.ranks[0])
    assert full_graph_backend(ctx) == "flashinfer"
    assert wrapper_sizes_in_window(ctx, graph_modes(e.deployment)["FULL"]) == []
    assert PART not in _parts(e)


def test_asked_flashinfer_with_auto_kv_counts_the_wrappers() -> None:
    # --attention-backend flashinfer on an A100: the same wrappers, whatever the KV dtype
    e = _est(kv="auto", attention_backend="flashinfer")
    assert _parts(e)[PART] == HAND_COUNT


def test_l40s_fp8_runs_flashinfer_too() -> None:
    # sm89: FlashAttention 2 as on the A100, so an fp8 KV cache falls to FlashInfer
    e = _est(gpu="L40S")
    assert full_graph_backend(rank_context(e, e.ranks[0])) == "flashinfer"
    assert _parts(e)[PART] == HAND_COUNT


# --- FlashInfer's workspace inside the CUDA-graph estimate (0.28.0 on) ---------------------------
#
# Hand count, Qwen2.5-7B-Instruct (28 query heads of 128) with --kv-cache-dtype fp8 on an A10G
# (sm86: FlashAttention 2 reads no fp8 KV cache, FlashInfer runs the attention) at vLLM 0.30.0,
# max_num_batched_tokens 2048 (vllm serve's default there): the builder's workspace is
# max(394 MiB, 2048 x 28 x 128 x 16 B = 112 MiB) = 394 MiB, made by the profiling capture's first
# metadata build, so Model Runner V2's estimate is its capture window + 394 MiB. With 64 query
# heads of 128 at 8192 batched tokens the product wins: 8192 x 64 x 128 x 16 B = 1 GiB.


def _ctx(model: str, version: str, gpu: str, kv: str = "fp8", **kw: Any) -> Any:
    e = estimate(model, Deployment(engine_version=version, max_model_len=8192,
                                   kv_cache_dtype=kv, **kw), gpu_name=gpu)
    return rank_context(e, e.ranks[0])


def test_estimate_workspace_hand_count() -> None:
    ctx = _ctx("qwen2.5-7b-instruct", "0.30.0", "A10G", quantization="awq_marlin")
    assert gqa_backend(ctx) == "flashinfer"
    assert estimate_window_workspace(ctx)[0] == 394 * MiB
    v = v2_graph_estimate(ctx)
    assert v is not None and v.workspace == 394 * MiB
    assert v.estimate == v.window + 394 * MiB  # Qwen2.5-7B's FULL graphs cost over 1 MiB each


def test_estimate_workspace_grows_with_the_prefill_footprint() -> None:
    ctx = _ctx("qwen3-32b", "0.30.0", "L40S", max_num_batched_tokens=8192)
    assert flashinfer_workspace_bytes(ctx) == 8192 * 64 * 128 * 16 == 1 << 30


def test_estimate_workspace_in_v1_full_first_sample() -> None:
    # a MoE model runs the V1 runner at 0.28.0; FlashInfer's workspace is in the FULL mode's first
    # sample only, where V1 builds attention metadata
    fp8 = _ctx("qwen3-30b-a3b", "0.28.0", "A100-80GB")
    auto = _ctx("qwen3-30b-a3b", "0.28.0", "A100-80GB", kv="auto")
    ws = estimate_window_workspace(fp8)[0]
    assert ws == 394 * MiB
    g, g0 = cudagraph_model(fp8), cudagraph_model(auto)
    assert g.first_capture["FULL"] - g0.first_capture["FULL"] == ws
    assert g.first_capture["PIECEWISE"] == g0.first_capture["PIECEWISE"]


def test_estimate_workspace_not_where_it_is_not_made() -> None:
    assert estimate_window_workspace(_ctx("qwen2.5-7b-instruct", "0.30.0", "A10G",
                                          kv="auto"))[0] == 0  # FlashAttention 2
    assert estimate_window_workspace(_ctx("qwen3-32b", "0.30.0", "B200"))[0] == 0  # TRT-LLM
    assert value_at(FLASHINFER_WORKSPACE_IN_ESTIMATE, "0.33.0", False) is True
    # before profile_cudagraph_memory (0.18.0) vLLM estimates no graphs
    assert value_at(FLASHINFER_WORKSPACE_IN_ESTIMATE, "0.17.1", False) is False


def test_estimate_workspace_from_the_first_estimate() -> None:
    # the builders' lazy workspace, the profiling KV cache's fresh builders and the FULL-only
    # metadata build are in the 0.18.0, 0.20.0, 0.24.0 and 0.27.1 wheels as in 0.28.0's
    for version in ("0.20.0", "0.24.0", "0.27.1"):
        assert estimate_window_workspace(_ctx("qwen2.5-7b-instruct", version, "A10G"))[0] \
            == 394 * MiB, version


def test_estimate_workspace_prefill_footprint_from_0_26() -> None:
    # 8192 x 64 x 128 x 16 B = 1 GiB from 0.26.0; 0.25.0's builder makes the 394 MiB default alone
    def ws(version: str) -> int:
        ctx = _ctx("qwen3-32b", version, "L40S", max_num_batched_tokens=8192)
        return flashinfer_workspace_bytes(ctx)
    assert ws("0.25.0") == 394 * MiB
    assert ws("0.26.0") == 1 << 30
