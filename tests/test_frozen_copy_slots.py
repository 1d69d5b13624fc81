"""``memprof.base.frozen.copier`` sets a slotted class's fields through each slot's own setter
and a class without slots through ``object.__setattr__``: both give what ``dataclasses.replace``
gives, a subclass's slots included."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from memprof.base.frozen import _slot, copier
from memprof.core.components import TermContext


@dataclass(frozen=True, slots=True, kw_only=True)
class _Base:
    a: int
    b: str = "b"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Derived(_Base):
    c: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class _NoSlots:
    a: int
    b: int = 0


def test_slots_found_through_the_bases() -> None:
    assert _slot(_Derived, "a") is _Base.__dict__["a"]  # declared on the base
    assert _slot(_Derived, "c") is _Derived.__dict__["c"]
    assert _slot(_NoSlots, "a") is None  # a class default, not a slot descriptor


def test_slotted_subclass_copy_is_replace() -> None:
    copy = copier(_Derived, tuple(f.name for f in fields(_Derived)))
    d = _Derived(a=1, b="x", c=(1, 2))
    out = copy(d, {"c": (3,)})
    assert out == replace(d, c=(3,)) and type(out) is _Derived and out is not d
    assert copy(d, {}) == d


def test_unslotted_copy_is_replace() -> None:
    copy = copier(_NoSlots, ("a", "b"))
    n = _NoSlots(a=1, b=2)
    assert copy(n, {"a": 7}) == replace(n, a=7)
    assert copy(n, {}).__dict__ == {"a": 1, "b": 2}


def test_term_context_with_is_replace_for_every_field() -> None:
    names = [f.name for f in fields(TermContext)]
    ctx = TermContext(**{n: n for n in names})  # type: ignore[arg-type]
    for n in names:
        assert ctx.with_(**{n: 1}) == replace(ctx, **{n: 1})  # type: ignore[arg-type]
