"""The engines memprof models, one module each behind ``base.Engine``, and the registry.

A new engine is one module here (an ``Engine`` subclass and its ``ENGINE`` instance, its flag
spellings in ``Engine.flags``), one line in ``ENGINES``, and its row of releases (display name,
releases, whether they are source snapshots) in ``memprof/core/releases.py``, the leaf that
``versions`` and the engine modules both read. Everything that differs by engine asks
``engine_of(dep)`` (or ``engine_named``); tests/test_extension_axes.py keeps it so.
"""

from __future__ import annotations

from memprof.base.errors import BadInput
from memprof.core.engines import sglang, vllm
from memprof.core.engines.base import DeploymentView, Engine

ENGINES: dict[str, Engine] = {e.name: e for e in (vllm.ENGINE, sglang.ENGINE)}
NAMES: tuple[str, ...] = tuple(ENGINES)
# the engine a deployment runs when --engine is not given (``Deployment.engine``'s default)
DEFAULT: str = vllm.ENGINE.name


def engine_named(name: str) -> Engine:
    """The engine called ``name``; an unknown name is ``BadInput`` (exit 2), as
    ``deployment.validate`` words it."""
    engine = ENGINES.get(name)
    if engine is None:
        raise BadInput(f"unknown --engine {str(name)[:40]!r}", hint=" or ".join(NAMES))
    return engine


def engine_of(dep: DeploymentView) -> Engine:
    """The engine a deployment runs (``BadInput`` for an unknown one: ``engine_named``)."""
    engine = ENGINES.get(dep.engine)  # (an estimate asks a dozen times: one lookup, no call)
    return engine if engine is not None else engine_named(dep.engine)
