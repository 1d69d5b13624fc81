"""SGLang's attention backend, per release: which one SGLang picks when ``--attention-backend`` is
not given, and what that backend allocates for the decode CUDA graphs (its capture state), read
in the PyPI wheels 0.4.3 – 0.5.19.

The capture state is allocated while ``CudaGraphRunner`` is built, so it is inside the drop in
free memory SGLang logs as "Capture cuda graph end. … mem usage=X GB" (``sglang_graphs``):
``attn_backend.init_cuda_graph_state(max_bs, max_num_token)`` in ``CudaGraphRunner.__init__``
and, per batch size, ``init_forward_metadata_capture_cuda_graph`` in ``capture_one_batch_size``
(outside the ``torch.cuda.graph`` context: the default pool, not the graph pool). The first runs
on the stream the runner is built on, the second inside ``graph_capture()``, on the capture
stream, whose segments they do not share (``reserved_on_streams``). With no
speculative decoding ``max_num_token = max_bs`` (one token per request)::

    flashinfer  per wrapper: cuda_graph_kv_indices [max_num_token × context] int32
                + cuda_graph_custom_mask [max_num_token × context] uint8 (one)
                + per batch size and wrapper a BatchDecodeWithPagedKVCacheWrapper(use_cuda_graph
                  =True) with its own 8 MiB int workspace (flashinfer decode.py, 0.2.2.post1 –
                  0.6.7.post2, the releases SGLang 0.4.3.post4 – 0.5.10 pin)
                wrappers: 2 for a model with sliding-window layers, else 1
    triton      cuda_graph_attn_logits [max_num_token, heads, 8 splits, v_head_dim (+1 through
                0.4.4)] fp32 + attn_lse [max_num_token, heads, 8] fp32 (0.4.5 on)
                + cuda_graph_kv_indices [max_num_token × context] (int32 through 0.4.10, int64
                from 0.5.1) + cuda_graph_custom_mask [max_num_token × context] uint8 (through
                0.5.16; from 0.5.17 only with speculative decoding, which memprof does not model)
    fa3         page_table [max_bs, ceil(context / page)] int32
    trtllm_mha  page_table [max_bs, ceil(context / page)] int32 (page 16, 32 or 64: SGLang sets
                64 for any other)

(heads: the attention heads of one attention-TP rank; v_head_dim: the value buffer's last
dimension, the latent ``kv_lora_rank`` for MLA; context: the server's context length.) The
index vectors beside these (``cache_seqlens``, ``cu_seqlens``, the indptr clones) are a few KiB
and not charged; each buffer is charged the segment the caching allocator reserves for it in a
pool with no free block to reuse (approximation). Backends whose state is not modelled (the MLA
kernels of FlashInfer, FlashMLA, CUTLASS and TRT-LLM, aiter, fa4, the 0.5.19 Triton
lean-attention buffers, and the backends of attention kinds whose SGLang choice memprof has not
read: ``AttentionKind.hip_aiter_heads`` None) are named as such in the output.

DeepSeek's sparse attention (a lightning indexer) runs SGLang's own backend (0.5.10
server_args.py: "Use nsa attention backend for DeepSeek with DSA."), whose state is not
modelled. The
default choice (``model_runner.py`` ``model_specific_adjustment`` through 0.5.4,
``server_args.py`` ``_handle_attention_backend`` / ``_get_default_attn_backend`` from 0.5.5,
``arg_groups/model_override_base.py`` at 0.5.19) is ``SGLANG_DEFAULT_BACKEND``; the CUDA 12.3 /
12.8 conditions of ``is_hopper_with_cuda_12_3`` / ``is_sm100_supported`` are assumed met and
model-specific overrides (DeepSeek's trtllm_mla on SM100, gpt-oss, Whisper) are not modelled:
the output says which backend it assumed.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, cast

from memprof.base.errors import BadInput
from memprof.base.units import fmt_bytes
from memprof.core.attention import kind_of
from memprof.core.engines.base import DeploymentView
from memprof.core.gpus import GPU
from memprof.core.versions import Rule, value_at

# ``--attention-backend`` values SGLang's argument parser accepts (server_args.py
# ATTENTION_BACKEND_CHOICES at 0.5.19, which holds every earlier release's; 0.4.3 accepted
# flashinfer, triton and torch_native)
SGLANG_BACKENDS: tuple[str, ...] = (
    "flashinfer", "fa3", "triton", "trtllm_mha", "trtllm_mla", "flashmla", "cutlass_mla",
    "fa4", "torch_native", "flex_attention", "dsa", "nsa", "dsv4", "cutedsl_mla",
    "tokenspeed_mla", "dual_chunk_flash_attn", "hpc_ops", "minicpm_flashattn",
    "minicpm_flashinfer", "aiter", "wave", "intel_amx", "ascend", "intel_xpu")

_READ = "read in the sglang {} wheel (first release with it)"
_MR = "model_executor/model_runner.py model_specific_adjustment"
_SA = "server_args.py _handle_attention_backend"

# The default for standard (MHA/GQA) attention on CUDA. value: (FA3 on SM90: "none", "listed"
# (for the architectures the release lists: ``Family.sglang_fa3_listed``) or "all"; trtllm_mha on
# SM100, compute capability 10.x); otherwise flashinfer.
SGLANG_DEFAULT_BACKEND: tuple[Rule, ...] = (
    Rule(name="sglang_default_attention_backend", changes="CUDA graphs: attention backend",
         since=None, until="0.4.6", value=("none", False), engine="sglang",
         introduced_by="before 0.4.3", removed_by=_READ.format("0.4.6"),
         source="sglang 0.4.3 server_args.py __post_init__: attention_backend = 'flashinfer' "
         f"if is_flashinfer_available() else 'triton'; 0.4.5 {_MR} the same"),
    Rule(name="sglang_default_attention_backend", changes="CUDA graphs: attention backend",
         since="0.4.6", until="0.5.7", value=("listed", False), engine="sglang",
         introduced_by=_READ.format("0.4.6"), removed_by=_READ.format("0.5.7"),
         source=f"sglang 0.4.6 – 0.5.4 {_MR}, 0.5.5 / 0.5.6 {_SA}: fa3 if "
         "is_hopper_with_cuda_12_3() and is_no_spec_infer_or_topk_one and "
         "is_fa3_default_architecture(hf_config) (the families' sglang_fa3_listed rows), else "
         "flashinfer"),
    Rule(name="sglang_default_attention_backend", changes="CUDA graphs: attention backend",
         since="0.5.7", until="0.5.8", value=("listed", True), engine="sglang",
         introduced_by=_READ.format("0.5.7"), removed_by=_READ.format("0.5.8"),
         source=f"sglang 0.5.7 {_SA}: the same, and trtllm_mha elif is_sm100_supported() and "
         "no speculative decoding with topk > 1"),
    Rule(name="sglang_default_attention_backend", changes="CUDA graphs: attention backend",
         since="0.5.8", until=None, value=("all", True), engine="sglang",
         introduced_by=_READ.format("0.5.8"),
         source=f"sglang 0.5.8, 0.5.9 {_SA}, 0.5.10 _get_default_attn_backend, 0.5.19 "
         "arg_groups/model_override_base.py: fa3 on every Hopper MHA model (sgl-project/sglang "
         "#17411), trtllm_mha on SM100 (fa4 where K and V widths differ, 0.5.19), else "
         "flashinfer (triton for attention sinks, 0.5.19)"),
)

# The default for MLA on CUDA. value: (FA3 on SM90, FlashInfer's MLA backend on SM100); else
# triton.
SGLANG_DEFAULT_MLA_BACKEND: tuple[Rule, ...] = (
    Rule(name="sglang_default_mla_backend", changes="CUDA graphs: attention backend",
         since=None, until="0.4.6", value=(False, False), engine="sglang",
         introduced_by="before 0.4.3", removed_by=_READ.format("0.4.6"), applies_to="mla",
         source=f"sglang 0.4.3 {_MR}: 'MLA optimization is turned on. Use triton backend.'"),
    Rule(name="sglang_default_mla_backend", changes="CUDA graphs: attention backend",
         since="0.4.6", until="0.4.7", value=(True, False), engine="sglang",
         introduced_by=_READ.format("0.4.6"), removed_by=_READ.format("0.4.7"), applies_to="mla",
         source=f"sglang 0.4.6 {_MR}: fa3 if is_hopper_with_cuda_12_3() else triton"),
    Rule(name="sglang_default_mla_backend", changes="CUDA graphs: attention backend",
         since="0.4.7", until=None, value=(True, True), engine="sglang",
         introduced_by=_READ.format("0.4.7"), applies_to="mla",
         source=f"sglang 0.4.7 {_MR} to 0.5.19 model_override_base.py: fa3 on Hopper, "
         "flashinfer on SM100 (is_sm100_supported), else triton"),
)

# The default on ROCm (flashinfer is not built there). value: whether aiter is the default.
SGLANG_DEFAULT_ROCM_BACKEND: tuple[Rule, ...] = (
    Rule(name="sglang_default_rocm_backend", changes="CUDA graphs: attention backend",
         since=None, until="0.4.7", value=False, engine="sglang",
         introduced_by="before 0.4.3", removed_by=_READ.format("0.4.7"),
         source="sglang 0.4.3 server_args.py: triton where is_flashinfer_available() is False "
         "(no FlashInfer on HIP)"),
    Rule(name="sglang_default_rocm_backend", changes="CUDA graphs: attention backend",
         since="0.4.7", until=None, value=True, engine="sglang",
         introduced_by=_READ.format("0.4.7"),
         source=f"sglang 0.4.7 {_MR}: aiter elif _is_hip (MLA: aiter with 16 or 128 KV heads, "
         "else triton); 0.5.19 model_override_base.py the same"),
)

# The Triton backend's capture buffers. value: (attn_logits' last dim adds the lse column,
# kv_indices' bytes per element).
SGLANG_TRITON_CAPTURE: tuple[Rule, ...] = (
    Rule(name="sglang_triton_capture_state", changes="CUDA graphs: attention capture state",
         since=None, until="0.4.5", value=(True, 4), engine="sglang",
         introduced_by="before 0.4.3", removed_by=_READ.format("0.4.5"),
         source="sglang 0.4.3.post4, 0.4.4 layers/attention/triton_backend.py "
         "init_cuda_graph_state: attn_logits (max_bs, num_head, num_kv_splits, v_head_dim + 1) "
         "fp32; kv_indices (max_bs * max_context_len) int32"),
    Rule(name="sglang_triton_capture_state", changes="CUDA graphs: attention capture state",
         since="0.4.5", until="0.5.1", value=(False, 4), engine="sglang",
         introduced_by=_READ.format("0.4.5"), removed_by=_READ.format("0.5.1"),
         source="sglang 0.4.5 – 0.4.10 triton_backend.py init_cuda_graph_state: attn_logits "
         "(max_num_tokens, num_head, max_kv_splits, v_head_dim) fp32 + attn_lse (max_num_tokens, "
         "num_head, max_kv_splits) fp32; kv_indices int32"),
    Rule(name="sglang_triton_capture_state", changes="CUDA graphs: attention capture state",
         since="0.5.1", until=None, value=(False, 8), engine="sglang",
         introduced_by=_READ.format("0.5.1"),
         source="sglang 0.5.1 – 0.5.10 triton_backend.py init_cuda_graph_state: kv_indices "
         "int64 (0.5.19 adds lean-attention buffers, not modelled)"),
)

# Whether the Triton backend's capture state holds cuda_graph_custom_mask [max_num_token x
# context] uint8 with no speculative decoding (memprof models none). value: whether.
SGLANG_TRITON_CAPTURE_MASK: tuple[Rule, ...] = (
    Rule(name="sglang_triton_capture_mask", changes="CUDA graphs: attention capture state",
         since=None, until="0.5.17", value=True, engine="sglang",
         introduced_by="before 0.4.3", removed_by=_READ.format("0.5.17"),
         source="sglang 0.5.10, 0.5.14, 0.5.15, 0.5.16 layers/attention/triton_backend.py "
         "init_cuda_graph_state: 'if not self.skip_prefill: self.cuda_graph_custom_mask = "
         "torch.zeros((max_num_tokens * self.max_context_len), dtype=torch.uint8)'"),
    Rule(name="sglang_triton_capture_mask", changes="CUDA graphs: attention capture state",
         since="0.5.17", until=None, value=False, engine="sglang",
         introduced_by=_READ.format("0.5.17"),
         source="sglang 0.5.17, 0.5.18, 0.5.19 triton_backend.py init_cuda_graph_state: "
         "self._verify_mask = maybe_create_verify_mask(..., num_draft_tokens="
         "get_spec().speculative_num_draft_tokens); layers/attention/verify_mask.py: 'if "
         "is_draft_runner or skip_prefill or not num_draft_tokens: return None'"),
)

# server_args.py triton_attention_num_kv_splits default (0.4.3 – 0.5.10)
TRITON_KV_SPLITS = 8
# flashinfer decode.py BatchDecodeWithPagedKVCacheWrapper.__init__: _int_workspace_buffer =
# torch.empty((8 * 1024 * 1024,), dtype=torch.uint8) on the device, whatever use_tensor_cores
# (flashinfer 0.2.2.post1 – 0.6.7.post2; read in 0.2.7.post1, which sglang 0.4.9 pins, and in
# 0.6.7.post2, which 0.5.10 pins). With use_tensor_cores and use_cuda_graph the wrapper adds only
# _qo_indptr_buf = arange(batch_size + 1) int32; with backend "trtllm-gen" a 32,768-entry int32
# _kv_lens_buffer (sglang 0.5.10 passes backend="fa2"). SGLang's
# FlashInferAttnBackend.init_forward_metadata_capture_cuda_graph (0.4.9, 0.5.10) builds one
# wrapper per num_wrappers for each captured batch size and passes only its shared float
# workspace (global_workspace_buffer); it calls no reset_workspace_buffer, so every wrapper keeps
# its own int workspace
FLASHINFER_INT_WORKSPACE = 8 * 1024 * 1024
# server_args.py _handle_attention_backend_compatibility (0.5.7 – 0.5.19): "TensorRT-LLM MHA
# only supports page_size of 16, 32 or 64, changing page_size from … to 64"
TRTLLM_MHA_PAGES = (16, 32, 64)

_MODELLED = ("flashinfer", "triton", "fa3", "trtllm_mha")


def check_backend(name: str | None) -> None:
    """Refuse an ``--attention-backend`` SGLang's parser does not accept."""
    if name is not None and name.strip().lower() not in SGLANG_BACKENDS:
        raise BadInput(f"unknown SGLang --attention-backend {str(name)[:40]!r}",
                       hint="one of: " + ", ".join(SGLANG_BACKENDS))


def _is_mla(spec: Any) -> bool:
    """SGLang's ``use_mla_backend``: a latent KV (``kv_lora_rank``)."""
    return any(layer.attention.kv_lora_rank for layer in spec.layers)


def _fa3_listed(spec: Any, version: str | None) -> bool:
    """Does the release's ``is_fa3_default_architecture`` list the model's architecture (its
    family's ``sglang_fa3_listed`` rows)?"""
    from memprof.core.models.families import family_row

    rows = family_row(spec.family).sglang_fa3_listed
    listed = cast("tuple[str, ...]", value_at(rows, version, (), engine="sglang"))
    return spec.architecture in listed


def _pair(rules: tuple[Rule, ...], version: str | None,
          default: tuple[Any, Any]) -> tuple[Any, Any]:
    """A two-part rule value in force at ``version``."""
    return cast("tuple[Any, Any]", value_at(rules, version, default, engine="sglang"))


def _cc_major(gpu: GPU) -> int:
    cc = gpu.compute_capability or ""
    return int(cc.split(".")[0]) if cc.split(".")[0].isdigit() else 0


def default_backend(dep: DeploymentView, gpu: GPU, spec: Any) -> tuple[str, str]:
    """The backend SGLang picks at ``dep.engine_version`` for ``spec`` on ``gpu`` with no
    ``--attention-backend``, and why (the rows above)."""
    version = dep.engine_version
    major = _cc_major(gpu)
    mla = _is_mla(spec)
    if any(kind_of(layer.attention).hip_aiter_heads is None for layer in spec.layers):
        return "its own", "SGLang's backend for the attention kind, not read"
    if any(layer.attention.has_indexer for layer in spec.layers):
        return "nsa", "SGLang's backend for DeepSeek's sparse attention (DSA)"
    if gpu.is_rocm:
        aiter = value_at(SGLANG_DEFAULT_ROCM_BACKEND, version, True, engine="sglang")
        listed = kind_of(spec.layers[0].attention).hip_aiter_heads or ()
        heads = max(1, spec.layers[0].attention.num_heads // max(1, dep.tp))
        if aiter and (not listed or heads in listed):
            return "aiter", "SGLang's default on ROCm"
        return "triton", "SGLang's default on ROCm"
    if mla:
        fa3, fi = _pair(SGLANG_DEFAULT_MLA_BACKEND, version, (True, True))
        if fa3 and major == 9:
            return "fa3", "SGLang's default for MLA on Hopper"
        if fi and major == 10:
            return "flashinfer", "SGLang's default for MLA on SM100"
        return "triton", "SGLang's default for MLA"
    archs, trtllm = _pair(SGLANG_DEFAULT_BACKEND, version, ("all", True))
    if major == 9 and (archs == "all" or (archs == "listed" and _fa3_listed(spec, version))):
        return "fa3", "SGLang's default on Hopper" + (
            "" if archs == "all" else f" for {spec.architecture}")
    if trtllm and major == 10:
        return "trtllm_mha", "SGLang's default on SM100"
    why = ("SGLang's default" if major != 9 else
           f"SGLang's default ({spec.architecture} is not one of the release's FA3 models)")
    return "flashinfer", why


def chosen_backend(dep: DeploymentView, gpu: GPU, spec: Any) -> tuple[str, str]:
    """``--attention-backend`` where given, else ``default_backend``; with the reason."""
    if dep.attention_backend:
        return dep.attention_backend.strip().lower(), "--attention-backend"
    return default_backend(dep, gpu, spec)


@lru_cache(maxsize=256)
def reserved_on_streams(current: tuple[int, ...], per_size: tuple[int, ...], sizes: int,
                        capture_first: tuple[int, ...] = ()) -> int:
    """What the caching allocator reserves (``memprof.alloc``'s replica, default pool, no free
    block to start with) for ``current`` allocated in turn on the stream the runner is built
    on, then, on the capture stream (``graph_capture()`` makes its own), ``per_size`` for each
    of ``sizes`` captured sizes with ``capture_first`` after the first size's (what its warm-up
    makes there: the stream's cuBLAS workspace, which torch takes from the caching allocator
    for each (handle, stream) pair: aten/src/ATen/cuda/CublasHandlePool.cpp
    ``getNewWorkspace``). A free block is reused only on its own stream
    (c10/cuda/CUDACachingAllocator.cpp ``get_free_block``), so the two streams' buffers never
    share a segment."""
    return _reserved_streams(tuple(current), tuple(per_size), sizes, tuple(capture_first))


@lru_cache(maxsize=256)
def _reserved_streams(current: tuple[int, ...], per_size: tuple[int, ...], sizes: int,
                      capture_first: tuple[int, ...]) -> int:
    from memprof.alloc.allocator import CachingAllocator

    alloc = CachingAllocator()
    for nbytes in current:
        if nbytes > 0:
            alloc.malloc(nbytes, stream=0)
    for i in range(sizes):
        for nbytes in per_size + (capture_first if i == 0 else ()):
            if nbytes > 0:
                alloc.malloc(nbytes, stream=2)
    return alloc.total_allocated_memory


def capture_buffers(dep: DeploymentView, gpu: GPU, spec: Any,
                    sizes: list[int]) -> tuple[tuple[int, ...], tuple[int, ...], str]:
    """The attention backend's capture state for the decode graphs of ``sizes``: (the buffers
    ``init_cuda_graph_state`` allocates in ``CudaGraphRunner.__init__``, on the stream the
    runner is built on; the buffers ``init_forward_metadata_capture_cuda_graph`` allocates for
    each captured size inside ``graph_capture()``, on the capture stream: FlashInfer's decode
    wrappers; what the formula says, naming the backend and why it was assumed)."""
    backend, why = chosen_backend(dep, gpu, spec)
    label = f"attention backend {backend} ({why})"
    if backend not in _MODELLED or (backend == "flashinfer" and _is_mla(spec)):
        return (), (), f"{label}: its capture state not modelled [assumption]"
    max_bs = max(sizes)
    context = dep.max_model_len or 0
    a = spec.layers[0].attention
    page = dep.block_size or 1
    if backend in ("fa3", "trtllm_mha"):
        if backend == "trtllm_mha" and page not in TRTLLM_MHA_PAGES:
            page = 64
        table = max_bs * -(-context // page) * 4
        return ((table,), (),
                f"{label}: page table [{max_bs}, ceil({context:,} / {page})] int32")
    if backend == "flashinfer":
        wrappers = 2 if any(layer.attention.sliding_window for layer in spec.layers) else 1
        indices = max_bs * context * 4
        mask = max_bs * context
        return ((indices,) * wrappers + (mask,), (FLASHINFER_INT_WORKSPACE,) * wrappers,
                f"{label}: {wrappers} × kv_indices [{max_bs} × {context:,}] int32 + custom "
                f"mask [{max_bs} × {context:,}] uint8 + {wrappers * len(sizes)} decode "
                f"wrappers' int workspace of {fmt_bytes(FLASHINFER_INT_WORKSPACE)} (on the "
                "capture stream)")
    lse_column, index_bytes = _pair(SGLANG_TRITON_CAPTURE, dep.engine_version, (False, 8))
    heads = max(1, a.num_heads // max(1, dep.attn_tp))
    v_dim = a.kv_lora_rank if _is_mla(spec) and a.kv_lora_rank else a.v_head_dim
    logits = max_bs * heads * TRITON_KV_SPLITS * (v_dim + (1 if lse_column else 0)) * 4
    lse = 0 if lse_column else max_bs * heads * TRITON_KV_SPLITS * 4
    mask_on = bool(value_at(SGLANG_TRITON_CAPTURE_MASK, dep.engine_version, False,
                            engine="sglang"))
    bufs = (logits, lse, max_bs * context * index_bytes) + ((max_bs * context,) if mask_on
                                                             else ())
    return (bufs, (),
            f"{label}: attn logits [{max_bs}, {heads}, {TRITON_KV_SPLITS}, {v_dim}"
            f"{' + 1' if lse_column else ''}] fp32{'' if lse_column else ' + lse'} + "
            f"kv_indices [{max_bs} × {context:,}] int{index_bytes * 8}"
            + (" + custom mask uint8" if mask_on else
               " (no custom mask: no speculative decoding)"))


def capture_state(dep: DeploymentView, gpu: GPU, spec: Any,
                  sizes: list[int]) -> tuple[int, str]:
    """The capture state's bytes alone (``capture_buffers`` on its two streams) and words."""
    current, per_size, words = capture_buffers(dep, gpu, spec, sizes)
    return reserved_on_streams(current, per_size, len(sizes)), words


RULES: tuple[tuple[Rule, ...], ...] = (SGLANG_DEFAULT_BACKEND, SGLANG_DEFAULT_MLA_BACKEND,
                                       SGLANG_DEFAULT_ROCM_BACKEND, SGLANG_TRITON_CAPTURE,
                                       SGLANG_TRITON_CAPTURE_MASK)
"""The rows of this module (``memprof versions`` lists them with the engine's)."""
