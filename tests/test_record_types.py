"""Named tuples stand in for frozen dataclasses where a cold start defines them (see
``docs/benchmarks.md``): a ``dataclasses.field(...)`` left as a named tuple's default would be
the default itself, silently. Every named tuple in memprof is checked for one."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import memprof


def _named_tuples() -> list[type]:
    out = []
    for info in pkgutil.walk_packages(memprof.__path__, "memprof."):
        if info.name.endswith("__main__") or info.name.startswith(
                ("memprof.kernels", "memprof.validation", "memprof.trace")):
            continue  # the entry point; torch / GPU-only modules
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, tuple)
                    and hasattr(value, "_field_defaults") and value.__module__ == info.name):
                out.append(value)
    return out


def test_no_named_tuple_default_is_a_dataclass_field() -> None:
    found = _named_tuples()
    assert len(found) >= 10  # the scan sees them (it would pass vacuously otherwise)
    bad = [f"{t.__module__}.{t.__name__}.{k}" for t in found
           for k, v in t._field_defaults.items() if isinstance(v, dataclasses.Field)]
    assert bad == []
