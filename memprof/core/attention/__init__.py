"""One module per attention kind, each answering the kind's questions behind one interface
(``base.AttentionKind``): its KV pages and default block size, its profile-run live set, its
RoPE caches and its attention weights.

- ``gqa``: MHA / GQA / MQA (per-head K and V; sliding window, sinks, q/k norms as attributes);
- ``mla``: DeepSeek V2/V3 latent attention and V3.2's sparse MLA with its indexer;
- ``dsv4``: DeepSeek-V4 compressed sparse attention (SWA-only, C4, C128).

The generic modules ask ``kind_of(attention)`` instead of branching on ``Attention.kind``; a new
kind is one module here and one entry in ``KINDS``.
"""

from memprof.core.attention import dsv4, gqa, mla
from memprof.core.attention.base import (
    ActQuery,
    AttentionKind,
    AttentionStage,
    KVLayerSpec,
    KVQuery,
    RopeCache,
    WeightSink,
    rope_positions,
    rope_scaling,
)
from memprof.core.models import Attention

KINDS: dict[str, AttentionKind] = {k.name: k for k in (gqa.KIND, mla.KIND, dsv4.KIND)}
"""``Attention.kind`` → the kind's answers."""


def kind_of(a: Attention) -> AttentionKind:
    """The answers of ``a``'s kind (a ``KeyError`` for an unknown kind is a memprof bug: the
    family builders make only these)."""
    return KINDS[a.kind]


__all__ = ["KINDS", "ActQuery", "AttentionKind", "AttentionStage", "KVLayerSpec", "KVQuery",
           "RopeCache", "WeightSink", "kind_of", "rope_positions", "rope_scaling"]
