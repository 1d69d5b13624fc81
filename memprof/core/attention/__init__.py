"""One module per attention kind, each answering the kind's questions behind one interface
(``base.AttentionKind``): its KV pages and default block size, its profile-run live set, its
RoPE caches and its attention weights.

- ``gqa``: MHA / GQA / MQA (per-head K and V; sliding window, sinks, q/k norms as attributes);
- ``mla``: DeepSeek V2/V3 latent attention and V3.2's sparse MLA with its indexer;
- ``dsv4``: DeepSeek-V4 compressed sparse attention (SWA-only, C4, C128);
- ``state``: the recurrent mixers of hybrid models (Gated DeltaNet, Mamba-2, KDA) that replace
  attention in some layers (``Attention.mixer``), answered by a ``HybridKind``.

The generic modules ask ``kind_of(attention)`` instead of branching on ``Attention.kind``; a new
kind is one module here and one entry in ``KINDS``.
"""

from memprof.core.attention import dsv4, gqa, mla, state
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


_HYBRID: dict[tuple[str, str], AttentionKind] = {
    (m, k): state.HybridKind(mixer, kind)
    for m, mixer in state.STATE_KINDS.items() for k, kind in KINDS.items()}
"""(mixer kind, attention kind) → the answers for a layer whose mixer replaces attention."""


def kind_of(a: Attention) -> AttentionKind:
    """The answers of ``a``'s kind (a ``KeyError`` for an unknown kind is a memprof bug: the
    family builders make only these); for a layer whose ``mixer`` replaces attention, the
    ``state.HybridKind`` of that mixer over the model's attention kind."""
    if a.mixer is None:
        return KINDS[a.kind]
    return _HYBRID[(a.mixer.kind, a.kind)]


__all__ = ["KINDS", "ActQuery", "AttentionKind", "AttentionStage", "KVLayerSpec", "KVQuery",
           "RopeCache", "WeightSink", "kind_of", "rope_positions", "rope_scaling"]
