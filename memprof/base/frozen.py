"""A fast ``dataclasses.replace`` for frozen, slotted dataclasses that are derived thousands of
times (a sweep's deployments, a rank's term contexts): the copy is one straight-line function
per class, written once when the class's module is imported, as ``dataclasses`` writes the
class's ``__init__``; it sets every field through its slot's own setter (``object.__setattr__``
for a field that is not a slot; no ``__init__``, no ``__post_init__``, no field checks: the
caller copies a valid object) and then the changes. ``fast_init`` writes a class's ``__init__``
the same way (``object.__setattr__`` by name is what ``dataclasses`` writes for a frozen class)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


def copier(cls: type[_T], names: tuple[str, ...]) -> Callable[[_T, dict[str, Any]], _T]:
    """``copy(obj, changes)``: a new ``cls`` with ``obj``'s fields ``names`` (every field of
    ``cls``) and then ``changes`` (field names the caller has checked). The function is written
    on the first copy, not when the class's module is imported (a cold estimate may copy none)."""
    for n in names:
        if not n.isidentifier():
            raise ValueError(f"not a field name: {n!r}")
    written: list[Callable[[_T, dict[str, Any]], _T]] = []

    def copy(obj: _T, changes: dict[str, Any]) -> _T:
        if not written:
            written.append(_write(cls, names))
        return written[0](obj, changes)

    return copy


def _slot(cls: type, name: str) -> Any:
    """The slot descriptor of field ``name`` of ``cls`` (its ``__set__`` stores the value, as
    ``object.__setattr__`` does, without looking the name up), or None for a field that is not a
    slot."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(name)
        if found is not None:
            return found if type(found).__name__ == "member_descriptor" else None
    return None


def _write(cls: type[_T], names: tuple[str, ...]) -> Callable[[_T, dict[str, Any]], _T]:
    scope: dict[str, Any] = {"_new": object.__new__, "_set": object.__setattr__, "_cls": cls}
    lines = []
    for i, n in enumerate(names):
        slot = _slot(cls, n)
        if slot is None:
            lines.append(f"    _set(new, {n!r}, obj.{n})\n")
        else:  # the slot's own setter, bound once: a frozen class's fields set as ``_set`` does
            scope[f"_s{i}"] = slot.__set__
            lines.append(f"    _s{i}(new, obj.{n})\n")
    src = ("def copy(obj, changes):\n    new = _new(_cls)\n" + "".join(lines)
           + "    for name, value in changes.items():\n        _set(new, name, value)\n"
           "    return new\n")
    exec(src, scope)
    fn: Callable[[_T, dict[str, Any]], _T] = scope["copy"]
    return fn


def fast_init(cls: type[_T]) -> type[_T]:
    """Give the frozen, slotted dataclass ``cls`` an ``__init__`` that sets each field through
    its slot's own setter (as ``copier``'s copies do) in place of the one ``dataclasses`` wrote,
    which calls ``object.__setattr__`` by name for each field: the same parameters (positional,
    then keyword-only), the same default objects, fields left out of ``__init__`` set to their
    defaults, then ``__post_init__``. For classes built for every deployment a sweep estimates.
    A class this cannot stand for (a default factory, a field that is not a slot, an
    ``InitVar`` or ``ClassVar``) is a TypeError when it is defined."""
    from dataclasses import MISSING, fields

    flds = fields(cls)  # type: ignore[arg-type]
    declared = getattr(cls, "__dataclass_fields__", {})
    if len(declared) != len(flds):
        raise TypeError(f"{cls.__name__}: fast_init takes no InitVar or ClassVar fields")
    scope: dict[str, Any] = {}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for i, f in enumerate(flds):
        slot = _slot(cls, f.name)
        if slot is None or f.default_factory is not MISSING or not f.name.isidentifier() or (
                not f.init and f.default is MISSING):
            raise TypeError(f"{cls.__name__}.{f.name}: fast_init takes slot fields with plain "
                            "defaults")
        scope[f"_s{i}"] = slot.__set__
        if f.default is not MISSING:
            scope[f"_d{i}"] = f.default
        if not f.init:
            body.append(f"    _s{i}(self, _d{i})\n")
            continue
        (keyword if f.kw_only else positional).append(
            f.name if f.default is MISSING else f"{f.name}=_d{i}")
        body.append(f"    _s{i}(self, {f.name})\n")
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()\n")
    exec(f"def __init__({params}):\n" + "".join(body or ["    pass\n"]), scope)
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {**{f.name: f.type for f in flds if f.init}, "return": None}
    init.__module__ = cls.__module__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
