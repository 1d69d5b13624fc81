"""The engines memprof models, one module each behind ``base.Engine``, and the registry.

A new engine is one module here (an ``Engine`` subclass and its ``ENGINE`` instance) and one line
in ``ENGINES``. Everything that differs by engine asks ``engine_of(dep)`` (or ``engine_named``).
"""

from __future__ import annotations

from memprof.core.engines import sglang, vllm
from memprof.core.engines.base import DeploymentView, Engine

ENGINES: dict[str, Engine] = {e.name: e for e in (vllm.ENGINE, sglang.ENGINE)}
NAMES: tuple[str, ...] = tuple(ENGINES)


def engine_named(name: str) -> Engine:
    """The engine called ``name`` (a ``KeyError`` for an unknown name: ``deployment.validate``
    refuses those first)."""
    return ENGINES[name]


def engine_of(dep: DeploymentView) -> Engine:
    return ENGINES[dep.engine]
