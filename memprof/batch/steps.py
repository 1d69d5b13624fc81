"""The estimator's steps (``memprof.core.estimate.Steps``) with the work deployments share kept
between calls, for one ``Evaluator``: the overridden model, the validated deployment (once for
every ``gpu_memory_utilization``), a class of ranks' weights, KV layout and budget terms, and
the weights and KV layout on their own (shared by classes that differ elsewhere), and the ranks
estimated with their classes (kept by the deployment fields the rank order reads:
``memprof.batch.memo.SpecDepMemo``).

Each cache is keyed by the values its step reads; a model spec is keyed by identity (hashing
one costs tens of microseconds) and kept alive by this object while it is a key, so an id never
names a later object. The object belongs to its caller and dies with it: nothing is kept at
module level.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TypeVar

from memprof.batch.memo import SpecDepMemo
from memprof.core import estimate as est
from memprof.core.components import Component, TermFn
from memprof.core.deployment import Deployment, RankCoord, but_utilization
from memprof.core.engines import engine_of
from memprof.core.gpus import GPU
from memprof.core.kvcache import KVPlan
from memprof.core.models import ModelSpec, QuantConfig
from memprof.core.weights import WeightTensor, weights_key

_T = TypeVar("_T")
_MISSING = object()  # no step returns it
MAX_ENTRIES = 1 << 16  # per cache, before it starts afresh (a sweep has at most 1,000,000 points)


class LayoutKeys:
    """A deployment's settings but ``gpu_memory_utilization`` (``but_utilization``) as a small
    number: read and hashed once per deployment object, however many caches key by it (the
    steps of a class of ranks, its rank order, the allocator replay of each of its ranks). A
    number is never given to other settings, also after the table starts afresh."""

    def __init__(self) -> None:
        self._ids: dict[tuple[object, ...], int] = {}
        self._next = itertools.count()
        self._last: tuple[Deployment | None, int] = (None, -1)

    def __call__(self, dep: Deployment) -> int:
        last_dep, last = self._last
        if dep is last_dep:  # (a frozen deployment: the same object, the same settings)
            return last
        key = but_utilization(dep)
        n = self._ids.get(key)
        if n is None:
            if len(self._ids) >= MAX_ENTRIES:
                self._ids.clear()
            n = self._ids[key] = next(self._next)
        self._last = (dep, n)
        return n

    def remember(self, dep: Deployment, n: int) -> None:
        """``dep`` has the settings numbered ``n`` (a copy of a deployment numbered ``n`` that
        differs from it in ``gpu_memory_utilization`` alone): its next reading costs nothing."""
        self._last = (dep, n)


class CachedSteps:
    """``memprof.core.estimate.STEPS``, each step remembered by what it reads (``steps``)."""

    def __init__(self, layout: LayoutKeys | None = None) -> None:
        self._layout = layout or LayoutKeys()
        self._cache: dict[tuple[object, ...], object] = {}
        self._alive: dict[int, object] = {}  # the specs whose ids are in keys
        # one object per rank coordinate: the keys of every layout then hold the same objects,
        # which compare by identity
        self._coords: dict[RankCoord, RankCoord] = {}
        self._ready: Deployment | None = None  # the deployment last given to ``ready``
        self._ranks = SpecDepMemo(lambda spec, dep: self._interned(est.STEPS.rank_order(spec,
                                                                                        dep)))
        self.steps = est.Steps(model_spec=self.model_spec, prepared=self.prepared,
                               class_core=self.class_core, weights=self.weights,
                               kv_plan=self.kv_plan, rank_order=self.rank_order)

    def _id(self, spec: ModelSpec) -> int:
        self._alive.setdefault(id(spec), spec)
        return id(spec)

    def _get(self, key: tuple[object, ...], fn: Callable[[], _T]) -> _T:
        found = self._cache.get(key, _MISSING)  # (one lookup: a key hashes a GPU and more)
        if found is not _MISSING:
            return found  # type: ignore[return-value]
        if len(self._cache) >= MAX_ENTRIES:
            self._cache.clear()  # the specs stay alive: their ids may be in no key, harmless
        value = self._cache[key] = fn()
        return value

    def model_spec(self, model: str | ModelSpec, dep: Deployment) -> ModelSpec:
        if not dep.hf_overrides:
            return est.STEPS.model_spec(model, dep)
        who = model if isinstance(model, str) else self._id(model)
        return self._get(("overridden", who, dep.hf_overrides, dep.speculative_mtp,
                          dep.engine), lambda: est.STEPS.model_spec(model, dep))

    def prepared(self, dep: Deployment, spec: ModelSpec, gpu: GPU) -> Deployment:
        """Validated and resolved once for every gpu_memory_utilization: only its own range
        check, the engine check (SGLang has no such flag) and its default read it; a value
        either refuses is prepared on its own, so errors come in ``validate``'s order. The
        deployment last given to ``ready`` is returned as it is (prepared already)."""
        if dep is self._ready:  # (once: the estimate that asked for it)
            self._ready = None
            return dep
        util = dep.gpu_memory_utilization
        if util is not None and (not 0.0 < util <= 1.0
                                 or not engine_of(dep).budget_by_utilization):
            return est.STEPS.prepared(dep, spec, gpu)
        base, n = self.prepared_base(dep, spec, gpu)
        if util is not None and base.gpu_memory_utilization is not None:
            base = base.with_(gpu_memory_utilization=util)
        self._layout.remember(base, n)  # the steps after this one read its settings' number
        return base

    def prepared_base(self, dep: Deployment, spec: ModelSpec, gpu: GPU
                      ) -> tuple[Deployment, int]:
        """``dep`` prepared as if it had no ``gpu_memory_utilization`` (what every utilisation
        in (0, 1] shares), and its settings' number (``LayoutKeys``)."""
        return self._get(("prepared", self._id(spec), gpu, self._layout(dep)),
                         lambda: self._numbered(est.STEPS.prepared(
                             dep.with_(gpu_memory_utilization=None), spec, gpu)))

    def ready(self, dep: Deployment, number: int) -> None:
        """``dep`` is prepared, with the settings numbered ``number`` (``prepared_base``'s
        deployment, with a utilisation in (0, 1] where the engine budgets by it): the next
        ``prepared`` of it returns it as it is (a sweep's point: ``Evaluator
        .estimate_prepared``)."""
        self._ready = dep
        self._layout.remember(dep, number)

    def _numbered(self, dep: Deployment) -> tuple[Deployment, int]:
        return dep, self._layout(dep)

    def class_core(self, spec: ModelSpec, dep: Deployment, gpu: GPU, coord: RankCoord,
                   quant: QuantConfig | None, dtype: str, before_kv: list[TermFn],
                   steps: est.Steps) -> est.ClassCore:
        # nothing of a class but its KV budget reads gpu_memory_utilization
        key = ("class", self._id(spec), self._layout(dep), gpu, coord, quant, dtype,
               tuple(before_kv))
        return self._get(key, lambda: est.STEPS.class_core(spec, dep, gpu, coord, quant, dtype,
                                                           before_kv, steps))

    def rank_order(self, spec: ModelSpec, dep: Deployment) -> est.RankOrder:
        # the ranks and their classes read a few settings of the layout (TP, PP, DP, EP, the
        # release), never gpu_memory_utilization: kept by those it reads
        return self._ranks(spec, dep)

    def _interned(self, order: est.RankOrder) -> est.RankOrder:
        """``order`` with each rank coordinate replaced by the equal one met first."""
        if len(self._coords) >= MAX_ENTRIES:
            self._coords.clear()
        copies, ranks = order
        return copies, tuple((self._coords.setdefault(c, c), key) for c, key in ranks)

    def weights(self, spec: ModelSpec, dep: Deployment, quant: QuantConfig | None,
                coord: RankCoord, arch: str
                ) -> tuple[list[WeightTensor], list[Component], int]:
        # keyed by what memprof.core.weights reads of the deployment
        key = ("weights", self._id(spec), *weights_key(spec, dep, quant, coord, arch)[1:])
        return self._get(key, lambda: est.STEPS.weights(spec, dep, quant, coord, arch))

    def kv_plan(self, spec: ModelSpec, dep: Deployment, coord: RankCoord, dtype: str,
                arch: str) -> KVPlan:
        # keyed by what kv_plan reads of the deployment
        key = ("kv", self._id(spec), dep.engine, dep.engine_version, dep.kv_cache_dtype,
               dep.block_size, dep.attn_tp, dep.pp, coord.pp_stage, dtype, arch)
        return self._get(key, lambda: est.STEPS.kv_plan(spec, dep, coord, dtype, arch))
