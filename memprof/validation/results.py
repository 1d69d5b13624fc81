"""The result of ``memprof validate`` (:class:`ValidationRun`: the validations it ran, where) and
its JSON contract (``schema_version`` 1), built here so the reporters only serialise it, with
its inverse: a result rebuilt from its JSON (a recorded GPU run rendered again, as the golden
tests do, without running a kernel).

A validation's dict is its dataclass as is (``dataclasses.asdict``) plus the verdicts its type
derives (``VERDICTS``: ``parity_passed``, ``memory_passed``, ``graph_passed`` where it has a
graph-clean check, ``passed``); its type is found by its ``kernel`` in the registry
(``memprof.validation.registry``)."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any

from memprof.validation.registry import Validation, by_name

VALIDATE_SCHEMA_VERSION = 1
DERIVED = ("parity_passed", "memory_passed", "graph_passed", "passed")


@dataclass(frozen=True, slots=True)
class ValidationRun:
    """What one ``memprof validate`` ran: its validations, in order, with torch's version and
    the device's name."""

    kernels: tuple[Validation, ...]
    torch_version: str
    device_name: str

    @property
    def passed(self) -> bool:
        return all(k.passed for k in self.kernels)


def kernel_dict(k: Validation) -> dict[str, Any]:
    """One validation as a JSON-able dict."""
    d: dict[str, Any] = dataclasses.asdict(k)  # type: ignore[call-overload]
    for name in k.VERDICTS:
        d[name] = getattr(k, name)
    return d


def validation_dict(run: ValidationRun) -> dict[str, Any]:
    """The whole JSON document of ``memprof validate --format json``."""
    return {"schema_version": VALIDATE_SCHEMA_VERSION, "torch_version": run.torch_version,
            "device_name": run.device_name, "passed": run.passed,
            "kernels": [kernel_dict(k) for k in run.kernels]}


def _build(tp: Any, value: Any) -> Any:
    """``value`` (parsed JSON) as type ``tp``: dataclasses field by field, tuples from lists."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _build(inner[0], value) if len(inner) == 1 else value
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_build(args[0], v) for v in value)
        return tuple(_build(a, v) for a, v in zip(args, value, strict=True))
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: _build(hints[f.name], value[f.name])
                     for f in dataclasses.fields(tp)})
    return value


def kernel_from_dict(d: dict[str, Any]) -> Validation:
    """A validation rebuilt from its JSON (``kernel_dict``'s output; the derived verdicts are
    recomputed, not read)."""
    cls = by_name(d["kernel"]).result
    built: Validation = _build(cls, {k: v for k, v in d.items() if k not in DERIVED})
    return built


def run_from_dict(doc: dict[str, Any]) -> ValidationRun:
    """A whole ``memprof validate --format json`` document rebuilt (``validation_dict``'s
    inverse)."""
    return ValidationRun(tuple(kernel_from_dict(k) for k in doc["kernels"]),
                         doc["torch_version"], doc["device_name"])
