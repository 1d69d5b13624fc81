"""vLLM V0's profile run on an MLA + fused-MoE model (DeepSeek-R1, TP 8), read in the 0.7.1-0.7.3
and 0.8.0-0.8.2 wheels (``V0_MLA_PREFILL_PROFILE`` and ``V0_MOE_CACHES_PER_CALL`` in
memprof/core/terms/activation.py):

- V0 builds attention metadata for the dummy prompts, so the MLA backend runs the prefill in
  full (0.7.x attention/backends/mla/utils.py ``_forward_prefill_flash``; 0.8.x
  attention/backends/mla/common.py ``_forward_prefill``, whose ``forward`` first allocates the
  layer output [T, hidden]) instead of V1's worst-case kv_b buffer;
- the Triton fused-MoE caches are ``torch.empty``'d per call and freed when the layer returns
  (model_executor/layers/fused_moe/fused_moe.py ``fused_experts_impl``: three caches in 0.7.x,
  ``cache13`` + ``intermediate_cache2`` in 0.8.x), so they count in the MoE stage only.

Each figure below is a hand count of those tensors; published rows 802 / 803 are these
deployments (their notes say why their logs hold ~5.7-5.9 GiB a rank less KV than these
releases' code gives)."""

from __future__ import annotations

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.terms.activation import activation_stages

H, HEADS, NOPE, ROPE, V_DIM, Q_LORA, KV_LORA = 7168, 128 // 8, 128, 64, 128, 1536, 512
QK = NOPE + ROPE
TOP_K, I_L, CHUNK = 8, 2048 // 8, 32768  # moe_intermediate_size 2048 over TP 8
S = 2  # bf16


def _stages(version: str, max_model_len: int) -> tuple[dict[str, int], dict[str, int]]:
    e = estimate("deepseek-r1", Deployment(engine_version=version, tp=8,
                                           max_model_len=max_model_len), gpu_name="H200")
    st = {s.name: s.bytes for s in activation_stages(rank_context(e, e.ranks[0]))}
    comps = {c.name: c.bytes for c in e.ranks[0].components}
    return st, comps


def _attention(t: int, out_buffer: bool) -> int:
    outer = (2 * t * H  # residual + hidden [T, H]
             + t * (Q_LORA + KV_LORA + ROPE) + t * Q_LORA  # q_a/kv_a out, q_a norm
             + t * HEADS * QK + t * KV_LORA)  # q [T, h, qk], kv_c normed
    prefill = (t * HEADS * (NOPE + V_DIM)  # kv_b_proj out
               + 2 * t * HEADS * QK  # k with RoPE, v padded to qk
               + t * HEADS * V_DIM)  # the sliced output [T, h·v]
    proj = 2 * t * H  # o_proj out + all-reduce out
    return S * (outer + prefill + proj + (t * H if out_buffer else 0))


def test_0_7_1_runs_the_mla_prefill_and_frees_the_moe_caches_per_call() -> None:
    t = 16384  # max_model_len 16384, chunked prefill off for MLA
    st, comps = _stages("0.7.1", t)
    assert st["attention (mla)"] == _attention(t, out_buffer=False) == 1_579_155_456
    m = min(t, CHUNK)
    caches = S * m * TOP_K * (2 * I_L + I_L + H)  # cache1 [M,k,N] + cache2 [M·k,N/2] + cache3
    assert caches == 2_080_374_784
    # the MoE stage holds them beside its own tensors (``activation_stages`` lists the stages
    # without per-call caches); no workspace outlives the layer, so the peak is that stage
    assert "fused-MoE workspace (WorkspaceManager)" not in comps
    assert comps["activation peak (profile run)"] == st["MoE"] + caches
    assert st["MoE"] + caches > max(st.values())


def test_0_8_0_v0_adds_the_layer_output_and_shares_cache13() -> None:
    t = 163840  # max_model_len 163840, chunked prefill off for MLA
    st, comps = _stages("0.8.0+v0", t)
    assert st["attention (mla)"] == _attention(t, out_buffer=True) == 18_140_364_800
    caches = S * CHUNK * TOP_K * (max(2 * I_L, H) + I_L)  # cache13 + cache2, M = 32768
    assert caches == 3_892_314_112
    assert "fused-MoE workspace (WorkspaceManager)" not in comps
    # the MoE stage with its caches, and the loop's layer input V0's eager forward holds beside
    # it (memprof/core/terms/v0_eager_forward.py: [T, H] = 2.19 GiB here), is the peak, 28 MB
    # above the prefill's attention stage
    held = S * t * H
    assert st["MoE"] - held + caches < st["attention (mla)"] < st["MoE"] + caches
    assert comps["activation peak (profile run)"] == st["MoE"] + caches


def test_v1_keeps_the_worst_case_buffer_and_frees_the_moe_caches_per_call() -> None:
    # V1 calls the same fused_experts_impl: no workspace outlives the layer
    # (memprof/core/terms/moe_caches.py TRITON_MOE_CACHES_PER_CALL)
    st, comps = _stages("0.8.0", 163840)
    assert "fused-MoE workspace (WorkspaceManager)" not in comps
    assert st["attention (mla)"] < _attention(163840, out_buffer=False)
