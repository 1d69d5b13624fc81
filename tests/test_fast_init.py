"""``memprof.base.frozen.fast_init``: the ``__init__`` it writes takes the parameters the
dataclass's own takes (names, kinds, defaults, annotations), builds equal objects, sets fields left
out of ``__init__`` to their defaults and calls ``__post_init__``; a class it cannot stand for is
refused when defined. The classes a sweep builds for every deployment carry it."""

from __future__ import annotations

import inspect
from dataclasses import MISSING, InitVar, dataclass, field, fields
from typing import ClassVar

import pytest

from memprof.base.frozen import fast_init
from memprof.core.components import Component
from memprof.core.estimate import Estimate, RankEstimate
from memprof.core.kvcache import KVCapacity


def _pair(kw_only: bool):  # type: ignore[no-untyped-def]
    """The same dataclass twice, the second with ``fast_init``."""

    def make():  # type: ignore[no-untyped-def]
        @dataclass(frozen=True, slots=True, kw_only=kw_only)
        class P:
            a: int
            b: str = "b"
            c: tuple[int, ...] = ()
            seen: int = field(default=0, init=False, repr=False, compare=False)

            def __post_init__(self) -> None:
                object.__setattr__(self, "seen", self.a + 1)
        return P

    return make(), fast_init(make())


def _params(cls: type) -> list[tuple[str, object, object, object]]:
    return [(p.name, p.kind, p.default, p.annotation)
            for p in inspect.signature(cls).parameters.values()]


@pytest.mark.parametrize("kw_only", [True, False])
def test_same_parameters_and_objects(kw_only: bool) -> None:
    plain, fast = _pair(kw_only)
    assert _params(plain) == _params(fast)
    for kwargs in ({"a": 1}, {"a": 2, "b": "x"}, {"a": 3, "b": "y", "c": (1, 2)}):
        p, f = plain(**kwargs), fast(**kwargs)
        assert [getattr(p, x.name) for x in fields(p)] == [getattr(f, x.name) for x in fields(f)]
        assert f.seen == kwargs["a"] + 1  # __post_init__ ran after the fields were set
    with pytest.raises(TypeError):
        fast()
    with pytest.raises(TypeError):
        fast(a=1, d=2)
    if kw_only:
        with pytest.raises(TypeError):
            fast(1)
    else:
        assert fast(1, "z").b == "z"


def test_refused_classes() -> None:
    @dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = field(default_factory=list)

    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(frozen=True, slots=True)
    class WithClassVar:
        k: ClassVar[int] = 1
        a: int = 0

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        a: int
        b: InitVar[int] = 0

    for cls in (Factory, NoSlots, WithClassVar, WithInitVar):
        with pytest.raises(TypeError):
            fast_init(cls)


@pytest.mark.parametrize("cls", [Component, KVCapacity, RankEstimate, Estimate])
def test_hot_classes_take_their_fields(cls: type) -> None:
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
    want = [(f.name, inspect.Parameter.KEYWORD_ONLY,
             inspect.Parameter.empty if f.default is MISSING else f.default, f.type)
            for f in fields(cls) if f.init]
    assert _params(cls) == want
    c = Component(name="x", category="weights", bytes=3)
    assert (c.count, c.profiled, c.formula, c.where) == (1, True, "", "budget")
