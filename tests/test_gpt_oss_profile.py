"""gpt-oss-120b on one H100: the profile run's sampler before vLLM's Triton top-k/top-p kernel
(``V1_TORCH_SORT_SAMPLER``). From vLLM 0.8.0 to 0.16.x ``apply_top_k_top_p`` sorts the fp32 logits
of every row count (vllm/v1/sample/ops/topk_topp_sampler.py); 0.17.0 sorts only below 8 rows. The
expected bytes are written out from the source's tensors, not read from a log."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import RankEstimate, estimate
from memprof.core.terms.activation import (
    SAMPLER_TRITON_BUFFER_ROWS,
    V1_TORCH_SORT_SAMPLER,
    sort_temporaries_bytes,
    v1_sort_sampler_bytes_per_elem,
)
from memprof.core.weights.mlp import moe_caches_per_call

# gpt-oss-120b config.json: vocab_size 201,088, hidden_size 2,880, bf16 activations.
V, H = 201_088, 2_880
# vllm serve defaults on an H100 (V1): max_num_seqs 1,024; the issue's --max-num-batched-tokens.
R, T = 1_024, 1_024


def _peak(rank: RankEstimate) -> tuple[int, str]:
    c = next(c for c in rank.components if c.name == "activation peak (profile run)")
    return c.bytes, c.formula


def _dep(version: str) -> Deployment:
    return Deployment(engine_version=version, gpu_memory_utilization=0.95,
                      max_num_batched_tokens=T, max_model_len=131_072)


def test_rule_rows_follow_the_cumsum_and_the_triton_kernel() -> None:
    # 0.8.0-0.8.2: probs_sort.cumsum(dim=-1) is a new tensor: fp32 copy 4 + values 4 + int64
    # indices 8 + top-k mask 1 + probs 4 + cumsum 4 + top-p mask 1 + scatter output 4
    assert v1_sort_sampler_bytes_per_elem("vllm", "0.8.0") == 30
    assert v1_sort_sampler_bytes_per_elem("vllm", "0.8.2") == 30
    # 0.8.3 on: cumsum(out=probs_sort) writes into the probs
    assert v1_sort_sampler_bytes_per_elem("vllm", "0.8.3") == 26
    assert v1_sort_sampler_bytes_per_elem("vllm", "0.11.0") == 26
    assert v1_sort_sampler_bytes_per_elem("vllm", "0.16.0") == 26
    # V0 has its own rule; 0.17.0 brings topk_topp_triton.py; SGLang samples otherwise
    assert v1_sort_sampler_bytes_per_elem("vllm", "0.7.3") is None
    assert v1_sort_sampler_bytes_per_elem("vllm", "0.17.0") is None
    assert v1_sort_sampler_bytes_per_elem("sglang", "main@d315eb7") is None
    assert all(r.source and r.introduced_by and r.removed_by for r in V1_TORCH_SORT_SAMPLER)


@pytest.mark.parametrize("version", ["0.10.1", "0.11.0", "0.16.0"])
def test_sort_sampler_sets_the_peak_at_1024_rows(version: str) -> None:
    (rank,) = estimate("gpt-oss-120b", _dep(version), gpu_name="H100").ranks
    got, formula = _peak(rank)
    # hidden [T, H] bf16 + the last rows [R, H] and their rand_like (V1_SAMPLER_HIDDEN) + the
    # caller's logits [R, V] bf16 + at the sort: the fp32 copy (4), sorted values (4) and int64
    # indices (8), and the segmented sort's temporaries (1,024 rows ≥ 128 segments: 20 B per
    # element)
    assert sort_temporaries_bytes(R, V) == 20 * R * V
    want = T * H * 2 + 2 * R * H * 2 + R * V * 2 + (4 + 4 + 8 + 20) * R * V
    assert want == 7_842_430_976
    assert got == want
    assert "sampler" in formula and "sort + its temporaries" in formula


def test_triton_kernel_release_keeps_the_smaller_peak() -> None:
    (rank,) = estimate("gpt-oss-120b", _dep("0.17.0"), gpu_name="H100").ranks
    got, formula = _peak(rank)
    # fp32 copy + probs + exponential noise (12·R·V) + the kernel's [132, V] fp32 row buffer
    want = (T * H * 2 + 2 * R * H * 2 + R * V * 2 + 12 * R * V
            + SAMPLER_TRITON_BUFFER_ROWS * V * 4)
    assert got == want
    assert "Triton" in formula


def test_sort_costs_24_bytes_per_element_more_than_the_triton_path() -> None:
    # The difference between the two releases' sampler moments, from the formulas above:
    # (36 − 12)·R·V − 132·V·4 = 4.50 GiB for gpt-oss-120b's 201k vocabulary at 1,024 rows.
    old = _peak(estimate("gpt-oss-120b", _dep("0.16.0"), gpu_name="H100").ranks[0])[0]
    new = _peak(estimate("gpt-oss-120b", _dep("0.17.0"), gpu_name="H100").ranks[0])[0]
    assert old - new == 24 * R * V - SAMPLER_TRITON_BUFFER_ROWS * V * 4 == 4_835_764_224


def test_marlin_mxfp4_caches_are_per_call_on_sm90_before_0_12() -> None:
    # 0.10.1 / 0.11.0: Mxfp4MoEMethod.apply -> fused_marlin_moe, which torch.empty's its caches
    quant = estimate("gpt-oss-120b", Deployment(), gpu_name="H100").spec.quant
    assert moe_caches_per_call(quant, "sm90", "0.10.1")
    assert moe_caches_per_call(quant, "sm90", "0.11.2")
    assert not moe_caches_per_call(quant, "sm90", "0.12.0")  # Triton kernels from 0.12.0
    assert not moe_caches_per_call(quant, "sm100", "0.11.0")
    assert not moe_caches_per_call(None, "sm90", "0.11.0")


def test_no_persistent_moe_workspace_and_the_moe_stage_holds_the_caches() -> None:
    # one sequence, so the sampler is small and the MoE layer sets the peak at T = 8,192
    dep = Deployment(engine_version="0.10.1", max_num_seqs=1, max_model_len=8_192)
    (rank,) = estimate("gpt-oss-120b", dep, gpu_name="H100").ranks
    names = {c.name for c in rank.components}
    assert "fused-MoE workspace (WorkspaceManager)" not in names
    got, formula = _peak(rank)
    assert formula.split(" = ", 1)[1].startswith("MoE")
    t, e, k, i = 8_192, 128, 4, 2_880
    want = (2 * t * H * 2  # residual + hidden [T, H]
            + t * e * 4 + t * k * 8  # router logits fp32, top-k ids + weights
            + (t * k + e * 63) * 4 + t * H * 2  # moe_align sorted ids + experts' output
            + t * k * i * 2 + t * k * max(2 * i, H) * 2)  # cache2 + cache13 (bf16)
    assert got == want
    # 0.12.0 (Triton kernels): the persistent workspace is back
    (rank12,) = estimate("gpt-oss-120b", dep.with_(engine_version="0.12.0"),
                         gpu_name="H100").ranks
    assert "fused-MoE workspace (WorkspaceManager)" in {c.name for c in rank12.components}
