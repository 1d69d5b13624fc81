"""The memory terms between the weights and the KV cache, one module each: ``activation``,
``cudagraph``, ``non_torch``, ``allocator``, the model-load buffers ``rope_cache`` and
``dsv4_init_buffers``, the allocator's rounding inside the model-load figure ``load_rounding``
(and ``kv_cache``, the KV component itself).

Each term is a pure function ``(TermContext) -> list[Component]`` with its formula in the
docstring and a citation; ``BUDGET_TERMS`` run before the KV cache is sized, ``RUNTIME_TERMS``
after (they read ``ctx.num_gpu_blocks``).
"""

from __future__ import annotations

from memprof.core.components import TermFn
from memprof.core.terms.activation import activation_terms
from memprof.core.terms.allocator import allocator_runtime_terms
from memprof.core.terms.cudagraph import cudagraph_terms
from memprof.core.terms.dsv4_init_buffers import dsv4_init_buffer_terms
from memprof.core.terms.load_rounding import load_rounding_terms
from memprof.core.terms.non_torch import non_torch_terms
from memprof.core.terms.rope_cache import rope_cache_terms

MODEL_LOAD_TERMS: list[TermFn] = [rope_cache_terms, dsv4_init_buffer_terms, load_rounding_terms]
"""Buffers created while the model is built and the allocator's rounding of the whole load
(counted in vLLM's model load, category weights)."""

BUDGET_TERMS: list[TermFn] = [*MODEL_LOAD_TERMS, activation_terms, cudagraph_terms,
                              non_torch_terms]
"""Terms known before the KV cache is sized (their runtime/baseline components are not budgeted)."""

RUNTIME_TERMS: list[TermFn] = [allocator_runtime_terms]
"""Terms that need ``ctx.num_gpu_blocks`` / ``ctx.kv_cache_bytes``."""
