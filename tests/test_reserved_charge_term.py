"""vLLM 0.8.0 – 0.9.0.1 charge the allocator's unreturnable free blocks to the KV budget
(``memprof.core.terms.reserved_charge``): a hand-made load sequence through the allocator replica,
and the term's range of releases."""

from __future__ import annotations

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms.reserved_charge import NAME, holes_after_empty_cache


def test_holes_are_the_free_tails_of_segments_that_hold_a_tensor() -> None:
    # 3 MiB: a 20 MiB segment (requests of 1–10 MiB), split: 17 MiB stays free but reserved
    assert holes_after_empty_cache(((0, 3 * MiB),)) == 17 * MiB
    # 13 MiB + 0.5 MiB: a 14 MiB segment, the last 1 MiB left whole inside the block (≤ 1 MiB
    # is not split): allocated, not a hole; a 0.5 MiB request takes a 2 MiB small segment
    assert holes_after_empty_cache(((0, 13 * MiB + MiB // 2),)) == 0
    assert holes_after_empty_cache(((0, MiB // 2),)) == 2 * MiB - MiB // 2
    # a freed tensor alone in its segment is returned by empty_cache
    assert holes_after_empty_cache(((0, 40 * MiB), (0, 40 * MiB), (1, 0))) == 0


def _holes(version: str) -> int:
    e = estimate("llama-3.1-8b", Deployment(engine_version=version), gpu_name="H100")
    return sum(c.bytes for c in e.ranks[0].components if c.name == NAME)


def test_charged_from_0_8_0_to_0_9_0_1_only() -> None:
    assert _holes("0.8.0") > 0 and _holes("0.9.0.1") == _holes("0.8.0")
    assert _holes("0.7.3") == 0 and _holes("0.9.1") == 0 and _holes("0.8.5+v0") == 0
    e = estimate("llama-3.1-8b", Deployment(engine_version="0.8.5"), gpu_name="H100")
    c = next(x for x in e.ranks[0].components if x.name == NAME)
    assert c.where == "budget" and c.profiled and c.category == "allocator"
