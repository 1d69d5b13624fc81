"""Components (the named terms of a rank's memory) and the context a term is computed from.

A term is a small pure function ``(TermContext) -> list[Component]`` with its formula in the
docstring and a citation. ``memprof.core.estimate`` composes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Literal, get_args

from memprof.base.frozen import copier, fast_init
from memprof.core.deployment import Deployment, RankCoord
from memprof.core.gpus import GPU
from memprof.core.kvcache import KVPlan
from memprof.core.models import ModelSpec, QuantConfig

Category = Literal["weights", "kv_cache", "scratch", "activation", "cudagraph", "non_torch",
                   "allocator"]
Where = Literal["baseline", "budget", "runtime"]
CATEGORIES: tuple[Category, ...] = get_args(Category)
WHERE: tuple[Where, ...] = get_args(Where)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Component:
    """One named term of a rank's memory: ``count × bytes_each = bytes`` (bytes)."""

    name: str
    category: Category
    bytes: int
    count: int = 1
    profiled: bool = True  # does the engine's start-up profile see it (is it in the budget)?
    formula: str = ""
    placeholder: bool = False  # a labelled stand-in for a term not modelled yet
    # where the memory sits relative to the engine's budget (docs/memory-model.md):
    #   "baseline" — allocated before the engine's baseline snapshot (CUDA context, eager NCCL
    #                init): outside ``requested``, but it must fit beside it at start-up;
    #   "budget"   — inside ``requested`` (weights, profiled activations, graph estimate, KV);
    #   "runtime"  — appears after start-up and was not budgeted (lazy scratch, graph pool above
    #                the estimate, allocator slack).
    where: Where = "budget"

    @property
    def in_budget(self) -> bool:
        return self.where == "budget"

    @property
    def bytes_each(self) -> int:
        return self.bytes // self.count if self.count else self.bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class TermContext:
    """Everything a memory term may depend on, for one rank."""

    spec: ModelSpec
    dep: Deployment
    gpu: GPU
    coord: RankCoord
    plan: KVPlan
    weights_bytes: int
    model_dtype: str
    quant: QuantConfig | None = None
    # set only for runtime terms, evaluated after the KV cache is sized:
    num_gpu_blocks: int = 0
    kv_cache_bytes: int = 0

    def with_(self, **changes: object) -> TermContext:
        """The same context with some fields changed (the one way to derive a context); as
        ``dataclasses.replace``, without its per-field overhead."""
        if not _CONTEXT_FIELDS.issuperset(changes):  # an unknown name
            return replace(self, **changes)  # type: ignore[arg-type]  # raises its TypeError
        return _copy(self, changes)



_CONTEXT_FIELDS_ORDER = tuple(f.name for f in fields(TermContext))
_CONTEXT_FIELDS = frozenset(_CONTEXT_FIELDS_ORDER)
_copy = copier(TermContext, _CONTEXT_FIELDS_ORDER)

TermFn = Callable[[TermContext], list[Component]]
