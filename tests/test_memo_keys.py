"""``memprof.batch.memo._key_fn``: a read set's key is (the ids of the model and KV plan it read,
in name order; the values of the other context fields it read; the values of the deployment
fields it read), whichever of those it read."""

from __future__ import annotations

from memprof.batch.memo import _key_fn
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.gpus import resolve_gpu


def _ctx():  # type: ignore[no-untyped-def]
    e = estimate("qwen3-0.6b", Deployment(tp=2, max_model_len=4096), gpu=resolve_gpu("H100", None))
    return rank_context(e, e.ranks[0])


def test_key_of_each_shape() -> None:
    ctx = _ctx()
    dep = ctx.dep
    cases = {
        frozenset(): ((), ()),
        frozenset({("dep", "tp")}): ((), (dep.tp,)),
        frozenset({("ctx", "spec")}): (id(ctx.spec), (), ()),
        frozenset({("ctx", "plan"), ("dep", "max_model_len"), ("dep", "tp")}):
            (id(ctx.plan), (), (dep.max_model_len, dep.tp)),
        frozenset({("ctx", "spec"), ("ctx", "plan"), ("ctx", "gpu"), ("dep", "pp")}):
            (id(ctx.plan), id(ctx.spec), (ctx.gpu,), (dep.pp,)),
        frozenset({("ctx", "coord"), ("ctx", "gpu"), ("dep", "pp"), ("dep", "dp")}):
            ((ctx.coord, ctx.gpu), (dep.dp, dep.pp)),
    }
    for reads, want in cases.items():
        assert _key_fn(reads)(ctx) == want, sorted(reads)


def test_keys_tell_contexts_apart_by_what_was_read() -> None:
    ctx = _ctx()
    other = ctx.with_(dep=ctx.dep.with_(max_model_len=8192))
    by_spec_and_len = _key_fn(frozenset({("ctx", "spec"), ("dep", "max_model_len")}))
    by_spec_and_tp = _key_fn(frozenset({("ctx", "spec"), ("dep", "tp")}))
    assert by_spec_and_len(ctx) != by_spec_and_len(other)
    assert by_spec_and_tp(ctx) == by_spec_and_tp(other)
