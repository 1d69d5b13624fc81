"""Scratch buffers of attention backends: per layer or shared, inside the budget or at run time.

The four seed PRs of this project (vLLM #37442/#37805, #40655/#40941, SGLang #8280, vLLM
#40889/#40892) share one failure: a scratch buffer that one layer needs for one call was
allocated once per layer (61-64 copies) or once per layer per step, was not seen by vLLM's
start-up profile run (attention is skipped there), and turned into an OOM.

- ``buffer``: what a buffer is (``ScratchBuffer``, ``Part``, ``Dims``);
- one module per family: ``mla``, ``flashinfer``, ``turboquant``, ``sglang_dp``, ``dsv4``;
- ``catalog``: all of them (``CATALOG``, ``buffers_for``);
- ``backends``: the backend a deployment runs and the policy current releases use;
- ``evaluate``: the rank's scratch components and what sharing saves;
- ``terms``: the scratch terms the estimate lists, answering ``[]`` without the catalog for a
  rank no catalog key applies to.

The package imports nothing itself: its names load their module on first use.
"""

from typing import TYPE_CHECKING, Any

from memprof.base.lazy import attribute

if TYPE_CHECKING:
    from memprof.core.scratch.backends import (
        BACKENDS,
        default_backend,
        default_scratch_policy,
        resolve_backend,
    )
    from memprof.core.scratch.buffer import (
        WORKSPACE_ALIGN,
        Dims,
        Part,
        ScratchBuffer,
        dims,
    )
    from memprof.core.scratch.catalog import CATALOG, buffers_for
    from memprof.core.scratch.evaluate import scratch_terms
    from memprof.core.scratch.mla import CUTLASS_MLA_LATENT, CUTLASS_MLA_MAX_HEADS
    from memprof.core.scratch.terms import (
        scratch_budget_terms,
        scratch_runtime_terms,
        scratch_savings,
    )
    from memprof.core.scratch.turboquant import TQ_MAX_KV_SPLITS

__all__ = ["BACKENDS", "CATALOG", "CUTLASS_MLA_LATENT", "CUTLASS_MLA_MAX_HEADS",
           "TQ_MAX_KV_SPLITS", "WORKSPACE_ALIGN", "Dims", "Part", "ScratchBuffer",
           "buffers_for", "default_backend", "default_scratch_policy", "dims", "resolve_backend",
           "scratch_budget_terms", "scratch_runtime_terms", "scratch_savings", "scratch_terms"]

_HOME = {
    **dict.fromkeys(("BACKENDS", "default_backend", "default_scratch_policy", "resolve_backend"),
                    "memprof.core.scratch.backends"),
    **dict.fromkeys(("WORKSPACE_ALIGN", "Dims", "Part", "ScratchBuffer", "dims"),
                    "memprof.core.scratch.buffer"),
    **dict.fromkeys(("CATALOG", "buffers_for"), "memprof.core.scratch.catalog"),
    "scratch_terms": "memprof.core.scratch.evaluate",
    **dict.fromkeys(("CUTLASS_MLA_LATENT", "CUTLASS_MLA_MAX_HEADS"), "memprof.core.scratch.mla"),
    **dict.fromkeys(("scratch_budget_terms", "scratch_runtime_terms", "scratch_savings"),
                    "memprof.core.scratch.terms"),
    "TQ_MAX_KV_SPLITS": "memprof.core.scratch.turboquant",
}


def __getattr__(name: str) -> Any:
    """The public names, each imported from its module on first use (PEP 562): an estimate
    without scratch (no catalog key applies, ``terms``) never loads the catalog."""
    return attribute(__name__, _HOME, globals(), name)
