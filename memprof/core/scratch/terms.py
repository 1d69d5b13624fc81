"""The scratch terms as the estimate lists them, and whether a rank has any scratch at all.

A deployment has scratch buffers only where a catalog key applies to it: the engine's own keys
(SGLang's DP-attention gather), the resolved attention backend's scratch family (its row's
``scratch``), the attention kind's ``scratch_key`` (DeepSeek-V4's workspace). Most deployments
(GQA on FlashAttention) have none; for them these functions answer ``[]`` without importing the
catalog and its evaluation (``memprof.core.scratch.evaluate``, ~4 ms of a cold start), which is
what the evaluation itself answers when no key applies. ``tests/test_scratch_keys.py`` holds the
keys this module reads to the catalog's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memprof.base.errors import BadInput
from memprof.core.attention import kind_of
from memprof.core.attention_backends import BY_NAME
from memprof.core.deployment import SCRATCH_POLICIES
from memprof.core.engines import engine_of
from memprof.core.scratch.backends import resolve_backend

if TYPE_CHECKING:
    from memprof.core.components import Component, TermContext
    from memprof.core.scratch.evaluate import ScratchTensor


def scratch_keys(ctx: TermContext) -> list[str]:
    """The catalog keys that can apply to ``ctx``'s rank (as ``evaluate`` collects them);
    a ``--scratch`` that is no policy is refused here, before anything is evaluated."""
    dep, spec = ctx.dep, ctx.spec
    if dep.scratch is not None and dep.scratch not in SCRATCH_POLICIES:
        raise BadInput(f"unknown --scratch {dep.scratch!r}", hint="per-layer or shared")
    engine = engine_of(dep)
    keys = list(engine.scratch_keys(dep))
    if engine.selects_attention_backend:
        backend = resolve_backend(spec, ctx.gpu, dep)
        if BY_NAME[backend].scratch:
            keys.append(backend)
        kind_key = kind_of(spec.layers[0].attention).scratch_key
        if kind_key is not None:
            keys.append(kind_key)
    return keys


def scratch_budget_terms(ctx: TermContext) -> list[Component]:
    """``memprof.core.scratch.evaluate.scratch_budget_terms``, for a rank with scratch."""
    if not scratch_keys(ctx):
        return []
    from memprof.core.scratch import evaluate

    return evaluate.scratch_budget_terms(ctx)


def scratch_runtime_terms(ctx: TermContext) -> list[Component]:
    """``memprof.core.scratch.evaluate.scratch_runtime_terms``, for a rank with scratch."""
    if not scratch_keys(ctx):
        return []
    from memprof.core.scratch import evaluate

    return evaluate.scratch_runtime_terms(ctx)


def scratch_tensors(ctx: TermContext) -> list[ScratchTensor]:
    """``memprof.core.scratch.evaluate.scratch_tensors``, for a rank with scratch."""
    if not scratch_keys(ctx):
        return []
    from memprof.core.scratch import evaluate

    return evaluate.scratch_tensors(ctx)


def scratch_savings(ctx: TermContext) -> list[tuple[str, int, int]]:
    """``memprof.core.scratch.evaluate.scratch_savings``, for a rank with scratch (the keys do
    not depend on the policy, so a rank without them saves nothing under either)."""
    if not scratch_keys(ctx):
        return []
    from memprof.core.scratch import evaluate

    return evaluate.scratch_savings(ctx)
