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

from memprof.base.errors import BadInput
from memprof.base.units import GiB, MiB, fmt_bytes
from memprof.core.components import Component, TermContext, TermFn
from memprof.core.deployment import Deployment, RankCoord, ranks, validate
from memprof.core.gpus import GPU, resolve_gpu
from memprof.core.kvcache import (
    KVCapacity,
    KVPlan,
    capacity_from_blocks,
    kv_plan,
    max_fitting_model_len,
)
from memprof.core.models import ModelSpec, QuantConfig, load_model, quant_from_flag
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
    headroom_bytes: int = 0
    # per scratch buffer: (name, bytes with per-layer buffers, bytes with one shared buffer)
    scratch_savings: tuple[tuple[str, int, int], ...] = ()

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
    mem_fraction_static: float | None = None

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


def default_terms() -> tuple[list[TermFn], list[TermFn]]:
    """(terms known before the KV cache is sized, runtime terms that need its size)."""
    from memprof.core import scratch, terms

    return ([scratch.scratch_budget_terms, *terms.BUDGET_TERMS],
            [scratch.scratch_runtime_terms, *terms.RUNTIME_TERMS])


# --- SGLang --------------------------------------------------------------------------------------


def sglang_defaults(gpu: GPU, dep: Deployment) -> tuple[int, int, float]:
    """SGLang's (chunked_prefill_size, cuda_graph_max_bs, mem_fraction_static) heuristics.

    ``server_args.py::_handle_gpu_memory_settings`` (SGL@d315eb7, ``reference/internals.md``
    §4.2), sizes in MiB::

        reserved = 512 + 1.5·max(chunked_prefill_size, 2048) + tp·pp/8·1024 + reserve_for_graph
        reserve_for_graph = 2·max_bs [+ 3·max_bs·dp (+1.5·max_bs·dp if max_bs > 300) with DP attn]
        reserved = max(reserved, 10 GiB) if the GPU has more than 60 GiB
        mem_fraction_static = round((gpu_mem − reserved) / gpu_mem, 3)
    """
    gib = gpu.total_bytes / GiB
    tiers = ((20, 2048, 8, 8), (35, 2048, 24, 80), (60, 4096, 32, 160), (90, 8192, 256, 512),
             (160, 8192, 256, 512), (math.inf, 16384, 512, 512))
    tier = next(t for t in tiers if gib < t[0])
    chunk = dep.chunked_prefill_size or tier[1]
    max_bs = dep.cuda_graph_max_bs or (tier[2] if dep.tp < 4 else tier[3])
    graph: float = 2 * max_bs
    if dep.enable_dp_attention:
        graph += 3 * max_bs * dep.dp + (1.5 * max_bs * dep.dp if max_bs > 300 else 0)
    mib = gpu.total_bytes / MiB
    reserved = 512 + 1.5 * max(chunk, 2048) + dep.tp * dep.pp / 8 * 1024 + graph
    if gib > 60:
        reserved = max(reserved, 10 * 1024)
    mfs = dep.mem_fraction_static or round((mib - reserved) / mib, 3)
    return chunk, max_bs, mfs


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


def _sum(comps: list[Component], where: str) -> int:
    return sum(c.bytes for c in comps if c.where == where)


def _loaded(c: Component) -> bool:
    """Allocated while loading the model (weights, buffers registered at construction)."""
    return c.where == "budget" and c.category in ("weights", "scratch")


def estimate(model: str | ModelSpec, dep: Deployment, *, gpu_name: str | None = None,
             gpu_memory_bytes: int | None = None, gpu: GPU | None = None,
             terms: tuple[list[TermFn], list[TermFn]] | None = None) -> Estimate:
    """Estimate every rank of a deployment: weights, terms, KV budget, blocks, verdict."""
    gpu = gpu or resolve_gpu(gpu_name, gpu_memory_bytes)
    spec = model if isinstance(model, ModelSpec) else load_model(
        model, speculative_mtp=dep.num_speculative_tokens > 0)
    validate(dep, spec)
    if dep.sglang:
        chunk, max_bs, _mfs = sglang_defaults(gpu, dep)
        dep = dep.with_(chunked_prefill_size=chunk, cuda_graph_max_bs=max_bs,
                        max_num_batched_tokens=dep.max_num_batched_tokens or chunk,
                        block_size=dep.block_size or 1)
    dep = resolve(dep, spec, gpu)
    quant = quant_from_flag(dep.quantization, spec) if dep.quantization else spec.quant
    dtype = model_dtype(spec, dep)
    mml = dep.max_model_len
    mnbt = dep.max_num_batched_tokens
    assert mml is not None and mnbt is not None
    before_kv, after_kv = default_terms() if terms is None else terms
    requested = math.ceil(dep.gpu_memory_utilization * gpu.total_bytes)
    mfs = sglang_defaults(gpu, dep)[2] if dep.sglang else 0.0

    # pass 1: every rank's weights and pre-KV terms, and the KV memory its budget leaves
    raw: list[tuple[RankCoord, list[WeightTensor], list[Component], KVPlan, int, int]] = []
    cache: dict[tuple[int, int | None], tuple[list[WeightTensor], list[Component], KVPlan]] = {}
    for coord in ranks(dep):
        n_exp = None if coord.ep_rank is None else _expert_key(spec, dep, coord.ep_rank)
        key = (coord.pp_stage, n_exp)
        if key not in cache:
            tensors, groups = group_weights(spec, dep, quant, coord, gpu.arch)
            plan = kv_plan(spec, dep, coord, dtype, gpu.arch)
            weights = _weight_components(groups)
            ctx = TermContext(spec=spec, dep=dep, gpu=gpu, coord=coord, plan=plan,
                              weights_bytes=sum(c.bytes for c in weights), model_dtype=dtype,
                              quant=quant)
            cache[key] = (tensors, weights + [c for fn in before_kv for c in fn(ctx)], plan)
        tensors, comps, plan = cache[key]
        baseline = _sum(comps, "baseline")
        if dep.kv_cache_memory_bytes:
            available = dep.kv_cache_memory_bytes
            envelope = requested
        elif dep.sglang:
            # SGLang: KV = free after loading − (1 − mfs) × free before loading (§4.1)
            pre_free = gpu.total_bytes - baseline
            loaded = sum(c.bytes for c in comps if _loaded(c))
            available = int(mfs * pre_free) - loaded
            envelope = int(mfs * pre_free)
        else:
            available = requested - _sum(comps, "budget")
            envelope = requested
        raw.append((coord, tensors, comps, plan, available, envelope))

    # pass 2: one engine (a DP rank's TP×PP workers) uses the smallest block count of its workers
    min_blocks: dict[int, int] = {}
    for coord, _t, _c, plan, available, _e in raw:
        blocks = max(0, available // plan.block_bytes) if available > 0 else 0
        if dep.sglang and plan.layout == "uniform":  # page-aligned token count
            blocks = blocks // max(1, plan.block_size) * max(1, plan.block_size)
        min_blocks[coord.dp_rank] = min(min_blocks.get(coord.dp_rank, blocks), blocks)

    from memprof.core.scratch import scratch_savings

    rank_estimates: list[RankEstimate] = []
    runtime_cache: dict[tuple[object, ...], list[Component]] = {}
    savings_cache: dict[tuple[object, ...], tuple[tuple[str, int, int], ...]] = {}
    for coord, tensors, comps, plan, available, envelope in raw:
        cap = capacity_from_blocks(plan, min_blocks[coord.dp_rank], mml, mnbt)
        rkey = (id(plan), cap.num_gpu_blocks, coord.pp_stage)
        if rkey not in runtime_cache:
            ctx = TermContext(spec=spec, dep=dep, gpu=gpu, coord=coord, plan=plan,
                              weights_bytes=sum(c.bytes for c in comps
                                                if c.category == "weights"),
                              model_dtype=dtype, quant=quant, num_gpu_blocks=cap.num_gpu_blocks,
                              kv_cache_bytes=cap.kv_cache_bytes)
            runtime_cache[rkey] = [c for fn in after_kv for c in fn(ctx)]
            savings_cache[rkey] = tuple(x for x in scratch_savings(ctx) if x[1] != x[2])
        kv_comp = Component(name="KV cache", category="kv_cache", bytes=cap.kv_cache_bytes,
                            count=cap.num_gpu_blocks or 1,
                            formula=f"{cap.num_gpu_blocks} blocks × {plan.block_bytes} B "
                            f"({plan.formula})")
        all_comps = [*comps, *runtime_cache[rkey], kv_comp]
        verdict, reasons, headroom = _verdict(dep, gpu, plan, all_comps, available, envelope,
                                              cap, mml, mnbt)
        est_len = max_fitting_model_len(plan, available, mnbt, mml)
        rank_estimates.append(RankEstimate(
            coord=coord, same_as=(coord.rank,), components=tuple(all_comps),
            tensors=tuple(tensors), plan=plan, requested_bytes=envelope,
            available_kv_bytes=available, kv=cap, estimated_max_model_len=est_len,
            verdict=verdict, reasons=tuple(reasons), headroom_bytes=headroom,
            scratch_savings=savings_cache[rkey]))

    folded = _fold(rank_estimates)
    worst = max(folded, key=lambda r: VERDICTS.index(r.verdict))
    all_reasons = tuple(dict.fromkeys(x for r in folded for x in r.reasons))
    notes = _notes(dep, quant, gpu, mfs)
    return Estimate(spec=spec, deployment=dep, gpu=gpu, quant=quant, model_dtype=dtype,
                    max_model_len=mml, max_num_batched_tokens=mnbt, ranks=tuple(folded),
                    verdict=worst.verdict, reasons=all_reasons, notes=notes,
                    mem_fraction_static=mfs or None)


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


def _names(comps: list[Component]) -> str:
    top = sorted(comps, key=lambda c: -c.bytes)[:3]
    return ", ".join(f"{c.name} {fmt_bytes(c.bytes)}" for c in top)


def _verdict(dep: Deployment, gpu: GPU, plan: KVPlan, comps: list[Component], available: int,
             envelope: int, cap: KVCapacity, mml: int, mnbt: int
             ) -> tuple[str, list[str], int]:
    """startup_oom / runtime_oom / fits, the components that cause it, and the headroom.

    Process memory at run time (DESIGN.md): baseline (context, eager NCCL) + the engine's
    envelope (vLLM: requested; SGLang: mfs × free-before-load) + what it did not budget.
    SGLang's activations, graphs and non-torch memory live in the (1 − mfs) slack, so for it
    every non-loaded component counts against the slack.
    """
    total = gpu.total_bytes
    baseline = [c for c in comps if c.where == "baseline"]
    runtime = [c for c in comps if c.where == "runtime" and c.bytes > 0]
    base = sum(c.bytes for c in baseline)
    if dep.sglang:
        outside = [c for c in comps if c.where in ("budget", "runtime") and c.bytes > 0
                   and not _loaded(c) and c.category != "kv_cache"]
        used = base + envelope + sum(c.bytes for c in outside)
    else:
        outside = runtime
        used = base + envelope + sum(c.bytes for c in runtime)
    headroom = total - used
    if not dep.sglang and not dep.kv_cache_memory_bytes and base + envelope > total:
        return "startup_oom", [
            f"free memory at start-up ({fmt_bytes(total - base)}, after {_names(baseline)}) is "
            f"less than the requested {fmt_bytes(envelope)} (gpu_memory_utilization "
            f"{dep.gpu_memory_utilization})"], headroom
    if available <= 0 or cap.num_gpu_blocks == 0:
        loaded = [c for c in comps if (_loaded(c) if dep.sglang else c.where == "budget")
                  and c.category != "kv_cache"]
        return "startup_oom", [
            f"No available memory for the cache blocks: the budget leaves "
            f"{fmt_bytes(available)} for the KV cache after {_names(loaded)}"], headroom
    if cap.request_bytes > cap.kv_cache_bytes:
        est = max_fitting_model_len(plan, cap.kv_cache_bytes, mnbt, mml)
        return "startup_oom", [
            f"one request of max_model_len {mml} needs {fmt_bytes(cap.request_bytes)} of KV cache "
            f"but {fmt_bytes(cap.kv_cache_bytes)} is available; estimated maximum model length "
            f"is {est}"], headroom
    if headroom < 0:
        return "runtime_oom", [
            f"the engine starts, but at run time {fmt_bytes(sum(c.bytes for c in outside))} it "
            f"did not budget ({_names(outside)}) exceeds the {fmt_bytes(total - base - envelope)}"
            f" left outside its budget by {fmt_bytes(-headroom)}"], headroom
    return "fits", [], headroom


def _notes(dep: Deployment, quant: QuantConfig | None, gpu: GPU, mfs: float) -> tuple[str, ...]:
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
    if dep.sglang:
        notes.append(f"SGLang: mem_fraction_static {mfs} "
                     f"({'given' if dep.mem_fraction_static else 'SGLang heuristic'}), "
                     "weights sharded as vLLM shards them")
    return tuple(notes)
