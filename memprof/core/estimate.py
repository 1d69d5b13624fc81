"""The estimate: every rank's memory, the engine's KV budget, blocks, tokens and the verdict.

vLLM budget (vLLM@52a31cc vllm/v1/worker/gpu_worker.py ``determine_available_memory``)::

    requested = ceil(gpu_memory_utilization × total)
    KV        = requested − weights − activation peak − non-torch increase − CUDA-graph estimate
              (or --kv-cache-memory verbatim)
    blocks    = min over the workers of one engine of KV // block bytes
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import NamedTuple

from memprof.base.frozen import fast_init
from memprof.core.attention import kind_of
from memprof.core.auto_dtype import check_served_dtype, served_dtype_notes
from memprof.core.auto_fit import AUTO_FIT, fit_mode, holds_back_null_block, longest_fitting
from memprof.core.capability import capability_notes, check_capability
from memprof.core.components import Component, TermContext, TermFn
from memprof.core.deployment import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    Deployment,
    RankCoord,
    experts_on_rank,
    long_context_allowed,
    ranks,
    set_without_lora,
    validate,
)
from memprof.core.dtypes import dtype_bytes
from memprof.core.engine_defaults import resolve
from memprof.core.engines import engine_of
from memprof.core.engines.base import AttentionFacts
from memprof.core.engines.vllm_pooling import architecture_defaults, score_head_notes
from memprof.core.gpus import GPU, UNKNOWN_ARCH_RULES, platform_note, resolve_gpu
from memprof.core.kvcache import (
    KVCapacity,
    KVPlan,
    capacity_from_blocks,
    hybrid_token_line_per_group,
    kv_plan,
    mamba_cache_notes,
    max_fitting_model_len,
)
from memprof.core.models import (
    ModelSpec,
    QuantConfig,
    load_config,
    load_model,
    quant_from_flag,
    spec_from_config,
)
from memprof.core.models.config import merged_sub_configs, parse_overrides, with_overrides
from memprof.core.models.draft_head import load_draft_head
from memprof.core.models.families import family_row
from memprof.core.nvidia_driver import before_r550_note, check_driver
from memprof.core.speculative import HEAD_METHODS
from memprof.core.terms.activation import check_flashinfer_sampler, samples_in_profile_run
from memprof.core.terms.cudagraph import assumed_driver_note
from memprof.core.terms.draft_head import head_note
from memprof.core.terms.kv_cache import kv_cache_component
from memprof.core.terms.mtp_drafter import mtp_note
from memprof.core.terms.nccl_nvls import check_nccl_nvls
from memprof.core.terms.non_torch import first_kernel_in_load
from memprof.core.terms.symm_mem import unused_switch_note
from memprof.core.verdict import VERDICTS, Verdict, loaded_at_start, rank_verdict
from memprof.core.versions import Rule, rule_in_force
from memprof.core.weights import (
    WeightGroup,
    WeightTensor,
    group_weights,
    model_dtype,
)


class _Later:
    """What a ``RankEstimate`` computes on first read, from the rank's context and budget."""

    __slots__ = ("_len", "_savings", "available", "ctx", "max_num_batched_tokens", "upper")

    def __init__(self, ctx: TermContext, available: int, max_num_batched_tokens: int,
                 upper: int) -> None:
        self.ctx, self.available = ctx, available
        self.max_num_batched_tokens, self.upper = max_num_batched_tokens, upper
        self._len: int | None = None
        self._savings: tuple[tuple[str, int, int], ...] | None = None

    def max_model_len(self) -> int:
        if self._len is None:
            dep, plan = self.ctx.dep, self.ctx.plan
            held = plan.block_bytes if holds_back_null_block(dep.engine_version,
                                                             dep.engine) else 0
            self._len = max_fitting_model_len(plan, self.available - held,
                                              self.max_num_batched_tokens, self.upper)
        return self._len

    def savings(self) -> tuple[tuple[str, int, int], ...]:
        if self._savings is None:
            from memprof.core.scratch import scratch_savings

            self._savings = tuple(x for x in scratch_savings(self.ctx) if x[1] != x[2])
        return self._savings


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class RankEstimate:
    """One distinct rank: its components (bytes), weight tensors, KV layout and capacity, the
    budget (``requested_bytes`` = the engine's envelope, ``available_kv_bytes``), the verdict and
    the run-time headroom (bytes; negative when it does not fit)."""

    coord: RankCoord
    same_as: Sequence[int]  # global ranks with an identical estimate (this one included)
    components: tuple[Component, ...]
    tensors: tuple[WeightTensor, ...]
    plan: KVPlan
    requested_bytes: int
    available_kv_bytes: int
    kv: KVCapacity
    verdict: Verdict
    reasons: tuple[str, ...]
    headroom_bytes: int = 0
    # the two figures no verdict reads, computed when first read (a sweep reads neither)
    later: _Later | None = field(default=None, compare=False, repr=False)

    @property
    def estimated_max_model_len(self) -> int:
        """vLLM's "estimated maximum model length": the longest request the KV budget admits."""
        return self.later.max_model_len() if self.later is not None else 0

    @property
    def scratch_savings(self) -> tuple[tuple[str, int, int], ...]:
        """Per scratch buffer whose policies differ: (name, bytes with per-layer buffers, bytes
        with one shared buffer)."""
        return self.later.savings() if self.later is not None else ()

    @property
    def weights_bytes(self) -> int:
        return sum(c.bytes for c in self.components if c.category == "weights")

    def category_bytes(self, category: str) -> int:
        return sum(c.bytes for c in self.components if c.category == category)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    """A whole deployment: the model, the deployment with every default resolved, the GPU, the
    distinct ranks (identical ones folded) and the overall verdict (the worst rank's)."""

    spec: ModelSpec
    deployment: Deployment  # with every default resolved
    gpu: GPU
    quant: QuantConfig | None
    model_dtype: str
    max_model_len: int
    max_num_batched_tokens: int
    ranks: tuple[RankEstimate, ...]  # distinct ranks only (identical ones folded)
    verdict: Verdict
    reasons: tuple[str, ...]
    notes: tuple[str, ...]
    mem_fraction_static: float | None = None
    # vLLM's --max-model-len auto: the derived length it profiled at (``max_model_len`` is then
    # the length it fitted after profiling: memprof.core.auto_fit); None without the flag
    auto_fit_from: int | None = None

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


# --- the terms between the weights and the KV cache -------------------------------------------


def default_terms() -> tuple[list[TermFn], list[TermFn]]:
    """(terms known before the KV cache is sized, runtime terms that need its size)."""
    from memprof.core import scratch
    from memprof.core.terms.registry import BUDGET_TERMS, RUNTIME_TERMS

    return ([scratch.scratch_budget_terms, *BUDGET_TERMS],
            [scratch.scratch_runtime_terms, *RUNTIME_TERMS])


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


class _Class(NamedTuple):
    """Ranks that hold the same weights and KV layout (same PP stage, same expert count)."""

    tensors: tuple[WeightTensor, ...]  # (a tuple once per class: each rank keeps it as is)
    comps: list[Component]
    plan: KVPlan
    available: int  # KV bytes the budget leaves
    envelope: int  # what the engine reserves for itself (vLLM: requested; SGLang: mfs × free)
    ctx: TermContext  # the context the class's terms were computed in


# (tensors, components, plan, context, budgeted bytes, bytes before the baseline, the engine's
# load figure: ``Engine.load_figure`` of the bytes loaded at start) of a class of ranks
ClassCore = tuple[tuple[WeightTensor, ...], list[Component], KVPlan, TermContext, int, int,
                  int]
WeightsFn = Callable[[ModelSpec, Deployment, "QuantConfig | None", RankCoord, str],
                     tuple[list[WeightTensor], list[Component], int]]
KVPlanFn = Callable[[ModelSpec, Deployment, RankCoord, str, str], KVPlan]
# a rank's class: (PP stage, experts on the rank, whether it samples in the profile run)
ClassKey = tuple[int, int | None, bool]
# (identical engines, the ranks estimated with their class, in rank order)
RankOrder = tuple[int, tuple[tuple[RankCoord, ClassKey], ...]]


class Steps(NamedTuple):
    """The estimator's steps that a caller estimating many deployments may wrap (a cache of
    its own, ``memprof.batch.sweep.Evaluator``): each is a pure function of its arguments, and
    ``estimate`` calls them and nothing else for the work they do. The defaults compute.

    - ``model_spec(model, dep)``: the model with ``--hf-overrides`` merged;
    - ``prepared(dep, spec, gpu)``: the deployment validated, every default resolved;
    - ``class_core(spec, dep, gpu, coord, quant, dtype, before_kv, steps)``: a class of ranks'
      weights, KV layout, budget terms and load figure (``ClassCore``); it reads ``dep``'s
      ``gpu_memory_utilization`` not at all;
    - ``weights(spec, dep, quant, coord, arch)`` and ``kv_plan(spec, dep, coord, dtype, arch)``:
      what ``class_core`` computes them with;
    - ``rank_order(spec, dep)``: the ranks estimated and their classes (``RankOrder``); it
      reads ``dep``'s ``gpu_memory_utilization`` not at all.
    """

    model_spec: Callable[[str | ModelSpec, Deployment], ModelSpec]
    prepared: Callable[[Deployment, ModelSpec, GPU], Deployment]
    class_core: Callable[[ModelSpec, Deployment, GPU, RankCoord, QuantConfig | None, str,
                          list[TermFn], Steps], ClassCore]
    weights: WeightsFn
    kv_plan: KVPlanFn
    rank_order: Callable[[ModelSpec, Deployment], RankOrder] = (
        lambda spec, dep: _rank_order(spec, dep))  # a named tuple's default: no field()


def estimate(model: str | ModelSpec, dep: Deployment, *, gpu_name: str | None = None,
             gpu_memory_bytes: int | None = None, gpu_arch: str | None = None,
             gpu: GPU | None = None, terms: tuple[list[TermFn], list[TermFn]] | None = None,
             steps: Steps | None = None, notes: bool = True) -> Estimate:
    """Estimate every rank of a deployment: weights, terms, KV budget, blocks, verdict.

    Work grows with the *distinct* ranks, not their count: ranks of one PP stage holding the
    same number of experts (and sampling in the profile run or not) are one class, computed
    once; an engine (one DP rank's TP×PP workers) takes the smallest block count of its classes;
    ranks with the same class and block count share one ``RankEstimate`` (``same_as`` lists
    them).

    ``terms``: the terms before and after the KV cache is sized (``default_terms``);
    ``steps``: the steps of ``Steps`` (``STEPS``, computing); a caller that estimates many
    deployments passes wrappers that share work between them. The estimator keeps nothing
    between calls.

    The GPU: ``gpu``, or ``gpu_name`` / ``gpu_memory_bytes`` / ``gpu_arch`` as the flags give
    them (``resolve_gpu``: a size alone is refused; pass ``gpu=unlisted_gpu(size)`` to estimate
    a card of unknown architecture, whose assumed rules the notes then state).

    ``notes=False``: ``Estimate.notes`` is left empty (a caller that reads only figures, such
    as a sweep's records, skips writing them); every figure is the same.
    """
    steps = steps or STEPS
    gpu = gpu or resolve_gpu(gpu_name, gpu_memory_bytes, gpu_arch)
    if dep.no_gpu_peer_access and gpu.peer_access:  # --no-gpu-peer-access: the host's driver
        gpu = replace(gpu, peer_access=False)  # gives none, whatever the card
    spec = steps.model_spec(model, dep)
    asked = dep
    dep = steps.prepared(dep, spec, gpu)
    quant = (quant_from_flag(dep.quantization, spec, dep.engine_version,
                             engine_of(dep).quant_flag_by_release)
             if dep.quantization else spec.quant)
    check_served_dtype(spec, dep, gpu.arch, gpu.name)  # what the worker refuses at start-up
    dtype = model_dtype(spec, dep, gpu.arch)
    # what vLLM refuses on this compute capability
    check_capability(gpu, dtype, quant, dep.engine_version, dep.engine)
    check_driver(dep.nvidia_driver, rocm=gpu.is_rocm, gpu_name=gpu.name)
    mml = dep.max_model_len
    mnbt = dep.max_num_batched_tokens
    assert mml is not None and mnbt is not None
    before_kv, after_kv = default_terms() if terms is None else terms
    util = dep.gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION
    requested = math.ceil(util * gpu.total_bytes)
    engine = engine_of(dep)
    # the attention of the first layer that has one (not a recurrent mixer): ``_attention_facts``
    mfs = engine.mem_fraction(dep, gpu, _attention_facts(spec), spec=spec)

    # pass 1: one class per (PP stage, experts on the rank, whether it samples in the profile
    # run: V0 only on TP rank 0); the engines each rank belongs to
    classes: dict[ClassKey, _Class] = {}
    copies, order = steps.rank_order(spec, dep)
    for coord, key in order:
        if key not in classes:
            classes[key] = _class(spec, dep, gpu, coord, quant, dtype, before_kv, requested, mfs,
                                  steps)

    # pass 2: one engine (a DP rank's TP×PP workers) uses the smallest block count of its workers
    blocks_of = {key: _blocks(dep, c) for key, c in classes.items()}
    min_blocks: dict[int, int] = {}
    for coord, key in order:
        b = blocks_of[key]
        min_blocks[coord.dp_rank] = min(min_blocks.get(coord.dp_rank, b), b)

    # pass 3: one RankEstimate per (class, engine block count)
    members: dict[tuple[tuple[int, int | None, bool], int], list[int]] = {}
    first: dict[tuple[tuple[int, int | None, bool], int], RankCoord] = {}
    for coord, key in order:
        ck = (key, min_blocks[coord.dp_rank])
        if ck not in members:
            members[ck] = []
            first[ck] = coord
        members[ck].append(coord.rank)
    # vLLM's --max-model-len auto: the length each engine fits after profiling (auto_fit.py)
    fitted = (_auto_fitted(dep, classes, order, mml, mnbt)
              if asked.max_model_len == AUTO_FIT else None)
    rank_estimates = [
        _rank_estimate(spec, dep, gpu, first[ck], classes[ck[0]], ck[1], quant, dtype, mml, mnbt,
                       after_kv, tuple(rs),
                       None if fitted is None else fitted[first[ck].dp_rank])
        for ck, rs in members.items()] if copies == 1 else [
        _rank_estimate(spec, dep, gpu, first[ck], classes[ck[0]], ck[1], quant, dtype, mml, mnbt,
                       after_kv, RankSet(tuple(rs), dep.tp * dep.pp, copies),
                       None if fitted is None else fitted[first[ck].dp_rank])
        for ck, rs in members.items()]
    auto_from = None
    if fitted is not None:  # the figures a log prints are the fitted length's
        auto_from, mml = mml, min(fitted.values())

    folded = _fold(rank_estimates)
    if len(folded) == 1 and len(folded[0].reasons) <= 1:  # (the usual point: one rank)
        worst, all_reasons = folded[0], folded[0].reasons
    else:
        worst = max(folded, key=lambda r: VERDICTS.index(r.verdict))
        all_reasons = tuple(dict.fromkeys(x for r in folded for x in r.reasons))
    if not notes:
        return Estimate(spec=spec, deployment=dep, gpu=gpu, quant=quant, model_dtype=dtype,
                        max_model_len=mml, max_num_batched_tokens=mnbt, ranks=tuple(folded),
                        verdict=worst.verdict, reasons=all_reasons, notes=(),
                        mem_fraction_static=mfs or None, auto_fit_from=auto_from)
    written = (_notes(dep, quant, gpu, mfs) + served_dtype_notes(spec, dep, gpu.arch, dtype)
             + capability_notes(gpu, quant)
             + _input_notes(asked, spec, gpu)
             + score_head_notes(spec, dep)
             + tuple(engine.model_settings_notes(dep, asked,
                                                 spec.layers[0].attention.has_indexer))
             + tuple(engine.vision_notes(dep, spec) if spec.vision is not None else ())
             + tuple(engine.batch_default_notes(asked, dep, gpu))
             + tuple(engine.runner_notes(
                 dep, architecture=spec.architecture, moe=spec.is_moe,
                 hybrid=spec.has_state_mixer,
                 quantised=quant is not None, vocab=spec.vocab_size,
                 logits_itemsize=dtype_bytes(dtype),
                 runner_listed=family_row(spec.family).v2_runner_listed))
             + mamba_cache_notes(spec, dep, gpu.arch)
             + _auto_fit_notes(dep, auto_from, mml))
    return Estimate(spec=spec, deployment=dep, gpu=gpu, quant=quant, model_dtype=dtype,
                    max_model_len=mml, max_num_batched_tokens=mnbt, ranks=tuple(folded),
                    verdict=worst.verdict, reasons=all_reasons, notes=written,
                    mem_fraction_static=mfs or None, auto_fit_from=auto_from)


@lru_cache(maxsize=64)  # kept by the spec (whose hash is computed once): every estimate asks
def _attention_facts(spec: ModelSpec) -> AttentionFacts | None:
    """What an engine reads of the attention of the model's first layer that has one (not a
    recurrent mixer); None where no layer has one."""
    attention = next((x.attention for x in spec.layers if not x.attention.mixer), None)
    return None if attention is None else AttentionFacts(attention.num_heads,
                                                         kind_of(attention).hip_aiter_heads)


def _rank_order(spec: ModelSpec, dep: Deployment) -> RankOrder:
    """The ranks to estimate, each with its class (PP stage, experts on the rank, whether it
    samples in the profile run: V0 only on TP rank 0). vLLM without expert parallelism: every
    DP engine is the first one (a rank's class reads its PP stage and TP rank, never its DP
    rank), so the first engine's ranks are estimated and the others are the same ranks shifted
    (``RankSet``): work and memory grow with TP×PP, not with DP (a remedy's layout of millions
    of ranks takes as long as one engine)."""
    copies = engine_of(dep).identical_engines(dep)
    order = []
    for coord in (ranks(dep) if copies == 1 else _first_engine(dep)):
        n_exp = (None if coord.ep_rank is None
                 else experts_on_rank(spec.num_experts, dep.ep_size, coord.ep_rank))
        order.append((coord, (coord.pp_stage, n_exp, samples_in_profile_run(dep, coord))))
    return copies, tuple(order)


def _model_spec(model: str | ModelSpec, dep: Deployment) -> ModelSpec:
    """The model, with ``--hf-overrides`` merged into its config before it is validated and
    built (``with_overrides``), as the engines apply them, and the EAGLE head
    ``--speculative-model`` names (``with_draft_head``)."""
    return with_draft_head(_target_spec(model, dep), dep)


def with_draft_head(spec: ModelSpec, dep: Deployment) -> ModelSpec:
    """``spec`` with the draft head of an EAGLE / EAGLE-3 deployment (its config.json:
    ``memprof.core.models.draft_head``), or without one where the deployment drafts none."""
    head = None
    if (dep.num_speculative_tokens and dep.speculative_method in HEAD_METHODS
            and dep.speculative_model):
        head = load_draft_head(dep.speculative_model, dep.speculative_method)
    return spec if spec.draft_head == head else replace(spec, draft_head=head)


def _target_spec(model: str | ModelSpec, dep: Deployment) -> ModelSpec:
    mtp = dep.speculative_mtp
    if not dep.hf_overrides:
        return model if isinstance(model, ModelSpec) else load_model(
            model, speculative_mtp=mtp, assume_architecture=dep.assume_architecture)
    text = dep.hf_overrides
    flag = engine_of(dep).overrides_flag

    if isinstance(model, ModelSpec):
        name, cfg, source = model.name, model.raw, model.source
    else:
        name, cfg, path = load_config(model)
        source = str(path)
    return spec_from_config(with_overrides(cfg, text, flag, dep.engine_version), name=name,
                            source=source,
                            with_mtp=mtp, assume_architecture=dep.assume_architecture)


def _prepared(dep: Deployment, spec: ModelSpec, gpu: GPU) -> Deployment:
    """``dep`` validated, with SGLang's heuristics and every engine default resolved (a block
    size the backend does not take replaced by the one vLLM forces, ``block_size_for``)."""
    from memprof.core.scratch.backends import block_size_for

    validate(dep, spec)
    # the runner and conversion vLLM resolves for a classification checkpoint
    # (engines/vllm_pooling.py architecture_defaults)
    resolved = architecture_defaults(dep, spec.architecture)
    if resolved:
        dep = dep.with_(**resolved)
    check_flashinfer_sampler(dep)
    check_nccl_nvls(dep)
    block, _why = block_size_for(spec, gpu, dep)
    if block != dep.block_size:
        dep = dep.with_(block_size=block)
    changes = engine_of(dep).prepared(dep, gpu)
    if changes:
        dep = dep.with_(**changes)
    # what the engine sets for this model (SGLang's DeepSeek NSA settings: engines/sglang_nsa.py)
    changes = engine_of(dep).model_settings(dep, gpu, spec.layers[0].attention.has_indexer,
                                            spec=spec)
    if changes:
        dep = dep.with_(**changes)
    return resolve(dep, spec, gpu)


def _class(spec: ModelSpec, dep: Deployment, gpu: GPU, coord: RankCoord,
           quant: QuantConfig | None, dtype: str, before_kv: list[TermFn], requested: int,
           mfs: float, steps: Steps) -> _Class:
    # nothing of a class but its KV budget reads gpu_memory_utilization (only ``requested``
    # does): a wrapped ``class_core`` may return the context of a deployment that differs from
    # ``dep`` in it alone (each rank's context takes ``dep``: ``_rank_estimate``)
    tensors, comps, plan, ctx, budget, baseline, load_figure = steps.class_core(
        spec, dep, gpu, coord, quant, dtype, before_kv, steps)
    # the engine's budget line (engines/vllm.py, engines/sglang.py ``budget``)
    line = engine_of(dep).budget(dep, gpu, requested=requested, budgeted=budget,
                                 baseline=baseline, loaded=load_figure, mfs=mfs)
    return _Class(tensors=tensors, comps=comps, plan=plan, available=line.available,
                  envelope=line.envelope, ctx=ctx)


def _class_core(spec: ModelSpec, dep: Deployment, gpu: GPU, coord: RankCoord,
                quant: QuantConfig | None, dtype: str, before_kv: list[TermFn],
                steps: Steps) -> ClassCore:
    """A class's weights, KV layout and budget terms: (tensors, components, plan, context,
    budgeted bytes, bytes before the baseline, the engine's load figure of the bytes loaded at
    start: ``Engine.load_figure``, which reads the layout, not the utilisation)."""
    tensors, weights, weights_bytes = steps.weights(spec, dep, quant, coord, gpu.arch)
    plan = steps.kv_plan(spec, dep, coord, dtype, gpu.arch)
    ctx = TermContext(spec=spec, dep=dep, gpu=gpu, coord=coord, plan=plan,
                      weights_bytes=weights_bytes, model_dtype=dtype, quant=quant)
    comps = weights + [c for fn in before_kv for c in fn(ctx)]
    loaded = sum(c.bytes for c in comps if loaded_at_start(c))
    return (tuple(tensors), comps, plan, ctx, _sum(comps, "budget"), _sum(comps, "baseline"),
            engine_of(dep).load_figure(dep, loaded, first_kernel_in_load(dep, gpu)))


def _weights(spec: ModelSpec, dep: Deployment, quant: QuantConfig | None, coord: RankCoord,
             arch: str) -> tuple[list[WeightTensor], list[Component], int]:
    """A rank's tensors, its weights report rows and their bytes."""
    tensors, groups = group_weights(spec, dep, quant, coord, arch)
    rows = _weight_components(groups)
    return tensors, rows, sum(c.bytes for c in rows)


# each step looks its function up when called, so that replacing one of this module's
# functions (a test's monkeypatch) reaches every estimate
STEPS = Steps(model_spec=lambda model, dep: _model_spec(model, dep),
              prepared=lambda dep, spec, gpu: _prepared(dep, spec, gpu),
              class_core=lambda *args: _class_core(*args),
              weights=lambda *args: _weights(*args),
              kv_plan=lambda *args: kv_plan(*args))
"""The estimator's steps, computing (no cache)."""


def _blocks(dep: Deployment, c: _Class) -> int:
    engine = engine_of(dep)
    blocks = engine.blocks(c.available, c.plan.sized_block_bytes or c.plan.block_bytes,
                           c.plan.block_size, c.plan.layout)
    return engine.capped_blocks(dep, blocks, c.plan.block_size, c.plan.layout)


def _rank_estimate(spec: ModelSpec, dep: Deployment, gpu: GPU, coord: RankCoord, c: _Class,
                   num_blocks: int, quant: QuantConfig | None, dtype: str, mml: int, mnbt: int,
                   after_kv: list[TermFn], same_as: Sequence[int], fitted: int | None = None
                   ) -> RankEstimate:
    """One rank's estimate. ``fitted``: the length vLLM's ``--max-model-len auto`` fitted for
    the rank's engine (None without the flag): the KV figures and the terms sized after the
    KV cache read it (the engine sends it to its workers, ``update_max_model_len``); what was
    built before profiling keeps the derived ``mml``."""
    plan = c.plan
    length = mml if fitted is None else (fitted or mml)
    cap = capacity_from_blocks(plan, num_blocks, length, mnbt,
                               hybrid_token_line_per_group(dep.engine_version, dep.engine))
    run_dep = dep if length == mml else dep.with_(max_model_len=length)
    ctx = c.ctx.with_(dep=run_dep, coord=coord, num_gpu_blocks=cap.num_gpu_blocks,
                      kv_cache_bytes=cap.kv_cache_bytes)
    runtime = [x for fn in after_kv for x in fn(ctx)]
    kv_comp = kv_cache_component(plan, cap)
    all_comps = [*c.comps, *runtime, kv_comp]
    verdict, reasons, headroom = rank_verdict(dep, gpu, plan, all_comps, c.available, c.envelope,
                                          cap, mml if fitted is None else fitted, mnbt,
                                          auto_fit=fitted is not None)
    return RankEstimate(
        coord=coord, same_as=same_as, components=tuple(all_comps), tensors=c.tensors,
        plan=plan, requested_bytes=c.envelope, available_kv_bytes=c.available, kv=cap,
        verdict=verdict, reasons=tuple(reasons), headroom_bytes=headroom,
        later=_Later(ctx, c.available, mnbt, mml))


def _auto_fitted(dep: Deployment, classes: dict[ClassKey, _Class],
                 order: tuple[tuple[RankCoord, ClassKey], ...], mml: int, mnbt: int
                 ) -> dict[int, int]:
    """The length vLLM's ``--max-model-len auto`` fits for each engine (DP rank), at most the
    derived ``mml``; 0 where not one token fits (``memprof.core.auto_fit``): from 0.17.0 the
    smallest of each worker's fit on its own KV budget, in 0.14.0-0.16.x the whole model's
    layers (one plan per PP stage, summed) against the smallest worker's budget."""
    held = holds_back_null_block(dep.engine_version, dep.engine)
    whole = fit_mode(dep.engine_version) == "global"
    engines: dict[int, list[tuple[int, _Class]]] = {}
    for coord, key in order:
        engines.setdefault(coord.dp_rank, []).append((coord.pp_stage, classes[key]))
    out: dict[int, int] = {}
    for dp_rank, workers in engines.items():
        usable = [c.available - (c.plan.block_bytes if held else 0) for _s, c in workers]
        if whole:
            plans = tuple({stage: c.plan for stage, c in workers}.values())
            out[dp_rank] = longest_fitting(
                lambda n, ps=plans: sum(p.request_bytes(n, mnbt) for p in ps),  # type: ignore[misc]
                min(usable), mml)
        else:
            out[dp_rank] = min(max_fitting_model_len(c.plan, u, mnbt, mml)
                               for (_s, c), u in zip(workers, usable, strict=True))
    return out


def _auto_fit_notes(dep: Deployment, derived: int | None, fitted: int) -> tuple[str, ...]:
    """What ``--max-model-len auto`` did, as vLLM logs it (``memprof.core.auto_fit``)."""
    if derived is None:
        return ()
    how = ("the whole model's KV cache groups against the smallest worker's KV memory"
           if fit_mode(dep.engine_version) == "global"
           else "each worker's KV cache groups against its own KV memory, the smallest fit")
    if fitted <= 0:
        said = "no length fits ('Cannot auto-fit max_model_len')"
    elif fitted >= derived:
        said = f"'Auto-fit max_model_len: full model context length {derived} fits'"
    else:
        said = f"'Auto-fit max_model_len: reduced from {derived} to {fitted}'"
    return (f"--max-model-len auto: profiled at the derived length {derived:,} (the runner's "
            f"buffers are sized by it), then fitted after profiling from {how}: {said}; "
            + ("the concurrency and the terms sized after the KV cache read the fitted length"
               if fitted > 0 else "the concurrency is for one request of the derived length"),)


def _fold(rows: list[RankEstimate]) -> list[RankEstimate]:
    if len(rows) == 1:  # nothing to fold (and no rank key to hash)
        return rows
    # rows that differ in PP stage, verdict or KV capacity never fold: when no two agree on
    # those, nothing folds and the rank keys (every component and tensor) need no hashing
    cheap = {(r.coord.pp_stage, r.verdict, r.kv) for r in rows}
    if len(cheap) == len(rows):
        return rows
    out: dict[tuple[object, ...], list[RankEstimate]] = {}
    for r in rows:
        out.setdefault(_rank_key(r), []).append(r)
    return [replace(rs[0], same_as=_merged([r.same_as for r in rs]))
            if len(rs) > 1 else rs[0] for rs in out.values()]


def _merged(sets: list[Sequence[int]]) -> Sequence[int]:
    """The union of the ``same_as`` of folded ranks, sorted (``RankSet``s of one layout stay
    one ``RankSet``)."""
    first = sets[0]
    if isinstance(first, RankSet) and all(
            isinstance(x, RankSet) and (x.stride, x.copies) == (first.stride, first.copies)
            for x in sets):
        base = tuple(sorted(r for x in sets for r in x.base))  # type: ignore[attr-defined]
        return RankSet(base, first.stride, first.copies)
    return tuple(sorted(r for x in sets for r in x))


def _first_engine(dep: Deployment) -> list[RankCoord]:
    """The ranks of DP engine 0 (vLLM order: PP stage, then TP rank), no expert parallelism."""
    return [RankCoord(pp_stage * dep.tp + tp_rank, tp_rank, pp_stage, 0, None)
            for pp_stage in range(dep.pp) for tp_rank in range(dep.tp)]


class RankSet(Sequence[int]):
    """Global ranks ``base + k × stride`` for ``k`` in ``range(copies)``, in ascending order:
    the ranks of every DP engine that are the ranks ``base`` of the first (``stride`` = TP×PP
    ranks an engine). A ``Sequence`` of ints that stores three numbers and a tuple, so a
    deployment of a million ranks costs no million-entry tuple; equal to the tuple of its
    ranks."""

    __slots__ = ("_set", "base", "copies", "stride")

    def __init__(self, base: tuple[int, ...], stride: int, copies: int) -> None:
        self.base, self.stride, self.copies = base, stride, copies
        self._set = frozenset(base)

    def __len__(self) -> int:
        return len(self.base) * self.copies

    def __iter__(self) -> Iterator[int]:
        for k in range(self.copies):
            off = k * self.stride
            for r in self.base:
                yield off + r

    def __contains__(self, x: object) -> bool:
        if not isinstance(x, int) or x < 0:
            return False
        k, r = divmod(x, self.stride)
        return k < self.copies and r in self._set

    def __getitem__(self, i: int) -> int:  # type: ignore[override]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        k, j = divmod(i, len(self.base))
        return k * self.stride + self.base[j]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RankSet):
            return (self.base, self.stride, self.copies) == (other.base, other.stride,
                                                              other.copies)
        if isinstance(other, tuple | list):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other,
                                                                          strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.base, self.stride, self.copies))

    def __repr__(self) -> str:
        return f"RankSet({self.base!r}, stride={self.stride}, copies={self.copies})"


# methods vLLM applies to an unquantised checkpoint while it loads it: fp8 (Fp8Config has no
# config file to find, so get_quant_config returns the default config, weight_utils.py) and
# bitsandbytes' in-flight 4-bit (BitsAndBytesModelLoader); AWQ, GPTQ, ModelOpt NVFP4 read their
# checkpoint's (quantize_config.json, hf_quant_config.json, or config.json's
# quantization_config) and have no in-flight path
QUANTISED_IN_FLIGHT = ("fp8_per_tensor", "fp8_per_channel", "bnb4")

# --quantization mxfp4 on a checkpoint without a quantization config: vLLM's online MXFP4
# quantises it while loading, from the release whose online shorthands name mxfp4
MXFP4_ONLINE: tuple[Rule, ...] = (
    Rule(name="mxfp4_online", changes="note: --quantization mxfp4 on an unquantised checkpoint",
         since="0.28.0", until=None, value=True,
         introduced_by="0.28.0: mxfp4 among config/quantization.py _ONLINE_SHORTHANDS (not in "
         "0.27.0's)",
         source="0.28.0 / 0.29.0 / 0.30.0 / 0.33.0 config/quantization.py _ONLINE_SHORTHANDS"
         "['mxfp4'], resolve_quantization_config; model_loader/weight_utils.py "
         "get_quant_config: OnlineQuantizationConfig where the checkpoint has no "
         "quantization config", applies_to="mxfp4"),
)


def _notes(dep: Deployment, quant: QuantConfig | None, gpu: GPU, mfs: float) -> tuple[str, ...]:
    notes: list[str] = []
    online_mxfp4 = (quant is not None and quant.method == "mxfp4"
                    and rule_in_force(MXFP4_ONLINE, dep.engine_version, dep.engine) is not None)
    if quant is not None and quant.source == "flag" and quant.method in QUANTISED_IN_FLIGHT:
        notes.append(f"--quantization {dep.quantization}: sized as vLLM quantises an unquantised "
                     f"checkpoint while loading it ({quant.method})")
    elif quant is not None and quant.source == "flag" and online_mxfp4:
        notes.append(f"--quantization {dep.quantization} on a config that declares no "
                     f"quantization: vLLM {dep.engine_version} quantises the checkpoint to MXFP4 "
                     "while loading it (online: config/quantization.py _ONLINE_SHORTHANDS, "
                     "its linear layers and MoE experts); memprof sizes the MoE experts as "
                     f"MXFP4 (4-bit in groups of {quant.group_size}) and every other layer in "
                     "the model dtype, as an MXFP4 checkpoint's Mxfp4Config quantises them "
                     "[not modelled: the online linear layers; their weights are overestimated]")
    elif quant is not None and quant.source == "flag" and quant.method == "mxfp4":
        notes.append(f"--quantization {dep.quantization} on a config that declares no "
                     f"quantization: sized as this model's checkpoint quantised with mxfp4, its "
                     f"MoE experts 4-bit in groups of {quant.group_size} (assumed; Mxfp4Config "
                     "quantises no other layer); what this release does with an unquantised "
                     "checkpoint under mxfp4 is not read (vLLM quantises it online from 0.28.0)")
    elif quant is not None and quant.source == "flag":
        notes.append(f"--quantization {dep.quantization} on a config that declares no "
                     f"quantization: sized as this model's checkpoint quantised with "
                     f"{quant.method}, {quant.bits}-bit in groups of {quant.group_size} "
                     "(assumed); vLLM makes "
                     "no such checkpoint while loading: it reads the checkpoint's own "
                     "quantization config (get_quant_config, model_loader/weight_utils.py), so "
                     "point --model at the quantised checkpoint's config.json for its own "
                     "figures")
    if unread := set_without_lora(dep):
        from memprof.core.flags import flag_name

        given = ", ".join(flag_name(f, dep.engine) for f in unread)
        notes.append(f"{given} without --enable-lora: vLLM reads the LoRA settings only with "
                     "LoRA on (no LoRAConfig otherwise), so they change nothing here")
    if not gpu.exact:
        notes.append(f"{gpu.name}: the catalog's total memory is rounded or inferred "
                     "(see configs/gpus.json); pass --gpu-memory for an exact figure")
    if gpu.arch == "unknown":
        notes.append(UNKNOWN_ARCH_RULES)
    platform = platform_note(gpu)
    if platform is not None:
        notes.append(platform)
    if driver := before_r550_note(dep.nvidia_driver, graphs=not dep.enforce_eager):
        notes.append(driver)
    if driver := assumed_driver_note(dep, gpu):
        notes.append(driver)
    if unused := unused_switch_note(dep, gpu):
        notes.append(unused)
    notes += engine_of(dep).notes(dep, mfs, gpu) + engine_of(dep).release_notes(
        dep, gpu.arch, quant.method if quant is not None else None)
    return tuple(notes)


def added_keys_notes(spec: ModelSpec, given: dict[str, object], flag: str, text: str = "",
                     release: str | None = None) -> list[str]:
    """An override key the model's own config.json lacks is added, not replaced, as the engines
    merge it (``config.update``): said, with the config's closest key, so that a misspelt key
    (``num_hidden_layer``) is not read as the setting it was meant to change. A sub-config
    ``text`` (the overrides as given) merges into rather than replaces is said too
    (``merged_sub_configs``)."""
    import difflib

    from memprof.core.models import bundled_models

    try:
        _name, original, _path = load_config(str(bundled_models().get(spec.name, spec.source)))
    except Exception:  # a spec built in memory has no file to compare with: nothing to say
        return []
    notes = []
    for key in sorted(k for k in given if k not in original):
        close = difflib.get_close_matches(key, [str(k) for k in original], n=1, cutoff=0.8)
        notes.append(f"{flag}: {key} is not a key of {spec.name}'s config.json, so it is added "
                     "rather than replacing one" + (f" (did you mean {close[0]}?)" if close
                                                    else ""))
    merged = merged_sub_configs(original, text, flag, release) if text else ()
    if merged:
        notes.append(f"{flag}: {', '.join(merged)} merged into the checkpoint's own key by key, "
                     "not replaced (vLLM config/model.py _apply_dict_overrides, 0.11.1 on)")
    return notes


def _input_notes(asked: Deployment, spec: ModelSpec, gpu: GPU) -> tuple[str, ...]:
    """What the estimate took differently from what was asked, as the engine does: a forced
    block size, a context length beyond the derived maximum allowed by the engine's variable;
    and what it assumed when asked to (``--assume-architecture``)."""
    notes: list[str] = []
    left_out = family_row(spec.family).note  # what the estimate leaves out for this family
    if left_out:
        notes.append(left_out)
    if spec.draft_head is not None:  # what the EAGLE head took from the target, and left out
        notes.append(head_note(spec.hidden_size, spec.vocab_size, spec.draft_head))
    if asked.speculative_mtp and spec.mtp_layers:  # what the MTP drafter sizes, and leaves out
        notes.append(mtp_note(spec))
    if asked.assume_architecture is not None:
        from memprof.core.models.families import ASSUMED

        if spec.family in ASSUMED:
            notes.append(f"--assume-architecture {asked.assume_architecture}: "
                         f"{spec.architecture} is not a family memprof knows; ASSUMED "
                         f"{ASSUMED[spec.family]}; not checked against the engine's model "
                         "registry (taken as loadable, e.g. registered by a plugin)")
    if not (asked.hf_overrides or asked.block_size is not None
            or long_context_allowed(asked.engine)):
        return tuple(notes)  # nothing else was taken differently (a sweep's usual point)
    from memprof.core.deployment import LONG_CONTEXT_ENV, beyond_derived_len
    from memprof.core.scratch.backends import block_size_for

    if asked.hf_overrides:
        given = parse_overrides(asked.hf_overrides)
        keys = ", ".join(sorted(given))
        flag = engine_of(asked).overrides_flag
        notes.append(f"{flag}: config.json sized with {keys or 'nothing'} overridden")
        notes += added_keys_notes(spec, given, flag, asked.hf_overrides, asked.engine_version)
    _block, why = block_size_for(spec, gpu, asked)
    if why:
        notes.append(why)
    over = beyond_derived_len(asked, spec)
    if over is not None:
        notes.append(f"{LONG_CONTEXT_ENV[asked.engine]}=1: max_model_len {asked.max_model_len:,} "
                     f"is beyond {spec.name}'s derived maximum {over[0]:,} ({over[1]}); the "
                     "engine allows it with that variable (positions past the derived maximum "
                     "are outside what the model was trained on)")
    return tuple(notes)


def rank_context(e: Estimate, r: RankEstimate) -> TermContext:
    """The term context of a rank of an estimate, with its KV cache sized."""
    return TermContext(spec=e.spec, dep=e.deployment, gpu=e.gpu, coord=r.coord, plan=r.plan,
                       weights_bytes=r.weights_bytes, model_dtype=e.model_dtype, quant=e.quant,
                       num_gpu_blocks=r.kv.num_gpu_blocks, kv_cache_bytes=r.kv.kv_cache_bytes)


def load_figure(e: Estimate, r: RankEstimate) -> int:
    """What the rank's engine counts as its model load (``Engine.load_figure``): the bytes
    allocated while loading, and, for an engine whose load is a free-memory drop (SGLang), the
    first kernel's non-torch memory where the load runs that kernel (``first_kernel_in_load``).
    The budget line subtracts it; a log's load line ("Model loading took", SGLang's "mem
    usage") is compared with it."""
    allocated = sum(c.bytes for c in r.components if loaded_at_start(c))
    dep = e.deployment
    return engine_of(dep).load_figure(dep, allocated, first_kernel_in_load(dep, e.gpu))
