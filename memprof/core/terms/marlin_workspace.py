"""The Marlin workspaces: one small int32 buffer per layer that runs a Marlin kernel, allocated
when the layer's weights are repacked (``process_weights_after_loading``), so inside vLLM's
"model loading took".

vLLM v0.11.0 ``quantization/utils/marlin_utils.py``::

    def marlin_make_workspace_new(device, max_blocks_per_sm=1):
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        return torch.zeros(sms * max_blocks_per_sm, dtype=torch.int, ...)

called once per Marlin linear (``MarlinLinearKernel.process_weights_after_loading``,
``AWQMarlinLinearMethod``, ``prepare_fp8_layer_for_marlin``, ``prepare_fp4_layer_for_marlin``:
``max_blocks_per_sm`` 1) and once per FusedMoE layer on Marlin (``GPTQMarlinMoEMethod``,
``AWQMarlinMoEMethod``, ``prepare_moe_fp8_layer_for_marlin``, ``prepare_moe_fp4_layer_for_marlin``:
4). Which layers run Marlin is decided with their weights (``WeightTensor.marlin_blocks``,
``memprof.core.weights.formats.marlin_blocks``); a fused linear (``qkv_proj``) has one. Each
workspace is its own allocation, which PyTorch's caching allocator rounds up to 512 B (not
counted here: the model-load rounding replay does not see these buffers).

Before 0.9.0 a linear's workspace was sized by its output columns instead
(``memprof.core.terms.marlin_repack.MARLIN_WORKSPACE``: ``marlin_make_workspace(N)``,
``(N // 64) × 16`` int32), and a FusedMoE layer kept one of SMs × 4 int32 only from 0.8.5
(``MARLIN_MOE_WORKSPACE``; before it, none).
"""

from __future__ import annotations

from memprof.core.components import Component, TermContext
from memprof.core.terms.marlin_repack import (
    moe_workspace_held,
    old_workspace_bytes,
    workspace_per_output,
)
from memprof.core.weights.shard import WeightTensor


def output_columns(t: WeightTensor) -> int:
    """The output columns of one linear's tensor on this rank: the second dimension of its
    group / channel scales (``scales`` or ``weight_scale``, ``(rows, N)``), 0 without one."""
    return next((p.shape[1] for p in t.params
                 if p.name in ("scales", "weight_scale") and len(p.shape) == 2), 0)


def _per_output(tensors: list[WeightTensor], moe_sms: int) -> list[Component]:
    """The pre-0.9.0 workspaces: ``(N // 64) × 16`` int32 per Marlin linear, ``N`` its output
    columns (a QKV projection's q and kv parts together), and ``moe_sms`` × 4 int32 per
    FusedMoE Marlin layer (0 where the release keeps none: ``MARLIN_MOE_WORKSPACE``)."""
    cols: dict[str, int] = {}
    count: dict[str, int] = {}
    marked: set[str] = set()
    moe = 0
    for t in tensors:
        if t.marlin_blocks == 4:
            moe += t.count
            continue
        base = t.module.replace("(q)", "").replace("(kv)", "")
        cols[base] = cols.get(base, 0) + output_columns(t)
        count[base] = t.count
        if t.marlin_blocks == 1:
            marked.add(base)
    n = sum(count[b] for b in marked)
    total = sum(old_workspace_bytes(cols[b]) * count[b] for b in marked)
    moe_bytes = moe * moe_sms * 4 * 4
    if not n and not moe_bytes:
        return []
    what = (f"{moe} MoE layer(s) × {moe_sms} SMs × 4 blocks × 4 B" if moe_bytes
            else "MoE layers keep none")
    return [Component(name="Marlin workspaces", category="weights", bytes=total + moe_bytes,
                      count=n + (moe if moe_bytes else 0), where="budget", profiled=True,
                      formula=f"{n} Marlin linear(s) × (output columns // 64) × 16 × 4 B "
                      f"(int32, marlin_make_workspace before 0.9.0); {what}")]


def marlin_workspace_terms(ctx: TermContext) -> list[Component]:
    """``Σ over Marlin layers of sm_count × max_blocks_per_sm × 4 B`` (int32), in model load.
    A GPU whose SM count the catalog does not state gets a zero placeholder naming it."""
    from memprof.core.capability import marlin_min_cc
    from memprof.core.weights.formats import marlin_blocks
    from memprof.core.weights.rank import rank_weights

    q = ctx.quant
    cc = marlin_min_cc(ctx.dep.engine_version, ctx.dep.engine)
    if q is None or not (q.method == "mxfp4" or marlin_blocks(q, ctx.gpu.arch, marlin_cc=cc)):
        return []  # no Marlin layer (the common case): nothing to build
    tensors = rank_weights(ctx.spec, ctx.dep, q, ctx.coord, ctx.gpu.arch)
    linear = sum(t.count for t in tensors if t.marlin_blocks == 1)
    moe = sum(t.count for t in tensors if t.marlin_blocks == 4)
    if not linear and not moe:
        return []
    if workspace_per_output(ctx.dep.engine_version):
        # before 0.9.0 only the AWQ / GPTQ MoE methods run Marlin experts, from 0.8.5
        held = moe_workspace_held(ctx.dep.engine_version) and q.method in ("awq", "gptq")
        return _per_output(tensors, (ctx.gpu.sm_count or 0) if held else 0)
    sms = ctx.gpu.sm_count
    if sms is None:
        return [Component(name="Marlin workspaces", category="weights", bytes=0,
                          count=linear + moe, placeholder=True,
                          formula=f"{ctx.gpu.name}: SM count not in the catalog; each of "
                          f"{linear} linear(s) holds SMs × 4 B and each of {moe} MoE "
                          "layer(s) SMs × 16 B (not counted)")]
    per_linear, per_moe = sms * 4, sms * 4 * 4
    total = linear * per_linear + moe * per_moe
    return [Component(name="Marlin workspaces", category="weights", bytes=total,
                      count=linear + moe, where="budget", profiled=True,
                      formula=f"{linear} Marlin linear(s) × {sms} SMs × 4 B + {moe} MoE "
                      f"layer(s) × {sms} SMs × 4 blocks × 4 B (int32, "
                      "marlin_make_workspace_new)")]
