"""Attention backends' buffers made inside vLLM's CUDA-graph capture windows, release by release:
what the logged "Graph capturing finished in N secs, took X GiB" figure holds beyond the graphs'
pool and driver memory (``memprof.core.graph_log``), and what the CUDA-graph estimate the budget
subtracts holds beyond them (FlashInfer's workspace, below).

FlashInfer's decode wrappers under Model Runner V2 (vLLM 0.22.0-0.28.x, read in the 0.22.0,
0.22.1, 0.23.0, 0.24.0 and 0.28.0 wheels). Where the FULL decode graphs run FlashInfer, its
metadata builder (v1/attention/backends/flashinfer.py ``FlashInferMetadataBuilder``) keeps one
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

FlashInfer's workspace in the CUDA-graph estimate (V1's estimate from its first release, 0.18.0,
read in the 0.18.0, 0.20.0, 0.24.0, 0.27.1 and 0.28.0-0.33.0 wheels; V2's from 0.29.0, where it
estimates its own graphs). The metadata builder holds no workspace until its first ``build``
(``_workspace_buffer = None`` at ``__init__``; ``_get_workspace_buffer`` makes
``VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE`` = 394 MiB, and from 0.26.0 max(394 MiB,
max_num_batched_tokens × the rank's query heads × head_dim × 16 B): ``PREFILL_FOOTPRINT``, absent
from the 0.24.0 and 0.25.0 wheels). ``profile_cudagraph_memory``
makes fresh builders (``_init_minimal_kv_cache_for_profiling``) after the profile run, which built
no attention metadata, and their first build runs inside what it measures: V1's FULL mode's first
sample (``_dummy_run`` builds metadata only for FULL), V2's ``capture_model`` free-memory delta
(``prepare_attn`` for every PIECEWISE and FULL size). The teardown frees it with the builders,
so the budget subtracts it once more than the graphs cost and the KV cache is that much smaller
(``FLASHINFER_WORKSPACE_IN_ESTIMATE``; ``estimate_window_workspace``). Row 1718 of
tests/data/published.json (vLLM 0.30.0, Qwen2.5-7B AWQ on an A10G) logs 483,632 tokens with an
fp8 KV cache, which FlashInfer runs there, where its bf16 twin (row 1717, FlashAttention 2) logs
248,000: 338 MiB less KV memory, where the workspace is 394 MiB (memprof +2.5% without it,
-0.5% with it; the bf16 twin -0.1%). Not read: the
compute capability 10.x path (TRT-LLM's kernels, with a module-level workspace of the forward's),
and the decode wrappers of the two FULL sizes the estimate captures (8 MiB each).

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
from memprof.core.terms.common import max_seqs, profile_tokens
from memprof.core.versions import Rule, value_at

FLASHINFER = "flashinfer"
# FlashInfer decode.py BatchDecodeWithPagedKVCacheWrapper.__init__ (0.6.12, 0.6.16.post3):
# torch.empty((8 * 1024 * 1024,), dtype=torch.uint8, device=self.device)
INT_WORKSPACE = 8 * MiB
# model_executor/warmup/kernel_warmup.py (0.22.1, 0.23.0, 0.24.0, 0.28.0): the FlashInfer attention
# warm-up before capture_model, _dummy_run(num_tokens=16, ...), 16 one-token requests
FLASHINFER_WARMUP_TOKENS = 16
# the compute capability 10.0 family, where FlashInfer decodes through TRT-LLM's kernels
# (utils/flashinfer.py supports_trtllm_attention: is_device_capability_family(100);
# FlashInferMetadataBuilder.build: decode_use_trtllm gives TRTLLMDecode, no wrapper)
_TRTLLM_DECODE_ARCHS = ("sm10",)

FLASHINFER_DECODE_WRAPPERS: tuple[Rule, ...] = (
    Rule(name="attn_capture_flashinfer_wrappers",
         changes="logged graph figure: FlashInfer's per-size decode wrappers (Model Runner V2)",
         since="0.22.0", until="0.29.0", value=True,
         introduced_by="read in the 0.22.1 wheel (Model Runner V2 by default from 0.22.0)",
         removed_by="not read past 0.28.0",
         source="0.22.1 / 0.23.0 / 0.24.0 / 0.28.0 v1/attention/backends/flashinfer.py "
         "FlashInferMetadataBuilder._get_decode_wrapper (one BatchDecodeWithPagedKVCacheWrapper "
         "per batch size under FULL decode graphs, use_cuda_graph=True, "
         "use_tensor_cores=True); v1/worker/gpu/cudagraph_utils.py CudaGraphManager.capture "
         "(metadata of each FULL size built before its warm-up, inside graph_capture); "
         "model_executor/warmup/kernel_warmup.py (the 16-token FlashInfer warm-up before "
         "capture_model); flashinfer-python 0.6.12 / 0.6.16.post3 decode.py "
         "BatchDecodeWithPagedKVCacheWrapper.__init__ (8 MiB _int_workspace_buffer, "
         "_qo_indptr_buf of batch_size + 1 int32)"),
)

# FlashInfer's workspace in the CUDA-graph estimate's window (module docstring, last part):
# made by the first metadata build of the builders that ``_init_minimal_kv_cache_for_profiling``
# creates, inside what the estimate measures. Read in the 0.18.0, 0.20.0, 0.24.0, 0.27.1 and
# 0.28.0-0.33.0 wheels (V1's estimate, made from 0.18.0 and subtracted from 0.20.0:
# ``cudagraph.CUDAGRAPH_ESTIMATE``; V2 estimates its graphs from 0.29.0:
# ``runner_v2_profile.v2_estimates_graphs``).
FLASHINFER_WORKSPACE_IN_ESTIMATE: tuple[Rule, ...] = (
    Rule(name="attn_capture_flashinfer_estimate_workspace",
         changes="CUDA-graph estimate: FlashInfer's workspace, made by the estimate's first "
         "metadata build",
         since="0.18.0", until=None, value=True,
         introduced_by="profile_cudagraph_memory (first released in 0.18.0)",
         source="0.18.0 / 0.20.0 / 0.24.0 / 0.27.1 / 0.28.0-0.33.0 v1/attention/backends/"
         "flashinfer.py FlashInferMetadataBuilder (_workspace_buffer = None at __init__; "
         "_get_workspace_buffer at the first build: PREFILL_FOOTPRINT); V1: "
         "v1/worker/gpu_model_runner.py profile_cudagraph_memory (_init_minimal_kv_cache_for_"
         "profiling, then each mode's first sample around _warmup_and_capture, whose _dummy_run "
         "builds attention metadata only for FULL), _cleanup_profiling_kv_cache; V2 (0.29.0 on): "
         "v1/worker/gpu/cudagraph_utils.py profile_cudagraph_memory (_init_minimal_kv_cache_for_"
         "profiling, then capture_model's free-memory delta, every PIECEWISE and FULL size "
         "building metadata through prepare_attn), _teardown_profiling_state"),
)

# The workspace's size: VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE alone, then from 0.26.0 at least the
# prefill footprint (``flashinfer_workspace_bytes``).
PREFILL_FOOTPRINT: tuple[Rule, ...] = (
    Rule(name="attn_capture_flashinfer_workspace_prefill_footprint",
         changes="FlashInfer's workspace: at least the prefill footprint",
         since="0.26.0", until=None, value=True,
         introduced_by="0.26.0 v1/attention/backends/flashinfer.py "
         "FLASHINFER_PREFILL_WORKSPACE_BYTES_PER_ELEM (absent from the 0.24.0 and 0.25.0 wheels)",
         source="0.26.0 / 0.27.0 / 0.27.1 / 0.28.0 v1/attention/backends/flashinfer.py "
         "_get_workspace_buffer: max(VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE, "
         "max_num_batched_tokens x num_qo_heads x head_dim x 16); 0.18.0 / 0.20.0 / 0.24.0 / "
         "0.25.0: VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE alone"),
)

ATTN_CAPTURE_RULES: tuple[tuple[Rule, ...], ...] = (FLASHINFER_DECODE_WRAPPERS,
                                                   FLASHINFER_WORKSPACE_IN_ESTIMATE,
                                                   PREFILL_FOOTPRINT)


def full_graph_backend(ctx: TermContext) -> str | None:
    """The backend vLLM's FULL decode graphs run for the rank's GQA layers at the release (a row
    name of ``attention_backends``); None where the model's first layer is not GQA or no row
    runs it."""
    a = ctx.spec.layers[0].attention
    return gqa_backend(ctx) if attention_kind(a.kind, a.has_indexer) == GQA else None


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


# v1/attention/backends/flashinfer.py (0.26.0 on): FLASHINFER_PREFILL_WORKSPACE_BYTES_PER_ELEM
PREFILL_WORKSPACE_BYTES_PER_ELEM = 16


def gqa_backend(ctx: TermContext) -> str | None:
    """The backend the rank's first GQA layer runs at the release (a row name of
    ``attention_backends``): a hybrid model's attention layers, wherever they sit; None where the
    model has no GQA layer or no row runs it."""
    dep, arch = ctx.dep, ctx.gpu.arch
    for layer in ctx.spec.layers:
        a = layer.attention
        if attention_kind(a.kind, a.has_indexer) != GQA:
            continue
        try:
            row = chosen(GQA, arch, ctx.gpu.is_rocm, dep.kv_cache_dtype, dep.attention_backend,
                         dep.engine_version)
        except (KeyError, LookupError):
            return None
        return None if row is None else row.name
    return None


def flashinfer_workspace_bytes(ctx: TermContext) -> int:
    """The metadata builder's workspace (``_get_workspace_buffer``): from 0.26.0
    (``PREFILL_FOOTPRINT``)::

        max(VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE (394 MiB),
            max_num_batched_tokens × query heads of the rank × head_dim × 16)

    before it, VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE alone."""
    a = next(la.attention for la in ctx.spec.layers
             if attention_kind(la.attention.kind, la.attention.has_indexer) == GQA)
    # imported here: a rank that runs no FlashInfer never loads the scratch catalog
    from memprof.core.scratch.flashinfer import FLASHINFER_WORKSPACE_BYTES

    if not value_at(PREFILL_FOOTPRINT, ctx.dep.engine_version, False, ctx.dep.engine):
        return FLASHINFER_WORKSPACE_BYTES
    heads = max(1, a.num_heads // max(ctx.dep.tp, 1))
    est = profile_tokens(ctx.dep) * heads * a.head_dim * PREFILL_WORKSPACE_BYTES_PER_ELEM
    return max(FLASHINFER_WORKSPACE_BYTES, est)


def estimate_window_workspace(ctx: TermContext) -> tuple[int, str]:
    """FlashInfer's workspace inside the window vLLM's CUDA-graph estimate measures
    (``FLASHINFER_WORKSPACE_IN_ESTIMATE``): the builders ``_init_minimal_kv_cache_for_profiling``
    makes hold none until their first build, which runs inside the measurement (V1: the FULL
    mode's first sample; V2: ``capture_model``'s delta), and the teardown frees it with them,
    so the estimate the budget subtracts holds it once, and the KV cache is sized without it.
    (0, "") where the rule does not hold, the attention layers do not run FlashInfer, or the
    card decodes through TRT-LLM's kernels (compute capability 10.x: a module-level workspace
    of the forward's, not read here)."""
    if (not value_at(FLASHINFER_WORKSPACE_IN_ESTIMATE, ctx.dep.engine_version, False,
                     ctx.dep.engine)
            or gqa_backend(ctx) != FLASHINFER
            or ctx.gpu.arch.startswith(_TRTLLM_DECODE_ARCHS)):
        return 0, ""
    nbytes = flashinfer_workspace_bytes(ctx)
    return nbytes, (f"FlashInfer's workspace {nbytes // MiB} MiB, made by the first attention "
                    "metadata build inside the estimate's capture and freed with the profiling "
                    "builders")
