"""memprof.core.terms.stream_pool: torch's stream pool that vLLM 0.11.0-0.19.x's model runner
makes before the profile run (``comm_stream``), charged once: to the budget, not to the graphs."""

from __future__ import annotations

from typing import Any

import pytest

from memprof.core.components import Component
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate, rank_context
from memprof.core.terms import cudagraph, stream_pool
from memprof.core.terms.nccl import TORCH_STREAM_POOL_BYTES

POOL = "torch stream pool (model runner's comm_stream)"


def _est(**kw: Any) -> Estimate:
    return estimate("qwen3-0.6b", Deployment(**kw), gpu_name="H100")


def _pool(e: Estimate) -> list[Component]:
    return [c for c in e.ranks[0].components if c.name == POOL]


@pytest.mark.parametrize(("version", "made"), [("0.10.1", False), ("0.11.0", True),
                                               ("0.14.1", True), ("0.19.0", True),
                                               ("0.20.0", False), ("0.8.5+v0", False)])
def test_where_the_model_runner_makes_it(version: str, made: bool) -> None:
    e = _est(engine_version=version)
    ctx = rank_context(e, e.ranks[0])
    if made:
        (c,) = _pool(e)
        assert (c.bytes, c.where, c.category) == (73_400_320, "budget", "non_torch")
        assert cudagraph.graph_driver_first(ctx) == 0
    else:
        assert _pool(e) == []
        assert cudagraph.graph_driver_first(ctx) == cudagraph.GRAPH_DRIVER_FIRST


def test_charged_once_and_moves_the_kv_budget_by_its_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # 0.11.0 has no CUDA-graph estimate in the budget (the graph pool is run-time): the pool
    # that moves from the first graph to the budget takes its bytes from the KV memory, and the
    # graphs' run-time figure loses exactly those bytes
    with_rule = _est(engine_version="0.11.0")
    monkeypatch.setattr(stream_pool, "COMM_STREAM_POOL", ())
    without = _est(engine_version="0.11.0")
    a, b = with_rule.ranks[0], without.ranks[0]
    assert b.available_kv_bytes - a.available_kv_bytes == TORCH_STREAM_POOL_BYTES
    assert b.category_bytes("cudagraph") - a.category_bytes("cudagraph") == TORCH_STREAM_POOL_BYTES
    assert a.category_bytes("non_torch") - b.category_bytes("non_torch") == TORCH_STREAM_POOL_BYTES


def test_also_at_tp2_and_when_eager() -> None:
    # before 0.14.0 vLLM's PyNccl communicator makes no torch stream
    # (memprof.core.terms.pynccl_pool): at TP2 comm_stream makes the pool too; from 0.14.0 the
    # communicator's warm-up (current_stream()) made it before, and comm_stream pays none
    assert len(_pool(_est(engine_version="0.13.0", tp=2))) == 1
    assert len(_pool(_est(engine_version="0.14.1", tp=2))) == 0
    # the model runner makes comm_stream whether or not graphs are captured
    assert len(_pool(_est(engine_version="0.14.1", enforce_eager=True))) == 1
