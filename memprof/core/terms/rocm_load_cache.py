"""Cached blocks in vLLM's ROCm weights figure: what the caching allocator still holds, freed but
not released, when the load of a block-fp8 MoE checkpoint ends, which vLLM on ROCm counts as model
memory (category weights, inside the budget).

Why ROCm only (vLLM 0.17.1 and 0.18.0): the weights figure is ``DeviceMemoryProfiler``'s delta
around ``GPUModelRunner.load_model`` (``v1/worker/gpu_model_runner.py``), each end read by
``current_platform.get_current_memory_usage``. ``platforms/cuda.py`` empties the cache and reads
``torch.cuda.max_memory_allocated`` (tensors only); ``platforms/rocm.py`` reads
``total − free`` of ``torch.cuda.mem_get_info`` with no ``empty_cache``, so every segment the
allocator reserved during the load and still caches at its end is counted as weights.
``memory_profiling`` (``utils/mem_utils.py``) empties the cache before the profile run, so those
bytes are charged to the budget without being held.

What the load frees, per FusedMoE layer of a block-fp8 checkpoint, in module order
(``Fp8MoEMethod.process_weights_after_loading``, ``model_executor/layers/quantization/fp8.py``,
0.17.1 and 0.18.0):

- on an e4m3fnuz architecture (gfx942: MI300X, MI300A, MI308X, MI325X; ``platforms/rocm.py``
  ``is_fp8_fnuz``) ``normalize_e4m3fn_to_e4m3fnuz`` (``quantization/utils/w8a8_utils.py``)
  builds ``weight_as_int8 == -128``, a bool mask of the weight's elements (1 B each), for w13 and
  then w2, rewriting the weight in place; the mask is freed at once;
- with the AITER fused MoE (``VLLM_ROCM_USE_AITER=1``, whose ``VLLM_ROCM_USE_AITER_MOE`` defaults
  to 1: ``oracle/fp8.py`` picks ``Fp8MoeBackend.AITER``) ``convert_to_fp8_moe_kernel_format``
  calls ``rocm_aiter_ops.shuffle_weights(w13, w2)``: AITER's ``shuffle_weight``
  (``aiter/ops/shuffle.py``) returns ``permute(...).contiguous()`` copies, and
  ``replace_parameter`` drops the loaded w13 and w2, which are freed.

The allocator hands a freed block to the next request it fits (best fit), so the next layer's
mask and shuffled copies take the previous layer's freed blocks; what is cached when the load ends
is the last layer's: with AITER its loaded w13 and w2 (w13 + w2 bytes), without AITER on gfx942 the
w13 mask block (w13 elements × 1 B; the w2 mask was split from it and merged back), and without
AITER off gfx942 nothing. Each is a whole multiple of 2 MiB for these shapes, so the allocator's
rounding adds nothing. The attention projections' masks are smaller and are split from the same
cached blocks (not counted apart).

Only the vLLM releases read hold the rule: 0.17.1 and 0.18.0 (every step above the same in both);
earlier and later ROCm releases were not read and get no charge.
"""

from __future__ import annotations

from math import prod

from memprof.base.errors import BadInput
from memprof.base.units import fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.versions import Rule, value_at

NAME = "ROCm load: cached fp8 MoE blocks"

FNUZ_ARCHS = ("gfx942",)
"""The ROCm architectures whose fp8 is e4m3fnuz (vLLM 0.17.1 ``platforms/rocm.py``
``is_fp8_fnuz``: ``"gfx94" in the device's gcnArchName``)."""

# vLLM on ROCm counts the load's device-memory drop, cached blocks included, as weights.
# value: True while ``RocmPlatform.get_current_memory_usage`` reads mem_get_info without
# emptying the cache.
ROCM_LOAD_USED_MEMORY: tuple[Rule, ...] = (
    Rule(name="rocm_load_used_memory", changes="weights: cached blocks of the fp8 MoE load "
         "(ROCm)", since="0.17.1", until="0.18.1", value=True,
         introduced_by="read in 0.17.1 (earlier ROCm releases not read)",
         removed_by="not read after 0.18.0: later releases get no charge until they are",
         source="0.17.1 and 0.18.0 (the same code) platforms/rocm.py "
         "RocmPlatform.get_current_memory_usage: "
         "reset_peak_memory_stats, then total_mem - free_mem of torch.cuda.mem_get_info "
         "(platforms/cuda.py: empty_cache, then max_memory_allocated); utils/mem_utils.py "
         "DeviceMemoryProfiler around v1/worker/gpu_model_runner.py load_model",
         applies_to="fp8_block"),
)


def _block_fp8_moe(ctx: TermContext) -> tuple[int, int] | None:
    """The elements of one FusedMoE layer's w13 and w2 on this rank (fp8: bytes), for vLLM's own
    block-fp8 method; None without such a layer."""
    q = ctx.quant
    if q is None or q.method != "fp8" or q.block is None or q.checkpoint_format or q.marlin:
        return None
    from memprof.core.weights.rank import rank_weights

    for t in rank_weights(ctx.spec, ctx.dep, q, ctx.coord, ctx.gpu.arch):
        shapes = {p.name: p.shape for p in t.params}
        if t.count and "w13_weight" in shapes and "w2_weight" in shapes:
            return prod(shapes["w13_weight"]), prod(shapes["w2_weight"])
    return None


def rocm_load_cache_terms(ctx: TermContext) -> list[Component]:
    """The last FusedMoE layer's freed blocks that vLLM's ROCm weights figure counts: w13 + w2
    bytes with the AITER fused MoE, the w13 mask (w13 elements × 1 B) without it on gfx942."""
    dep = ctx.dep
    if dep.vllm_rocm_use_aiter not in (None, 0, 1):
        raise BadInput(f"--vllm-rocm-use-aiter {dep.vllm_rocm_use_aiter}: VLLM_ROCM_USE_AITER is "
                       "0 or 1", hint="pass 1 where the launch sets VLLM_ROCM_USE_AITER=1, "
                       "0 or nothing otherwise")
    if (not ctx.gpu.is_rocm
            or not value_at(ROCM_LOAD_USED_MEMORY, dep.engine_version, False, dep.engine)):
        return []
    moe = _block_fp8_moe(ctx)
    if moe is None:
        return []
    w13, w2 = moe
    if dep.vllm_rocm_use_aiter == 1:
        nbytes, what = w13 + w2, ("the last MoE layer's loaded w13 + w2 (fp8), freed when "
                                  "AITER's shuffle_weight copies replace them")
    elif ctx.gpu.arch in FNUZ_ARCHS:
        nbytes, what = w13, ("the w13 bool mask of normalize_e4m3fn_to_e4m3fnuz (e4m3fnuz), "
                             "freed and cached (Triton fused MoE: no shuffle)")
    else:
        return []
    return [Component(name=NAME, category="weights", bytes=nbytes, where="budget",
                      profiled=True,
                      formula=f"{what}: {fmt_bytes(nbytes)}, counted by vLLM's ROCm "
                      "load figure (total − free, no empty_cache)")]
