"""A memory term remembered by the settings it reads, for sweeps.

A sweep's points differ in a few settings (``tp``, ``max_model_len``, ``max_num_seqs`` …) and
most terms read only some of them: the CUDA-graph term reads the batch size but not the context
length, the model-load rounding neither. ``ReadMemo`` wraps a term: when it runs, it is handed a
context whose fields, and whose deployment's fields, record that they were read; the result is
kept under the values of what was read (the model and the KV plan by identity). A later context
that agrees on every field of a recorded read set gets that result without the term running.

Why this is exact: a term is a pure function of its context. A run on a context that agrees
with an earlier one on every field the earlier run read takes the same branches, so it reads the
same fields and returns the same components. A property or method of the deployment or context
runs with the recorder as ``self``, so what it reads is recorded too; hashing, comparing or
printing either (a memo key of all settings) counts as reading every field, and a term that
reads every setting is run directly after its first run (``estimate``'s class memo already
shares it). A run that fails with the recorder in place is run again plainly.
``tests/test_term_memo.py`` checks the recorder's rules and sweeps against cold estimates.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from dataclasses import fields
from types import FunctionType, MethodType
from typing import Any, cast

from memprof.core.components import Component, TermContext, TermFn
from memprof.core.deployment import Deployment

DEP_FIELDS = tuple(f.name for f in fields(Deployment))
CTX_FIELDS = tuple(f.name for f in fields(TermContext) if f.name != "dep")
# context fields compared by identity (their objects are kept alive by the memo)
BY_ID = frozenset({"spec", "plan"})
# what only the KV budget reads (estimate.py's class memo already shares the rest)
EVERY_SETTING = frozenset(("dep", n) for n in DEP_FIELDS if n != "gpu_memory_utilization")
MAX_ENTRIES = 4096  # results kept per term before the memo starts afresh

_Read = tuple[str, str]  # ("dep" | "ctx", field name)


class _Recorder:
    """Stands in for a frozen dataclass instance and records which of its fields are read.

    A property or method of the class runs with the recorder as ``self``, so its reads are
    recorded too; hashing, comparing or printing the object counts as reading every field."""

    __slots__ = ("_fields", "_kind", "_obj", "_read")

    def __init__(self, obj: object, read: set[_Read], kind: str,
                 field_names: tuple[str, ...]) -> None:
        self._obj = obj
        self._read = read
        self._kind = kind
        self._fields = field_names

    def _all(self) -> None:
        self._read.update((self._kind, n) for n in self._fields)

    def __getattr__(self, name: str) -> Any:
        if name in self._fields:
            self._read.add((self._kind, name))
            return getattr(self._obj, name)
        kind, attr = _class_attr(type(self._obj), name)
        if kind == "property":
            return attr.fget(self)
        if kind == "function":
            return MethodType(attr, self)
        self._all()  # a descriptor of another kind: assume it reads everything
        return getattr(self._obj, name)

    def __hash__(self) -> int:
        self._all()
        return hash(self._obj)

    def __eq__(self, other: object) -> bool:
        self._all()
        if isinstance(other, _Recorder):
            other = other._obj
        return bool(self._obj == other)

    def __repr__(self) -> str:
        self._all()
        return repr(self._obj)


_ATTRS: dict[tuple[type, str], tuple[str, Any]] = {}


def _class_attr(cls: type, name: str) -> tuple[str, Any]:
    """("property" | "function" | "other", the attribute) of a class, kept per name."""
    known = _ATTRS.get((cls, name))
    if known is None:
        attr = inspect.getattr_static(cls, name, None)
        if attr is None:
            raise AttributeError(name)
        kind = ("property" if isinstance(attr, property) and attr.fget is not None
                else "function" if isinstance(attr, FunctionType) else "other")
        known = _ATTRS[(cls, name)] = (kind, attr)
    return known


class _ContextRecorder(_Recorder):
    """A ``TermContext`` whose ``dep`` is a recorder sharing the read set."""

    __slots__ = ("_dep",)

    def __init__(self, ctx: TermContext, read: set[_Read]) -> None:
        super().__init__(ctx, read, "ctx", CTX_FIELDS)
        self._dep = _Recorder(ctx.dep, read, "dep", DEP_FIELDS)

    def __getattr__(self, name: str) -> Any:
        if name == "dep":
            return self._dep
        return super().__getattr__(name)

    def _all(self) -> None:
        super()._all()
        self._dep._all()


def recorded_run(term: TermFn, ctx: TermContext) -> tuple[list[Component], frozenset[_Read]]:
    """``term(ctx)`` and the context and deployment fields it read."""
    read: set[_Read] = set()
    out = term(cast(TermContext, _ContextRecorder(ctx, read)))
    return out, frozenset(read)


def _key_fn(reads: frozenset[_Read]) -> Callable[[TermContext], tuple[object, ...]]:
    """The values of ``reads`` in a context (model and KV plan by id)."""
    ctx_names = sorted(n for k, n in reads if k == "ctx")
    dep_names = sorted(n for k, n in reads if k == "dep")
    by_id = [n for n in ctx_names if n in BY_ID]
    by_value = [n for n in ctx_names if n not in BY_ID]

    def values(getter_names: list[str]) -> Callable[[object], tuple[object, ...]]:
        if not getter_names:
            return lambda _o: ()
        if len(getter_names) == 1:
            one = operator.attrgetter(getter_names[0])
            return lambda o: (one(o),)
        return operator.attrgetter(*getter_names)

    ids, vals, deps = values(by_id), values(by_value), values(dep_names)

    def key(ctx: TermContext) -> tuple[object, ...]:
        return (tuple(id(x) for x in ids(ctx)), vals(ctx), deps(ctx.dep))

    return key


class ReadMemo:
    """``term`` (a ``TermFn``), remembered by what it reads. Use one per sweep (``Evaluator``):
    the models and KV plans it has met are kept alive while their ids are keys."""

    def __init__(self, term: TermFn) -> None:
        self.term = term
        self.__name__ = getattr(term, "__name__", "term")
        # the read sets met so far, each with the function that reads its values
        self._sets: list[tuple[frozenset[_Read], Callable[[TermContext], tuple[object, ...]]]] = []
        self._results: dict[tuple[object, ...], tuple[Component, ...]] = {}
        self._alive: list[object] = []
        self.hits = 0
        self.runs = 0
        self.direct = False  # set once a run reads every setting: nothing to share

    def __call__(self, ctx: TermContext) -> list[Component]:
        if self.direct:
            return self.term(ctx)
        for i, (_reads, key) in enumerate(self._sets):
            hit = self._results.get((i, key(ctx)))
            if hit is not None:
                self.hits += 1
                return list(hit)
        self.runs += 1
        try:
            out, reads = recorded_run(self.term, ctx)
        except Exception:  # the stand-in may be what failed: run the term plainly
            self.direct = True  # (a term that fails on its own raises the same error again)
            return self.term(ctx)
        if reads >= EVERY_SETTING:  # only the same class of ranks would share it
            self.direct = True
            return out
        known = [k for k, (r, _f) in enumerate(self._sets) if r == reads]
        i = known[0] if known else len(self._sets)
        if not known:
            self._sets.append((reads, _key_fn(reads)))
        if len(self._results) >= MAX_ENTRIES:
            self._results.clear()
            self._alive.clear()
        self._alive += [ctx.spec, ctx.plan]  # their ids may be in the key
        self._results[(i, self._sets[i][1](ctx))] = tuple(out)
        return list(out)
