"""DeepSeek-V4 scratch (seed 003): the AITER sparse-MLA decode buffers on ROCm, per layer per
step (vLLM #40889) or shared (#40892 / #40909), and the prefill K-gather workspace."""

from __future__ import annotations

from collections.abc import Callable

from memprof.base.units import cdiv
from memprof.core.attention.dsv4 import DSV4_SWA_BLOCK
from memprof.core.attention.dsv4 import SCRATCH_KEY as DEEPSEEK_V4
from memprof.core.deployment import Deployment
from memprof.core.models import Layer, ModelSpec
from memprof.core.scratch.buffer import (
    Dims,
    Part,
    ScratchBuffer,
    Shape,
    ShapeFn,
)

DSV4_PREFILL_CHUNK = 4  # PREFILL_CHUNK_SIZE of the DeepSeek-V4 prefill K gather (vLLM@52a31cc)


def _dsv4_layer(spec: ModelSpec, dep: Deployment, layer: Layer) -> str | None:
    """DeepSeek-V4 layer kind by compress ratio (vLLM deepseek_v4.py @023da1fc): SWA-only, C4 or
    C128."""
    del spec, dep
    a = layer.attention
    if a.kind != "dsv4":
        return None
    return {4: "C4", 128: "C128"}.get(a.compress_ratio, "SWA-only")


def _dsv4_extra_rows(kind: str) -> int | None:
    """Rows per block of a DeepSeek-V4 layer's compressed ("extra") scope: a 256-token block holds
    64 C4 entries or 2 C128 entries (vLLM @023da1fc DeepSeek-V4 KV specs); SWA-only layers have
    none."""
    return {"C4": DSV4_SWA_BLOCK, "C128": 2}.get(kind)


def _dsv4_extra_topk(d: Dims, kind: str) -> int | None:
    """Top-k of the extra scope: C4 = index_topk; C128 ≈ ceil(max_model_len / 128), the width of
    ``c128a_global_decode_topk_indices`` (vLLM #40892 AiterSparseScratch (ROCm/vllm#902), marked
    unverified there)."""
    if kind == "C4":
        return d.index_topk
    if kind == "C128":
        return cdiv(d.max_model_len, 128)
    return None


def _dsv4_prefill_gather_rows(d: Dims, kind: str) -> Shape | None:
    """``(4, M, head_dim)``, ``M = ceil(max_model_len / ratio) + window + max_num_batched_tokens``
    (``N = 0`` for SWA-only layers); vLLM@52a31cc vllm/envs.py and the backends' module-level
    buffers, ``models/deepseek_v4/nvidia/flashmla.py``
    L52/L150-165 and ``amd/rocm.py`` L615-640."""
    ratio = {"C4": 4, "C128": 128}.get(kind)
    n = cdiv(d.max_model_len, ratio) if ratio else 0
    return (DSV4_PREFILL_CHUNK, n + d.window + d.max_num_batched_tokens, d.head_dim)


def _aiter_parts(scope: str, topk: Callable[[Dims, str], int | None]) -> tuple[Part, ...]:
    """Decode IO buffers of one AITER sparse-MLA scope: the table of #40892's
    ``AiterSparseScratch`` (vLLM #40892 AiterSparseScratch (ROCm/vllm#902)) less the opaque AITER
    work/reduce metadata.
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
    (vLLM #40889, vLLM #40889 items 1-3). SWA rows = 64 per block; extra scope: C4 64,
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



DSV4_BUFFERS: tuple[ScratchBuffer, ...] = (
    # --- DeepSeek-V4 AITER sparse MLA decode on ROCm (seed 003; vLLM #40889 / #40892 / #40909) ---
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
    # --- DeepSeek-V4 prefill gather workspace (vLLM@52a31cc vllm/envs.py and the backends'
    # module-level buffers) ---
    ScratchBuffer(
        key="dsv4_prefill_gather", backend=DEEPSEEK_V4, name="DeepSeek-V4 prefill K gather",
        label="workspace", policy="both", lifetime="shared_workspace", per_layer=False,
        parts=(Part(label="gather", dtype="bf16", shape=_dsv4_prefill_gather_rows),),
        applies=_dsv4_layer, profiled=True, workspace_manager=True,
        source="vLLM@52a31cc models/deepseek_v4/{nvidia/flashmla.py L52,L150-165; amd/rocm.py "
               "L615-640}: WorkspaceManager, reserved in the profile run's dummy forward"),
)
