"""Weight-only quantised linears that dequantise the whole weight shard on every call (vLLM's AWQ
linear from 256 tokens, its GPTQ linear on every call): a 16-bit copy of the weight, live beside
the matmul's output, in the profile run and in every captured graph it happens in.

**AWQ, not Marlin.** vLLM's ``AWQLinearMethod.apply`` (model_executor/layers/quantization/awq.py,
read in the 0.6.5 and 0.13.0 wheels; ``AutoAWQLinearMethod.apply`` of auto_awq.py in 0.33.0, the
same code) runs a linear as::

    FP16_MATMUL_HEURISTIC_CONDITION = x.shape[:-1].numel() >= 256
    if FP16_MATMUL_HEURISTIC_CONDITION:
        out = ops.awq_dequantize(qweight, scales, qzeros, 0, 0, 0)   # [in, out], scales' dtype
        out = torch.matmul(reshaped_x, out)                          # [T, out]
    else:
        out = ops.awq_gemm(reshaped_x, qweight, scales, qzeros, pack_factor)

so from 256 tokens every call makes a 16-bit copy of the whole weight shard and the matmul's
output beside it, and frees the copy when it returns; below 256 the fused ``awq_gemm`` makes
none. vLLM runs it for ``--quantization awq`` ("forcing awq" over awq_marlin) and for an AWQ
checkpoint below compute capability 8.0; on sm80+ an AWQ checkpoint runs ``AWQMarlinLinearMethod``
(``memprof.core.terms.marlin_repack``), which makes none.

**GPTQ, not Marlin.** vLLM's ``GPTQLinearMethod.apply`` (gptq.py, read in the 0.6.5, 0.8.5.post1,
0.13.0 and 0.20.0 wheels) calls ``ops.gptq_gemm``, whose CUDA op (csrc/quantization/gptq/
q_gemm.cu ``gptq_gemm``, vllm-project/vllm@6ab6cdd) allocates, on every call and at any token
count, ``c = torch::empty({a.size(0), b_q_weight.size(1)})`` and
``temp_dq = torch::empty({b_q_weight.size(0) * 32 / bit, b_q_weight.size(1)})`` in the input's
dtype: the [in, out] weight, which the exllama kernels reconstruct into for a cuBLAS GEMM above
a few rows. vLLM runs it for ``--quantization gptq`` ("forcing gptq") and for a GPTQ checkpoint
that gptq_marlin does not take (not Marlin-compatible, or below compute capability 8.0); on sm80+
gptq_marlin runs Marlin or Machete, which make none. Releases from 0.21.0 are not read (0.27.1
has no gptq.py: its auto_gptq.py chooses a mixed-precision kernel), so nothing is charged there
[approximation].

The largest such live set of the rank is a stage of its own (``dequant_stage``): the layer's
residual and input (``activation._base``), the linear's input where it is not the layer input
(o_proj's attention output, down_proj's activation), the 16-bit copy and the matmul's output. It
enters the profile run's peak (T = ``max_num_batched_tokens``) and each captured graph's decode
live sets where the method dequantises at that size (``memprof.core.terms.cudagraph``), both
through ``activation_stages``. Not counted [approximation]: the extra kernel nodes the
dequantisation adds to each linear of those graphs (2.3-10 KiB of driver memory a node).
"""

from __future__ import annotations

from memprof.core.components import TermContext
from memprof.core.dtypes import dtype_bytes
from memprof.core.terms.common import Stage, model_bytes
from memprof.core.versions import Rule, value_at

# The token count from which each method's linear dequantises its weight, by release
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
GPTQ_GEMM_TEMP: tuple[Rule, ...] = (
    Rule(name="gptq_gemm_dequantised_weight",
         changes="GPTQ linears (not Marlin): dequantised weight on every call",
         since="0.6.5", until="0.21.0", value=1,
         introduced_by="read first in 0.6.5 (earlier releases not read)",
         removed_by="not read after 0.20.0 (0.27.1: auto_gptq.py, no GPTQLinearMethod)",
         source="0.6.5 / 0.8.5.post1 / 0.13.0 / 0.20.0 model_executor/layers/quantization/"
         "gptq.py GPTQLinearMethod.apply: ops.gptq_gemm(...); csrc/quantization/gptq/q_gemm.cu "
         "gptq_gemm (vllm-project/vllm@6ab6cdd): at::Tensor temp_dq = torch::empty("
         "{b_q_weight.size(0) * 32 / bit, b_q_weight.size(1)}, options) on every call",
         applies_to="marlin"),
)
RULES = (AWQ_DENSE_MATMUL, GPTQ_GEMM_TEMP)


def _sm(ctx: TermContext) -> int:
    from memprof.core.weights.formats import _cuda_sm

    return _cuda_sm(ctx.gpu.arch) if ctx.gpu.arch != "unknown" else 0


def _marlin_cc(ctx: TermContext) -> int:
    from memprof.core.capability import marlin_min_cc

    return marlin_min_cc(ctx.dep.engine_version, ctx.dep.engine)


def _plain_awq(ctx: TermContext) -> bool:
    """Does the rank run vLLM's AWQ linear, not Marlin: ``--quantization awq`` where it forces
    the plain kernel (vLLM "forcing awq", on a checkpoint that declares AWQ too: awq_marlin.py
    ``AWQMarlinConfig.override_quantization_method`` returns awq_marlin only where the user asked
    for it or for none: ``QuantConfig.source`` "forced"; up to 0.23.0), or AWQ on Marlin's
    terms (a checkpoint, ``--quantization awq_marlin``, and from 0.24.0 ``--quantization awq``,
    which AutoAWQConfig serves) on a CUDA GPU below Marlin's smallest compute capability
    (``capability.marlin_min_cc``: 8.0, 7.5 from 0.14.0)? Below it the checkpoint is not
    converted (check_marlin_supported fails), and 0.24.0 auto_awq.py
    ``AutoAWQConfig.get_quant_method`` returns AutoAWQLinearMethod where it fails."""
    q = ctx.quant
    if q is None or q.method != "awq":
        return False
    if q.source == "forced" or (q.source == "flag" and not q.marlin):
        return True
    if q.source not in ("config", "flag"):
        return False
    return 0 < _sm(ctx) < _marlin_cc(ctx)


def _plain_gptq(ctx: TermContext) -> bool:
    """Does the rank run vLLM's GPTQ linear, not Marlin or Machete: ``--quantization gptq``
    ("forcing gptq": ``QuantConfig.marlin`` False), a checkpoint gptq_marlin does not take, or a
    CUDA GPU below Marlin's smallest compute capability (``capability.marlin_min_cc``: 8.0,
    7.5 from 0.14.0; from 0.22.0 AutoGPTQConfig's kernel choice, model_executor/kernels/linear
    choose_mp_linear_kernel, passes MarlinLinearKernel below it for ExllamaLinearKernel)?"""
    q = ctx.quant
    if q is None or q.method != "gptq":
        return False
    return not q.marlin or 0 < _sm(ctx) < _marlin_cc(ctx)


def _linear_base(module: str) -> str:
    """vLLM's linear of one of memprof's tensors: ``qkv_proj(q)`` and ``qkv_proj(kv)`` are one
    ``QKVParallelLinear``."""
    return module.split("(")[0]


def dequant_threshold(ctx: TermContext) -> int | None:
    """The token count from which the rank's quantised linears dequantise (256 for AWQ, 1 for
    GPTQ), or None where they do not at the release."""
    dep = ctx.dep
    if _plain_awq(ctx):
        rows = AWQ_DENSE_MATMUL
    elif _plain_gptq(ctx):
        rows = GPTQ_GEMM_TEMP
    else:
        return None
    value = value_at(rows, dep.engine_version, None, dep.engine)
    return value if isinstance(value, int) else None


def dequant_linears(ctx: TermContext) -> list[tuple[str, int, int, int]]:
    """(linear, in features, out features, bytes an element of the 16-bit copy) of the rank's
    linears that dequantise at the release (``dequant_threshold``); [] elsewhere."""
    if dequant_threshold(ctx) is None:
        return []
    from memprof.core.weights import rank_weights

    q = ctx.quant
    group = q.group_size if q is not None and q.group_size and q.group_size > 0 else 128
    dims: dict[str, list[int]] = {}
    for t in rank_weights(ctx.spec, ctx.dep, q, ctx.coord, ctx.gpu.arch):
        scales = next((p for p in t.params if p.name == "scales"), None)
        if scales is None or not any(p.name == "qweight" for p in t.params) or \
                "experts" in t.module:
            continue
        groups, out = scales.shape[0], scales.shape[1]
        row = dims.setdefault(_linear_base(t.module),
                              [groups * group, 0, dtype_bytes(scales.dtype)])
        row[1] += out
    return [(m, i, o, b) for m, (i, o, b) in dims.items()]


def dequant_stage(ctx: TermContext, tokens: int, base: list[tuple[str, int]]) -> Stage | None:
    """The live set of the rank's linear whose dequantised call holds the most at ``tokens``
    (module docstring), on top of the layer's ``base``; None below the method's threshold or
    without such linears."""
    threshold = dequant_threshold(ctx)
    if threshold is None or tokens < threshold:
        return None
    s, h = model_bytes(ctx), ctx.spec.hidden_size
    best: tuple[int, list[tuple[str, int]]] | None = None
    for module, inn, out, b in dequant_linears(ctx):
        name = module.rsplit(".", 1)[-1]
        parts = [] if inn == h else [(f"{name} input [T,{inn}]", tokens * inn * s)]
        parts += [(f"dequantised {name} [{inn},{out}]", inn * out * b),
                  (f"matmul out [T,{out}]", tokens * out * s)]
        total = sum(n for _l, n in parts)
        if best is None or total > best[0]:
            best = (total, parts)
    if best is None:
        return None
    what = "AWQ" if ctx.quant is not None and ctx.quant.method == "awq" else "GPTQ"
    return Stage(f"{what} dequantised linear", tuple(base + best[1]))
