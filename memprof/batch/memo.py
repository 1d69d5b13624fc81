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
reads every setting is run directly after its first run (the sweep's cached ``class_core``,
``memprof.batch.steps``, already shares it). An error a term raises under the recorder is
raised to the caller, never retried without it: a term the recorder cannot stand in for is a bug
to see. ``tests/test_term_memo.py`` checks the recorder's rules and sweeps against cold
estimates; ``tests/test_term_reads.py`` checks each term's declared reads with the recorder.
``SpecDepMemo`` does the same for a function of the model and a deployment (the sweep's rank
order: ``tests/test_spec_dep_memo.py``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import fields
from typing import Any, Generic, TypeVar

from memprof.core.components import Component, TermContext, TermFn
from memprof.core.deployment import Deployment

DEP_FIELDS = tuple(f.name for f in fields(Deployment))
CTX_FIELDS = tuple(f.name for f in fields(TermContext) if f.name != "dep")
# context fields compared by identity (their objects are kept alive by the memo)
BY_ID = frozenset({"spec", "plan"})
# what only the KV budget reads (the sweep's cached class_core already shares the rest)
EVERY_SETTING = frozenset(("dep", n) for n in DEP_FIELDS if n != "gpu_memory_utilization")
MAX_ENTRIES = 4096  # results kept per term before the memo starts afresh

_Read = tuple[str, str]  # ("dep" | "ctx", field name)
_D = TypeVar("_D")
_T = TypeVar("_T")


class _Reader:
    """A field of a recorder: the first read adds ``(kind, field)`` to the read set and keeps
    the value in the instance's ``__dict__``, where later reads find it without this descriptor
    (it defines no ``__set__``, so the instance's entry comes first): a term that reads a field
    many times pays for recording once."""

    __slots__ = ("key", "name")

    def __init__(self, kind: str, name: str) -> None:
        self.key, self.name = (kind, name), name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        obj._rec_read.add(self.key)
        value = obj.__dict__[self.name] = getattr(obj._rec_obj, self.name)
        return value


class _Inner:
    """The field of a recorder whose value is the inner recorder (not counted as a read); the
    instance's ``__dict__`` holds it too, so reads rarely get here."""

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else obj._rec_inner


def _recording_class(base: type[_D], kind: str, names: tuple[str, ...],
                     inner: str | None = None) -> type[_D]:
    """A subclass of the frozen dataclass ``base`` whose instances stand for one instance of it
    (``_rec_obj``) and add ``(kind, field)`` to ``_rec_read`` for each field read (``_Reader``).
    Properties and methods are inherited, so they run on the recorder and their reads are
    recorded too; hashing, comparing or printing counts as reading every field. ``inner``: a
    field whose value is itself a recorder (``_rec_inner``, put in the instance's ``__dict__``
    when it is made), returned without being counted; reading everything reads everything of
    it too."""

    def read_all(self: Any) -> None:
        self._rec_read.update((kind, n) for n in names if n != inner)
        if inner is not None:
            self._rec_inner._read_all()

    def hash_(self: Any) -> int:
        self._read_all()
        return hash(self._rec_obj)

    def eq(self: Any, other: object) -> bool:
        self._read_all()
        return bool(self._rec_obj == getattr(other, "_rec_obj", other))

    def repr_(self: Any) -> str:
        self._read_all()
        return repr(self._rec_obj)

    cls = type(f"Recording{base.__name__}", (base,), {
        "__slots__": ("__dict__", "_rec_inner", "_rec_obj", "_rec_read"),
        "_read_all": read_all, "__hash__": hash_, "__eq__": eq, "__repr__": repr_})
    for name in names:
        setattr(cls, name, _Inner() if name == inner else _Reader(kind, name))
    return cls


_RecordingDeployment = _recording_class(Deployment, "dep", DEP_FIELDS)
# the context's deployment is a recorder itself, sharing the read set
_RecordingContext = _recording_class(TermContext, "ctx", (*CTX_FIELDS, "dep"), inner="dep")


def _recorder(cls: type[_D], obj: _D, read: set[_Read], inner: object = None,
              inner_name: str = "") -> _D:
    rec = object.__new__(cls)
    for slot, value in (("_rec_obj", obj), ("_rec_read", read), ("_rec_inner", inner)):
        object.__setattr__(rec, slot, value)
    if inner_name:  # the inner recorder, read as the field without being counted
        rec.__dict__[inner_name] = inner
    return rec


def recorded_run(term: Callable[[TermContext], _T], ctx: TermContext
                 ) -> tuple[_T, frozenset[_Read]]:
    """``term(ctx)`` and the context and deployment fields it read."""
    read: set[_Read] = set()
    dep = _recorder(_RecordingDeployment, ctx.dep, read)
    return term(_recorder(_RecordingContext, ctx, read, dep, "dep")), frozenset(read)


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

    vals, deps = values(by_value), values(dep_names)
    if not by_id:  # (the usual case: a term reads the model and KV plan through settings)
        return lambda ctx: (vals(ctx), deps(ctx.dep))
    ids = [operator.attrgetter(n) for n in by_id]
    if len(ids) == 1:  # (the model or the KV plan: the same key, without a list per call)
        one = ids[0]
        return lambda ctx: (id(one(ctx)), vals(ctx), deps(ctx.dep))
    if len(ids) == 2:
        first, second = ids
        return lambda ctx: (id(first(ctx)), id(second(ctx)), vals(ctx), deps(ctx.dep))
    return lambda ctx: (*[id(get(ctx)) for get in ids], vals(ctx), deps(ctx.dep))


_MISSING = object()  # a result no term returns


class ReadMemoFn(Generic[_T]):
    """``fn`` (a function of a ``TermContext``), remembered by what it reads; results are
    returned as stored (the caller copies what it changes). The models and KV plans it has met
    are kept alive while their ids are keys."""

    def __init__(self, fn: Callable[[TermContext], _T], *,
                 direct_when_reading_everything: bool = True,
                 direct_after_misses: int | None = None) -> None:
        """``direct_when_reading_everything``: once a run reads every setting, run ``fn``
        plainly from then on (a caller that already shares work per class of ranks); otherwise
        such a result is kept under all its settings like any other.
        ``direct_after_misses``: run ``fn`` plainly once that many runs found no result kept
        (a memo whose contexts differ in what it reads costs its recording and saves
        nothing; running plainly is the same result)."""
        self.fn = fn
        self._give_up = direct_after_misses
        self.__name__ = getattr(fn, "__name__", "term")
        self._direct_when_everything = direct_when_reading_everything
        # the read sets met so far, each with the function that reads its values
        self._sets: list[tuple[frozenset[_Read], Callable[[TermContext], tuple[object, ...]]]] = []
        # the results of each read set (``_sets[i]``), by the values it read
        self._results: list[dict[tuple[object, ...], _T]] = []
        self._count = 0  # results kept in all
        self._alive: list[object] = []
        self.hits = 0
        self.runs = 0
        self.direct = False  # set once a run reads every setting: nothing to share

    def value(self, ctx: TermContext) -> _T:
        if self.direct:
            return self.fn(ctx)
        sets = self._sets
        if len(sets) == 1:  # (the usual case: one read set, no enumeration)
            found = self._results[0].get(sets[0][1](ctx), _MISSING)
            if found is not _MISSING:
                self.hits += 1
                return found  # type: ignore[return-value]
        else:
            for (_reads, key), results in zip(sets, self._results, strict=True):
                found = results.get(key(ctx), _MISSING)
                if found is not _MISSING:
                    self.hits += 1
                    return found  # type: ignore[return-value]
        self.runs += 1
        if self._give_up is not None and not self.hits and self.runs > self._give_up:
            self.direct = True  # (nothing found in as many runs: not worth recording)
            return self.fn(ctx)
        out, reads = recorded_run(self.fn, ctx)
        if self._direct_when_everything and reads >= EVERY_SETTING:
            self.direct = True  # only the same class of ranks would share it
            return out
        known = [k for k, (r, _f) in enumerate(self._sets) if r == reads]
        i = known[0] if known else len(self._sets)
        if not known:
            self._sets.append((reads, _key_fn(reads)))
            self._results.append({})
        if self._count >= MAX_ENTRIES:
            for results in self._results:
                results.clear()
            self._count = 0
            self._alive.clear()
        # the objects whose ids are in the key stay alive (read only if the run read them:
        # ``ctx`` may be a recorder of an enclosing memo)
        self._alive += [getattr(ctx, n) for n in sorted(BY_ID) if ("ctx", n) in reads]
        self._results[i][self._sets[i][1](ctx)] = out
        self._count += 1
        return out


class SpecDepMemo(Generic[_T]):
    """``fn(spec, dep)`` remembered by the model (by identity) and the deployment fields it reads
    (a recording deployment, as ``ReadMemoFn`` records a context's); results are returned as
    stored. The models it has met are kept alive while their ids are keys."""

    def __init__(self, fn: Callable[[Any, Deployment], _T]) -> None:
        self.fn = fn
        # the read sets met so far, each with the function that reads its values
        self._sets: list[tuple[frozenset[str], Callable[[Deployment], object]]] = []
        self._results: dict[tuple[object, ...], _T] = {}
        self._alive: dict[int, object] = {}
        self.hits = 0
        self.runs = 0

    def __call__(self, spec: Any, dep: Deployment) -> _T:
        sid = id(spec)
        for i, (_names, key) in enumerate(self._sets):
            found = self._results.get((i, sid, key(dep)), _MISSING)
            if found is not _MISSING:
                self.hits += 1
                return found  # type: ignore[return-value]
        self.runs += 1
        read: set[_Read] = set()
        out = self.fn(spec, _recorder(_RecordingDeployment, dep, read))
        names = frozenset(n for _kind, n in read)
        known = [k for k, (r, _f) in enumerate(self._sets) if r == names]
        i = known[0] if known else len(self._sets)
        if not known:
            ordered = sorted(names)
            self._sets.append((names, operator.attrgetter(*ordered) if ordered
                               else (lambda _d: ())))
        if len(self._results) >= MAX_ENTRIES:
            self._results.clear()
            self._alive.clear()
        self._alive[sid] = spec
        self._results[(i, sid, self._sets[i][1](dep))] = out
        return out


def all_terms(terms: list[TermFn]) -> TermFn:
    """One term whose components are those of ``terms``, in order (to be wrapped in a
    ``ReadMemo`` over term memos: a context that agrees with an earlier one on every field the
    earlier evaluation read, through every term's memo, gets the same components without any of
    the terms being looked up; each term's memo, whether it ran the term or found a result,
    read the fields that decide that result)."""

    def budget_terms(ctx: TermContext) -> list[Component]:
        return [c for fn in terms for c in fn(ctx)]

    return budget_terms


class ReadMemo(ReadMemoFn[tuple[Component, ...]]):
    """A term (a ``TermFn``) remembered by what it reads; each call gets its own list."""

    def __init__(self, term: TermFn, *, direct_after_misses: int | None = None) -> None:
        super().__init__(lambda ctx: tuple(term(ctx)), direct_after_misses=direct_after_misses)
        self.term = term
        self.__name__ = getattr(term, "__name__", "term")

    def __call__(self, ctx: TermContext) -> list[Component]:
        return list(self.value(ctx))
