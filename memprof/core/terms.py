"""The terms between the weights and the KV cache: activations, CUDA graphs, non-torch, allocator.

Each term is a pure function ``(TermContext) -> list[Component]`` with its formula in the docstring
and a citation. Semantics are vLLM V1's (``reference/internals.md`` §1, vLLM@52a31cc):

- ``activation_terms``: the torch peak of ``profile_run()`` — an eager ``_dummy_run`` of
  ``max_num_batched_tokens`` tokens with attention skipped, then the sampler on
  ``R = min(max_num_seqs, max_num_batched_tokens)`` rows (§1.3). Inside the budget, profiled.
- ``cudagraph_terms``: vLLM's CUDA-graph estimate, which it subtracts from the KV budget, and
  memprof's prediction of the pool actually used above it (§1.4).
- ``non_torch_terms``: the CUDA context and eager NCCL state (before the engine's baseline
  snapshot), and the library modules the profile run loads (its ``non_torch_increase``) (§7).
- ``allocator_runtime_terms``: caching-allocator rounding of the KV-cache tensors (§1.6, §5).

Sizes are ``int`` bytes. "s" below is the model dtype's size; "T" the tokens of the profile run
(per DP rank); local sizes are per rank: heads/tp, dense I/tp, MoE I/(tp·dp) (full I with EP).

Measured constants come from ``/work/shared/calibration/measured_h100_overheads.json`` (H100,
torch 2.11.0+cu130, driver 580) and internals §7.1 (2× H200, NCCL 2.28.9); the figure and the
step it comes from are named where each constant is defined.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from memprof.base.units import KiB, MiB, cdiv, fmt_bytes, round_up
from memprof.core.components import Component, TermContext, TermFn
from memprof.core.deployment import Deployment, experts_on_rank
from memprof.core.gpus import GPU
from memprof.core.kvcache import KVPlan, rank_layers
from memprof.core.models import Attention, Layer, layer_kinds

# --- constants (each with its source) -------------------------------------------------------------

DTYPE_SIZE = {"bfloat16": 2, "float16": 2, "float32": 4}

# vLLM V1 sampler warm-up (``_dummy_sampler_run``, internals §1.3) on R rows × V vocab. The first
# call may use FlashInfer; the second passes a torch.Generator, which falls back to
# ``forward_native`` (vllm/v1/sample/ops/topk_topp_sampler.py), so the native path sets the peak:
# model-dtype logits (kept alive by the caller) + their fp32 copy (4 B/elem), then
# ``apply_top_k_top_p``:
# - R ≥ 8 (``HAS_TRITON and logits.shape[0] >= 8``; newer vLLM: always): the Triton pivot kernel
#   masks the fp32 logits in place using a cached [programs, V] fp32 row buffer (programs ≤ SMs);
#   then ``softmax`` probs (4) and ``random_sample``'s exponential noise q (4): 12·R·V + buffer;
# - R < 8: ``apply_top_k_top_p_pytorch`` sorts: values fp32 (4) + int64 indices (8), the top-k
#   bool mask (1), ``softmax`` whose ``cumsum(out=probs_sort)`` is in place (4), the top-p bool
#   mask (1): 22·R·V with the fp32 copy.
# Not counted: the sort kernel's own temporary storage [unverified size].
SAMPLER_FP32_BYTES_PER_ELEM = 4
SAMPLER_TRITON_BYTES_PER_ELEM = 4 + 4  # probs + exponential noise, after the in-place mask
SAMPLER_SORT_BYTES_PER_ELEM = 4 + 8 + 1 + 4 + 1  # = 18; with the fp32 copy: 22·R·V
SAMPLER_TRITON_MIN_ROWS = 8
# Rows of the Triton kernel's cached buffer: one per program, at most one per SM; 132 = SMs of an
# H100/H200 SXM [approximation for other GPUs] (vllm/v1/sample/ops/topk_topp_triton.py
# ``BUFFER_ROW = BUFFER + pid * VOCAB_SIZE``).
SAMPLER_TRITON_BUFFER_ROWS = 132

# vLLM ``VLLM_FUSED_MOE_CHUNK_SIZE`` default 16·1024 (vllm/envs.py): the modular fused-MoE kernel
# sizes its workspaces for at most this many tokens per chunk.
FUSED_MOE_CHUNK_SIZE = 16 * 1024
# ``moe_align_block_size``: sorted_token_ids int32 of ``topk_ids.numel() + E·(BLOCK_SIZE_M − 1)``
# (vllm/model_executor/layers/fused_moe/moe_align_block_size.py); BLOCK_SIZE_M comes from the tuned
# config (16-128); memprof takes 64 [assumption].
MOE_ALIGN_BLOCK_M = 64

# MLA profile run: ``MLAAttention.forward`` with ``attn_metadata is None`` allocates
# ``torch.empty((chunked_prefill_workspace_size, num_heads, qk_nope_head_dim + v_head_dim))`` "to
# simulate the worse case output size for kv_b_proj(kv_c_normed) in _compute_prefill_context"
# (vllm/model_executor/layers/attention/mla_attention.py, v1/attention/backends/mla/common.py).
# ``determine_chunked_prefill_workspace_size``: min(max(8·max_model_len, 4·max_num_seqs·block),
# 64·1024), then at least max_num_seqs·block (MLACommonMetadataBuilder, upstream vLLM).
MLA_CHUNKED_PREFILL_CAP = 64 * 1024

# DeepSeek-V4: FlashMLA pads the heads to at least 64 (``padded_heads = max(n_local_heads, 64)``,
# vllm/model_executor/models/deepseek_v4.py @023da1fc); ``o_padded`` is [T, padded_heads, 512].
DSV4_MIN_PADDED_HEADS = 64
# Three aux CUDA streams run bf16 GEMMs in parallel with the main one (compressor kv_score,
# indexer.weights_proj, indexer.compressor kv_score; "Disable them on ROCm"), same file.
DSV4_AUX_STREAMS = 3

# cuBLAS workspace (internals §7.3, aten/src/ATen/cuda/CublasHandlePool.cpp): allocated through the
# caching allocator once per (handle, stream), so it lands in the profile run's torch peak.
CUBLAS_WORKSPACE_HOPPER_PLUS = 32 * MiB  # compute capability 9.x-12.x: ":4096:8" = 4096 KiB × 8
CUBLAS_WORKSPACE_OLDER = 8 * MiB + 128 * KiB  # ":4096:2:16:8" = 4096 KiB × 2 + 16 KiB × 8
CUBLAS_WORKSPACE_ROCM_MI300_PLUS = 128 * MiB  # gfx942 / gfx950 / gfx1250
CUBLAS_WORKSPACE_ROCM = 32 * MiB

# CUDA context: measured_h100_overheads.json step "CUDA context (first tensor)":
# used 554,500,096 − reserved 2,097,152 = 552,402,944 B (526.8 MiB). internals §7.1 measured
# 527-529 MiB on H200 (same driver/torch), i.e. within 2.3 MiB of this value.
CUDA_CONTEXT_BYTES = 554_500_096 - 2_097_152

# Library modules the profile run loads (non-torch, measured_h100_overheads.json, non-torch =
# used − reserved after each step):
#   first bf16 GEMM (cuBLAS):    623,706,112 − 552,402,944 = 71,303,168 B (68 MiB)
#   first Linear+bias (cuBLASLt): 623,706,112 − 623,706,112 = 0 B on H100
#   first Triton kernel:         718,077,952 − 623,706,112 = 94,371,840 B (90 MiB)
# internals §7.1 (H200): cuBLAS +66 MiB, cuBLASLt +90 MiB, Triton not measured. Both devices add
# ≈158 MiB for the libraries they exercised; memprof uses the H100 steps (all three measured on
# one device) and so counts 158 MiB once.
CUBLAS_NON_TORCH_BYTES = 623_706_112 - 552_402_944
CUBLASLT_NON_TORCH_BYTES = 0
TRITON_NON_TORCH_BYTES = 718_077_952 - 623_706_112

# NCCL, internals §7.1 (2× H200, NVLink, NCCL 2.28.9, cuMem on): communicator init +458 MiB, first
# collective +474 MiB, no growth after (128 MiB all_reduce, 256 MiB all_gather). Measured at 2
# ranks only. NCCL's ring/tree buffers connect a bounded number of neighbours per channel, so
# memprof keeps the 2-rank figures for larger groups [unverified: channel count and NVLS
# buffers depend on topology and size]. NCCL_CUMEM_ENABLE=0 measured +808 MiB at init instead.
NCCL_COMM_INIT_BYTES = 458 * MiB
NCCL_FIRST_COLLECTIVE_BYTES = 474 * MiB

# CUDA graphs: per captured graph, driver memory for the executable. vLLM floors its per-graph
# sample at 1 MiB ("driver overhead", ``profile_cudagraph_memory``, internals §1.4); internals §7.1
# measured +2 MiB non-torch for capturing and replaying one small graph. memprof uses 2 MiB
# [approximation: large piecewise graphs have one executable per piece].
CUDAGRAPH_MIN_PER_GRAPH = 1 * MiB
CUDAGRAPH_DRIVER_PER_GRAPH = 2 * MiB
CUDAGRAPH_MAX_CAPTURE_DEFAULT = 512  # min(max_num_seqs·decode_query_len·2, 512), §1.4

# Caching allocator (internals §5.1-§5.2, c10/cuda/CUDACachingAllocator.cpp @eb42ad6).
ALLOC_SMALL_SIZE = 1 * MiB  # kSmallSize
ALLOC_SMALL_BUFFER = 2 * MiB  # kSmallBuffer
ALLOC_LARGE_BUFFER = 20 * MiB  # kLargeBuffer
ALLOC_MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc
ALLOC_ROUND_LARGE = 2 * MiB  # kRoundLarge
ALLOC_MIN_BLOCK = 512  # kMinBlockSize


# --- shared helpers -------------------------------------------------------------------------------


def _s(ctx: TermContext) -> int:
    return DTYPE_SIZE.get(ctx.model_dtype, 2)


def _tokens(dep: Deployment) -> int:
    """Tokens of the profile run on one DP rank: ``max_num_batched_tokens`` (resolved)."""
    if dep.max_num_batched_tokens is None:
        raise ValueError("terms need a resolved deployment (max_num_batched_tokens is None)")
    return dep.max_num_batched_tokens


def _seqs(dep: Deployment) -> int:
    if dep.max_num_seqs is None:
        raise ValueError("terms need a resolved deployment (max_num_seqs is None)")
    return dep.max_num_seqs


def _is_rocm(gpu: GPU) -> bool:
    return gpu.vendor.lower() == "amd" or gpu.arch.startswith("gfx")


def _is_first_stage(ctx: TermContext) -> bool:
    return ctx.coord.pp_stage == 0


def _is_last_stage(ctx: TermContext) -> bool:
    return ctx.coord.pp_stage == ctx.dep.pp - 1


@dataclass(frozen=True, slots=True)
class Stage:
    """The tensors live at one point of the profile forward, and their sum."""

    name: str
    parts: tuple[tuple[str, int], ...]

    @property
    def bytes(self) -> int:
        return sum(b for _n, b in self.parts)

    def describe(self) -> str:
        return f"{self.name}: " + " + ".join(f"{n} {fmt_bytes(b)}" for n, b in self.parts if b)


# --- 1. activations of the profile run ------------------------------------------------------------


def _base(ctx: TermContext, t: int) -> list[tuple[str, int]]:
    """What lives across a decoder layer: the residual stream and the layer's (normed) input.

    DeepSeek-V4 mHC keeps the residual as [T, hc_mult, H] (4× a hidden state, deepseek_v4.md §6.3)
    plus the post/comb mixes [T, hc] and [T, hc, hc] in fp32.
    """
    s, h = _s(ctx), ctx.spec.hidden_size
    hc = ctx.spec.hc_mult
    if hc:
        return [("residual [T,hc,H]", t * hc * h * s), ("layer input [T,H]", t * h * s),
                ("mHC mixes fp32", t * (hc + hc * hc) * 4)]
    return [("residual [T,H]", t * h * s), ("hidden [T,H]", t * h * s)]


def _row_parallel_out(ctx: TermContext, t: int, what: str) -> list[tuple[str, int]]:
    """A row-parallel output [T,H]; with TP>1 the all-reduce is out of place
    (``_all_reduce_out_place`` returns a new tensor, vllm/distributed/parallel_state.py), so the
    reduced copy is live too."""
    s, h = _s(ctx), ctx.spec.hidden_size
    out = [(f"{what} out [T,H]", t * h * s)]
    if ctx.dep.tp > 1:
        out.append(("all-reduce out [T,H]", t * h * s))
    return out


def _gqa_stage(ctx: TermContext, a: Attention, t: int) -> list[tuple[str, int]]:
    """qkv_proj output [T, (h+2·kv)·D], the attention output buffer [T, h·Dv] (filled with zeros in
    the profile run, internals §1.3), o_proj output; Qwen3 q/k norms are out of place."""
    s, tp = _s(ctx), ctx.dep.tp
    h_l, kv_l = a.num_heads // tp, max(1, a.num_kv_heads // tp)
    parts = [("qkv [T,(h+2kv)·D]", t * (h_l * a.head_dim + kv_l * (a.head_dim + a.v_head_dim)) * s),
             ("attn out [T,h·Dv]", t * h_l * a.v_head_dim * s)]
    if a.qk_norm:
        parts.append(("q/k norm out", t * (h_l + kv_l) * a.head_dim * s))
    return parts + _row_parallel_out(ctx, t, "o_proj")


def mla_chunked_prefill_rows(ctx: TermContext) -> int:
    """``MLACommonMetadataBuilder.determine_chunked_prefill_workspace_size`` (upstream vLLM)::

        W = max(min(max(8·max_model_len, 4·max_num_seqs·block), 64·1024), max_num_seqs·block)
    """
    mml = ctx.dep.max_model_len or ctx.spec.max_position_embeddings or 1
    seqs, block = _seqs(ctx.dep), ctx.plan.block_size
    return max(min(max(8 * mml, 4 * seqs * block), MLA_CHUNKED_PREFILL_CAP), seqs * block)


def _mla_stage(ctx: TermContext, a: Attention, t: int, decode: bool) -> list[tuple[str, int]]:
    """MLA (DeepSeek V2/V3): q path, latent kv, the attention output buffer, o_proj.

    Profile run (``decode=False``): ``MLAAttention.forward`` with no metadata allocates the
    worst-case kv_b_proj output ``[W, heads_local, qk_nope+v]`` (W = ``mla_chunked_prefill_rows``)
    and returns ``output.fill_(0)``. Decode (CUDA-graph capture, ``decode=True``): the absorbed q
    [b, h, kv_lora+rope] and the latent attention output [b, h, kv_lora] instead.
    """
    s, h_l = _s(ctx), a.num_heads // ctx.dep.tp
    qk = a.qk_nope_head_dim + a.qk_rope_head_dim
    latent = a.kv_lora_rank + a.qk_rope_head_dim
    parts: list[tuple[str, int]] = []
    if a.q_lora_rank:
        parts += [("fused q_a/kv_a out", t * (a.q_lora_rank + latent) * s),
                  ("q_a norm", t * a.q_lora_rank * s)]
    else:
        parts += [("kv_a out [T,kv_lora+rope]", t * latent * s)]
    parts += [("q [T,h·qk]", t * h_l * qk * s), ("kv_c normed", t * a.kv_lora_rank * s),
              ("attn out [T,h·v]", t * h_l * a.v_head_dim * s)]
    if decode:
        parts += [("absorbed q [b,h,kv_lora+rope]", t * h_l * latent * s),
                  ("latent out [b,h,kv_lora]", t * h_l * a.kv_lora_rank * s)]
    else:
        w = mla_chunked_prefill_rows(ctx)
        parts += [(f"kv_b worst case [{w},h,nope+v]",
                   w * h_l * (a.qk_nope_head_dim + a.v_head_dim) * s)]
    return parts + _row_parallel_out(ctx, t, "o_proj")


def _dsv4_attention_stage(ctx: TermContext, a: Attention, t: int) -> list[tuple[str, int]]:
    """DeepSeek-V4 attention projections (vllm/model_executor/models/deepseek_v4.py @023da1fc):
    fused wq_a|wkv [T, q_lora+512], q_norm, wq_b → q [T, h_l·512], kv_norm, the indexer's q
    [T, 64·128] and weights (C4 layers), the compressor's kv/gate (C4: 2·1024, C128: 2·512 cols),
    o_padded [T, max(h_l,64), 512] (deepseek_v4.md §6.3), the grouped wo_a output z
    [T, groups/tp, o_lora], wo_b. The attention kernel itself is skipped in the profile run; its
    prefill gather workspace belongs to the scratch catalog (``memprof.core.scratch``).
    """
    s, tp = _s(ctx), ctx.dep.tp
    h_l = a.num_heads // tp
    ph = max(h_l, DSV4_MIN_PADDED_HEADS)
    q_lora = a.q_lora_rank or 0
    parts = [("fused wq_a|wkv out", t * (q_lora + a.head_dim) * s), ("q_norm", t * q_lora * s),
             ("q [T,h·512]", t * h_l * a.head_dim * s), ("kv_norm", t * a.head_dim * s)]
    if a.compress_ratio == 4:
        parts += [("indexer q", t * a.index_n_heads * a.index_head_dim * s),
                  ("indexer weights fp32", t * a.index_n_heads * 4),
                  ("compressor kv|gate", t * 2 * 2 * a.head_dim * s)]
    elif a.compress_ratio == 128:
        parts += [("compressor kv|gate", t * 2 * a.head_dim * s)]
    parts += [("o_padded [T,ph,512]", t * ph * a.head_dim * s),
              ("z [T,g,o_lora]", t * max(1, a.o_groups // tp) * a.o_lora_rank * s)]
    return parts + _row_parallel_out(ctx, t, "wo_b")


def _dense_stage(ctx: TermContext, inter: int, t: int) -> list[tuple[str, int]]:
    """Dense MLP: gate_up [T, 2·I/tp] stays alive (a local) while act [T, I/tp] and down run."""
    s, i_l = _s(ctx), inter // ctx.dep.tp
    return [("gate_up [T,2I]", t * 2 * i_l * s), ("act [T,I]", t * i_l * s),
            *_row_parallel_out(ctx, t, "down_proj")]


def _moe_dims(ctx: TermContext, layer: Layer, t: int) -> tuple[int, int, int]:
    """(M tokens entering the experts, local intermediate, local experts).

    DP>1: vLLM's default all2all backend gathers every DP rank's tokens before the experts
    (``allgather_reducescatter``), so M = T·dp. Without EP the experts' I is split TP×DP ways.
    """
    dep, mlp = ctx.dep, layer.mlp
    m = t * dep.dp if dep.dp > 1 else t
    if dep.enable_expert_parallel:
        i_l = mlp.moe_intermediate_size
        e_l = experts_on_rank(mlp.num_experts, dep.ep_size, ctx.coord.ep_rank or 0)
    else:
        i_l = mlp.moe_intermediate_size // dep.moe_tp_size
        e_l = mlp.num_experts
    return m, i_l, e_l


def _moe_workspace(ctx: TermContext, layer: Layer, t: int) -> int:
    """Fused-MoE modular-kernel workspaces (``TritonExperts.workspace_shapes``,
    vllm/model_executor/layers/fused_moe): workspace13 = (M, top_k, max(I_l, H)) and
    workspace2 = (M, top_k, max(2·I_l, H)) in the model dtype, M capped at
    ``VLLM_FUSED_MOE_CHUNK_SIZE``. They come from the ``WorkspaceManager`` (internals §2), so
    they persist after the profile run and all MoE layers share the largest.
    Other expert backends (DeepGEMM, CUTLASS, FlashInfer, Marlin) size theirs differently.
    """
    s, h, k = _s(ctx), ctx.spec.hidden_size, layer.mlp.top_k
    m, i_l, _e = _moe_dims(ctx, layer, t)
    mc = min(m, FUSED_MOE_CHUNK_SIZE)
    return mc * k * max(i_l, h) * s + mc * k * max(2 * i_l, h) * s


def _moe_stage(ctx: TermContext, layer: Layer, t: int) -> list[tuple[str, int]]:
    """MoE layer (without its persistent workspace): router logits [M, E] fp32, top-k ids int32 and
    weights fp32 [M, k], the gathered hidden states [M, H] (DP>1), moe_align's sorted ids, the
    experts' output [M, H], the reduce-scatter back to [T, H] (DP>1); the shared expert's
    gate_up/act run before the routed experts and only its output [T, H] stays alive."""
    s, h, dep, mlp = _s(ctx), ctx.spec.hidden_size, ctx.dep, layer.mlp
    m, _i, e_l = _moe_dims(ctx, layer, t)
    k = mlp.top_k
    parts: list[tuple[str, int]] = []
    if ctx.spec.hc_mult:  # DSv4 NormGateLinear: the MoE input is normed inside the gate
        parts.append(("normed x", t * h * s))
    parts += [("router logits fp32 [M,E]", m * mlp.num_experts * 4),
              ("top-k ids+weights", m * k * 8)]
    if dep.dp > 1:
        parts.append(("DP-gathered hidden [M,H]", m * h * s))
    sh_i = mlp.shared_intermediate_size // dep.tp
    shared_out = t * h * s if sh_i else 0
    shared_mlp = t * 3 * sh_i * s  # gate_up [T, 2I] + act [T, I]
    routed = ((m * k + e_l * (MOE_ALIGN_BLOCK_M - 1)) * 4  # sorted_token_ids int32
              + m * h * s  # experts' output [M, H]
              + (t * h * s if dep.dp > 1 else 0))  # reduce-scatter output
    if shared_mlp > routed:
        parts += [("shared expert gate_up+act", shared_mlp)]
    else:
        parts += [("align+experts out", routed)]
    if shared_out:
        parts.append(("shared expert out [T,H]", shared_out))
    if dep.tp > 1:
        parts.append(("all-reduce out [T,H]", t * h * s))
    return parts


def _mhc_stage(ctx: TermContext, t: int) -> list[tuple[str, int]]:
    """DeepSeek-V4 ``mhc_fused_post_pre``: the old and the new residual [T, hc, H] are both live,
    with the sublayer output and the next layer input [T, H] (deepseek_v4.py @023da1fc)."""
    s, h, hc = _s(ctx), ctx.spec.hidden_size, ctx.spec.hc_mult
    return [("residual old+new [T,hc,H]", 2 * t * hc * h * s), ("x in+out [T,H]", 2 * t * h * s),
            ("mHC mixes fp32", 2 * t * (hc + hc * hc) * 4)]


def activation_stages(ctx: TermContext, *, tokens: int | None = None, rows: int | None = None,
                      decode: bool = False) -> list[Stage]:
    """Live sets of one forward on this rank, one per distinct (attention, MLP) layer type, plus the
    embedding (first PP stage) and the sampler (last PP stage, when ``rows`` > 0).

    ``tokens`` defaults to the profile run's T (``max_num_batched_tokens``); ``rows`` to
    R = min(max_num_seqs, T); ``decode=True`` sizes a decode step of ``tokens`` sequences (CUDA
    graphs) instead of the profile run. The persistent MoE workspace is not in these sets (see
    ``moe_workspace_bytes``).
    """
    dep, spec = ctx.dep, ctx.spec
    t = _tokens(dep) if tokens is None else tokens
    r = min(_seqs(dep), t) if rows is None else rows
    s, h = _s(ctx), spec.hidden_size
    base = _base(ctx, t)
    stages: list[Stage] = []
    if _is_first_stage(ctx):
        emb = [("embedding out [T,H]", t * h * s)]
        if dep.tp > 1:  # VocabParallelEmbedding: masked partial lookup, then all-reduce
            emb.append(("all-reduce out [T,H]", t * h * s))
        if spec.hc_mult:
            emb.append(("hc repeat [T,hc,H]", t * spec.hc_mult * h * s))
        stages.append(Stage("embedding", tuple(emb)))
    for layer, _n in layer_kinds(rank_layers(spec, dep, ctx.coord)):
        a, mlp = layer.attention, layer.mlp
        if a.kind == "mla":
            attn = _mla_stage(ctx, a, t, decode)
        elif a.kind == "dsv4":
            attn = _dsv4_attention_stage(ctx, a, t)
        else:
            attn = _gqa_stage(ctx, a, t)
        label = a.kind
        if a.kind == "dsv4":
            label += f", C{a.compress_ratio}" if a.compress_ratio else ", SWA-only"
        stages.append(Stage(f"attention ({label})", tuple(base + attn)))
        if mlp.kind == "moe":
            stages.append(Stage("MoE", tuple(base + _moe_stage(ctx, layer, t))))
        else:
            stages.append(Stage("dense MLP", tuple(base + _dense_stage(ctx, mlp.intermediate_size,
                                                                        t))))
    if spec.hc_mult and rank_layers(spec, dep, ctx.coord):
        stages.append(Stage("mHC post/pre", tuple(_mhc_stage(ctx, t))))
    if _is_last_stage(ctx) and r > 0:
        stages.append(sampler_stage(ctx, t, r))
    return list(dict.fromkeys(stages))  # layer types that differ only in routing share a stage


def sampler_stage(ctx: TermContext, t: int, r: int) -> Stage:
    """The sampler warm-up on R rows (internals §1.3): the last hidden states [T, H] are still
    alive; logits [R, V] in the model dtype (with TP>1 also the local shard [R, V/tp] before the
    all-gather); then the fp32 copy and top-k/top-p: 12·R·V + the Triton row buffer when R ≥ 8,
    22·R·V (sort) below (see ``SAMPLER_*``). With speculative decoding the rejection sampler's
    logits [R·(1+k), V] (fp32 + probs, plus the draft rows in the model dtype) replace it when they
    are larger [approximation]."""
    s, v, h, dep = _s(ctx), ctx.spec.vocab_size, ctx.spec.hidden_size, ctx.dep
    parts = [("last hidden [T,H]", t * h * s), ("logits [R,V]", r * v * s)]
    if dep.tp > 1:
        parts.append(("local logits shard [R,V/tp]", r * cdiv(v, dep.tp) * s))
    if r >= SAMPLER_TRITON_MIN_ROWS:
        rows = min(r, SAMPLER_TRITON_BUFFER_ROWS)
        topkp = [("fp32 logits + probs + noise 12·R·V",
                  r * v * (SAMPLER_FP32_BYTES_PER_ELEM + SAMPLER_TRITON_BYTES_PER_ELEM)),
                 (f"Triton top-k/p buffer [{rows},V] fp32", rows * v * 4)]
    else:
        topkp = [("fp32 logits + sort/softmax/masks 22·R·V",
                  r * v * (SAMPLER_FP32_BYTES_PER_ELEM + SAMPLER_SORT_BYTES_PER_ELEM))]
    k = dep.num_speculative_tokens
    spec_rows = r * (1 + k)
    reject = spec_rows * v * (4 + 4) + (spec_rows - r) * v * s if k else 0
    if reject > sum(b for _n, b in topkp):
        parts.append((f"rejection sampler [{spec_rows},V] fp32+probs", reject))
    else:
        parts += topkp
    return Stage("sampler", tuple(parts))


def moe_workspace_bytes(ctx: TermContext, tokens: int | None = None) -> int:
    """The largest fused-MoE workspace of the rank's MoE layers (0 for dense models).

    It is a ``WorkspaceManager`` caller: the scratch catalog should count its own workspace
    callers as growth above this one (one buffer, max over callers, internals §2).
    """
    t = _tokens(ctx.dep) if tokens is None else tokens
    return max((_moe_workspace(ctx, layer, t) for layer in rank_layers(ctx.spec, ctx.dep, ctx.coord)
                if layer.mlp.kind == "moe"), default=0)


def cublas_workspace_bytes(gpu: GPU) -> int:
    """One cuBLAS workspace (internals §7.3): 32 MiB on compute capability 9.x-12.x, 8 MiB + 128 KiB
    before; ROCm 128 MiB on gfx942/gfx950/gfx1250, else 32 MiB. Unknown GPUs get 32 MiB."""
    arch = gpu.arch
    if _is_rocm(gpu):
        if arch.startswith(("gfx942", "gfx950", "gfx1250")):
            return CUBLAS_WORKSPACE_ROCM_MI300_PLUS
        return CUBLAS_WORKSPACE_ROCM
    if arch.startswith(("sm8", "sm7", "sm6")):
        return CUBLAS_WORKSPACE_OLDER
    return CUBLAS_WORKSPACE_HOPPER_PLUS


def cublas_streams(ctx: TermContext) -> int:
    """Streams that run cuBLAS GEMMs in the profile run: the main one, plus DeepSeek-V4's three aux
    streams on CUDA (not ROCm). Each (handle, stream) pair gets its own workspace (§7.3)."""
    if ctx.spec.hc_mult and not _is_rocm(ctx.gpu):
        return 1 + DSV4_AUX_STREAMS
    return 1


def activation_terms(ctx: TermContext) -> list[Component]:
    """The torch peak of vLLM's profile run (``torch_peak_increase``, internals §1.2-§1.3).

    ``_dummy_run(T = max_num_batched_tokens)`` runs eager with attention skipped, on
    ``min(T, max_num_seqs)`` requests; then, on the last PP stage only, the sampler on
    R = min(max_num_seqs, T) rows. The peak is::

        peak = max over stages (embedding, each layer type's attention and MLP/MoE, DSv4 mHC,
                                sampler) of the tensors live there
             + the fused-MoE WorkspaceManager buffer (persistent from the first MoE layer on)
             + cuBLAS workspace × streams

    Each stage = residual + layer input (DSv4: [T, hc, H] + [T, H]) + the stage's outputs (see
    the ``_*_stage`` docstrings). With DP each rank runs T tokens; with DP>1 MoE experts see T·dp.
    Returns three components (category "activation", where "budget", profiled): the peak of the
    non-persistent tensors, the MoE workspace, the cuBLAS workspace. The DSv4 prefill gather
    workspace and other attention workspaces belong to ``memprof.core.scratch``.
    """
    t = _tokens(ctx.dep)
    r = min(_seqs(ctx.dep), t)
    stages = activation_stages(ctx, tokens=t, rows=r)
    top = max(stages, key=lambda st: st.bytes)
    comps = [Component(name="activation peak (profile run)", category="activation",
                       bytes=top.bytes, where="budget", profiled=True,
                       formula=f"T={t}, R={r}; max over {len(stages)} stages = {top.describe()}")]
    ws = moe_workspace_bytes(ctx, t)
    if ws:
        comps.append(Component(
            name="fused-MoE workspace (WorkspaceManager)", category="activation", bytes=ws,
            where="budget", profiled=True,
            formula=f"min(M,{FUSED_MOE_CHUNK_SIZE})·top_k·(max(I,H) + max(2I,H))·s, M = T·dp; "
            "persistent, shared by all MoE layers"))
    n = cublas_streams(ctx)
    each = cublas_workspace_bytes(ctx.gpu)
    comps.append(Component(
        name="cuBLAS workspace", category="activation", bytes=n * each, count=n, where="budget",
        profiled=True,
        formula=f"{n} stream(s) × {fmt_bytes(each)} ({ctx.gpu.arch}); torch-allocated, in the "
        "profile's torch peak (internals §7.3)"))
    return comps


# --- 2. CUDA graphs -------------------------------------------------------------------------------


def capture_sizes(dep: Deployment) -> list[int]:
    """vLLM ``_set_cudagraph_sizes`` (vllm/config/vllm.py @52a31cc, internals §1.4)::

        dql = 1 + num_speculative_tokens
        max_capture = min(min(max_num_seqs·dql·2, 512), max_num_batched_tokens)
        sizes = [1,2,4] (≤ max) + range(8, min(max+1, 256), 8) + range(256, max+1, 16)
                + [max_num_batched_tokens] if it is ≤ max and not present
    """
    dql = 1 + dep.num_speculative_tokens
    mnbt = _tokens(dep)
    mx = min(min(_seqs(dep) * dql * 2, CUDAGRAPH_MAX_CAPTURE_DEFAULT), mnbt)
    sizes = [x for x in (1, 2, 4) if x <= mx]
    sizes += list(range(8, min(mx + 1, 256), 8)) + list(range(256, mx + 1, 16))
    if mnbt <= mx and mnbt not in sizes:
        sizes.append(mnbt)
    return sorted(sizes)


def graph_modes(dep: Deployment) -> dict[str, list[int]]:
    """FULL_AND_PIECEWISE (the V1 default, vllm/config/compilation.py): a PIECEWISE graph per
    capture size; FULL graphs for uniform decode batches, sizes with dql ≤ x ≤ dql·max_num_seqs
    (vllm/v1/cudagraph_dispatcher.py)."""
    sizes = capture_sizes(dep)
    dql = 1 + dep.num_speculative_tokens
    return {"PIECEWISE": sizes,
            "FULL": [x for x in sizes if dql <= x <= dql * _seqs(dep)]}


def decode_live_bytes(ctx: TermContext, batch: int) -> int:
    """The largest live set of one decode forward of ``batch`` tokens (no sampler, no MoE workspace:
    the WorkspaceManager buffer was sized by the profile run and is outside the graph pool)."""
    return max(st.bytes for st in activation_stages(ctx, tokens=batch, rows=0, decode=True))


@dataclass(frozen=True, slots=True)
class GraphModel:
    modes: dict[str, list[int]]
    first_capture: dict[str, int]  # per mode: live set of its largest graph + driver overhead
    per_graph_sample: int  # vLLM's mem_sample[1], floored at 1 MiB
    estimate: int  # what vLLM subtracts from the KV budget
    actual: int  # memprof's prediction of the pool used


def cudagraph_model(ctx: TermContext) -> GraphModel:
    """vLLM's estimate and memprof's prediction of the graph pool (internals §1.4).

    vLLM (``profile_cudagraph_memory``)::

        first[mode]  = mem_get_info delta of capturing the mode's largest graph
        per_graph    = max(mem_get_info delta of the second largest, 1 MiB)
        estimate     = max over modes of first[mode] + Σ_modes per_graph·(n_mode − 1)

    memprof models a capture's delta as the decode live set at that batch (all graphs share one
    pool, captured largest first, so smaller ones reuse it) plus ~2 MiB of driver memory per graph;
    the second capture then costs only its driver memory::

        first[mode] = live(largest size of the mode) + 2 MiB
        actual      = max over modes of live(largest) + 2 MiB × number of graphs

    This is an approximation: PR-text actuals are ~0.65 GiB (gemma-3-4b, #21489) and ~1.3 GiB
    (Llama-4 Maverick, #21489), and vLLM's estimate often exceeds the actual pool by far (#45178:
    KV 769,888 → 245,840 tokens; #53013: 118.65 GiB estimated) because the second sample is not
    just driver memory; memprof does not model that excess, nor attention-kernel workspaces that
    FULL captures touch (``profile_seq_lens``).
    """
    modes = {m: sizes for m, sizes in graph_modes(ctx.dep).items() if sizes}
    live = {m: decode_live_bytes(ctx, max(sizes)) for m, sizes in modes.items()}
    first = {m: live[m] + CUDAGRAPH_DRIVER_PER_GRAPH for m in modes}
    per_graph = max(CUDAGRAPH_DRIVER_PER_GRAPH, CUDAGRAPH_MIN_PER_GRAPH)
    estimate = (max(first.values(), default=0)
                + sum(per_graph * (len(sizes) - 1) for sizes in modes.values()))
    n_graphs = sum(len(sizes) for sizes in modes.values())
    actual = max(live.values(), default=0) + CUDAGRAPH_DRIVER_PER_GRAPH * n_graphs
    return GraphModel(modes=modes, first_capture=first, per_graph_sample=per_graph,
                      estimate=estimate, actual=actual)


def cudagraph_terms(ctx: TermContext) -> list[Component]:
    """Two components (category "cudagraph"):

    - "CUDA-graph estimate": vLLM's own estimate (``cudagraph_model``), which it subtracts from
      the KV budget (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1, the default since #38284):
      where "budget", profiled;
    - "CUDA-graph pool above the estimate": max(0, actual − estimate), where "runtime", not
      profiled.

    ``--enforce-eager`` captures nothing: both are 0 with formula "enforce_eager".
    """
    names = ("CUDA-graph estimate", "CUDA-graph pool above the estimate")
    if ctx.dep.enforce_eager:
        return [Component(name=names[0], category="cudagraph", bytes=0, where="budget",
                          profiled=True, formula="enforce_eager"),
                Component(name=names[1], category="cudagraph", bytes=0, where="runtime",
                          profiled=False, formula="enforce_eager")]
    g = cudagraph_model(ctx)
    counts = ", ".join(f"{m}={len(s)} (largest={max(s)})" for m, s in g.modes.items())
    firsts = " / ".join(f"{m} {fmt_bytes(b)}" for m, b in g.first_capture.items())
    n = sum(len(s) for s in g.modes.values())
    return [
        Component(name=names[0], category="cudagraph", bytes=g.estimate, count=max(1, n),
                  where="budget", profiled=True,
                  formula=f"{counts}; max first capture ({firsts}) + "
                  f"{fmt_bytes(g.per_graph_sample)} × (n−1) per mode"),
        Component(name=names[1], category="cudagraph", bytes=max(0, g.actual - g.estimate),
                  where="runtime", profiled=False,
                  formula=f"predicted pool {fmt_bytes(g.actual)} (largest decode live set + "
                  f"{fmt_bytes(CUDAGRAPH_DRIVER_PER_GRAPH)} × {n} graphs) − estimate"),
    ]


def cudagraph_terms_estimate_off(ctx: TermContext) -> list[Component]:
    """vLLM before #38284 (or VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0): nothing is subtracted
    from the budget and the whole pool appears at run time."""
    if ctx.dep.enforce_eager:
        return cudagraph_terms(ctx)
    g = cudagraph_model(ctx)
    return [Component(name="CUDA-graph estimate", category="cudagraph", bytes=0, where="budget",
                      profiled=True, formula="estimate off (VLLM_MEMORY_PROFILER_ESTIMATE_"
                      "CUDAGRAPHS=0 / vLLM before #38284)"),
            Component(name="CUDA-graph pool above the estimate", category="cudagraph",
                      bytes=g.actual, where="runtime", profiled=False,
                      formula=f"predicted pool {fmt_bytes(g.actual)}, none of it budgeted")]


# --- 3. non-torch ---------------------------------------------------------------------------------


def nccl_groups(dep: Deployment) -> list[tuple[str, int]]:
    """Process groups that get an NCCL communicator on a rank: TP, PP, DP and EP, each only when its
    size is > 1 (vLLM ``initialize_model_parallel``; EP only with --enable-expert-parallel)."""
    groups = [("TP", dep.tp), ("PP", dep.pp), ("DP", dep.dp),
              ("EP", dep.ep_size if dep.enable_expert_parallel else 1)]
    return [(n, size) for n, size in groups if size > 1]


def non_torch_terms(ctx: TermContext) -> list[Component]:
    """Memory outside PyTorch's allocator (category "non_torch", internals §7).

    Before vLLM's ``init_snapshot`` (where "baseline", outside ``requested``):

    - CUDA context: 552,402,944 B (H100 measured; 527-529 MiB on H200);
    - per process group of size > 1: NCCL communicator init (+458 MiB) and the buffers of its
      first collective (+474 MiB) (2-rank H200 measurement, §7.1). vLLM creates each group's
      ``PyNcclCommunicator`` in ``init_worker_distributed_environment``, and its constructor runs
      ``ncclCommInitRank`` *and a warm-up all_reduce* (vllm/distributed/device_communicators/
      pynccl.py: "A small all_reduce for warmup."), before the snapshot ("NCCL buffers are
      allocated before we measure available memory", §1.1). So both sit in the baseline.

    Seen by the profile run (where "budget", vLLM's ``non_torch_increase``):

    - cuBLAS handle + kernels 68 MiB, cuBLASLt 0 MiB, first Triton kernel 90 MiB (H100 steps).

    Not modelled: other kernel modules loaded lazily (FlashAttention, FlashInfer, vLLM custom ops),
    NCCL communicators that torch's ProcessGroupNCCL creates at their first use in the profile,
    NVLS buffers, custom all-reduce IPC buffers (~8 MiB), DeepEP/NVSHMEM heaps.
    The cuBLAS *workspace* is torch-allocated and counted once, in ``activation_terms``.

    ROCm: the same constants are used [unverified: HIP context and hipBLAS/hipBLASLt module sizes
    were not measured]; the workspace that differs (128 MiB on gfx942/gfx950) is in
    ``cublas_workspace_bytes``.
    """
    rocm = _is_rocm(ctx.gpu)
    tag = " [ROCm: H100 figure, unverified]" if rocm else ""
    comps = [Component(name="CUDA context", category="non_torch", bytes=CUDA_CONTEXT_BYTES,
                       where="baseline", profiled=True,
                       formula="measured H100: used 554,500,096 − reserved 2,097,152 after the "
                       "first tensor (H200: 527-529 MiB)" + tag)]
    for name, size in nccl_groups(ctx.dep):
        comps.append(Component(
            name=f"NCCL {name} communicator ({size} ranks)", category="non_torch",
            bytes=NCCL_COMM_INIT_BYTES + NCCL_FIRST_COLLECTIVE_BYTES, count=1, where="baseline",
            profiled=True,
            formula="458 MiB ncclCommInitRank + 474 MiB buffers of PyNccl's warm-up all_reduce "
            "(2 ranks, H200, NCCL 2.28.9); kept for larger groups [unverified]"))
    libs = CUBLAS_NON_TORCH_BYTES + CUBLASLT_NON_TORCH_BYTES + TRITON_NON_TORCH_BYTES
    comps.append(Component(
        name="non-torch increase (profile run)", category="non_torch", bytes=libs,
        where="budget", profiled=True,
        formula="cuBLAS 68 MiB + cuBLASLt 0 MiB + first Triton kernel 90 MiB (H100 measured "
        "steps)" + tag))
    return comps


# --- 4. allocator slack at run time ---------------------------------------------------------------


def allocation_size(nbytes: int) -> int:
    """Bytes the caching allocator reserves for one request of ``nbytes``
    (``round_size`` then ``get_allocation_size``, internals §5.2)::

        size = 512·ceil(n/512);  ≤ 1 MiB → 2 MiB segment;  < 10 MiB → 20 MiB;  else 2 MiB·ceil
    """
    size = max(ALLOC_MIN_BLOCK, round_up(nbytes, ALLOC_MIN_BLOCK))
    if size <= ALLOC_SMALL_SIZE:
        return ALLOC_SMALL_BUFFER
    if size < ALLOC_MIN_LARGE_ALLOC:
        return ALLOC_LARGE_BUFFER
    return round_up(size, ALLOC_ROUND_LARGE)


def kv_tensor_sizes(plan: KVPlan, num_blocks: int) -> list[int]:
    """One ``torch.zeros(size, int8)`` per ``KVCacheTensor`` (``_allocate_kv_cache_tensors``, §1.6):

    - uniform: one tensor per layer cache, ``page_layer × num_blocks``;
    - hybrid: ``group_size`` tensors of ``page × num_blocks`` (group_size = block bytes / page);
    - DeepSeek-V4 packed: one slab of ``block_stride × num_blocks`` (deepseek_v4.md §5.4).
    """
    if num_blocks <= 0:
        return []
    if plan.layout == "dsv4_packed":
        return [plan.block_bytes * num_blocks]
    if plan.layout == "hybrid":
        page = plan.layers[0].page_bytes
        return [page * num_blocks] * (plan.block_bytes // page)
    return [layer.page_bytes * num_blocks for layer in plan.layers]


def allocator_runtime_terms(ctx: TermContext) -> list[Component]:
    """Reserved − allocated of the KV-cache tensors (category "allocator", where "runtime", not
    profiled): ``Σ over KV tensors of (allocation_size(size) − size)``; vLLM counts the KV cache as
    ``num_blocks × block bytes`` and never sees the rounding.

    No fixed fragmentation allowance is added: memprof has no measured basis for one (vLLM's own
    150 MiB ``redundancy_buffer_memory`` in its post-capture suggestion is an "empirically observed
    underestimate" slack, not a fragmentation measurement, internals §1.2).
    Needs ``ctx.num_gpu_blocks`` (a runtime term).
    """
    sizes = kv_tensor_sizes(ctx.plan, ctx.num_gpu_blocks)
    slack = sum((allocation_size(n) - n) * k for n, k in Counter(sizes).items())
    return [Component(name="allocator rounding (KV tensors)", category="allocator", bytes=slack,
                      count=max(1, len(sizes)), where="runtime", profiled=False,
                      formula=f"Σ over {len(sizes)} KV tensor(s) of round_up(size, 2 MiB) − size "
                      f"({ctx.num_gpu_blocks} blocks)")]


BUDGET_TERMS: list[TermFn] = [activation_terms, cudagraph_terms, non_torch_terms]
"""Terms known before the KV cache is sized (their runtime/baseline components are not budgeted)."""

RUNTIME_TERMS: list[TermFn] = [allocator_runtime_terms]
"""Terms that need ``ctx.num_gpu_blocks`` / ``ctx.kv_cache_bytes``."""
