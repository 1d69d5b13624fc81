"""The custom all-reduce's hold on the profiling graphs' all-reduce inputs
(``memprof/core/terms/graph_input_handles.py``): where vLLM's V1 worker captures graphs inside the
budget's window with the custom all-reduce on, the pool segments the peers' IPC handles keep are
charged to the budget (reports/gpu/ipc-free-open/), and nowhere else."""

from __future__ import annotations

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.terms.cudagraph import engine_graph_modes
from memprof.core.terms.graph_input_handles import NAME, registered_segment_bytes

# runs the V1 runner at 0.22.0 (not listed for Model Runner V2) and loads from 0.17.1 (vLLM
# 0.17.1 / 0.18.0 have no DeepseekV4ForCausalLM in their model registry: first in 0.20.0)
MODEL = "deepseek-v3"


def _held(dep: Deployment, gpu: str = "H200", model: str = MODEL) -> list[int]:
    e = estimate(model, dep, gpu_name=gpu)
    return [c.bytes for c in e.ranks[0].components if c.name == NAME]


def test_charged_where_the_v1_worker_profiles_graphs_with_the_custom_all_reduce() -> None:
    for version in ("0.18.0", "0.22.0"):
        held = _held(Deployment(engine_version=version, tp=2, enable_expert_parallel=True))
        assert len(held) == 1 and held[0] > 0 and held[0] % (2 * MiB) == 0, version


@pytest.mark.parametrize("dep, gpu, why", [
    (Deployment(engine_version="0.17.1", tp=2, enable_expert_parallel=True), "H200",
     "no profiling capture before 0.18.0"),
    (Deployment(engine_version="0.22.0", tp=1), "H200", "no TP group"),
    (Deployment(engine_version="0.22.0", tp=2, enable_expert_parallel=True, enforce_eager=True),
     "H200", "no graphs"),
    (Deployment(engine_version="0.22.0", tp=2, enable_expert_parallel=True,
                disable_custom_all_reduce=True), "H200", "no custom all-reduce"),
    (Deployment(engine_version="0.22.0", tp=2, enable_expert_parallel=True), "MI300X",
     "HIP's IPC not measured"),
])
def test_not_charged_elsewhere(dep: Deployment, gpu: str, why: str) -> None:
    assert _held(dep, gpu) == [], why


def test_not_charged_under_model_runner_v2() -> None:
    """0.22.0 runs Qwen3 on Model Runner V2, whose profile_cudagraph_memory returns 0."""
    assert _held(Deployment(engine_version="0.22.0", tp=2), model="qwen3-8b") == []


def test_only_segments_that_held_a_registered_input() -> None:
    dep = Deployment(engine_version="0.22.0", tp=2, enable_expert_parallel=True)
    e = estimate(MODEL, dep, gpu_name="H200")
    ctx = rank_context(e, e.ranks[0])
    modes = {m: v for m, v in engine_graph_modes(ctx).items() if v}
    held, count, pool = registered_segment_bytes(ctx, modes, 8 * MiB)
    assert count > 0 and 0 < held <= pool
    # an all-reduce input at or above max_size goes to NCCL, not the custom all-reduce:
    # nothing is registered, nothing held
    assert registered_segment_bytes(ctx, modes, 1)[:2] == (0, 0)
    # the pool is the same whatever is registered
    assert registered_segment_bytes(ctx, modes, 1)[2] == pool
