"""``memprof.batch.memo.SpecDepMemo``: a function of (model, deployment) remembered by the model
and the deployment fields it reads; the sweep keeps each layout's ranks with it."""

from __future__ import annotations

import itertools

from memprof.batch.memo import SpecDepMemo
from memprof.core.deployment import Deployment
from memprof.core.estimate import STEPS
from memprof.core.models import load_model


def test_a_result_is_shared_by_deployments_that_agree_on_what_was_read() -> None:
    calls: list[int] = []

    def tp_only(spec: object, dep: Deployment) -> int:
        calls.append(dep.tp)
        return dep.tp * 10

    memo = SpecDepMemo(tp_only)
    spec = object()
    assert memo(spec, Deployment(tp=2, max_model_len=4096)) == 20
    assert memo(spec, Deployment(tp=2, max_model_len=8192, max_num_seqs=64)) == 20
    assert calls == [2]  # the second deployment differs only in fields never read
    assert memo(spec, Deployment(tp=4)) == 40
    assert calls == [2, 4]
    assert (memo.runs, memo.hits) == (2, 1)


def test_another_model_is_never_served_another_models_result() -> None:
    memo = SpecDepMemo(lambda spec, dep: (id(spec), dep.tp))
    a, b = object(), object()
    assert memo(a, Deployment()) == (id(a), 1)
    assert memo(b, Deployment()) == (id(b), 1)
    assert memo.runs == 2


def test_hashing_the_deployment_reads_every_field() -> None:
    memo = SpecDepMemo(lambda spec, dep: hash(dep))
    spec = object()
    one, other = Deployment(max_model_len=4096), Deployment(max_model_len=8192)
    assert memo(spec, one) == hash(one)
    assert memo(spec, other) == hash(other)  # not the first result: every field was read
    assert memo.runs == 2


def test_rank_orders_match_the_estimators_over_a_grid() -> None:
    spec = load_model("deepseek-r1")
    memo = SpecDepMemo(STEPS.rank_order)
    for tp, pp, dp, ep, mml in itertools.product((1, 2, 8), (1, 2), (1, 2), (False, True),
                                                 (4096, 8192)):
        dep = Deployment(tp=tp, pp=pp, dp=dp, enable_expert_parallel=ep, max_model_len=mml)
        assert memo(spec, dep) == STEPS.rank_order(spec, dep)
    assert memo.hits >= 24  # every max_model_len after the first is served
