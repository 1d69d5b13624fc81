"""The tensors SGLang's KV pool is made of, per layer, so that the caching allocator's rounding of
each (``memprof/core/terms/allocator.py``) is that of SGLang's pool and not vLLM's.

vLLM allocates one tensor per layer holding K and V (``memprof.core.kvcache.kv_tensor_sizes``).
SGLang's pools (``mem_cache/memory_pool.py``, every release read) allocate, per layer:

* ``MHATokenToKVPool``: ``k_buffer`` and ``v_buffer``, each ``torch.zeros((size + page_size,
  head_num, head_dim))`` (sglang 0.4.3: ``size + 1``, the page then being one token) — two
  tensors of half a page a block, plus one page (the padded slot 0);
* ``MLATokenToKVPool``: ``kv_buffer`` ``(size + page_size, 1, kv_cache_dim)`` — one tensor of a
  page a block, plus one page;
* ``NSATokenToKVPool`` (DeepSeek-V3.2's indexer, from 0.5.3): ``index_k_with_scale_buffer``
  ``((size + page_size + 1) // page_size, page_size × 132)`` uint8 — one page a block, plus one
  page (``size`` is whole pages of 64).

``size`` is the pool's tokens (``max_total_num_tokens``, whole pages). Each tensor above 10 MiB
is rounded up to 2 MiB by PyTorch's caching allocator, which "KV size" does not print and
"Memory pool end. avail mem" shows (tests/data/published_sglang_breakdown.json, the R term).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memprof.core.versions import Rule

_POOL = "python/sglang/srt/mem_cache/memory_pool.py"

# the layer specs' names whose SGLang tensors are modelled, each with its tensors per layer; a
# rank with any other spec keeps vLLM's layout (``pool_tensors``). value: what they are
_TENSORS_PER_LAYER: tuple[tuple[str, int], ...] = (("full", 2), ("mla", 1), ("indexer", 1))
SGLANG_POOL_TENSORS: tuple[Rule, ...] = (
    Rule(name="sglang_pool_tensors", changes="allocator: the KV pool's tensors",
         since=None, until=None, value="per layer: K and V apart (MHA); the latent, the indexer's "
         "buffer (MLA); each a page longer than the pool",
         engine="sglang",
         introduced_by="before 0.4.3 (read in the sglang 0.4.3 wheel, the oldest release "
         "modelled)",
         source=f"sglang 0.4.3 {_POOL} MHATokenToKVPool k_buffer / v_buffer (size + 1, "
         "head_num, head_dim) and MLATokenToKVPool kv_buffer (size + 1, 1, kv_lora_rank + "
         "qk_rope_head_dim), one of each per layer; sglang 0.4.9 / 0.5.3 / 0.5.4 the same "
         "with size + page_size, and NSATokenToKVPool index_k_with_scale_buffer ((size + "
         "page_size + 1) // page_size, page_size × (128 + 4)) per layer"),
)
_COUNTS: dict[str, int] = dict(_TENSORS_PER_LAYER)


def pool_tensors(layers: Sequence[Any]) -> tuple[tuple[int, int], ...]:
    """SGLang's pool tensors for the rank's layer specs (``KVLayerSpec`` of
    memprof/core/attention/base.py), each as (bytes per block, bytes beyond the blocks): an MHA
    layer's K and V (half its page each, one padding page each), an MLA layer's latent buffer
    and its indexer buffer (a page each, one padding page). () where a spec is of a kind this
    module does not know (the caller keeps vLLM's one tensor per layer)."""
    out: list[tuple[int, int]] = []
    for spec in layers:
        count = _COUNTS.get(spec.name)
        if count is None or spec.page_bytes % count:
            return ()
        part = spec.page_bytes // count
        out += [(part, part)] * count
    return tuple(out)
