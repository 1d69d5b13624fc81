"""Model Runner V2's own CUDA-graph estimate from vLLM 0.29.0 (memprof/core/terms/
runner_v2_graphs.py): the capture while profiling, FULL graphs beyond the two largest
extrapolated at max(their driver memory, 1 MiB), charged in the budget cold or warm."""

from __future__ import annotations

import pytest

from memprof.base.units import GiB, MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate, rank_context
from memprof.core.graph_log import logged_graph
from memprof.core.terms.cudagraph import GRAPH_DRIVER_PER_GRAPH, graph_modes
from memprof.core.terms.graph_window import logged_graph_of_context
from memprof.core.terms.runner_v2_graphs import MIN_PER_GRAPH_BYTES, v2_graph_estimate
from memprof.core.version_diff import version_diff
from memprof.probes.startup_log import parse_log

# rows 1601 / 1602 of tests/data/published.json: Qwen3-4B on an RTX 5060 Ti (torch's total
# 15.9287 GiB), max_model_len 8192, utilisation 0.7, 256 sequences, 2,048 batched tokens
ROW_1602 = Deployment(engine_version="0.30.0", max_model_len=8192, gpu_memory_utilization=0.7,
                      max_num_seqs=256, max_num_batched_tokens=2048,
                      hf_overrides='{"max_position_embeddings": 262144}')


def _est(dep: Deployment, model: str = "qwen3-4b", gpu: str = "RTX-5060-Ti",
         mem: int | None = round(15.9287109375 * GiB)) -> Estimate:
    return estimate(model, dep, gpu_name=gpu, gpu_memory_bytes=mem)


def _comp(e: Estimate, name: str) -> tuple[int, str, str]:
    c = next(c for c in e.ranks[0].components if c.name == name)
    return c.bytes, c.where, c.formula


def test_row_1602_by_hand() -> None:
    e = _est(ROW_1602)
    # capture sizes (0.30.0 config/vllm.py): [1, 2, 4] + 8..248 step 8 + 256..512 step 16 = 51
    # PIECEWISE sizes; FULL decode sizes up to 256 sequences: 35
    assert {m: len(s) for m, s in graph_modes(e.deployment).items()} == {"PIECEWISE": 51,
                                                                         "FULL": 35}
    # driver memory on sm120 (R580's sm90 costs, a CUDA 13 wheel): 110 KiB a graph, 3,350 B a
    # GEMM node, 2,310 B another kernel node; a PIECEWISE size is 36 layers + 1 = 37 graphs
    # holding 4 GEMMs (qkv, o, gate_up, down) and 4 other kernels (2 norms, rotary, SiLU-mul)
    # a layer; a FULL size one graph with the attention op's 2 kernels more a layer
    assert GRAPH_DRIVER_PER_GRAPH == 112_640
    per_full = 112_640 + 36 * (4 * 3_350 + 6 * 2_310)
    assert per_full == 1_094_000 > MIN_PER_GRAPH_BYTES  # no floor: no lift
    executables = 51 * (37 * 112_640 + 36 * (4 * 3_350 + 4 * 2_310)) + 35 * per_full
    assert executables == 292_408_720
    window = logged_graph_of_context(rank_context(e, e.ranks[0]))
    assert window is not None
    parts = {name: b for name, b, _w in window.parts}
    assert parts["graph executables"] == executables
    assert parts["warm-up stream's cuBLAS workspace"] == 32 * MiB  # sm120: 32 MiB, one segment
    by_hand = parts["graph pool tensors"] + executables + 32 * MiB
    v = v2_graph_estimate(rank_context(e, e.ranks[0]))
    assert v is not None and v.per_full == per_full and v.full_graphs == 35
    assert v.estimate == v.window == by_hand
    est, where, formula = _comp(e, "CUDA-graph estimate")
    assert (est, where) == (by_hand, "budget") and "Model Runner V2 at vLLM 0.30.0" in formula
    # the logs: "CUDA graph pool memory: … 0.38 GiB (estimated)" (rows 1601 and 1602); and row
    # 1601's capture while profiling, two FULL graphs of 35, "took 0.33 GiB"
    assert abs(est / GiB - 0.38) / 0.38 < 0.11
    profiled = est - 33 * per_full
    assert abs(profiled / GiB - 0.33) / 0.33 < 0.07
    # the capture after the KV allocation, the figure logged: the window with only the 33 FULL
    # graphs beyond the profiling capture's at their driver memory (the rest is built in what
    # the destroyed profiling graphs left: reports/gpu/graph-reuse, runner_v2_capture.py)
    logged = logged_graph(e, e.ranks[0])
    assert logged is not None
    assert dict((n, b) for n, b, _w in logged.parts)["graph executables"] == 33 * per_full
    assert logged.total == by_hand - (executables - 33 * per_full)


def test_the_floor_lifts_a_shallow_models_full_graphs() -> None:
    # Qwen2.5-0.5B: 24 layers, a FULL graph of 112,640 + 24 × 27,260 B = 766,880 B < 1 MiB:
    # vLLM's extrapolation takes 1 MiB for each FULL graph after the first
    e = estimate("qwen2.5-0.5b", Deployment(engine_version="0.30.0"), gpu_name="H100")
    v = v2_graph_estimate(rank_context(e, e.ranks[0]))
    assert v is not None and v.per_full == 112_640 + 24 * (4 * 3_350 + 6 * 2_310) == 766_880
    n = len(graph_modes(e.deployment)["FULL"])
    assert v.full_graphs == n > 2
    assert v.estimate - v.window == (n - 1) * (MIN_PER_GRAPH_BYTES - 766_880)


def test_cold_and_warm_charge_the_same_estimate_eager_none() -> None:
    cold, warm = _est(ROW_1602), _est(ROW_1602.with_(compile_cache="warm"))
    assert _comp(cold, "CUDA-graph estimate")[:2] == _comp(warm, "CUDA-graph estimate")[:2]
    eager = _est(ROW_1602.with_(enforce_eager=True))
    assert _comp(eager, "CUDA-graph estimate")[0] == 0
    assert v2_graph_estimate(rank_context(eager, eager.ranks[0])) is None
    # the warm start's budget: V2's own profile terms and V2's estimate; row 1602 logs 19,744
    # tokens ("compilation: 0.54 s": the cache was warm); memprof 0.8% short (3.4% with the
    # H100's first-kernel step on the 5060 Ti's 36 SMs, before that step followed the card:
    # memprof.core.terms.first_kernel; 2.2% before the model load's max_split_size_mb:20
    # rounding, load_rounding.LOAD_MAX_SPLIT; V1's profile terms on the same start: 9% short);
    # 1.3% short since the load's allocator holes that 0.30.0's total_consumed charges
    # (12 MiB: reserved_charge.py)
    assert -0.015 < warm.kv_cache_tokens / 19_744 - 1 < -0.01
    assert cold.kv_cache_tokens / 19_744 - 1 < -0.08


@pytest.mark.parametrize("version", ["0.28.0", "0.27.1"])
def test_before_0_29_v2_estimates_nothing_or_v1s_stands(version: str) -> None:
    dep = ROW_1602.with_(engine_version=version)
    e = _est(dep)
    assert v2_graph_estimate(rank_context(e, e.ranks[0])) is None
    # V2's own terms, cold (with the compile's example arguments) or warm: no CUDA-graph
    # estimate in the budget (profile_cudagraph_memory returns 0 through 0.28.x)
    assert _comp(e, "CUDA-graph estimate")[0] == 0
    assert _comp(_est(dep.with_(compile_cache="warm")), "CUDA-graph estimate")[0] == 0
    assert _comp(_est(dep.with_(engine_version="0.20.0")), "CUDA-graph estimate")[2].startswith(
        "PIECEWISE=")  # the V1 runner's estimate (its per-mode samples)


def test_the_v1_runner_and_sglang_keep_their_own() -> None:
    # 0.29.0 runs every model with V2; before 0.21.0 no V2 runner exists
    e = _est(ROW_1602.with_(engine_version="0.20.0"))
    assert v2_graph_estimate(rank_context(e, e.ranks[0])) is None
    s = estimate("qwen3-4b", Deployment(engine="sglang"), gpu_name="H100")
    assert v2_graph_estimate(rank_context(s, s.ranks[0])) is None


def test_versions_lists_the_change_at_0_29() -> None:
    d = version_diff("qwen3-4b", ROW_1602, "0.28.0", "0.29.0", gpu_name="RTX-5060-Ti")
    change = next(c for c in d.rules if c.name == "model_runner_v2_graph_estimate")
    assert change.a is not None and change.a.value is False
    assert change.b is not None and change.b.value is True
    assert "cudagraph_utils.py" in change.b.source


def test_a_v2_log_reads_the_capture_after_the_budget_and_the_estimate() -> None:
    # From 0.29.0 V2 logs "Graph capturing finished ... took" twice: the capture while
    # profiling (before "Available KV cache memory") and the real one; the pool line gives the
    # estimate the budget charged (row 1601's lines, vLLM 0.29.0)
    log = parse_log(
        "INFO 09-20 22:25:04 [model_runner.py:960] Graph capturing finished in 58 secs, took "
        "0.33 GiB\n"
        "INFO 09-20 22:25:05 [gpu_worker.py:625] Available KV cache memory: 1.45 GiB\n"
        "INFO 09-20 22:26:13 [model_runner.py:960] Graph capturing finished in 68 secs, took "
        "0.23 GiB\n"
        "INFO 09-20 22:26:13 [gpu_worker.py:797] CUDA graph pool memory: 0.23 GiB (actual), "
        "0.38 GiB (estimated), difference: 0.14 GiB (62.0%).\n")
    assert log.figures["cudagraph_pool_bytes"].text.endswith("took 0.23 GiB")
    assert log.figures["cudagraph_estimate_bytes"].value == pytest.approx(0.38 * GiB)
    # a release that captures once, after the budget, keeps its one line
    v1 = parse_log("INFO [gpu_worker.py:563] Available KV cache memory: 10.74 GiB\n"
                   "INFO [gpu_model_runner.py:4600] Graph capturing finished in 6 secs, took "
                   "0.56 GiB\n")
    assert v1.figures["cudagraph_pool_bytes"].text.endswith("took 0.56 GiB")
