"""A ``GPU`` and a ``RankCoord`` keep the hash of their compared fields, computed once: equal
ones hash alike, a derived one (``dataclasses.replace``) hashes by its own fields, and the kept
hash is the hash of those fields (what the dataclass's own ``__hash__`` would give)."""

from __future__ import annotations

from dataclasses import fields, replace

from memprof.core.gpus import GPU, resolve_gpu, unlisted_gpu


def _field_hash(g: GPU) -> int:
    return hash(tuple(getattr(g, f.name) for f in fields(g) if f.compare))


def test_hash_is_the_compared_fields() -> None:
    for name in ("H200", "A100-80GB", "MI300X", "RTX-4090"):
        g = resolve_gpu(name, None)
        assert hash(g) == _field_hash(g)
    u = unlisted_gpu(1 << 34)
    assert hash(u) == _field_hash(u)


def test_a_derived_gpu_hashes_by_its_own_fields() -> None:
    g = resolve_gpu("H200", None)
    off = replace(g, peer_access=False)
    assert off != g and hash(off) == _field_hash(off) and hash(off) != hash(g)
    assert replace(off, peer_access=True) == g and hash(replace(off, peer_access=True)) == hash(g)
    assert len({g, replace(g), off}) == 2  # a set tells them apart by value
    assert "_hash" not in repr(g)


def test_rank_coord_hash_is_its_compared_fields() -> None:
    from memprof.core.deployment import Deployment, RankCoord, ranks

    for dep in (Deployment(tp=4, pp=2, dp=2), Deployment(tp=2, dp=4, enable_expert_parallel=True)):
        for c in ranks(dep):
            assert hash(c) == hash(tuple(getattr(c, f.name) for f in fields(c) if f.compare))
            assert c == RankCoord(c.rank, c.tp_rank, c.pp_stage, c.dp_rank, c.ep_rank)
            assert hash(replace(c, rank=c.rank + 1)) != hash(c) and "_hash" not in repr(c)
