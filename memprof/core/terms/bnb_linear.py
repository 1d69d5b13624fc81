"""What vLLM's bitsandbytes 4-bit linears add to a forward beyond a GEMM: the weight each call
dequantises (a live tensor of the profile run and of every captured graph's private pool) and
the kernels each call launches (kernel nodes of every captured graph).

vLLM 0.6.4.post1 to 0.8.0 (``model_executor/layers/quantization/bitsandbytes.py``
``BitsAndBytesLinearMethod._apply_4bit_weight``, the same code in each wheel read) runs one
linear as::

    bf_x = x.to(torch.bfloat16)                       # a cast kernel unless x is bf16
    out = torch.empty(T, Σ shard rows, bfloat16)
    for each shard i (one quant state per sub-weight the checkpoint stores: q, k, v; gate, up)
        out[:, a:b] = matmul_4bit(bf_x, qweight[offsets[i]:offsets[i+1]].t(), quant_states[i])
    out = out.to(original_type)                       # a cast kernel unless the model is bf16

and bitsandbytes' ``matmul_4bit`` (``bitsandbytes/autograd/_functions.py``, read in 0.45.2, the
release of Feb 2025 [assumption: the logs name no bitsandbytes release]) takes
``MatMul4Bit.forward`` for more than one row: ``F.dequantize_4bit`` (``functional.py``: with
double quantisation ``dequantize_blockwise`` of the uint8 absmax into a new fp32 tensor, one
kernel, and ``absmax += offset``, one more; then the 4-bit kernel into a new tensor of the
weight's shape in the quant state's dtype), ``.to(A.dtype)`` (the same 16-bit dtype: no kernel
[assumption: the checkpoint's 16-bit dtype is bfloat16, as vLLM casts the input to]) and
``torch.nn.functional.linear`` (one GEMM); the slice assignment copies the result into ``out``
(one kernel). Per shard: one GEMM and four other kernels; per linear two casts where the model
dtype is not bfloat16. A single row takes ``gemv_4bit`` instead (the dequantised absmax, the
offset, one gemv kernel: a kernel node instead of the dequantisation and the GEMM), which this
counts as the others [approximation: one node a shard fewer in the size-1 graph].

The dequantised shard ``[rows, in]`` (2 B an element) and its fp32 absmax (4 B per 64 elements)
are live together while the GEMM runs: the largest shard of the rank is a live set of its own
(``bnb_dequant_stage``), in the profile run and in the graphs' pool.
"""

from __future__ import annotations

from memprof.base.units import cdiv
from memprof.core.components import TermContext
from memprof.core.terms.common import Stage
from memprof.core.versions import Rule, value_at

# bitsandbytes' 4-bit block size (``quantize_4bit``'s default, every HF-saved checkpoint's)
BNB_BLOCK = 64

# Whether the release's bitsandbytes linear is the loop above (read in these wheels); later
# releases are not read and charge nothing
BNB_APPLY_LOOP: tuple[Rule, ...] = (
    Rule(name="bnb_apply_loop", changes="bitsandbytes linears: dequantised weight and kernels",
         since="0.6.4", until="0.8.0", value=True,
         introduced_by="read first in 0.6.4.post1 (0.6.4 not read)",
         removed_by="V1 by default (0.8.0; its V0 keeps the loop)",
         source="0.6.4.post1 / 0.7.1 / 0.7.3 model_executor/layers/quantization/bitsandbytes.py "
         "BitsAndBytesLinearMethod._apply_4bit_weight; bitsandbytes 0.45.2 "
         "autograd/_functions.py matmul_4bit, MatMul4Bit.forward, functional.py "
         "dequantize_4bit", applies_to="bnb"),
    Rule(name="bnb_apply_loop", changes="bitsandbytes linears: dequantised weight and kernels",
         since="0.8.0", until="0.8.1", value=True, generation="v0",
         introduced_by="V1 by default (0.8.0; its V0 keeps the loop)",
         removed_by="not read after 0.8.0", source="0.8.0 model_executor/layers/quantization/"
         "bitsandbytes.py BitsAndBytesLinearMethod._apply_4bit_weight", applies_to="bnb"),
)

RULES = (BNB_APPLY_LOOP,)

# kernels of one shard (besides its GEMM) and of one linear's casts
SHARD_KERNELS = 4
CAST_KERNELS = 2


def _shards(module: str) -> int:
    """Quant states of one of memprof's linear tensors: vLLM's loader keeps one per sub-weight
    the checkpoint stores (``bnb_shard_offsets``): ``qkv_proj(kv)`` holds k and v,
    ``gate_up_proj`` gate and up, every other tensor one."""
    return 2 if module.endswith(("(kv)", "gate_up_proj")) else 1


def _linears(ctx: TermContext) -> list[tuple[str, int, int]]:
    """(module, layers, elements) of the rank's bitsandbytes 4-bit linear tensors; none where
    the release's linear is not the loop (``BNB_APPLY_LOOP``) or the rank holds none."""
    q, dep = ctx.quant, ctx.dep
    if q is None or q.method != "bnb4":
        return []
    if not value_at(BNB_APPLY_LOOP, dep.engine_version, False, dep.engine):
        return []
    from memprof.core.weights import rank_weights

    out = []
    for t in rank_weights(ctx.spec, dep, q, ctx.coord, ctx.gpu.arch):
        weight = next((p for p in t.params if p.name == "weight"), None)
        if weight is None or not any(p.name == "absmax" for p in t.params):
            continue
        packed = 1
        for d in weight.shape:
            packed *= d
        out.append((t.module, t.count, 2 * packed))  # two 4-bit elements a byte
    return out


def bnb_graph_nodes(ctx: TermContext) -> tuple[int, int]:
    """(GEMM nodes, other nodes) one capture size's graph adds to the one GEMM the node counts
    give each linear (module docstring): per linear of ``s`` shards ``s − 1`` GEMMs, ``4·s``
    other kernels and two casts where the model dtype is not bfloat16 (``qkv_proj(q)`` and
    ``qkv_proj(kv)`` are one linear)."""
    gemm = other = 0
    casts = CAST_KERNELS if ctx.model_dtype != "bfloat16" else 0
    for module, layers, _n in _linears(ctx):
        s = _shards(module)
        second = module.endswith("(kv)")  # the rest of qkv_proj, whose GEMM and casts are q's
        gemm += layers * (s if second else s - 1)
        other += layers * (SHARD_KERNELS * s + (0 if second else casts))
    return gemm, other


def bnb_dequant_stage(ctx: TermContext) -> Stage | None:
    """The live set of the rank's largest dequantised shard: its 16-bit weight and its fp32
    absmax (module docstring); None without bitsandbytes linears at the release."""
    largest = max((n // _shards(m) for m, _l, n in _linears(ctx)), default=0)
    if not largest:
        return None
    return Stage("bitsandbytes dequantised shard", (
        ("dequantised weight (16-bit)", 2 * largest),
        (f"absmax fp32 [{cdiv(largest, BNB_BLOCK)}]", 4 * cdiv(largest, BNB_BLOCK))))
