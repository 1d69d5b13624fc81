"""CUDA-graph capture happens while the engine starts: where the graph memory it did not budget
does not fit beside everything it holds by then, the start fails, not the first request.

The engines memprof models capture their CUDA graphs during start-up, after the KV cache is
allocated and before they report ready:

- vLLM V1 (read in the 0.17.1 wheel): ``EngineCore._initialize_kv_caches`` allocates the cache
  (``Worker.initialize_from_config``), then ``Worker.compile_or_warm_up_model`` runs
  ``GPUModelRunner.capture_model`` and, after it, the sampler warm-up ``_dummy_sampler_run``,
  whose out-of-memory error reads "CUDA out of memory occurred when warming up sampler with N
  dummy requests" (v1/worker/gpu_model_runner.py); the API server logs "Application startup
  complete" only after that;
- vLLM V0 (read in the 0.8.4 wheel: ``LLMEngine._initialize_kv_caches`` calls the executor's
  ``initialize_cache``, whose ``Worker.initialize_cache`` runs ``_init_cache_engine`` and then
  ``_warm_up_model``, which runs ``capture_model``);
- SGLang (``ModelRunner.initialize`` in its 0.4 and 0.5 releases: ``init_memory_pool``, then
  ``init_cublas``, ``init_attention_backend`` and ``init_cuda_graphs``, before the server
  serves).

So the graph memory memprof places outside the engine's envelope (the CUDA-graph pool above the
engine's estimate, and for SGLang the graphs it keeps in the ``1 − mem_fraction_static`` slack)
is allocated at start-up: the rank holds, when start-up ends, the engine's envelope with what was
before its baseline (``Engine.used`` less the components outside it) plus those graph
components. Where that exceeds the GPU the capture (or the warm-up after it, which runs inside
the budget the capture has eaten into) runs out of memory and the engine never starts: a
``startup_oom``. What else is outside the envelope (allocator slack, scratch allocated at the
first decode, run-time peaks) appears only at run time and stays a ``runtime_oom``.

SGLang's request-to-token table (``memprof/core/terms/request_table.py``) is allocated at
start-up too, before the graphs: ``ModelRunner.init_memory_pool`` sizes the KV pool and then
builds ``ReqToTokenPool`` (``req_to_token``, read in the 0.4.5 and 0.5.5 wheels'
``model_executor/model_runner.py`` and ``mem_cache/memory_pool.py``), so it counts among the
start-up allocations outside the envelope; SGLang issue thread of ``tests/data/published.json``
row 119 (Llama-4-Scout at 0.4.5) fails there, in ``ReqToTokenPool.__init__``.

Published evidence: the vLLM 0.17.1 RTX 3090 log of ``tests/data/published.json`` row 1103
(TheBuccaneer/vllm-offload-profiles, fixd_llama_gmem090_offload0_failed.log) allocated its KV
cache, captured its graphs (84 MiB in torch's private pools at the failure) and ran out of memory
in the sampler warm-up, with other processes holding about 1.68 GiB of the card.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memprof.core.components import Component
from memprof.core.engines.base import Engine
from memprof.core.terms.request_table import REQUEST_TABLE

__all__ = ["CaptureOverflow", "capture_overflow", "overflow_of"]


@dataclass(frozen=True, slots=True)
class CaptureOverflow:
    """The rank's memory when start-up ends, above the GPU's total."""

    held_bytes: int  # baseline + envelope + the graph components outside it
    graphs: tuple[Component, ...]  # the start-up components outside the envelope
    over_bytes: int  # held_bytes − total (> 0)

    @property
    def what(self) -> str:
        """What the start-up allocations are, for the verdict's reason."""
        kinds = {"CUDA-graph capture" if c.category == "cudagraph" else c.name
                 for c in self.graphs}
        return " and ".join(sorted(kinds, reverse=True))


def capture_overflow(engine: Engine, comps: Sequence[Component], base: int, envelope: int,
                     total: int) -> CaptureOverflow | None:
    """What the rank holds when its start-up ends (the engine's envelope and baseline, as its
    ``used`` counts them, plus the CUDA-graph components and the request table outside the
    envelope), where that exceeds ``total``; None where it fits or no start-up allocation lies
    outside the envelope."""
    return overflow_of(*engine.used(comps, base, envelope), total)


def overflow_of(used: int, outside: Sequence[Component], total: int) -> CaptureOverflow | None:
    """``capture_overflow`` from the engine's ``used`` and the components outside its envelope
    (the verdict has them already). What start-up holds is ``used`` less the outside components
    that are not start-up allocations, so it can exceed the GPU only where ``used`` does or an
    outside component is negative: nothing more is looked at otherwise."""
    if used <= total and all(c.bytes >= 0 for c in outside):
        return None
    graphs = tuple(c for c in outside if c.bytes > 0 and (c.category == "cudagraph"
                                                          or c.name == REQUEST_TABLE))
    if not graphs:
        return None
    held = used - sum(c.bytes for c in outside) + sum(c.bytes for c in graphs)
    if held <= total:
        return None
    return CaptureOverflow(held_bytes=held, graphs=graphs, over_bytes=held - total)
