"""Package attributes loaded on first use (PEP 562): a package's ``__getattr__`` hands a name to
:func:`attribute`, which imports the name's home module, caches the value in the package's
namespace and returns it, so that importing the package loads none of its modules."""

from __future__ import annotations

from importlib import import_module
from typing import Any


def attribute(package: str, homes: dict[str, str], namespace: dict[str, Any], name: str) -> Any:
    """``name`` of ``package`` from its home module (``homes[name]``), kept in ``namespace``
    (the package's ``globals()``) so that the next access does not come back here."""
    home = homes.get(name)
    if home is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    namespace[name] = value
    return value
