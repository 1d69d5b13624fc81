"""Many deployments at once: axes (``tp=1,2,4,8``), their grid, and an evaluator that estimates
each point exactly as ``estimate`` does, sharing the work points have in common: the model spec,
the GPU, the estimator's steps (``memprof.batch.steps``), the terms remembered by what they read
(``memprof.batch.memo``) and the allocator replay of identical weights
(``memprof.batch.replay``). The evaluator owns every cache; ``estimate`` keeps none.

Results are plain records (one ``dict`` per point) so the pure core needs no table library; the
``sweep`` command turns them into a pandas DataFrame.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from memprof.base.errors import BadInput
from memprof.core.auto_fit import AUTO_FIT
from memprof.core.compare import no_none
from memprof.core.components import TermFn
from memprof.core.deployment import Deployment
from memprof.core.engines import engine_of
from memprof.core.estimate import Estimate, default_terms, estimate
from memprof.core.flags import BY_FIELD, coerce, field_for
from memprof.core.gpus import GPU, resolve_gpu
from memprof.core.models import ModelSpec, load_model

MAX_POINTS = 1_000_000
# classes of ranks met before the class memo of the budget terms gives up when none was found
CLASS_MEMO_TRIES = 16  # a grid larger than this is a mistake, not a sweep
# axes that are not Deployment fields
EXTRA_AXES = ("gpu", "model")
# vLLM's human_readable_int fields: 32k = 32,000 and 32K = 32,768, as vLLM reads them
HUMAN_READABLE = ("max_model_len", "max_num_batched_tokens")


@dataclass(frozen=True, slots=True)
class Axis:
    """One swept setting: the name the user wrote, the field it sets, and its values."""

    name: str
    field: str  # a Deployment field, or "gpu" / "model"
    values: tuple[Any, ...]


def read_int(text: str, where: str) -> int:
    """An integer as vLLM reads ``--max-model-len``: ``32768``, ``32k`` (32,000), ``32K``
    (32,768), ``1m``."""
    from memprof.base.units import parse_size

    try:
        return parse_size(text.strip(), bare_bytes=True, vllm_letters=True)
    except BadInput:
        raise BadInput(f"{where}: bad value {text[:40]!r}",
                       hint="an integer, or 32k (32,000) / 32K (32,768) as vLLM reads it"
                       ) from None


def parse_axis(text: str) -> Axis:
    """``KEY=V1,V2,...`` with KEY a field or any flag of either engine (``tp``,
    ``tensor_parallel_size``, ``max-model-len``, ``kv_cache_dtype``, ``gpu``, ``model``)."""
    key, eq, values = text.partition("=")
    where = f"--set {text[:60]}"
    if not eq or not key.strip():
        raise BadInput(f"{where}: expected KEY=V1,V2,...", hint="e.g. --set tp=1,2,4,8")
    name = key.strip()
    fld = name.lower() if name.lower() in EXTRA_AXES else field_for(name)
    if fld is None or fld == "engine":
        raise BadInput(f"{where}: unknown setting {name[:40]!r}",
                       hint="a deployment flag such as tp, pp, dp, max_model_len, max_num_seqs, "
                       "kv_cache_dtype, gpu_memory_utilization, or gpu / model")
    raw = [v.strip() for v in values.split(",")]
    if not raw or any(not v for v in raw):
        raise BadInput(f"{where}: an empty value", hint="e.g. --set max_model_len=8k,32k,128k")
    if fld == "gpu" and any(v.lower() == "auto" for v in raw):
        raise BadInput(f"{where}: auto is this host's card, not a card to sweep over",
                       hint="use --gpu auto for the base deployment, and catalog names in "
                       "--set gpu=… (memprof gpus lists them)")
    if fld in EXTRA_AXES:
        parsed: list[Any] = raw
    elif fld in HUMAN_READABLE:  # None / default: the engine's default, as coerce reads it
        parsed = [None if v.lower() in ("none", "default")
                  else AUTO_FIT if fld == "max_model_len" and v.lower() in ("auto", "-1")
                  else read_int(v, where) for v in raw]  # auto: vLLM's auto-fit (auto_fit.py)
    else:
        parsed = [no_none(fld, coerce(fld, v, where=where), where) for v in raw]
    return Axis(name=name, field=fld, values=tuple(dict.fromkeys(parsed)))


def grid_size(axes: list[Axis]) -> int:
    n = 1
    for a in axes:
        n *= len(a.values)
    return n


def points(axes: list[Axis]) -> Iterator[dict[str, Any]]:
    """Every combination of the axes' values, the last axis fastest ({field: value})."""
    if grid_size(axes) > MAX_POINTS:
        raise BadInput(f"the grid has {grid_size(axes):,} points, more than {MAX_POINTS:,}",
                       hint="sweep fewer values per axis")
    fields = [a.field for a in axes]
    if len(set(fields)) != len(fields):
        dup = next(f for f in fields if fields.count(f) > 1)
        raise BadInput(f"--set names {dup} twice", hint="give each setting one --set")
    for combo in itertools.product(*(a.values for a in axes)):
        yield dict(zip(fields, combo, strict=True))


class Evaluator:
    """Estimates deployments exactly as ``estimate`` does, with the shared work cached (every
    cache is this object's)."""

    def __init__(self) -> None:
        from memprof.batch.memo import ReadMemo, all_terms
        from memprof.batch.replay import AllocatorReplayCache
        from memprof.batch.steps import CachedSteps, LayoutKeys
        from memprof.core.terms.allocator import allocator_runtime_terms

        before, after = default_terms()
        layout = LayoutKeys()  # shared: a grid point's settings are read and hashed once
        replay = AllocatorReplayCache(layout)
        # every term remembered by what it reads; the allocator replay shared
        self.terms: tuple[list[TermFn], list[TermFn]] = (
            [ReadMemo(f) for f in before],
            [replay if f is allocator_runtime_terms else ReadMemo(f) for f in after])
        # what the estimator runs: the budget terms of a class of ranks as one memo over the
        # terms' memos (classes that agree on everything those read get the components with one
        # lookup, not one per term; ``self.terms[0]`` are the terms' own memos); where the first
        # classes of a sweep share nothing (a term reads the length: DeepSeek's activations),
        # the terms' memos are asked directly
        self._run_terms: tuple[list[TermFn], list[TermFn]] = (
            [ReadMemo(all_terms(self.terms[0]), direct_after_misses=CLASS_MEMO_TRIES)],
            self.terms[1])
        self._specs: dict[tuple[str, bool], ModelSpec] = {}
        self._gpus: dict[tuple[str | None, int | None, str | None], GPU] = {}
        self._cached = CachedSteps(layout)
        self._steps = self._cached.steps

    def spec(self, model: str | ModelSpec, mtp: bool) -> ModelSpec:
        if isinstance(model, ModelSpec):
            return model
        key = (model, mtp)
        if key not in self._specs:
            self._specs[key] = load_model(model, speculative_mtp=mtp)
        return self._specs[key]

    def gpu(self, name: str | None, memory: int | None, arch: str | None = None) -> GPU:
        key = (name, memory, arch)
        if key not in self._gpus:
            self._gpus[key] = resolve_gpu(name, memory, arch)
        return self._gpus[key]

    def remember_gpu(self, name: str | None, memory: int | None, gpu: GPU,
                     arch: str | None = None) -> None:
        self._gpus[(name, memory, arch)] = gpu

    def estimate(self, model: str | ModelSpec, dep: Deployment, gpu: GPU, *,
                 notes: bool = True) -> Estimate:
        """``estimate`` of one deployment (``notes=False``: no notes written, as a caller
        that keeps only figures asks)."""
        spec = self.spec(model, dep.speculative_mtp)
        return estimate(spec, dep, gpu=gpu, terms=self._run_terms, steps=self._steps,
                        notes=notes)

    def prepared_layout(self, model: str | ModelSpec, layout: Deployment, gpu: GPU
                        ) -> tuple[ModelSpec, Deployment, int] | None:
        """What ``estimate_prepared`` estimates a sweep's points of one layout from (every
        setting but ``gpu_memory_utilization``): the model, the layout's prepared deployment
        and its settings' number (``CachedSteps.prepared_base``). None where the estimate of
        a point could differ from its own deployment's: an override of the model's config, a
        GPU the estimate would change (``--no-gpu-peer-access``), ``--max-model-len auto``
        (the estimate reads it from the deployment as given, which preparing resolves to the
        derived length), an EAGLE head (``estimate`` adds it to the model), or a preparation
        that changes what the estimate reads before it prepares (the speculative tokens, the
        engine, the overrides). A refusal is raised as the estimate of any of its points with
        a utilisation the steps share raises it."""
        if layout.hf_overrides or (layout.no_gpu_peer_access and gpu.peer_access) or (
                layout.max_model_len == AUTO_FIT) or layout.speculative_model:
            return None  # (an EAGLE head joins the spec as the estimate builds it)
        spec = self.spec(model, layout.speculative_mtp)
        base, n = self._cached.prepared_base(layout, spec, gpu)
        if (base.num_speculative_tokens, base.speculative_method) != (
                layout.num_speculative_tokens, layout.speculative_method) or (
                base.engine, base.assume_architecture, base.no_gpu_peer_access,
                base.hf_overrides) != (layout.engine, layout.assume_architecture,
                                       layout.no_gpu_peer_access, layout.hf_overrides):
            return None
        return spec, base, n

    def estimate_prepared(self, spec: ModelSpec, base: Deployment, number: int,
                          util: float | None, gpu: GPU) -> Estimate:
        """``estimate(spec, layout.with_(gpu_memory_utilization=util), gpu, notes=False)`` for
        the layout ``prepared_layout`` gave ``base`` and ``number`` for (``util`` None, or in
        (0, 1] where the engine budgets by it): its prepared deployment is ``base`` with
        ``util``, which the steps take as prepared (``CachedSteps.ready``), so no point builds
        a deployment of its own."""
        dep = (base.with_(gpu_memory_utilization=util)
               if util is not None and base.gpu_memory_utilization is not None else base)
        self._cached.ready(dep, number)
        return estimate(spec, dep, gpu=gpu, terms=self._run_terms, steps=self._steps,
                        notes=False)


RESULT_COLUMNS = ("gpus", "verdict", "kv_cache_tokens", "max_concurrency",
                  "kv_cache_bytes_per_token", "weights_bytes", "available_kv_bytes",
                  "headroom_bytes", "max_model_len", "max_num_seqs", "error")


def record(e: Estimate) -> dict[str, Any]:
    """The figures of one estimate as a flat record (sizes in bytes)."""
    if len(e.ranks) == 1:  # (the usual point: one distinct rank, its figures read once)
        r = e.ranks[0]
        return {
            "gpus": e.deployment.world_size,
            "verdict": e.verdict,
            "kv_cache_tokens": r.kv.tokens,
            "max_concurrency": round(r.kv.max_concurrency, 4),
            "kv_cache_bytes_per_token": r.plan.bytes_per_token,
            "weights_bytes": r.weights_bytes,
            "available_kv_bytes": r.available_kv_bytes,
            "headroom_bytes": r.headroom_bytes,
            "max_model_len": e.max_model_len,
            "max_num_seqs": e.deployment.max_num_seqs,
            "error": "",
        }
    return {
        "gpus": e.deployment.world_size,
        "verdict": e.verdict,
        "kv_cache_tokens": e.kv_cache_tokens,
        "max_concurrency": round(e.max_concurrency, 4),
        "kv_cache_bytes_per_token": e.kv_cache_bytes_per_token,
        "weights_bytes": e.weights_bytes_max,
        "available_kv_bytes": min(r.available_kv_bytes for r in e.ranks),
        "headroom_bytes": min(r.headroom_bytes for r in e.ranks),
        "max_model_len": e.max_model_len,
        "max_num_seqs": e.deployment.max_num_seqs,
        "error": "",
    }


def sweep(model: str, base: Deployment, gpu_name: str | None, gpu_memory: int | None,
          axes: list[Axis], evaluator: Evaluator | None = None,
          base_gpu: GPU | None = None, gpu_arch: str | None = None) -> list[dict[str, Any]]:
    """One record per grid point: the axes' values, then ``RESULT_COLUMNS``. A point the engine
    would refuse (TP not dividing the heads, ...) has verdict ``invalid`` and its error."""
    ev = evaluator or Evaluator()
    if base_gpu is not None:  # e.g. --gpu auto, resolved by the caller
        ev.remember_gpu(gpu_name, gpu_memory, base_gpu, gpu_arch)
    out: list[dict[str, Any]] = []
    names = {a.field: a.name for a in axes}
    for a in axes:  # a GPU or a model the user mistyped is an error, not an invalid point
        for v in a.values:
            if a.field == "gpu":
                ev.gpu(v, gpu_memory, gpu_arch)
            elif a.field == "model":
                ev.spec(v, base.speculative_mtp)
    the_gpu = ev.gpu(gpu_name, gpu_memory, gpu_arch)
    ev.spec(model, base.speculative_mtp)
    # without a gpu or model axis a point is all deployment settings, on the one GPU
    plain = not any(a.field in EXTRA_AXES for a in axes)
    util_field = "gpu_memory_utilization"
    # a point's layout (every value but the utilisation) → what its points with a utilisation
    # the steps share are estimated from (``Evaluator.prepared_layout``; None: each point from
    # its own deployment) or the refusal each such point gets, and whether the engine budgets
    # by a utilisation (else only a point without one shares it)
    layouts: dict[tuple[Any, ...],
                  tuple[tuple[ModelSpec, Deployment, int] | str | None, bool]] = {}
    others = [a.field for a in axes if a.field != util_field]  # a layout's values, read in C
    row_names = [names[a.field] for a in axes]
    same_names = row_names == [a.field for a in axes]
    layout_key: Callable[[dict[str, Any]], tuple[Any, ...]] = (
        operator.itemgetter(*others) if len(others) > 1
        else (lambda p: (p[others[0]],)) if others else (lambda p: ()))
    for point in points(axes):
        # (a point holds the axes in order: where each is named by its field, a copy)
        row: dict[str, Any] = (point.copy() if same_names
                               else dict(zip(row_names, point.values(), strict=False)))
        changes = point if plain else {k: v for k, v in point.items() if k not in EXTRA_AXES}
        try:
            gpu = the_gpu if plain else ev.gpu(point.get("gpu", gpu_name), gpu_memory, gpu_arch)
            which = point.get("model", model)
            util = changes.get(util_field, base.gpu_memory_utilization)
            lkey = layout_key(point)
            entry = layouts.get(lkey)
            if entry is None:
                layout = base.with_(**{k: v for k, v in changes.items() if k != util_field})
                try:
                    at: tuple[ModelSpec, Deployment, int] | str | None = \
                        ev.prepared_layout(which, layout, gpu)
                except BadInput as exc:  # (every point the steps share it with: the same)
                    at = exc.message
                entry = layouts[lkey] = (at, engine_of(layout).budget_by_utilization)
            at, by_util = entry
            shared = util is None or (0.0 < util <= 1.0 and by_util)
            # (a record holds no notes: none are written)
            if at is None or not shared:
                row.update(record(ev.estimate(which, base.with_(**changes), gpu, notes=False)))
            elif isinstance(at, str):
                row.update({c: point.get(c) for c in RESULT_COLUMNS})
                row.update(verdict="invalid", error=at)
            else:
                row.update(record(ev.estimate_prepared(at[0], at[1], at[2], util, gpu)))
        except BadInput as exc:  # its inputs stay (a result column it set shows its value)
            row.update({c: point.get(c) for c in RESULT_COLUMNS})
            row.update(verdict="invalid", error=exc.message)
        out.append(row)
    return out


__all__ = ["BY_FIELD", "Axis", "Evaluator", "parse_axis", "points", "record", "sweep"]
