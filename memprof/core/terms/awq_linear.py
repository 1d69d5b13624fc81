"""What vLLM's AWQ linear (not Marlin) holds from 256 tokens up: the whole weight dequantised for
one dense matmul, a live tensor of the profile run and of every captured graph of 256 tokens or
more.

vLLM's ``AWQLinearMethod.apply`` (model_executor/layers/quantization/awq.py, read in the 0.6.5
and 0.13.0 wheels; ``AutoAWQLinearMethod.apply`` of auto_awq.py in 0.33.0, the same code) runs a
linear as::

    FP16_MATMUL_HEURISTIC_CONDITION = x.shape[:-1].numel() >= 256
    if FP16_MATMUL_HEURISTIC_CONDITION:
        out = ops.awq_dequantize(qweight, scales, qzeros, 0, 0, 0)   # [in, out], scales' dtype
        out = torch.matmul(reshaped_x, out)                          # [T, out]
    else:
        out = ops.awq_gemm(reshaped_x, qweight, scales, qzeros, pack_factor)

so at 256 tokens or more every call makes a 16-bit copy of the whole weight shard ([in, out] in
the scales' dtype: vLLM's AWQ runs float16) and the matmul's output beside it, and frees the
copy when the call returns. Below 256 tokens the fused ``awq_gemm`` kernel makes no copy. This is
the method vLLM runs for ``--quantization awq`` ("forcing awq" over awq_marlin) and for an AWQ
checkpoint on a GPU below compute capability 8.0; on sm80+ an AWQ checkpoint runs
``AWQMarlinLinearMethod`` (``memprof.core.terms.marlin_repack``), which makes none.

The largest such live set of the rank is a stage of its own (``awq_dequant_stage``): the layer's
residual and input (``_base``), the linear's input where it is not the layer input (o_proj's
attention output, down_proj's activation), the dequantised weight and the matmul's output. It
enters the profile run's peak (T = ``max_num_batched_tokens``) and each captured graph's decode
live sets of 256 tokens or more (``memprof.core.terms.cudagraph``), both through
``activation_stages``. Not counted [approximation]: the extra kernel node the dequantisation adds
to each linear of those graphs (about 2.3-10 KiB a node of driver memory).
"""

from __future__ import annotations

from memprof.core.components import TermContext
from memprof.core.dtypes import dtype_bytes
from memprof.core.terms.common import Stage, model_bytes
from memprof.core.versions import Rule, value_at

# The token count from which the linear dequantises (the heuristic's threshold), by release
AWQ_DENSE_MATMUL: tuple[Rule, ...] = (
    Rule(name="awq_dense_matmul_tokens",
         changes="AWQ linears (not Marlin): dequantised weight from 256 tokens",
         since="0.6.5", until=None, value=256,
         introduced_by="read first in 0.6.5 (earlier releases not read)",
         source="0.6.5 / 0.13.0 model_executor/layers/quantization/awq.py "
         "AWQLinearMethod.apply; 0.33.0 auto_awq.py AutoAWQLinearMethod.apply: "
         "FP16_MATMUL_HEURISTIC_CONDITION = x.shape[:-1].numel() >= 256, then "
         "ops.awq_dequantize(...) and torch.matmul", applies_to="marlin"),
)
RULES = (AWQ_DENSE_MATMUL,)


def _plain_awq(ctx: TermContext) -> bool:
    """Does the rank run vLLM's AWQ linear, not Marlin: ``--quantization awq`` exactly (vLLM
    "forcing awq", on a checkpoint that declares AWQ too: awq_marlin.py
    ``AWQMarlinConfig.override_quantization_method`` returns awq_marlin only where the user
    asked for it or for none), or an AWQ checkpoint on a CUDA GPU below compute capability 8.0?
    ``--quantization awq_marlin`` is Marlin's."""
    from memprof.core.weights.formats import _cuda_sm

    q = ctx.quant
    if q is None or q.method != "awq":
        return False
    if q.source == "forced" or (q.source == "flag" and not q.marlin):
        return True  # --quantization awq: AWQMarlinConfig.override_quantization_method
    if q.source != "config":
        return False  # --quantization awq_marlin
    sm = _cuda_sm(ctx.gpu.arch) if ctx.gpu.arch != "unknown" else 0
    return 0 < sm < 80


def _linear_base(module: str) -> str:
    """vLLM's linear of one of memprof's tensors: ``qkv_proj(q)`` and ``qkv_proj(kv)`` are one
    ``QKVParallelLinear``."""
    return module.split("(")[0]


def awq_linears(ctx: TermContext) -> list[tuple[str, int, int, int]]:
    """(linear, in features, out features, bytes an element of the dequantised copy) of the
    rank's AWQ linears where the release dequantises (``AWQ_DENSE_MATMUL``); [] elsewhere."""
    dep = ctx.dep
    if not _plain_awq(ctx) or value_at(AWQ_DENSE_MATMUL, dep.engine_version, None,
                                       dep.engine) is None:
        return []
    from memprof.core.weights import rank_weights

    group = ctx.quant.group_size if ctx.quant is not None and ctx.quant.group_size else 128
    dims: dict[str, list[int]] = {}
    for t in rank_weights(ctx.spec, dep, ctx.quant, ctx.coord, ctx.gpu.arch):
        scales = next((p for p in t.params if p.name == "scales"), None)
        if scales is None or not any(p.name == "qweight" for p in t.params) or \
                "experts" in t.module:
            continue
        groups, out = scales.shape[0], scales.shape[1]
        base = _linear_base(t.module)
        row = dims.setdefault(base, [groups * group, 0, dtype_bytes(scales.dtype)])
        row[1] += out
    return [(m, i, o, b) for m, (i, o, b) in dims.items()]


def awq_dequant_stage(ctx: TermContext, tokens: int,
                      base: list[tuple[str, int]]) -> Stage | None:
    """The live set of the rank's AWQ linear whose dequantised call holds the most at ``tokens``
    (module docstring), on top of the layer's ``base``; None below the release's threshold or
    without such linears."""
    dep = ctx.dep
    threshold = value_at(AWQ_DENSE_MATMUL, dep.engine_version, None, dep.engine)
    if not isinstance(threshold, int) or tokens < threshold:
        return None
    s, h = model_bytes(ctx), ctx.spec.hidden_size
    best: tuple[int, list[tuple[str, int]]] | None = None
    for module, inn, out, b in awq_linears(ctx):
        parts = ([] if inn == h else [(f"{module.rsplit('.', 1)[-1]} input [T,{inn}]",
                                       tokens * inn * s)])
        parts += [(f"dequantised {module.rsplit('.', 1)[-1]} [{inn},{out}]", inn * out * b),
                  (f"matmul out [T,{out}]", tokens * out * s)]
        total = sum(n for _l, n in parts)
        if best is None or total > best[0]:
            best = (total, parts)
    if best is None:
        return None
    return Stage("AWQ dequantised linear", tuple(base + best[1]))
