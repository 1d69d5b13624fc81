"""Attention backends' buffers made inside vLLM's CUDA-graph capture window, release by release:
what the logged "Graph capturing finished in N secs, took X GiB" figure holds beyond the graphs'
pool and driver memory (``memprof.core.graph_log``).

FlashInfer's decode wrappers under Model Runner V2 (vLLM 0.23.0-0.28.x, read in the 0.23.0,
0.24.0 and 0.28.0 wheels). Where the FULL decode graphs run FlashInfer, its metadata builder
(v1/attention/backends/flashinfer.py ``FlashInferMetadataBuilder``) keeps one
``BatchDecodeWithPagedKVCacheWrapper`` per captured batch size (``_decode_wrappers_cudagraph``,
``_get_decode_wrapper(batch_size, use_cudagraph=True)``, for a pure-decode batch of at most
``min((1 + spec) x max_num_seqs, max_cudagraph_capture_size)`` tokens). The wrapper's paged-KV
index buffers are slices of the builder's persistent buffers (made at ``__init__``, before the
window) and its float workspace is the builder's one shared buffer (``_get_workspace_buffer``,
``VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE`` = 394 MiB), first made by the FlashInfer attention
warm-up that ``kernel_warmup`` runs before ``capture_model`` (model_executor/warmup/
kernel_warmup.py: ``_dummy_run(num_tokens=16, ...)`` where every attention group is FlashInfer).
What each wrapper allocates itself (FlashInfer decode.py ``BatchDecodeWithPagedKVCacheWrapper.
__init__``, flashinfer-python 0.6.12 as 0.23.0 / 0.24.0 pin it, and 0.6.16.post3 as 0.28.0 pins
it): an 8 MiB uint8 ``_int_workspace_buffer`` on the device (``INT_WORKSPACE``), a pinned host copy
(not device memory) and, with ``use_tensor_cores=True`` (vLLM passes it) under CUDA graphs,
``_qo_indptr_buf = torch.arange(batch_size + 1, dtype=int32)``. V2's ``CudaGraphManager.capture``
(v1/worker/gpu/cudagraph_utils.py) builds each FULL size's metadata outside the graph, before its
eager warm-up, on ``graph_capture``'s stream; so the wrappers are made inside the window, in the
ordinary pool, largest size first, and kept. The warm-up's 16-token batch (16 one-token requests,
a pure decode) made the wrapper of size 16 before the window, on the default stream.

Placement (PyTorch c10/cuda/CUDACachingAllocator.cpp, simulated by ``memprof.alloc.allocator``):
an 8 MiB request takes a free block of at least 8 MiB on its stream, else a 20 MiB segment
(``kLargeBuffer``, requests of 1-10 MiB). In the window the capture stream's one lasting segment
before the FULL stage is the warm-up's cuBLAS workspace (``graph_log.WARMUP_WORKSPACE``: 8 MiB +
128 KiB in 20 MiB before compute capability 9.0, 32 MiB exact from it); the other free segments
are released by the ``empty_cache`` that begins each size's capture (torch/cuda/graphs.py), and a
segment a wrapper holds is not. So the first wrapper fills the workspace segment's 11.875 MiB
remainder where it has one, and every later pair shares one new 20 MiB segment; the index
tensors share one 2 MiB small-pool segment (``kSmallBuffer``) [approximation: the eager warm-ups'
activations, freed before each capture, are left out of the simulation; they only borrow the
free remainders between two requests].

Which backend the FULL graphs run: the deployment's, as the estimate picks it
(``attention_backends.chosen`` at the release): with a KV cache in fp8 elements on a CUDA card
other than FlashAttention 3's (compute capability 9.0), vLLM's selector passes over FlashAttention
to FlashInfer (``attention_backends.FP8_KV_GQA_BACKEND``), so the graphs run FlashInfer's decode
wrappers there too.

Checked and found to allocate nothing per size inside the window: FlashAttention 2's metadata
builder (0.24.0 v1/attention/backends/flash_attn.py: ``scheduler_metadata`` only where
``aot_schedule``, i.e. FA3, made at ``__init__``), and V2's per-size attention metadata (slices of
``input_buffers`` and the block tables' persistent tensors: v1/worker/gpu/model_states/default.py
``prepare_attn``, block_table.py ``get_dummy_block_tables``).
"""

from __future__ import annotations

from memprof.alloc.allocator import CachingAllocator
from memprof.base.units import MiB
from memprof.core.attention_backends import chosen
from memprof.core.components import TermContext
from memprof.core.kv_dtypes import GQA, attention_kind
from memprof.core.terms.activation import cublas_workspace_bytes
from memprof.core.terms.common import max_seqs
from memprof.core.versions import Rule, value_at

FLASHINFER = "flashinfer"
# FlashInfer decode.py BatchDecodeWithPagedKVCacheWrapper.__init__ (0.6.12, 0.6.16.post3):
# torch.empty((8 * 1024 * 1024,), dtype=torch.uint8, device=self.device)
INT_WORKSPACE = 8 * MiB
# model_executor/warmup/kernel_warmup.py (0.23.0, 0.24.0, 0.28.0): the FlashInfer attention
# warm-up before capture_model, _dummy_run(num_tokens=16, ...), 16 one-token requests
FLASHINFER_WARMUP_TOKENS = 16
# the compute capability 10.0 family, where FlashInfer decodes through TRT-LLM's kernels
# (utils/flashinfer.py supports_trtllm_attention: is_device_capability_family(100);
# FlashInferMetadataBuilder.build: decode_use_trtllm gives TRTLLMDecode, no wrapper)
_TRTLLM_DECODE_ARCHS = ("sm10",)

FLASHINFER_DECODE_WRAPPERS: tuple[Rule, ...] = (
    Rule(name="attn_capture_flashinfer_wrappers",
         changes="logged graph figure: FlashInfer's per-size decode wrappers (Model Runner V2)",
         since="0.23.0", until="0.29.0", value=True,
         introduced_by="read in the 0.23.0 wheel (Model Runner V2's first release)",
         removed_by="not read past 0.28.0",
         source="0.23.0 / 0.24.0 / 0.28.0 v1/attention/backends/flashinfer.py "
         "FlashInferMetadataBuilder._get_decode_wrapper (one BatchDecodeWithPagedKVCacheWrapper "
         "per batch size under FULL decode graphs, use_cuda_graph=True, "
         "use_tensor_cores=True); v1/worker/gpu/cudagraph_utils.py CudaGraphManager.capture "
         "(metadata of each FULL size built before its warm-up, inside graph_capture); "
         "model_executor/warmup/kernel_warmup.py (the 16-token FlashInfer warm-up before "
         "capture_model); flashinfer-python 0.6.12 / 0.6.16.post3 decode.py "
         "BatchDecodeWithPagedKVCacheWrapper.__init__ (8 MiB _int_workspace_buffer, "
         "_qo_indptr_buf of batch_size + 1 int32)"),
)

ATTN_CAPTURE_RULES: tuple[tuple[Rule, ...], ...] = (FLASHINFER_DECODE_WRAPPERS,)


def full_graph_backend(ctx: TermContext) -> str | None:
    """The backend vLLM's FULL decode graphs run for the rank's GQA layers at the release (a row
    name of ``attention_backends``); None where the model's first layer is not GQA or no row
    runs it."""
    dep, arch = ctx.dep, ctx.gpu.arch
    a = ctx.spec.layers[0].attention
    kind = attention_kind(a.kind, a.has_indexer)
    if kind != GQA:
        return None
    try:
        row = chosen(kind, arch, ctx.gpu.is_rocm, dep.kv_cache_dtype, dep.attention_backend,
                     dep.engine_version)
    except (KeyError, LookupError):
        return None
    return None if row is None else row.name


def wrapper_sizes_in_window(ctx: TermContext, full_sizes: list[int]) -> list[int]:
    """The FULL batch sizes whose FlashInfer decode wrapper is first made inside the window,
    largest first: each size up to ``min(max_num_seqs, max capture size)``, less the warm-up's
    16 (one-token requests only where ``max_num_seqs`` >= 16). Empty where the rule does not
    hold, the FULL graphs do not run FlashInfer, the card decodes through TRT-LLM's kernels
    (compute capability 10.x: ``TRTLLMDecode`` metadata, no wrapper), or speculative decoding is
    on (its multi-token decode graphs are not modelled here)."""
    dep = ctx.dep
    if (not full_sizes or dep.num_speculative_tokens
            or not value_at(FLASHINFER_DECODE_WRAPPERS, dep.engine_version, False)
            or full_graph_backend(ctx) != FLASHINFER
            or ctx.gpu.arch.startswith(_TRTLLM_DECODE_ARCHS)):
        return []
    seqs = max_seqs(dep)
    most = min(seqs, max(full_sizes))
    made_before = FLASHINFER_WARMUP_TOKENS if seqs >= FLASHINFER_WARMUP_TOKENS else None
    return sorted((s for s in full_sizes if s <= most and s != made_before), reverse=True)


def decode_wrapper_bytes(ctx: TermContext, sizes: list[int]) -> int:
    """Device memory the wrappers of ``sizes`` (largest first) add on the capture stream, after
    the warm-up's cuBLAS workspace, simulated with the caching allocator (module docstring)."""
    if not sizes:
        return 0
    alloc = CachingAllocator()
    stream = 1  # graph_capture's stream
    alloc.malloc(cublas_workspace_bytes(ctx.gpu), stream)
    before = alloc.total_allocated_memory
    for bs in sizes:
        alloc.malloc(INT_WORKSPACE, stream)
        alloc.malloc((bs + 1) * 4, stream)
    return alloc.total_allocated_memory - before


def capture_window_buffers(ctx: TermContext, full_sizes: list[int]) -> tuple[int, str]:
    """Bytes the rank's attention backend allocates and keeps inside the capture window under
    Model Runner V2, and where they come from ("" where none)."""
    sizes = wrapper_sizes_in_window(ctx, full_sizes)
    nbytes = decode_wrapper_bytes(ctx, sizes)
    if not nbytes:
        return 0, ""
    return nbytes, (f"FlashInfer's decode wrappers of {len(sizes)} FULL sizes made inside the "
                    f"window ({INT_WORKSPACE // MiB} MiB int workspace and the qo_indptr of "
                    "each, on the capture stream in the ordinary pool)")
