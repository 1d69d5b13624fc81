"""reports/gpu/graph-reuse/graph-reuse-h100.json: the driver keeps the memory of destroyed CUDA
graph executables and builds later graphs in it (one H100, driver 580.159.04), the measurement
``memprof.core.terms.runner_v2_capture`` models for Model Runner V2's capture after the KV
allocation (vLLM 0.29.0 on) and ``memprof.core.terms.runner_v1_capture`` for the V1 runner's
capture after its CUDA-graph memory profiling (0.18.0 on)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.graph_log import logged_graph
from memprof.core.terms.cudagraph import cudagraph_model, graph_driver_bytes
from memprof.core.terms.graph_window import logged_graph_of_context
from memprof.core.terms.runner_v1_capture import (
    profiled_graph_driver_bytes,
    v1_capture_after_profiling,
    v1_profiles_graphs,
)
from memprof.core.terms.runner_v2_capture import (
    REUSE_MEASURED,
    full_graphs_beyond_profiling,
    v2_capture_after_kv,
)

GOLDEN = Path(__file__).resolve().parents[1] / REUSE_MEASURED
DATA = json.loads(GOLDEN.read_text())
CASES = {(c["shape"], c["case"]): c for c in DATA["cases"]}


def _reads(c: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {tag: (free, reserved) for tag, free, reserved in c["reads"]}


def _window(c: dict[str, Any], tag: str) -> tuple[int, int]:
    """(driver bytes, pool reserved bytes) of capture ``tag``: the free-memory drop less what
    torch's allocator reserved in it."""
    r = _reads(c)
    drop = r["pre" + tag][0] - r[tag][0]
    reserved = r[tag][1] - r["pre" + tag][1]
    return drop - reserved, reserved


def test_the_run_is_the_one_described() -> None:
    assert DATA["gpu"] == "NVIDIA H100 80GB HBM3" and DATA["driver"] == "580.159.04"
    assert DATA["torch"] == "2.11.0+cu130" and DATA["cuda"] == "13.0"
    assert all("failed" not in c for c in DATA["cases"]) and len(CASES) == 8
    # V2's sets: 51 PIECEWISE sizes of layers + 1 pieces; A the 2 largest FULL sizes, B all 35
    assert CASES[("q15", "v2")]["graphs"] == {"A": [51 * 29, 2], "B": [51 * 29, 35]}
    assert CASES[("q4", "v2")]["graphs"] == {"A": [51 * 37, 2], "B": [51 * 37, 35]}


@pytest.mark.parametrize("key", [k for k in CASES if k[1] != "bonly"])
def test_destroyed_graphs_return_no_driver_memory(key: tuple[str, str]) -> None:
    c = CASES[key]
    r = _reads(c)
    driver_a, _pool = _window(c, "A")
    assert driver_a > 250 * MiB
    # del + gc.collect + empty_cache: the free memory rises by the pool segments torch released
    # and by nothing else, one by one or all together
    assert r["destroyed"][0] - r["A"][0] == r["A"][1] - r["destroyed"][1] > 0
    for tag, (free, _res) in r.items():
        if tag.startswith("pop"):
            assert free == r["A"][0]  # dropping graphs returns nothing before empty_cache either


@pytest.mark.parametrize("shape, case", [k for k in CASES if k[1] in ("v2", "nokv", "onebyone")])
def test_a_later_capture_takes_only_what_it_needs_beyond_the_destroyed_one(shape: str,
                                                                          case: str) -> None:
    # B = A's graphs and 33 FULL graphs more, after A was destroyed (with or without the KV-like
    # tensor between, A's graphs dropped one by one or together), against B in a fresh process
    fresh, fresh_pool = _window(CASES[(shape, "bonly")], "B")
    first, _pool = _window(CASES[(shape, case)], "A")
    later, later_pool = _window(CASES[(shape, case)], "B")
    assert later == fresh - first > 0  # to the byte: every byte the first left is reused
    assert later_pool == fresh_pool  # the pool's tensors and the stream's workspace are not


@pytest.mark.parametrize("case", ["same", "smaller"])
def test_a_later_capture_no_larger_takes_no_driver_memory(case: str) -> None:
    later, pool = _window(CASES[("q15", case)], "B")
    assert later == 0 and pool > 0


def test_v2_capture_after_kv_charges_the_full_graphs_beyond_the_profiling_ones() -> None:
    # the rule as memprof applies it, on the shape of row 2455 (Qwen2.5-1.5B, 0.31.0): of the
    # window's executables, only the FULL graphs past the two profiled are charged
    e = estimate("qwen2.5-1.5b-instruct", Deployment(engine_version="0.31.0"), gpu_name="H100")
    ctx = rank_context(e, e.ranks[0])
    window, after = logged_graph_of_context(ctx), v2_capture_after_kv(ctx)
    assert window is not None and after is not None
    modes = cudagraph_model(ctx).modes
    extra = full_graphs_beyond_profiling(ctx)
    assert extra == len(modes["FULL"]) - 2 > 0
    w, a = ({n: b for n, b, _ in g.parts} for g in (window, after))
    profiled = (graph_driver_bytes(ctx, "PIECEWISE", len(modes["PIECEWISE"]))
                + graph_driver_bytes(ctx, "FULL", 2))
    assert a["graph executables"] == w["graph executables"] - profiled
    assert a["graph executables"] == graph_driver_bytes(ctx, "FULL", extra)
    assert {n: b for n, b in a.items() if n != "graph executables"} == {
        n: b for n, b in w.items() if n != "graph executables"}


def test_no_double_capture_before_0_29() -> None:
    e = estimate("qwen2.5-1.5b-instruct", Deployment(engine_version="0.28.0"), gpu_name="H100")
    assert v2_capture_after_kv(rank_context(e, e.ranks[0])) is None


def test_v1_capture_after_profiling_charges_its_executables_less_the_profiled_ones() -> None:
    # the V1 runner (0.18.0 on) captures the two largest descriptors of each mode while
    # profiling and destroys them; its logged capture is built in what they left
    e = estimate("qwen2.5-1.5b-instruct", Deployment(engine_version="0.20.0"), gpu_name="H100")
    ctx = rank_context(e, e.ranks[0])
    assert v1_profiles_graphs(ctx)
    window, after = logged_graph_of_context(ctx), v1_capture_after_profiling(ctx)
    assert window is not None and after is not None
    w, a = ({n: b for n, b, _ in g.parts} for g in (window, after))
    profiled = (graph_driver_bytes(ctx, "PIECEWISE", 2) + graph_driver_bytes(ctx, "FULL", 2))
    assert profiled_graph_driver_bytes(ctx) == (profiled, {"PIECEWISE": 2, "FULL": 2})
    assert a["graph executables"] == w["graph executables"] - profiled > 0
    assert {n: b for n, b in a.items() if n != "graph executables"} == {
        n: b for n, b in w.items() if n != "graph executables"}
    # the estimate and the pool at run time are the window's: only the logged figure moves
    assert logged_graph(e, e.ranks[0]) == after


def test_v1_profiles_at_most_the_descriptors_it_has() -> None:
    # one capture size (max_num_seqs 1 → sizes [1, 2]: two PIECEWISE, FULL only at 1)
    e = estimate("qwen2.5-1.5b-instruct", Deployment(engine_version="0.20.0", max_num_seqs=1),
                 gpu_name="H100")
    ctx = rank_context(e, e.ranks[0])
    modes = cudagraph_model(ctx).modes
    _b, counts = profiled_graph_driver_bytes(ctx)
    assert counts == {m: min(2, len(s)) for m, s in modes.items() if s}
    assert counts["FULL"] == len(modes["FULL"]) == 1


@pytest.mark.parametrize("version", ["0.17.1", "0.14.1", "0.9.2+v0"])
def test_no_profiling_capture_before_0_18(version: str) -> None:
    e = estimate("qwen2.5-1.5b-instruct", Deployment(engine_version=version), gpu_name="H100")
    ctx = rank_context(e, e.ranks[0])
    assert v1_capture_after_profiling(ctx) is None
    assert logged_graph(e, e.ranks[0]) == logged_graph_of_context(ctx)


def test_v1_reuse_not_on_eager_v2_or_rocm() -> None:
    eager = estimate("qwen2.5-1.5b-instruct",
                     Deployment(engine_version="0.20.0", enforce_eager=True), gpu_name="H100")
    assert not v1_profiles_graphs(rank_context(eager, eager.ranks[0]))
    # Model Runner V2 has its own rule (runner_v2_capture)
    v2 = estimate("qwen2.5-1.5b-instruct", Deployment(engine_version="0.31.0"), gpu_name="H100")
    assert not v1_profiles_graphs(rank_context(v2, v2.ranks[0]))
    # ROCm: no profiling capture before 0.28.0; from it one, but the HIP reuse is not measured
    # (a MoE model, which 0.28.0 still runs on the V1 runner)
    for version, profiles in (("0.24.0", False), ("0.28.0", True)):
        r = estimate("qwen3-30b-a3b", Deployment(engine_version=version), gpu_name="MI300X")
        ctx = rank_context(r, r.ranks[0])
        assert v1_profiles_graphs(ctx) is profiles
        g, w = v1_capture_after_profiling(ctx), logged_graph_of_context(ctx)
        if profiles:
            assert g is not None and w is not None and g.total == w.total
            assert "[not modelled]" in dict((n, t) for n, _b, t in g.parts)["graph executables"]
        else:
            assert g is None
