"""A layout with many DP engines is estimated once per distinct rank of one engine (the other
engines are the same ranks shifted: ``RankSet``), so remedies that re-estimate layouts of
millions of ranks stay cheap; and ``same_as`` still lists exactly every rank."""

from __future__ import annotations

import itertools

import pytest

from memprof.core.deployment import Deployment, ranks
from memprof.core.estimate import RankSet, estimate
from memprof.core.remedies import remedies


def test_rank_set_is_the_tuple_of_its_ranks() -> None:
    s = RankSet((0, 2, 3), stride=4, copies=3)
    want = (0, 2, 3, 4, 6, 7, 8, 10, 11)
    assert tuple(s) == want and s == want and list(s) == list(want) and len(s) == 9
    assert [s[i] for i in range(-9, 9)] == [*want, *want]
    assert all((x in s) == (x in want) for x in range(-2, 20))
    assert "1" not in s
    with pytest.raises(IndexError):
        s[9]
    assert s == RankSet((0, 2, 3), 4, 3) and hash(s) == hash(RankSet((0, 2, 3), 4, 3))
    assert s != RankSet((0, 2, 3), 4, 2) and s != want[:-1]


@pytest.mark.parametrize(("model", "gpu", "dep"), [
    ("qwen3-32b", "H100", Deployment(tp=2, pp=2, dp=3)),
    # V0: TP rank 0 (Qwen2.5: 0.7.3's model registry has no Qwen3ForCausalLM)
    ("qwen2.5-32b-instruct", "H100", Deployment(tp=4, dp=3, engine_version="0.7.3")),
    ("llama-3.1-70b", "H100", Deployment(tp=2, pp=3, dp=2, engine_version="0.7.3")),
    ("deepseek-r1", "H200", Deployment(tp=8, dp=2)),
    ("deepseek-r1", "H200", Deployment(tp=8, dp=2, enable_expert_parallel=True)),
])
def test_same_as_lists_every_rank_once(model: str, gpu: str, dep: Deployment) -> None:
    e = estimate(model, dep, gpu_name=gpu)
    got = [list(r.same_as) for r in e.ranks]
    assert sorted(itertools.chain(*got)) == [c.rank for c in ranks(dep)]
    for r, rs in zip(e.ranks, got, strict=True):
        assert rs == sorted(rs) and r.coord.rank == rs[0] and r.coord.rank in r.same_as
        assert len(r.same_as) == len(rs)
    by_rank = {c.rank: c for c in ranks(dep)}
    for r in e.ranks:  # the ranks folded together sit where the representative sits
        assert {by_rank[x].pp_stage for x in r.same_as} == {r.coord.pp_stage}


def test_dp_engines_do_not_multiply_the_work() -> None:
    """DP 100,000 × TP 8: one distinct rank, 800,000 ranks in its ``same_as`` without a tuple
    of 800,000; every remedy (TP ×8 is 6.4 million ranks) estimated the same way."""
    # the bf16 weights (--quantization none): the checkpoint's 128×128 fp8 blocks do not split
    # over TP × DP = 800,000 expert shards, and vLLM refuses that layout (weights/mlp.py
    # block_divides)
    e = estimate("deepseek-r1", Deployment(tp=8, dp=100_000, quantization="none"),
                 gpu_name="H200")
    assert e.verdict == "startup_oom" and len(e.ranks) == 1
    (r,) = e.ranks
    assert isinstance(r.same_as, RankSet) and len(r.same_as) == 800_000
    assert 799_999 in r.same_as and 800_000 not in r.same_as and r.same_as[-1] == 799_999
    fixes = remedies(e, e.spec)
    assert fixes.tried == ("--kv-cache-dtype fp8", "--quantization fp8", "-tp 16", "-tp 32",
                           "-tp 64", "-pp 2", "-pp 4")
    assert not fixes.fitting
    small = estimate("deepseek-r1", Deployment(tp=8, dp=2, quantization="none"),
                     gpu_name="H200")
    assert small.ranks[0].components != r.components  # DP still moves the figures (MoE TP×DP)
