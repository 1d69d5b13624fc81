"""The JSON contract (``schema_version`` 1) of ``memprof validate``, built here beside the
validation results so the reporters only serialise it, and its inverse: a result rebuilt from
its JSON (a recorded GPU run rendered again, as the golden tests do, without running a kernel).

A kernel's dict is its dataclass as is (``dataclasses.asdict``) plus the derived verdicts
``parity_passed``, ``memory_passed``, ``graph_passed`` (DeepSeek-V4 and DP gather only) and
``passed``."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from memprof.validation.dp_gather import DPGatherValidation
from memprof.validation.dsv4 import DSV4Validation
from memprof.validation.mla_tq import KernelValidation

AnyValidation = KernelValidation | DSV4Validation | DPGatherValidation

VALIDATE_SCHEMA_VERSION = 1
DERIVED = ("parity_passed", "memory_passed", "graph_passed", "passed")
KINDS: dict[str, type[KernelValidation] | type[DSV4Validation] | type[DPGatherValidation]] = {
    "mla": KernelValidation, "tq": KernelValidation, "dsv4": DSV4Validation,
    "dp_gather": DPGatherValidation}


def kernel_dict(k: AnyValidation) -> dict[str, Any]:
    """One kernel's validation as a JSON-able dict."""
    d = dataclasses.asdict(k)
    d["parity_passed"] = k.parity_passed
    d["memory_passed"] = k.memory_passed
    if not isinstance(k, KernelValidation):
        d["graph_passed"] = k.graph_passed
    d["passed"] = k.passed
    return d


def validation_dict(kernels: list[AnyValidation], torch_version: str,
                    device_name: str) -> dict[str, Any]:
    """The whole JSON document of ``memprof validate --format json``."""
    return {"schema_version": VALIDATE_SCHEMA_VERSION, "torch_version": torch_version,
            "device_name": device_name, "passed": all(k.passed for k in kernels),
            "kernels": [kernel_dict(k) for k in kernels]}


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


def kernel_from_dict(d: dict[str, Any]) -> AnyValidation:
    """A kernel's validation rebuilt from its JSON (``kernel_dict``'s output; the derived
    verdicts are recomputed, not read)."""
    cls = KINDS[d["kernel"]]
    built: AnyValidation = _build(cls, {k: v for k, v in d.items() if k not in DERIVED})
    return built
