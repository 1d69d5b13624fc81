"""Which memory terms an estimate runs, and in which phase: ``BUDGET_TERMS`` before the KV cache
is sized, ``RUNTIME_TERMS`` after (they read ``ctx.num_gpu_blocks``), ``MODEL_LOAD_TERMS`` the
buffers counted in vLLM's model load.

The lists live here, not in the package ``__init__``: ``memprof.core.terms.allocations`` imports two
term modules, and a package ``__init__`` that imported every term (the allocator term among
them, which imports ``memprof.core.terms.allocations``) would close an import circle
(``tools/check_imports.py`` follows package ``__init__`` edges).
"""

from __future__ import annotations

from memprof.core.components import TermFn
from memprof.core.terms.activation import activation_terms
from memprof.core.terms.allocator import allocator_runtime_terms
from memprof.core.terms.cudagraph import cudagraph_terms
from memprof.core.terms.draft_head import draft_head_weight_terms, proposer_buffer_terms
from memprof.core.terms.encoder import encoder_terms
from memprof.core.terms.graph_input_handles import graph_input_handle_terms
from memprof.core.terms.in_use import in_use_terms
from memprof.core.terms.init_buffers import init_buffer_terms
from memprof.core.terms.load_rounding import load_rounding_terms
from memprof.core.terms.load_segments import load_segments_terms
from memprof.core.terms.lora import lora_terms
from memprof.core.terms.marlin_workspace import marlin_workspace_terms
from memprof.core.terms.nccl_nvls import nccl_nvls_terms
from memprof.core.terms.nccl_warmup import warm_up_first_kernel
from memprof.core.terms.ngram_speculator import ngram_buffer_terms
from memprof.core.terms.non_torch import non_torch_terms
from memprof.core.terms.post_load_requant import post_load_requant_terms
from memprof.core.terms.request_table import request_table_terms
from memprof.core.terms.reserved_charge import reserved_charge_terms
from memprof.core.terms.rocm_load_cache import rocm_load_cache_terms
from memprof.core.terms.rope_cache import rope_cache_terms
from memprof.core.terms.runner_buffers import runner_buffer_terms
from memprof.core.terms.runner_v2_graphs import runner_v2_graph_terms
from memprof.core.terms.stream_pool import stream_pool_terms

MODEL_LOAD_TERMS: list[TermFn] = [rope_cache_terms, init_buffer_terms,
                                  draft_head_weight_terms,
                                  marlin_workspace_terms, lora_terms, load_rounding_terms,
                                  load_segments_terms, rocm_load_cache_terms,
                                  post_load_requant_terms]
"""Buffers created while the model is built and the allocator's rounding of the whole load
(counted in vLLM's model load, category weights)."""

BUDGET_TERMS: list[TermFn] = [*MODEL_LOAD_TERMS, activation_terms, runner_buffer_terms,
                              proposer_buffer_terms,
                              ngram_buffer_terms,
                              encoder_terms,
                              cudagraph_terms, graph_input_handle_terms, runner_v2_graph_terms,
                              non_torch_terms,
                              nccl_nvls_terms,
                              warm_up_first_kernel, stream_pool_terms,
                              reserved_charge_terms, in_use_terms]
"""Terms known before the KV cache is sized (their runtime/baseline components are not budgeted)."""

RUNTIME_TERMS: list[TermFn] = [allocator_runtime_terms, request_table_terms]
"""Terms that need ``ctx.num_gpu_blocks`` / ``ctx.kv_cache_bytes``."""
