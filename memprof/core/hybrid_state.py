"""Per-request state of Mamba-2 and linear-attention layers, and the page-size unification that
lets vLLM's hybrid KV-cache manager put them in one block pool with attention layers.

Shapes are those of vLLM's ``MambaStateShapeCalculator``
(vllm/model_executor/layers/mamba/mamba_utils.py, v0.10.2–v0.11 era), per TP rank; the
unification is ``HybridAttentionMambaModelConfig.verify_and_update_config``
(vllm/model_executor/models/config.py, v0.10.2; later moved to platforms/interface.py
``_align_hybrid_block_size``): the attention block size is raised to the smallest multiple of
the kernel alignment whose page holds one state, and the state page is padded up to that
attention page. The KV pool then treats a state as one block per request
(``memprof.core.kvcache``, ``state`` groups).
"""

from __future__ import annotations

from math import prod
from typing import NamedTuple

from memprof.base.errors import BadInput
from memprof.base.units import cdiv
from memprof.core.versions import Rule

# Models with Mamba / linear-attention state run on V1's hybrid KV-cache manager by default from
# 0.10.2; up to 0.10.1 the engine oracle sends a model with inner state to V0 (its
# MambaCacheManager, which memprof does not model), and Qwen3-Next and Kimi-Linear do not exist.
HYBRID_STATE_V1: tuple[Rule, ...] = (
    Rule(name="hybrid_state_on_v1", changes="KV: recurrent-state layers (V1 hybrid manager)",
         since="0.10.2", until=None, value=True,
         introduced_by="0.10.2: _is_v1_supported_oracle no longer falls back to V0 for "
         "has_inner_state models (read in the 0.10.1 and 0.10.2 wheels; PR not identified)",
         source="0.10.1 engine/arg_utils.py _is_v1_supported_oracle ('V1 mamba models are "
         "unoptimized': _warn_or_fallback → V0); 0.10.2 / 0.11.0 model_executor/models/"
         "config.py HybridAttentionMambaModelConfig", applies_to="state"),
)

# Kernel block alignment of the attention page (v0.10.2 models/config.py
# HybridAttentionMambaModelConfig): 16 for standard attention; MLA 64 (CUTLASS MLA 128).
ATTENTION_BLOCK_ALIGNMENT = 16
MLA_BLOCK_ALIGNMENT = 64


def _divide(n: int, tp: int, what: str) -> int:
    """vLLM's ``divide``: the dimension must split evenly over the TP ranks."""
    if n % tp:
        raise BadInput(f"{what} ({n}) does not divide by tensor parallel size {tp}",
                       hint="choose a --tp that divides it")
    return n // tp


def extra_groups_for_head_shards(n_groups: int, tp: int) -> int:
    """Groups replicated so each head shard has its own (``extra_groups_for_head_shards``)."""
    return 0 if n_groups % tp == 0 else tp - n_groups


def mamba2_state_shapes(*, tp: int, intermediate_size: int, n_groups: int, num_heads: int,
                        head_dim: int, state_size: int, conv_kernel: int
                        ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(conv state, SSM state) of one Mamba-2 layer on one rank (``mamba2_state_shape``):
    conv ``(conv_kernel − 1, (intermediate + 2·groups·state) / tp)`` with the groups padded
    for head shards, SSM ``(heads / tp, head_dim, state)``."""
    groups = n_groups + extra_groups_for_head_shards(n_groups, tp)
    conv_dim = intermediate_size + 2 * groups * state_size
    return ((conv_kernel - 1, _divide(conv_dim, tp, "Mamba conv dimension")),
            (_divide(num_heads, tp, "Mamba heads"), head_dim, state_size))


def gated_delta_net_state_shapes(*, tp: int, num_k_heads: int, num_v_heads: int,
                                 head_k_dim: int, head_v_dim: int, conv_kernel: int
                                 ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(conv state, recurrent state) of one Gated DeltaNet layer on one rank
    (``gated_delta_net_state_shape``, no speculative tokens): conv
    ``(conv_kernel − 1, (2·k_heads·k_dim + v_heads·v_dim) / tp)``, recurrent
    ``(v_heads / tp, k_dim, v_dim)``."""
    conv_dim = 2 * head_k_dim * num_k_heads + head_v_dim * num_v_heads
    return ((conv_kernel - 1, _divide(conv_dim, tp, "linear-attention conv dimension")),
            (_divide(num_v_heads, tp, "linear-attention value heads"), head_k_dim, head_v_dim))


def kda_state_shapes(*, tp: int, num_heads: int, head_dim: int, conv_kernel: int
                     ) -> tuple[tuple[int, ...], ...]:
    """(q, k, v conv states, recurrent state) of one Kimi Delta Attention layer on one rank
    (vLLM v0.11.2 model_executor/layers/mamba/mamba_utils.py ``kda_state_shape``, no speculative
    tokens): three ``(conv_kernel − 1, heads·head_dim / tp)`` and ``(heads / tp, head_dim,
    head_dim)``."""
    proj = _divide(num_heads * head_dim, tp, "KDA projection")
    conv = (conv_kernel - 1, proj)
    return (conv, conv, conv, (_divide(num_heads, tp, "KDA heads"), head_dim, head_dim))


def state_page_bytes(shapes: tuple[tuple[int, ...], ...], dtype_bytes: tuple[int, ...]) -> int:
    """``MambaSpec.page_size_bytes`` before padding: Σ prod(shape) × element bytes."""
    if len(shapes) != len(dtype_bytes):
        raise ValueError("one dtype per state shape")
    return sum(prod(s) * b for s, b in zip(shapes, dtype_bytes, strict=True))


class AlignedPages(NamedTuple):
    """The attention block size and the (padded) state page after unification."""

    block_size: int  # "Setting attention block size to N tokens"
    page_bytes: int  # one block of one layer, attention and state alike
    state_bytes: int  # the state page before padding
    padding_pct: float  # "Padding mamba page size by X%"


def align_attention_block(*, attn_bytes_per_token: int, state_bytes: int, block_size: int,
                          alignment: int = ATTENTION_BLOCK_ALIGNMENT) -> AlignedPages:
    """Raise the attention block so that its page holds one state, then pad the state page to
    it (v0.10.2 models/config.py ``HybridAttentionMambaModelConfig.verify_and_update_config``):
    ``attn_block = alignment × cdiv(state, alignment × attn_bytes_per_token)``, taken when
    larger than ``block_size``."""
    if attn_bytes_per_token <= 0 or state_bytes <= 0:
        raise ValueError("page sizes must be positive")
    block = max(block_size, alignment * cdiv(state_bytes, alignment * attn_bytes_per_token))
    page = block * attn_bytes_per_token
    return AlignedPages(block_size=block, page_bytes=page, state_bytes=state_bytes,
                        padding_pct=100 * (page - state_bytes) / state_bytes)

