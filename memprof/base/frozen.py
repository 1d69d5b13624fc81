"""A fast ``dataclasses.replace`` for frozen, slotted dataclasses that are derived thousands of
times (a sweep's deployments, a rank's term contexts): the copy is one straight-line function
per class, written once when the class's module is imported, as ``dataclasses`` writes the
class's ``__init__``; it sets every field through its slot's own setter (``object.__setattr__``
for a field that is not a slot; no ``__init__``, no ``__post_init__``, no field checks: the
caller copies a valid object) and then the changes."""

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
