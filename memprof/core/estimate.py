"""The estimate: every rank's memory, the engine's KV budget, blocks, tokens and the verdict.

vLLM budget (``reference/internals.md`` §1.2, vLLM@52a31cc ``determine_available_memory``)::

    requested = ceil(gpu_memory_utilization × total)
    KV        = requested − weights − activation peak − non-torch increase − CUDA-graph estimate
              (or --kv-cache-memory verbatim)
    blocks    = min over the workers of one engine of KV // block bytes
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from memprof.core.components import Component, TermContext, TermFn
from memprof.core.deployment import Deployment, RankCoord, ranks, validate
from memprof.core.errors import BadInput
from memprof.core.gpus import GPU, resolve_gpu
from memprof.core.kvcache import (
    KVCapacity,
    KVPlan,
    capacity_from_blocks,
    kv_plan,
    max_fitting_model_len,
)
from memprof.core.models import ModelSpec, QuantConfig, load_model, quant_from_flag
from memprof.core.units import GiB, fmt_bytes
from memprof.core.weights import WeightGroup, WeightTensor, group_weights, model_dtype

SCHEMA_VERSION = 1
VERDICTS = ("fits", "runtime_oom", "startup_oom")  # in increasing severity


@dataclass(frozen=True, slots=True, kw_only=True)
class RankEstimate:
    coord: RankCoord
    same_as: tuple[int, ...]  # global ranks with an identical estimate (this one included)
    components: tuple[Component, ...]
    tensors: tuple[WeightTensor, ...]
    plan: KVPlan
    requested_bytes: int
    available_kv_bytes: int
    kv: KVCapacity
    estimated_max_model_len: int
    verdict: str
    reasons: tuple[str, ...]

    @property
    def weights_bytes(self) -> int:
        return sum(c.bytes for c in self.components if c.category == "weights")

    def category_bytes(self, category: str) -> int:
        return sum(c.bytes for c in self.components if c.category == category)


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    spec: ModelSpec
    deployment: Deployment  # with every default resolved
    gpu: GPU
    quant: QuantConfig | None
    model_dtype: str
    max_model_len: int
    max_num_batched_tokens: int
    ranks: tuple[RankEstimate, ...]  # distinct ranks only (identical ones folded)
    verdict: str
    reasons: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def kv_cache_tokens(self) -> int:
        return min(r.kv.tokens for r in self.ranks)

    @property
    def max_concurrency(self) -> float:
        return min(r.kv.max_concurrency for r in self.ranks)

    @property
    def kv_cache_bytes_per_token(self) -> int:
        return max(r.plan.bytes_per_token for r in self.ranks)

    @property
    def weights_bytes_max(self) -> int:
        return max(r.weights_bytes for r in self.ranks)


# --- defaults ------------------------------------------------------------------------------------


def batch_defaults(gpu: GPU) -> tuple[int, int]:
    """``vllm serve`` defaults for (max_num_batched_tokens, max_num_seqs) by GPU memory.

    vLLM 0.33.0 ``EngineArgs.get_batch_defaults`` (engine/arg_utils.py, OPENAI_API_SERVER):
    ≥ 160 GiB: 16384 / 1024; ≥ 70 GiB and not an A100: 8192 / 1024; otherwise 2048 / 256.
    """
    gib = gpu.total_bytes / GiB
    if gib >= 160:
        return 16384, 1024
    if gib >= 70 and not gpu.name.upper().startswith("A100"):
        return 8192, 1024
    return 2048, 256


def resolve(dep: Deployment, spec: ModelSpec, gpu: GPU) -> Deployment:
    mnbt, seqs = batch_defaults(gpu)
    resolved = dep.with_(
        max_model_len=dep.max_model_len or spec.max_position_embeddings,
        max_num_batched_tokens=dep.max_num_batched_tokens or mnbt,
        max_num_seqs=dep.max_num_seqs or seqs,
    )
    assert resolved.max_num_batched_tokens is not None and resolved.max_num_seqs is not None
    if resolved.max_num_batched_tokens < resolved.max_num_seqs:
        raise BadInput(
            f"--max-num-batched-tokens ({resolved.max_num_batched_tokens}) is smaller than "
            f"--max-num-seqs ({resolved.max_num_seqs})",
            hint="vLLM refuses this; raise --max-num-batched-tokens or lower --max-num-seqs",
        )
    return resolved


# --- the terms between the weights and the KV cache -------------------------------------------

def placeholder_terms(ctx: TermContext) -> list[Component]:
    """Terms not modelled yet: shown, labelled, and zero."""
    del ctx
    return [
        Component(name="activation peak (profile run)", category="activation", bytes=0,
                  formula="not modelled yet", placeholder=True),
        Component(name="non-torch increase (profile run)", category="non_torch", bytes=0,
                  formula="not modelled yet", placeholder=True),
        Component(name="CUDA-graph estimate", category="cudagraph", bytes=0,
                  formula="not modelled yet", placeholder=True),
    ]


TERMS: list[TermFn] = [placeholder_terms]


# --- the estimate --------------------------------------------------------------------------------


def _weight_components(groups: list[WeightGroup]) -> list[Component]:
    """Report rows of a rank's weights: ``count × each`` per group of equal-sized layers."""
    return [
        Component(name=g.group, category="weights", bytes=g.count * g.bytes_each, count=g.count,
                  formula=", ".join(g.modules[:8]) + (" …" if len(g.modules) > 8 else ""))
        for g in groups
    ]


def _rank_key(r: RankEstimate) -> tuple[object, ...]:
    return (r.components, r.tensors, r.kv, r.verdict, r.coord.pp_stage)


def estimate(model: str | ModelSpec, dep: Deployment, *, gpu_name: str | None = None,
             gpu_memory_bytes: int | None = None, terms: list[TermFn] | None = None) -> Estimate:
    """Estimate every rank of a deployment."""
    gpu = resolve_gpu(gpu_name, gpu_memory_bytes)
    spec = model if isinstance(model, ModelSpec) else load_model(
        model, speculative_mtp=dep.num_speculative_tokens > 0)
    validate(dep, spec)
    dep = resolve(dep, spec, gpu)
    quant = quant_from_flag(dep.quantization, spec) if dep.quantization else spec.quant
    dtype = model_dtype(spec, dep)
    mml = dep.max_model_len
    mnbt = dep.max_num_batched_tokens
    assert mml is not None and mnbt is not None
    term_fns = TERMS if terms is None else terms
    requested = math.ceil(dep.gpu_memory_utilization * gpu.total_bytes)

    # pass 1: every rank's weights, terms, and the KV memory it offers
    raw: list[tuple[RankCoord, list[WeightTensor], list[Component], KVPlan, int]] = []
    cache: dict[tuple[int, int | None], tuple[list[WeightTensor], list[Component], KVPlan]] = {}
    for coord in ranks(dep):
        n_exp = None if coord.ep_rank is None else _expert_key(spec, dep, coord.ep_rank)
        key = (coord.pp_stage, n_exp)
        if key not in cache:
            tensors, groups = group_weights(spec, dep, quant, coord, gpu.arch)
            plan = kv_plan(spec, dep, coord, dtype, gpu.arch)
            weights = _weight_components(groups)
            wbytes = sum(c.bytes for c in weights)
            ctx = TermContext(spec=spec, dep=dep, gpu=gpu, coord=coord, plan=plan,
                              weights_bytes=wbytes, model_dtype=dtype)
            extra = [c for fn in term_fns for c in fn(ctx)]
            cache[key] = (tensors, weights + extra, plan)
        tensors, comps, plan = cache[key]
        budgeted = sum(c.bytes for c in comps if c.in_budget and c.profiled)
        available = dep.kv_cache_memory_bytes if dep.kv_cache_memory_bytes else requested - budgeted
        raw.append((coord, tensors, comps, plan, available))

    # pass 2: one engine (a DP rank's TP×PP workers) uses the smallest block count of its workers
    min_blocks: dict[int, int] = {}
    for coord, _t, _c, plan, available in raw:
        blocks = max(0, available // plan.block_bytes) if available > 0 else 0
        min_blocks[coord.dp_rank] = min(min_blocks.get(coord.dp_rank, blocks), blocks)

    rank_estimates: list[RankEstimate] = []
    for coord, tensors, comps, plan, available in raw:
        cap = capacity_from_blocks(plan, min_blocks[coord.dp_rank], mml, mnbt)
        kv_comp = Component(name="KV cache", category="kv_cache", bytes=cap.kv_cache_bytes,
                            count=cap.num_gpu_blocks or 1,
                            formula=f"{cap.num_gpu_blocks} blocks × {plan.block_bytes} B "
                            f"({plan.formula})")
        verdict, reasons = _verdict(plan, available, cap, mml, mnbt, spec)
        est_len = max_fitting_model_len(plan, available, mnbt, mml)
        rank_estimates.append(RankEstimate(
            coord=coord, same_as=(coord.rank,), components=(*comps, kv_comp),
            tensors=tuple(tensors), plan=plan, requested_bytes=requested,
            available_kv_bytes=available, kv=cap, estimated_max_model_len=est_len,
            verdict=verdict, reasons=tuple(reasons)))

    folded = _fold(rank_estimates)
    worst = max(folded, key=lambda r: VERDICTS.index(r.verdict))
    all_reasons = tuple(dict.fromkeys(x for r in folded for x in r.reasons))
    notes = _notes(spec, dep, quant, gpu, term_fns)
    return Estimate(spec=spec, deployment=dep, gpu=gpu, quant=quant, model_dtype=dtype,
                    max_model_len=mml, max_num_batched_tokens=mnbt, ranks=tuple(folded),
                    verdict=worst.verdict, reasons=all_reasons, notes=notes)


def _expert_key(spec: ModelSpec, dep: Deployment, ep_rank: int) -> int:
    from memprof.core.deployment import experts_on_rank

    return experts_on_rank(spec.num_experts, dep.ep_size, ep_rank)


def _fold(rows: list[RankEstimate]) -> list[RankEstimate]:
    out: dict[tuple[object, ...], RankEstimate] = {}
    for r in rows:
        k = _rank_key(r)
        if k in out:
            out[k] = replace(out[k], same_as=(*out[k].same_as, r.coord.rank))
        else:
            out[k] = r
    return list(out.values())


def _verdict(plan: KVPlan, available: int, cap: KVCapacity, mml: int, mnbt: int,
             spec: ModelSpec) -> tuple[str, list[str]]:
    if available <= 0 or cap.num_gpu_blocks == 0:
        return "startup_oom", [
            f"No available memory for the cache blocks: the budget leaves {fmt_bytes(available)} "
            "for the KV cache"]
    if cap.request_bytes > cap.kv_cache_bytes:
        est = max_fitting_model_len(plan, cap.kv_cache_bytes, mnbt, mml)
        return "startup_oom", [
            f"one request of max_model_len {mml} needs {fmt_bytes(cap.request_bytes)} of KV cache "
            f"but {fmt_bytes(cap.kv_cache_bytes)} is available; estimated maximum model length "
            f"is {est}"]
    del spec
    return "fits", []


def _notes(spec: ModelSpec, dep: Deployment, quant: QuantConfig | None, gpu: GPU,
           terms: list[TermFn]) -> tuple[str, ...]:
    notes: list[str] = []
    if quant is not None and quant.source == "flag":
        notes.append(f"--quantization {dep.quantization}: sized as vLLM quantises an unquantised "
                     f"checkpoint ({quant.method})")
    if not gpu.exact:
        notes.append(f"{gpu.name}: the catalog's total memory is rounded or inferred "
                     "(see configs/gpus.json); pass --gpu-memory for an exact figure")
    if gpu.arch == "unknown":
        notes.append("GPU architecture unknown (--gpu-memory alone): kernel padding and "
                     "default backends follow generic rules; add --gpu for the exact ones")
    if terms is TERMS and placeholder_terms in terms:
        notes.append("activation peak, non-torch increase and CUDA-graph estimate are "
                     "placeholders (not modelled yet): the KV budget is an upper bound")
    del spec
    return tuple(notes)
