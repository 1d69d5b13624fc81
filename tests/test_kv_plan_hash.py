"""A ``KVPlan`` keeps the hash of its compared fields (a derived plan hashes by its own), and
``capacity_from_blocks`` reads a plan's per-request figures once per plan and lengths: the same
figures as the plan's methods, for every bundled model's plan."""

from __future__ import annotations

from dataclasses import fields, replace

from memprof.base.errors import BadInput
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import resolve_gpu
from memprof.core.kvcache import KVPlan, capacity_from_blocks
from memprof.core.models.load import configs_dir

MODELS = sorted(p.stem for p in (configs_dir() / "models").glob("*.json")
                if not p.name.startswith("_"))


def _field_hash(p: KVPlan) -> int:
    return hash(tuple(getattr(p, f.name) for f in fields(p) if f.compare))


def _plans() -> list[KVPlan]:
    gpu = resolve_gpu("H200", None)
    out = []
    for model in MODELS:
        try:
            e = estimate(model, Deployment(tp=8, max_model_len=8192), gpu=gpu)
        except BadInput:
            continue
        out += [r.plan for r in e.ranks]
    return out


def test_plan_hash_is_its_compared_fields() -> None:
    plans = _plans()
    assert len(plans) > 20
    for p in plans:
        assert hash(p) == _field_hash(p)
        other = replace(p, block_size=p.block_size * 2)
        assert other != p and hash(other) == _field_hash(other) and hash(other) != hash(p)
        assert hash(replace(p)) == hash(p) and "_hash" not in repr(p)


def test_capacity_reads_the_plans_own_figures() -> None:
    hybrid = 0
    for p in _plans():
        hybrid += p.layout != "uniform"
        for mml, mnbt in ((4096, 2048), (8192, 8192), (131072, 16384)):
            cap = capacity_from_blocks(p, 1234, mml, mnbt)
            assert cap.blocks_per_request == p.blocks_per_request(mml, mnbt)
            assert cap.request_bytes == p.request_bytes(mml, mnbt)
            conc = p.concurrency_blocks(mml, mnbt)
            assert cap.max_concurrency == (1234 / conc if conc else 0.0)
    assert hybrid > 0  # sliding, state or packed pools among them
