"""Scratch buffers of attention backends: per layer or shared, inside the budget or at run time.

The four seed PRs (``../shared/seeds/``) share one failure: a scratch buffer that one layer needs
for one call was allocated once *per layer* (61-64 copies) or once per layer *per step*, was not
seen by vLLM's start-up profile run (attention is skipped there, ``reference/internals.md``
§1.3), and turned into an OOM. This module is the catalog of those buffers and the terms that put
them into a rank's estimate.

The catalog (``CATALOG``) has one ``ScratchBuffer`` per (buffer, variant). ``policy`` says which
``--scratch`` policy the variant belongs to: ``"per-layer"`` (the PR that allocated one copy per
layer, or per layer per step) or ``"shared"`` (one copy for all layers: a module-level buffer,
vLLM's ``WorkspaceManager``, or a per-call allocation that the caching allocator reuses);
``"both"`` marks workspaces every deployment of the backend has whatever the policy.

Lifetimes:

- ``per_layer_registered``: ``register_buffer`` at model construction, so it is counted in "model
  load" (vLLM's ``weights_memory``): inside the budget, seen by the profiler;
- ``per_layer_lazy``: one per layer, allocated lazily at the first decode: after the KV cache is
  sized, invisible to the profiler;
- ``per_step``: fresh on every call;
- ``shared_workspace``: one buffer for all layers (a ``WorkspaceManager`` slot or a module-level
  tensor).

``where`` of a component follows from ``profiled``: ``"budget"`` when the engine's start-up sees
the buffer before it sizes the KV cache (model construction, or the profile run), ``"runtime"``
when it first appears afterwards. Buffers sized by the KV pool (``needs_kv_blocks``) are always
runtime terms: ``scratch_runtime_terms`` reads ``ctx.num_gpu_blocks``, which the estimate sets only
after sizing the KV cache; ``scratch_budget_terms`` never does.

``WorkspaceManager`` (``vllm/v1/worker/workspace.py``, internals §2): every ``get_simultaneous``
call rounds each sub-buffer up to 256 B and asks for their sum; the manager keeps *one* buffer
per micro-batch that only grows, so all of its callers together cost the largest single call, not
the sum. The terms below therefore report each workspace caller as the growth it adds above the
callers already counted (budget callers first, then runtime callers, largest last).

Sizes are bytes; formulas and constants cite the engine file / PR they come from.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from memprof.base.errors import BadInput
from memprof.base.units import MiB, cdiv, fmt_bytes, round_up
from memprof.core.components import Component, TermContext
from memprof.core.deployment import Deployment
from memprof.core.dtypes import dtype_bytes as element_bytes
from memprof.core.dtypes import short_name
from memprof.core.engine_defaults import batch_defaults, sglang_defaults
from memprof.core.gpus import GPU
from memprof.core.kvcache import DSV4_SWA_BLOCK, TQ_BOUNDARY_LAYERS, rank_layers
from memprof.core.models import Layer, ModelSpec

# --- names ---------------------------------------------------------------------------------------

LIFETIMES = ("per_layer_registered", "per_layer_lazy", "per_step", "shared_workspace")
POLICIES = ("per-layer", "shared")

# ``--attention-backend`` values memprof knows (vLLM's ``AttentionBackendEnum`` names, lower case).
BACKENDS = ("cutlass_mla", "flashinfer_mla", "flashmla", "triton_mla", "flash_attn", "flashinfer",
            "turboquant", "aiter_mla", "triton_attn")
MLA_BACKENDS = frozenset({"cutlass_mla", "flashinfer_mla", "flashmla", "triton_mla", "aiter_mla"})
GQA_BACKENDS = frozenset({"flash_attn", "flashinfer", "triton_attn", "turboquant"})
# Backends that run DeepSeek sparse attention (V3.2 indexer, V4): FlashMLA sparse (SM90/SM100),
# FlashInfer MLA sparse (SM100, ``FLASHINFER_MLA_SPARSE_DSV4``, deepseek_v4.md §5.1) and AITER on
# ROCm ("on ROCm, DeepSeek sparse attention can only run through AITER", review of vLLM #40889).
SPARSE_MLA_BACKENDS = frozenset({"flashmla", "flashinfer_mla", "aiter_mla"})

# Catalog keys that are not attention backends.
SGLANG_DP_ATTENTION = "sglang_dp_attention"  # SGLang --enable-dp-attention gathered buffer
DEEPSEEK_V4 = "deepseek_v4"  # buffers every DeepSeek-V4 deployment has, whatever the backend

# --- constants (each with its source) -------------------------------------------------------------

WORKSPACE_ALIGN = 256  # WorkspaceManager.get_simultaneous: round_up(bytes_i, 256) (internals §2)
TQ_MAX_KV_SPLITS = 32  # attention_config.tq_max_kv_splits_for_cuda_graph default (§3.2)
CUTLASS_MLA_MAX_HEADS = 128  # cutlass_mla.py MAX_HEADS: decode heads padded to 128 (§3.1)
CUTLASS_MLA_LATENT = 512  # D_latent of the CUTLASS MLA decode output (§3.1)
CUTLASS_MLA_WORKSPACE_BYTES = 128 * MiB  # g_sm100_workspace = SM100Workspace(128 MiB) (§1.7)
FLASHINFER_WORKSPACE_BYTES = 394 * MiB  # VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE default (§1.7)
DSV4_PREFILL_CHUNK = 4  # PREFILL_CHUNK_SIZE of the DeepSeek-V4 prefill K gather (§1.7)
AITER_SWA_TOPK = 128  # AITER DSv4 SWA scope attends to the 128-token window (deepseek_v4.md §7.2)



# --- the dimensions a buffer's shape is a function of ---------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Dims:
    """The sizes of one rank that scratch shapes depend on."""

    local_heads: int  # query heads on this rank: num_heads / TP
    local_kv_heads: int  # KV heads on this rank: max(1, num_kv_heads / TP)
    head_dim: int
    kv_lora_rank: int  # MLA latent rank (0 elsewhere)
    hidden: int
    decode_seqs: int  # max_num_seqs: at most one decode request per sequence slot
    decode_tokens: int  # decode query rows: seqs × (1 + speculative tokens), ≤ batched tokens
    max_num_batched_tokens: int
    max_model_len: int
    block_size: int  # KV block (tokens) of this rank's plan
    num_gpu_blocks: int  # 0 until the KV cache is sized
    model_bytes: int  # bytes of the model (= query) dtype
    model_dtype: str  # its short name: bf16 / fp16 / fp32
    kv_quantized: bool  # --kv-cache-dtype fp8*
    window: int  # sliding window (DeepSeek-V4: 128)
    index_topk: int  # DeepSeek sparse indexer top-k
    dp: int
    graph_max_bs: int  # SGLang --cuda-graph-max-bs (or its default)
    tokens_per_bs: int  # SGLang decode tokens per request in a graph: 1 + speculative tokens


def dims(ctx: TermContext) -> Dims:
    """The dimensions of ``ctx``'s rank; unresolved deployment defaults follow ``resolve``."""
    spec, dep = ctx.spec, ctx.dep
    a = spec.layers[0].attention
    mnbt_default, seqs_default = batch_defaults(ctx.gpu)
    seqs = dep.max_num_seqs or seqs_default
    mnbt = dep.max_num_batched_tokens or mnbt_default
    per_req = 1 + dep.num_speculative_tokens
    return Dims(
        local_heads=max(1, a.num_heads // dep.tp),
        local_kv_heads=max(1, a.num_kv_heads // dep.tp),
        head_dim=a.head_dim,
        kv_lora_rank=a.kv_lora_rank,
        hidden=spec.hidden_size,
        decode_seqs=min(seqs, mnbt),
        decode_tokens=min(seqs * per_req, mnbt),
        max_num_batched_tokens=mnbt,
        max_model_len=dep.max_model_len or spec.max_position_embeddings or 1,
        block_size=ctx.plan.block_size,
        num_gpu_blocks=ctx.num_gpu_blocks,
        model_bytes=element_bytes(ctx.model_dtype),
        model_dtype=short_name(ctx.model_dtype),
        kv_quantized=dep.kv_cache_dtype.startswith("fp8"),
        window=a.sliding_window or AITER_SWA_TOPK,
        index_topk=a.index_topk,
        dp=dep.dp,
        graph_max_bs=dep.cuda_graph_max_bs or sglang_defaults(ctx.gpu, dep)[1],
        tokens_per_bs=per_req,
    )


def dtype_bytes(dtype: str, d: Dims) -> int:
    """Bytes of one element. ``model`` / ``query``: the model dtype; ``mla_out``: bf16 when the
    KV cache is quantised, else the query dtype (``CutlassMLAImpl`` / ``FlashInferMLAImpl``,
    vLLM #37442)."""
    if dtype in ("model", "query"):
        return d.model_bytes
    if dtype == "mla_out":
        return 2 if d.kv_quantized else d.model_bytes
    return element_bytes(dtype)


def dtype_name(dtype: str, d: Dims) -> str:
    """The element type a catalog dtype resolves to on this rank (for formulas)."""
    if dtype in ("model", "query"):
        return d.model_dtype
    if dtype == "mla_out":
        return "bf16" if d.kv_quantized else d.model_dtype
    return dtype


# --- the catalog ---------------------------------------------------------------------------------

Shape = tuple[int, ...]
ShapeFn = Callable[[Dims, str], Shape | None]  # (dims, layer kind) -> shape, None = absent
AppliesFn = Callable[[ModelSpec, Deployment, Layer], str | None]  # layer -> kind, None = no


@dataclass(frozen=True, slots=True, kw_only=True)
class Part:
    """One tensor of a buffer set (the sub-buffers one call needs at the same time)."""

    label: str
    shape: ShapeFn
    dtype: str  # a dtype of memprof.core.dtypes, or "model" / "query" / "mla_out"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScratchBuffer:
    """One variant of one scratch buffer (set) of one backend."""

    key: str  # identity shared by the per-layer and shared variants of the same buffer
    backend: str  # attention backend, or SGLANG_DP_ATTENTION / DEEPSEEK_V4
    name: str
    label: str  # how the variant shows in a component name: "per layer", "shared", ...
    policy: str  # "per-layer" | "shared" | "both"
    lifetime: str  # one of LIFETIMES
    per_layer: bool  # does every layer (that has it) hold its own copy?
    parts: tuple[Part, ...]
    applies: AppliesFn
    profiled: bool  # seen by the engine before it sizes the KV cache
    source: str  # PR / file it comes from
    workspace_manager: bool = False  # a vLLM WorkspaceManager caller (256-B aligned, max-shared)
    needs_kv_blocks: bool = False  # sized by the KV pool: a runtime term only

    @property
    def where(self) -> str:
        return "budget" if self.profiled else "runtime"


def _any_layer(spec: ModelSpec, dep: Deployment, layer: Layer) -> str | None:
    del spec, dep, layer
    return ""


def _mla_layer(spec: ModelSpec, dep: Deployment, layer: Layer) -> str | None:
    del spec, dep
    return "" if layer.attention.kind == "mla" else None


def _flashinfer_mla_decode_layer(spec: ModelSpec, dep: Deployment, layer: Layer) -> str | None:
    """FlashInfer MLA allocates its decode output only for one query token per request (#37442);
    with speculative tokens (q_len > 1) it writes the padded rows instead."""
    if dep.num_speculative_tokens:
        return None
    return _mla_layer(spec, dep, layer)


def _tq_layer(spec: ModelSpec, dep: Deployment, layer: Layer) -> str | None:
    """TurboQuant layers: every GQA layer but the first and last ``TQ_BOUNDARY_LAYERS``, which stay
    in the model dtype (``get_boundary_skip_layers(n=2)``, internals §3.2; as ``kvcache`` does)."""
    del dep
    n = spec.num_layers
    if layer.attention.kind != "gqa" or layer.is_mtp:
        return None
    if layer.index < TQ_BOUNDARY_LAYERS or layer.index >= n - TQ_BOUNDARY_LAYERS:
        return None
    return ""


def _dsv4_layer(spec: ModelSpec, dep: Deployment, layer: Layer) -> str | None:
    """DeepSeek-V4 layer kind by compress ratio (deepseek_v4.md §2): SWA-only, C4 or C128."""
    del spec, dep
    a = layer.attention
    if a.kind != "dsv4":
        return None
    return {4: "C4", 128: "C128"}.get(a.compress_ratio, "SWA-only")


def _dsv4_extra_rows(kind: str) -> int | None:
    """Rows per block of a DeepSeek-V4 layer's compressed ("extra") scope: a 256-token block holds
    64 C4 entries or 2 C128 entries (deepseek_v4.md §5.2); SWA-only layers have none."""
    return {"C4": DSV4_SWA_BLOCK, "C128": 2}.get(kind)


def _dsv4_extra_topk(d: Dims, kind: str) -> int | None:
    """Top-k of the extra scope: C4 = index_topk; C128 ≈ ceil(max_model_len / 128), the width of
    ``c128a_global_decode_topk_indices`` (deepseek_v4.md §7.2, marked unverified there)."""
    if kind == "C4":
        return d.index_topk
    if kind == "C128":
        return cdiv(d.max_model_len, 128)
    return None


def _dsv4_prefill_gather_rows(d: Dims, kind: str) -> Shape | None:
    """``(4, M, head_dim)``, ``M = ceil(max_model_len / ratio) + window + max_num_batched_tokens``
    (``N = 0`` for SWA-only layers); internals §1.7, ``models/deepseek_v4/nvidia/flashmla.py``
    L52/L150-165 and ``amd/rocm.py`` L615-640."""
    ratio = {"C4": 4, "C128": 128}.get(kind)
    n = cdiv(d.max_model_len, ratio) if ratio else 0
    return (DSV4_PREFILL_CHUNK, n + d.window + d.max_num_batched_tokens, d.head_dim)


def _aiter_parts(scope: str, topk: Callable[[Dims, str], int | None]) -> tuple[Part, ...]:
    """Decode IO buffers of one AITER sparse-MLA scope: the table of #40892's
    ``AiterSparseScratch`` (deepseek_v4.md §7.2) less the opaque AITER work/reduce metadata.
    #40889 allocated the same tensors fresh on every call ("qo_indptr, kv_indptr, kv_indices,
    kv_last_page_lens, q_scale, kv_scale, q_fp8, the bf16 output buffer, and intermediate boolean
    masks", #40892's commit text), so both variants share this list."""

    def rows(shape: Callable[[Dims, int], Shape]) -> ShapeFn:
        def fn(d: Dims, kind: str) -> Shape | None:
            k = topk(d, kind)
            return None if k is None else shape(d, k)
        return fn

    return (
        Part(label=f"{scope} q_fp8", shape=rows(lambda d, k: (d.decode_tokens, d.local_heads,
                                                              d.head_dim)), dtype="fp8"),
        Part(label=f"{scope} out_buf", shape=rows(lambda d, k: (d.decode_tokens, d.local_heads,
                                                                d.head_dim)), dtype="bf16"),
        Part(label=f"{scope} kv_indices", shape=rows(lambda d, k: (d.decode_tokens, k)),
             dtype="int32"),
        Part(label=f"{scope} valid_mask", shape=rows(lambda d, k: (d.decode_tokens, k)),
             dtype="bool"),
        Part(label=f"{scope} qo_indptr+kv_indptr",
             shape=rows(lambda d, k: (2, d.decode_tokens + 1)), dtype="int32"),
        Part(label=f"{scope} kv_last_page_lens", shape=rows(lambda d, k: (d.decode_tokens,)),
             dtype="int32"),
        Part(label=f"{scope} q_scale+kv_scale", shape=rows(lambda d, k: (2,)), dtype="fp32"),
        Part(label=f"{scope} valid_lens", shape=rows(lambda d, k: (d.decode_tokens,)),
             dtype="int32"),
        Part(label=f"{scope} col_arange", shape=rows(lambda d, k: (k,)), dtype="int32"),
    )


def _swa_topk(d: Dims, kind: str) -> int | None:
    del kind
    return d.window


def _dequant_parts() -> tuple[Part, ...]:
    """bf16 dequantised copy of each scope's whole cache view, ``(num_blocks, rows, 1, 512)``, and
    its fp8 cast (same shape, 1 B): ``_dequantize_blocked_k_cache`` + ``blocked_k.to(fp8)``
    (vLLM #40889, deepseek_v4.md §7.1 items 1-3). SWA rows = 64 per block; extra scope: C4 64,
    C128 2."""

    def swa(d: Dims, kind: str) -> Shape | None:
        del kind
        return (d.num_gpu_blocks, DSV4_SWA_BLOCK, 1, d.head_dim)

    def extra(d: Dims, kind: str) -> Shape | None:
        r = _dsv4_extra_rows(kind)
        return None if r is None else (d.num_gpu_blocks, r, 1, d.head_dim)

    return (Part(label="SWA bf16", shape=swa, dtype="bf16"),
            Part(label="SWA fp8", shape=swa, dtype="fp8"),
            Part(label="extra bf16", shape=extra, dtype="bf16"),
            Part(label="extra fp8", shape=extra, dtype="fp8"))


_TQ_MID_O = Part(label="mid_o", dtype="fp32", shape=lambda d, k: (
    d.decode_seqs, d.local_heads, TQ_MAX_KV_SPLITS, d.head_dim + 1))
_TQ_LSE = Part(label="lse", dtype="fp32", shape=lambda d, k: (d.decode_seqs, d.local_heads))


def _tq_alloc_len(d: Dims) -> int:
    """``alloc_len = ceil(cached_len / block) · block`` with the longest continuation,
    ``cached_len = max_model_len − 1`` (turboquant_attn.py ``_continuation_prefill``, §3.2)."""
    return round_up(max(d.max_model_len - 1, 1), d.block_size)


_TQ_DEQUANT = tuple(
    Part(label=label, dtype="fp16", shape=lambda d, k: (1, d.local_kv_heads, _tq_alloc_len(d),
                                                        d.head_dim))
    for label in ("k", "v"))

_MLA_SHARED_SRC = ("vLLM #37805 (closed): one module-level g_*_decode_out for all layers; upstream "
                   "after the #38359 revert allocates the same shape per call (new_empty), one "
                   "layer's worth live at a time")

CATALOG: tuple[ScratchBuffer, ...] = (
    # --- CUTLASS MLA decode output (seed 000; internals §3.1) ---
    ScratchBuffer(
        key="cutlass_mla_decode_out", backend="cutlass_mla", name="CUTLASS MLA decode output",
        label="per layer", policy="per-layer", lifetime="per_layer_lazy", per_layer=True,
        parts=(Part(label="out", dtype="mla_out", shape=lambda d, k: (
            d.decode_tokens, CUTLASS_MLA_MAX_HEADS, CUTLASS_MLA_LATENT)),),
        applies=_mla_layer, profiled=False,
        source="vLLM #37442 (merged 2026-03-19, reverted by #38359): CutlassMLAImpl._decode_out, "
               "zeros (B_q, 128, 512) per layer, grown lazily in forward_mqa"),
    ScratchBuffer(
        key="cutlass_mla_decode_out", backend="cutlass_mla", name="CUTLASS MLA decode output",
        label="shared", policy="shared", lifetime="shared_workspace", per_layer=False,
        parts=(Part(label="out", dtype="mla_out", shape=lambda d, k: (
            d.decode_tokens, CUTLASS_MLA_MAX_HEADS, CUTLASS_MLA_LATENT)),),
        applies=_mla_layer, profiled=False, source=_MLA_SHARED_SRC),
    ScratchBuffer(
        key="cutlass_mla_workspace", backend="cutlass_mla", name="CUTLASS MLA SM100 workspace",
        label="workspace", policy="both", lifetime="shared_workspace", per_layer=False,
        parts=(Part(label="g_sm100_workspace", dtype="uint8",
                    shape=lambda d, k: (CUTLASS_MLA_WORKSPACE_BYTES,)),),
        applies=_any_layer, profiled=True,
        source="vllm/v1/attention/backends/mla/cutlass_mla.py L69-99: module-level "
               "SM100Workspace(128 MiB), allocated when the backend is imported at model "
               "construction (model load); resize_ above 128 MiB not modelled"),
    # --- FlashInfer MLA decode output (seed 000) ---
    ScratchBuffer(
        key="flashinfer_mla_decode_out", backend="flashinfer_mla",
        name="FlashInfer MLA decode output", label="per layer", policy="per-layer",
        lifetime="per_layer_lazy", per_layer=True,
        parts=(Part(label="out", dtype="mla_out", shape=lambda d, k: (
            d.decode_seqs, d.local_heads, d.kv_lora_rank)),),
        applies=_flashinfer_mla_decode_layer, profiled=False,
        source="vLLM #37442 (reverted by #38359): FlashInferMLAImpl.forward_mqa, zeros "
               "(B, local heads, kv_lora_rank) per layer when q_len_per_req == 1"),
    ScratchBuffer(
        key="flashinfer_mla_decode_out", backend="flashinfer_mla",
        name="FlashInfer MLA decode output", label="shared", policy="shared",
        lifetime="shared_workspace", per_layer=False,
        parts=(Part(label="out", dtype="mla_out", shape=lambda d, k: (
            d.decode_seqs, d.local_heads, d.kv_lora_rank)),),
        applies=_flashinfer_mla_decode_layer, profiled=False, source=_MLA_SHARED_SRC),
    # --- FlashInfer (GQA) workspace ---
    ScratchBuffer(
        key="flashinfer_workspace", backend="flashinfer", name="FlashInfer workspace",
        label="workspace", policy="both", lifetime="shared_workspace", per_layer=False,
        parts=(Part(label="workspace", dtype="uint8",
                    shape=lambda d, k: (FLASHINFER_WORKSPACE_BYTES,)),),
        applies=_any_layer, profiled=False,
        source="VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE (394 MiB, vllm/envs.py ~L1577); allocated "
               "on the first metadata build, which the attention-free profile run never does "
               "[derived]"),
    # --- TurboQuant decode (seed 001; internals §3.2) ---
    ScratchBuffer(
        key="tq_decode", backend="turboquant", name="TurboQuant decode mid_o+output+lse",
        label="per layer", policy="per-layer", lifetime="per_layer_registered", per_layer=True,
        parts=(_TQ_MID_O,
               Part(label="output", dtype="fp32",
                    shape=lambda d, k: (d.decode_seqs, d.local_heads, d.head_dim)),
               _TQ_LSE),
        applies=_tq_layer, profiled=True,
        source="vLLM #38479 Attention._init_turboquant_buffers: register_buffer at model "
               "construction (counted in model load), B = max_num_seqs, S = 32; removed by #40941"),
    ScratchBuffer(
        key="tq_decode", backend="turboquant", name="TurboQuant decode mid_o+output+lse",
        label="shared", policy="shared", lifetime="shared_workspace", per_layer=False,
        parts=(_TQ_MID_O,
               Part(label="output", dtype="fp32",
                    shape=lambda d, k: (d.decode_seqs, d.local_heads, d.head_dim)),
               _TQ_LSE),
        applies=_tq_layer, profiled=False, workspace_manager=True,
        source="vLLM #40655 (seed 001) / #40941 (commit 2cc008e7): turboquant_attn.py "
               "_decode_attention takes the same three buffers from "
               "WorkspaceManager.get_simultaneous (256-B aligned), grown at the first decode. "
               "memprof keeps #40655's fp32 output; #40941's dtype fix writes it in the query "
               "dtype (2·B·Hq·D instead of 4·B·Hq·D, 4 MiB less at B=256, Hq=64, D=128)"),
    ScratchBuffer(
        key="tq_prefill_dequant", backend="turboquant",
        name="TurboQuant continuation-prefill K/V dequant", label="per layer",
        policy="per-layer", lifetime="per_layer_lazy", per_layer=True, parts=_TQ_DEQUANT,
        applies=_tq_layer, profiled=False,
        source="vLLM #38479 _continuation_prefill: per-layer _tq_k/_tq_v_dequant_buf grown "
               "lazily (issue #40420: unprofiled, OOM at ~185K-234K context); removed by #40941"),
    ScratchBuffer(
        key="tq_prefill_dequant", backend="turboquant",
        name="TurboQuant continuation-prefill K/V dequant", label="shared", policy="shared",
        lifetime="shared_workspace", per_layer=False, parts=_TQ_DEQUANT, applies=_tq_layer,
        profiled=False, workspace_manager=True,
        source="vLLM #40941 _continuation_prefill: WorkspaceManager.get_simultaneous of two "
               "(1, Hk, alloc_len, D) fp16"),
    # --- SGLang DP-attention gathered buffer (seed 002; internals §4.3) ---
    ScratchBuffer(
        key="sglang_dp_gathered", backend=SGLANG_DP_ATTENTION,
        name="SGLang DP-attention gathered buffer", label="persistent in the CUDA-graph pool",
        policy="per-layer", lifetime="shared_workspace", per_layer=False,
        parts=(Part(label="gathered_buffer", dtype="model", shape=lambda d, k: (
            d.graph_max_bs * d.tokens_per_bs * d.dp, d.hidden)),),
        applies=_any_layer, profiled=False,
        source="SGLang #8280 (c0fb25e9) cuda_graph_runner.py: zeros (max_bs·tokens_per_bs·"
               "dp_size, hidden) held by the graph runner (the #8277 era); allocated after the "
               "KV pool, in the (1 − mem_fraction_static) slack"),
    ScratchBuffer(
        key="sglang_dp_gathered", backend=SGLANG_DP_ATTENTION,
        name="SGLang DP-attention gathered buffer", label="per forward", policy="shared",
        lifetime="per_step", per_layer=False,
        parts=(Part(label="global_dp_buffer", dtype="model", shape=lambda d, k: (
            d.graph_max_bs * d.tokens_per_bs * d.dp, d.hidden)),),
        applies=_any_layer, profiled=False,
        source="SGLang@d315eb7 layers/dp_attention.py get_global_dp_buffer: torch.empty per "
               "forward, MAX_LEN mode max·dp rows (decode / CUDA-graph default)"),
    # --- DeepSeek-V4 AITER sparse MLA decode on ROCm (seed 003; deepseek_v4.md §7) ---
    ScratchBuffer(
        key="aiter_dsv4_dequant", backend="aiter_mla",
        name="AITER DSv4 decode K dequant bf16+fp8", label="per layer per step",
        policy="per-layer", lifetime="per_step", per_layer=True, parts=_dequant_parts(),
        applies=_dsv4_layer, profiled=False, needs_kv_blocks=True,
        source="vLLM #40889 (closed) _forward_decode_aiter: fresh whole-pool dequant + fp8 cast "
               "per layer per step; #40909 text: they land in the CUDA-graph pool, ~60× "),
    ScratchBuffer(
        key="aiter_dsv4_dequant", backend="aiter_mla",
        name="AITER DSv4 decode K dequant bf16+fp8", label="shared", policy="shared",
        lifetime="shared_workspace", per_layer=False, parts=_dequant_parts(),
        applies=_dsv4_layer, profiled=False, needs_kv_blocks=True, workspace_manager=True,
        source="vLLM #40909 (open; ROCm/vllm#903): dequant out= and kv_fp8 buffers from "
               "WorkspaceManager, shared by all layers: num_blocks × 192 KiB with a C4 layer"),
    ScratchBuffer(
        key="aiter_dsv4_io", backend="aiter_mla",
        name="AITER DSv4 decode q_fp8/out/indices", label="per layer per step",
        policy="per-layer", lifetime="per_step", per_layer=True,
        parts=_aiter_parts("SWA", _swa_topk) + _aiter_parts("extra", _dsv4_extra_topk),
        applies=_dsv4_layer, profiled=False,
        source="vLLM #40889 (closed) _aiter_decode_one_scope: fresh per call, two scopes per "
               "compressed layer; AITER work/reduce metadata not modelled (sizes opaque)"),
    ScratchBuffer(
        key="aiter_dsv4_io", backend="aiter_mla",
        name="AITER DSv4 decode q_fp8/out/indices", label="shared", policy="shared",
        lifetime="shared_workspace", per_layer=False,
        parts=_aiter_parts("SWA", _swa_topk) + _aiter_parts("extra", _dsv4_extra_topk),
        applies=_dsv4_layer, profiled=False,
        source="vLLM #40892 (closed; ROCm/vllm#902, rocm_aiter_dsv4_decode.py @3183613): two "
               "AiterSparseScratch (SWA, extra) shared by all layers, rebuilt at the first decode"),
    # --- DeepSeek-V4 prefill gather workspace (internals §1.7) ---
    ScratchBuffer(
        key="dsv4_prefill_gather", backend=DEEPSEEK_V4, name="DeepSeek-V4 prefill K gather",
        label="workspace", policy="both", lifetime="shared_workspace", per_layer=False,
        parts=(Part(label="gather", dtype="bf16", shape=_dsv4_prefill_gather_rows),),
        applies=_dsv4_layer, profiled=True, workspace_manager=True,
        source="vLLM@52a31cc models/deepseek_v4/{nvidia/flashmla.py L52,L150-165; amd/rocm.py "
               "L615-640}: WorkspaceManager, reserved in the profile run's dummy forward"),
)


def buffers_for(key: str) -> tuple[ScratchBuffer, ...]:
    """Catalog entries of one backend (or of SGLANG_DP_ATTENTION / DEEPSEEK_V4)."""
    return tuple(b for b in CATALOG if b.backend == key)


# --- backends ------------------------------------------------------------------------------------


def default_backend(spec: ModelSpec, gpu: GPU, kv_cache_dtype: str) -> str:
    """The attention backend vLLM picks when ``--attention-backend`` is not given.

    - ``--kv-cache-dtype turboquant_*`` forces the TurboQuant backend (the only one that reads its
      packed slots; ``TurboQuantAttentionBackend.supported_kv_cache_dtypes``, internals §3.2);
    - DeepSeek-V4: AITER sparse MLA on ROCm (the only ROCm path, vLLM #40889 review), FlashMLA
      sparse on NVIDIA (deepseek_v4.md §5.1);
    - MLA: CUTLASS MLA on SM100 (its block size 128 is the SM100 default, ``kvcache``), FlashMLA on
      SM90 (and when the architecture is unknown), DeepSeek-V3.2's sparse MLA on FlashMLA; Triton
      MLA on older NVIDIA GPUs and on ROCm, where AITER MLA is opt-in (``VLLM_ROCM_USE_AITER``);
    - GQA: FlashInfer on SM100, FlashAttention on other NVIDIA GPUs, Triton attention on ROCm.
    """
    kind = spec.layers[0].attention.kind
    amd = gpu.is_rocm
    sm100 = gpu.arch.startswith("sm10")
    if kv_cache_dtype.startswith("turboquant"):
        if kind != "gqa":
            raise BadInput(f"--kv-cache-dtype {kv_cache_dtype} supports standard attention only",
                           hint=f"{spec.name} uses {kind.upper()}; use fp8")
        return "turboquant"
    if kind == "dsv4":
        return "aiter_mla" if amd else "flashmla"
    if kind == "mla":
        if spec.layers[0].attention.has_indexer:
            return "aiter_mla" if amd else "flashmla"
        if amd:
            return "triton_mla"
        if sm100:
            return "cutlass_mla"
        if gpu.arch in ("sm90", "unknown"):
            return "flashmla"
        return "triton_mla"
    if amd:
        return "triton_attn"
    return "flashinfer" if sm100 else "flash_attn"


def _arch_ok(backend: str, gpu: GPU) -> str | None:
    """Why ``backend`` cannot run on ``gpu`` (None: it can, or the architecture is unknown)."""
    if gpu.arch == "unknown":
        return None
    amd = gpu.is_rocm
    if backend == "aiter_mla" and not amd:
        return "AITER runs on AMD Instinct GPUs (gfx9xx) only"
    if backend in ("flash_attn", "flashinfer", "flashmla", "flashinfer_mla", "cutlass_mla") and amd:
        return f"{backend} is an NVIDIA backend"
    if backend in ("cutlass_mla", "flashinfer_mla") and not gpu.arch.startswith("sm10"):
        return f"{backend} needs Blackwell (SM100), {gpu.name} is {gpu.arch}"
    if backend == "flashmla" and gpu.arch not in ("sm90",) and not gpu.arch.startswith("sm10"):
        return f"FlashMLA needs SM90 or SM100, {gpu.name} is {gpu.arch}"
    return None


def resolve_backend(spec: ModelSpec, gpu: GPU, dep: Deployment) -> str:
    """``dep.attention_backend`` checked against the model, KV dtype and GPU, or the default.

    Raises ``BadInput`` for an unknown name or a combination vLLM refuses.
    """
    kv = dep.kv_cache_dtype
    name = dep.attention_backend
    if name is None:
        return default_backend(spec, gpu, kv)
    backend = name.strip().lower()
    if backend not in BACKENDS:
        raise BadInput(f"unknown --attention-backend {name!r}",
                       hint="one of: " + ", ".join(BACKENDS))
    kind = spec.layers[0].attention.kind
    if backend == "turboquant" and not kv.startswith("turboquant"):
        raise BadInput("--attention-backend turboquant needs a TurboQuant KV cache",
                       hint="add --kv-cache-dtype turboquant_k8v4 (or another turboquant_* "
                            "preset)")
    if kv.startswith("turboquant") and backend != "turboquant":
        raise BadInput(f"--kv-cache-dtype {kv} is read by the turboquant backend only",
                       hint="drop --attention-backend or use turboquant")
    if kind == "gqa" and backend in MLA_BACKENDS:
        raise BadInput(f"--attention-backend {backend} is an MLA backend but {spec.name} uses "
                       "standard attention (GQA)",
                       hint="use " + default_backend(spec, gpu, kv) + " (the default)")
    if kind in ("mla", "dsv4") and backend in GQA_BACKENDS:
        raise BadInput(f"--attention-backend {backend} cannot run {spec.name}'s "
                       f"{kind.upper()} attention",
                       hint="use " + default_backend(spec, gpu, kv) + " (the default)")
    sparse = kind == "dsv4" or spec.layers[0].attention.has_indexer
    if sparse and backend not in SPARSE_MLA_BACKENDS:
        raise BadInput(f"--attention-backend {backend} does not run DeepSeek sparse attention",
                       hint="one of: " + ", ".join(sorted(SPARSE_MLA_BACKENDS)))
    why = _arch_ok(backend, gpu)
    if why:
        raise BadInput(f"--attention-backend {backend} on {gpu.name}: {why}",
                       hint="use " + default_backend(spec, gpu, kv) + " (the default)")
    return backend


def default_scratch_policy(backend: str) -> str:
    """What current engine releases do, per catalog key (``--scratch`` left out).

    - ``cutlass_mla`` / ``flashinfer_mla``: ``"shared"``. The per-layer ``_decode_out`` of vLLM
      #37442 was reverted by #38359 (merged 2026-04-01); vLLM@52a31cc allocates the CUTLASS
      output per call (``new_empty``), so one layer's worth is live at a time (internals §3.1).
    - ``turboquant``: ``"shared"``. #40941 (merged 2026-04-26, commit 2cc008e7) removed the
      per-layer ``register_buffer`` set and the per-layer dequant buffers; both come from the
      WorkspaceManager (internals §3.2).
    - ``aiter_mla``: ``"shared"``. The per-layer-per-step copies of #40889 were never merged
      upstream (#40889/#40892 closed; the 0.20.2rc1 fallback that did the same was issue #41962),
      the ROCm fork carries the shared scratch (#40892 → ROCm/vllm#902, #40909 → ROCm/vllm#903),
      and upstream's Triton sparse MLA (#41812, merged 2026-05-11) reads the fp8 cache without a
      whole-pool dequant at all (deepseek_v4.md §7.4). The shared variant is therefore an upper
      bound for upstream builds; their per-call split-K partials (#50566) are not modelled.
    - ``sglang_dp_attention``: ``"shared"`` (per forward). SGL@d315eb7 allocates the gathered
      buffer with ``get_global_dp_buffer()`` on every forward; the persistent graph-runner buffer
      is the #8280 design (internals §4.3).
    - every other backend has no per-layer scratch in the catalog: ``"shared"``.
    """
    del backend  # every current release shares; the docstring records why, key by key
    return "shared"


# --- evaluation ----------------------------------------------------------------------------------


def _prod(shape: Shape) -> int:
    return math.prod(shape)


def _call_bytes(buf: ScratchBuffer, d: Dims, kind: str) -> tuple[int, list[str]]:
    """Bytes one call holds at once (workspace callers: each part rounded up to 256 B)."""
    total, terms = 0, []
    for p in buf.parts:
        shape = p.shape(d, kind)
        if shape is None:
            continue
        size = _prod(shape) * dtype_bytes(p.dtype, d)
        if buf.workspace_manager:
            size = round_up(size, WORKSPACE_ALIGN)
        total += size
        terms.append(f"{p.label} [{'×'.join(str(x) for x in shape)}] {dtype_name(p.dtype, d)}")
    return total, terms


def _applicable(ctx: TermContext) -> list[ScratchBuffer]:
    """The catalog entries of ``ctx``'s deployment under its scratch policy.

    vLLM: the resolved attention backend's entries (plus DeepSeek-V4's own workspace). SGLang:
    only the DP-attention gathered buffer; ``--attention-backend`` names vLLM backends and is not
    read for SGLang.
    """
    dep, spec = ctx.dep, ctx.spec
    if dep.scratch is not None and dep.scratch not in POLICIES:
        raise BadInput(f"unknown --scratch {dep.scratch!r}", hint="per-layer or shared")
    keys: list[str] = []
    if dep.engine == "sglang":
        if dep.enable_dp_attention:
            keys.append(SGLANG_DP_ATTENTION)
    else:
        keys.append(resolve_backend(spec, ctx.gpu, dep))
        if spec.layers[0].attention.kind == "dsv4":
            keys.append(DEEPSEEK_V4)
    out: list[ScratchBuffer] = []
    for key in keys:
        policy = dep.scratch or default_scratch_policy(key)
        out += [b for b in buffers_for(key) if b.policy in (policy, "both")]
    return out


def _layer_kinds(buf: ScratchBuffer, ctx: TermContext) -> dict[str, int]:
    """Layer kind → number of this rank's layers holding the buffer (PP-aware, MTP included)."""
    kinds: dict[str, int] = {}
    for layer in rank_layers(ctx.spec, ctx.dep, ctx.coord):
        kind = buf.applies(ctx.spec, ctx.dep, layer)
        if kind is not None:
            kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


@dataclass(frozen=True, slots=True)
class _Row:
    """One component-to-be: ``count`` copies of ``each`` bytes."""

    buf: ScratchBuffer
    kind: str  # layer kind of per-layer copies ("" when the rank has one kind)
    sized_by: str  # layer kind whose call sizes a single copy ("" when only one kind)
    count: int
    each: int
    terms: tuple[str, ...]
    eager_reuse: bool = False


def _rows(buf: ScratchBuffer, ctx: TermContext, d: Dims) -> list[_Row]:
    """Per-layer copies: one row per layer kind; otherwise one copy sized for the largest call.

    A ``per_step`` buffer under ``--enforce-eager`` is freed when its layer returns and reused by
    the next layer, so the peak is one call; under CUDA graphs every layer's allocation stays in
    the graph pool (vLLM #40909 text: "122-244 fresh ~kv-cache-sized allocations per step ...
    never get reused").
    """
    kinds = _layer_kinds(buf, ctx)
    if not kinds:
        return []
    sized = {k: _call_bytes(buf, d, k) for k in kinds}
    eager_reuse = buf.per_layer and buf.lifetime == "per_step" and ctx.dep.enforce_eager
    if not buf.per_layer or eager_reuse:
        kind = max(sized, key=lambda k: sized[k][0])
        each, terms = sized[kind]
        return [_Row(buf, "", kind if len(kinds) > 1 else "", 1, each, tuple(terms),
                     eager_reuse)]
    return [_Row(buf, k if len(kinds) > 1 else "", "", n, sized[k][0], tuple(sized[k][1]))
            for k, n in kinds.items()]


def _component(row: _Row, bytes_: int, note: str = "") -> Component:
    """``bytes_`` is what a single copy adds (a WorkspaceManager caller: its growth)."""
    buf = row.buf
    label = buf.label + (f", {row.kind} layers" if row.kind else "")
    notes = [note] if note else []
    if row.sized_by:
        notes.insert(0, f"sized by the largest call ({row.sized_by} layers)")
    if row.eager_reuse:
        notes.insert(0, "--enforce-eager: freed after each layer and reused, one call live")
    align = " (each part rounded up to 256 B)" if buf.workspace_manager else ""
    per_layer = buf.per_layer and not row.eager_reuse
    times = ""
    if per_layer:
        times = f" × {row.count} {row.kind + ' ' if row.kind else ''}layer" + \
            ("s" if row.count != 1 else "")
    formula = (" + ".join(row.terms) + f" = {row.each:,} B{align}{times}"
               + "".join(f"; {n}" for n in notes) + f" — {buf.source}")
    total = row.count * row.each if per_layer else bytes_
    return Component(name=f"{buf.name} ({label})", category="scratch", bytes=total,
                     count=row.count if per_layer else 1, profiled=buf.profiled,
                     where=buf.where, formula=formula)


def _components(ctx: TermContext) -> list[Component]:
    """Every scratch component of the rank, WorkspaceManager callers merged into one buffer.

    The WorkspaceManager keeps one buffer as large as its largest call (internals §2). Callers
    the engine reaches before sizing the KV cache come first, largest first; then the runtime
    callers, largest first. The first of each phase carries what it adds to the buffer; a caller
    that fits in it adds 0 B and says so.
    """
    d = dims(ctx)
    rows = [r for b in _applicable(ctx) for r in _rows(b, ctx, d)]
    out = [_component(r, r.each) for r in rows if not r.buf.workspace_manager]
    wm = sorted((r for r in rows if r.buf.workspace_manager),
                key=lambda r: (not r.buf.profiled, -r.each))
    high = 0
    for r in wm:
        grow = max(0, r.each - high)
        if not high:
            note = ""
        elif grow:
            note = (f"the WorkspaceManager buffer grows {fmt_bytes(high)} → "
                    f"{fmt_bytes(high + grow)}: +{grow:,} B")
        else:
            note = f"fits in the WorkspaceManager buffer already at {fmt_bytes(high)}: +0 B"
        out.append(_component(r, grow, note))
        high += grow
    return out


def scratch_terms(ctx: TermContext) -> list[Component]:
    """All scratch components of one rank (``scratch_budget_terms`` + ``scratch_runtime_terms``).

    The backend is ``ctx.dep.attention_backend`` (validated) or ``default_backend``; the policy
    ``ctx.dep.scratch`` or ``default_scratch_policy``. KV-sized buffers are 0 B until
    ``ctx.num_gpu_blocks`` is set.
    """
    return _components(ctx)


def scratch_budget_terms(ctx: TermContext) -> list[Component]:
    """Scratch the engine sees before it sizes the KV cache (``where == "budget"``): registered
    per-layer buffers (model load) and workspaces reserved at model construction or in the profile
    run. Never reads ``ctx.num_gpu_blocks``."""
    return [c for c in _components(ctx) if c.where == "budget"]


def scratch_runtime_terms(ctx: TermContext) -> list[Component]:
    """Scratch that first appears after start-up (``where == "runtime"``): lazily allocated decode
    buffers, per-step copies and KV-pool-sized dequant buffers (these read
    ``ctx.num_gpu_blocks``)."""
    return [c for c in _components(ctx) if c.where == "runtime"]


def scratch_savings(ctx: TermContext) -> list[tuple[str, int, int]]:
    """For every buffer of the deployment: ``(name, per-layer total, shared total)`` in bytes.

    Totals are standalone (a WorkspaceManager caller at its own size, not the growth it adds);
    workspaces that exist under both policies report the same number twice.
    """
    d = dims(ctx)
    saved: list[tuple[str, int, int]] = []
    policies = {"per-layer": ctx.dep.with_(scratch="per-layer"),
                "shared": ctx.dep.with_(scratch="shared")}
    by_policy: dict[str, dict[str, tuple[str, int]]] = {}
    for policy, dep in policies.items():
        sub = TermContext(spec=ctx.spec, dep=dep, gpu=ctx.gpu, coord=ctx.coord, plan=ctx.plan,
                          weights_bytes=ctx.weights_bytes, model_dtype=ctx.model_dtype,
                          quant=ctx.quant, num_gpu_blocks=ctx.num_gpu_blocks,
                          kv_cache_bytes=ctx.kv_cache_bytes)
        totals: dict[str, tuple[str, int]] = {}
        for buf in _applicable(sub):
            name, total = totals.get(buf.key, (buf.name, 0))
            totals[buf.key] = (name, total + sum(r.count * r.each for r in _rows(buf, sub, d)))
        by_policy[policy] = totals
    per, shared = by_policy["per-layer"], by_policy["shared"]
    for key in dict.fromkeys([*per, *shared]):
        name = (per.get(key) or shared[key])[0]
        saved.append((name, per.get(key, (name, 0))[1], shared.get(key, (name, 0))[1]))
    return saved
