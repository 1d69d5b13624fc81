"""memprof.core.graph_log at vLLM 0.8.4 (V1): the capture list, the pieces and the NCCL nodes of
a TP group whose custom all-reduce is off, counted by hand from the 0.8.4 wheel; and the two
published 0.8.4 TP2 rows, whose log says the custom all-reduce was off."""

from __future__ import annotations

import json
from pathlib import Path

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.graph_log import logged_graph
from memprof.core.terms.cudagraph import (
    GRAPH_DRIVER_NCCL_MIXING,
    GRAPH_DRIVER_PER_NCCL_NODE,
    GRAPH_DRIVER_PER_NODE_CUDA12,
    cudagraph_model,
    graph_nccl_nodes,
)

PUBLISHED = Path(__file__).parent / "data" / "published.json"
# Qwen2.5-7B: 28 decoder layers
LAYERS = 28


def _dep(**kw: object) -> Deployment:
    base: dict[str, object] = dict(engine_version="0.8.4", max_model_len=4096,
                                   max_num_batched_tokens=8192, entrypoint="llm")
    return Deployment(**{**base, **kw})  # type: ignore[arg-type]


def _parts(gpu: str = "RTX-3090", **kw: object) -> dict[str, int]:
    e = estimate("qwen2.5-7b-instruct", _dep(**kw), gpu_name=gpu)
    g = logged_graph(e, e.ranks[0])
    assert g is not None
    return {n: b for n, b, _w in g.parts}


def test_084_captures_its_whole_list_in_pieces() -> None:
    # 0.8.4 config.py _set_cudagraph_sizes (V1): [1, 2, 4] + range(8, 513, 8) = 67 sizes, the
    # list the rows' config line prints, whatever max_num_seqs is (256 on an RTX 3090 here);
    # PiecewiseBackend: one graph per piece, 28 attention layers -> 29 pieces a size
    e = estimate("qwen2.5-7b-instruct", _dep(), gpu_name="RTX-3090")
    g = cudagraph_model(rank_context(e, e.ranks[0]))
    assert g.modes == {"PIECEWISE": [1, 2, 4, *range(8, 513, 8)]}
    assert g.graphs == 67 * (LAYERS + 1)


def test_084_nccl_nodes_where_custom_all_reduce_is_off() -> None:
    # TP2 with the custom all-reduce off: every TP all-reduce is PyNccl's ncclAllReduce on the
    # capture stream, two a layer and the embedding's: 57 NCCL nodes a capture size
    # (cuda_communicator.py CudaCommunicator.all_reduce, 0.8.4)
    e = estimate("qwen2.5-7b-instruct", _dep(tp=2, disable_custom_all_reduce=True),
                 gpu_name="RTX-3090")
    assert graph_nccl_nodes(rank_context(e, e.ranks[0])) == 2 * LAYERS + 1
    # (the custom all-reduce needs peer access: an RTX A5000 pair, sm86 as the 3090 but with
    # PCIe P2P; two GeForce RTX 3090s have none and never run it)
    on = _parts("RTX-A5000", tp=2)
    off = _parts("RTX-A5000", tp=2, disable_custom_all_reduce=True)
    assert _parts(tp=2) == _parts(tp=2, disable_custom_all_reduce=True)
    # each of the 67 × 57 all-reduces turns from a custom all-reduce kernel node into an NCCL
    # node with NCCL's graph mixing cost (H100 measurements, reports/gpu/nccl/README.md); the
    # kernel node it replaces is costed at the CUDA 12.x drivers' ~10 KiB (cudagraph.DRIVER_STACK)
    per = GRAPH_DRIVER_PER_NCCL_NODE + GRAPH_DRIVER_NCCL_MIXING - GRAPH_DRIVER_PER_NODE_CUDA12
    assert off["graph executables"] - on["graph executables"] == 67 * (2 * LAYERS + 1) * per
    assert off["graph pool tensors"] == on["graph pool tensors"]


def test_tp1_has_the_stream_pool_tp2_does_not() -> None:
    # 0.8.4 reads free memory before graph_capture makes the process's first torch stream; at
    # TP2 the profile run's logits all-gather on torch's ProcessGroupNCCL made the pool, outside
    # the window (memprof.core.terms.pynccl_pool: vLLM's PyNccl communicator makes none)
    assert "stream pool" in _parts()
    assert "stream pool" not in _parts(tp=2, disable_custom_all_reduce=True)


def test_published_084_tp2_rows_state_the_logged_all_reduce() -> None:
    rows = {r["id"]: r for r in json.loads(PUBLISHED.read_text())["rows"]}
    for rid in (312, 313):
        r = rows[rid]
        assert "lacks GPU P2P capability" in r["quote"]
        assert r["memprof_run"]["disable_custom_all_reduce"] is True
    tp1 = sum(_parts().values())
    tp2 = sum(_parts(tp=2, disable_custom_all_reduce=True).values())
    # as logged (1.44 GiB at TP1, 2.13 GiB at TP2), TP2's figure is the larger
    assert tp2 > tp1


def test_driver_costs_say_where_they_were_measured() -> None:
    def where(gpu: str) -> str:
        e = estimate("qwen2.5-7b-instruct", _dep(), gpu_name=gpu)
        g = logged_graph(e, e.ranks[0])
        assert g is not None
        return next(w for n, _b, w in g.parts if n == "graph executables")

    assert "applied unmeasured to RTX-3090 (sm86)" in where("RTX-3090")
    assert "unmeasured" not in where("H100")


def _row_figure(row_id: int) -> tuple[float, dict[str, int]]:
    """The row's logged figure (GiB) and memprof's parts of it, run as the distribution test
    runs the row (its ``memprof_run``), on the rank with the most weights."""
    from tests.test_published_distribution import row_estimate

    rows = {r["id"]: r for r in json.loads(PUBLISHED.read_text())["rows"]}
    e, _ = row_estimate(rows[row_id])
    top = max(e.ranks, key=lambda r: r.weights_bytes)
    g = logged_graph(e, top)
    assert g is not None
    return float(rows[row_id]["observed"]["graph_gib"]), {n: b for n, b, _w in g.parts}


def _excess(row_id: int) -> float:
    """What the log holds above memprof's parts other than the executables, over memprof's
    executables: ~1 where the window's terms and the driver costs hold."""
    logged, parts = _row_figure(row_id)
    exe = parts["graph executables"]
    return (logged * 2**30 - (sum(parts.values()) - exe)) / exe


def test_neither_release_nor_card_separates_the_084_rtx_3090_rows() -> None:
    # The window's code is the same in the 0.8.1, 0.8.2, 0.8.4 and 0.8.5.post1 wheels
    # (v1/worker/gpu_model_runner.py capture_model and _dummy_run, 0.8.5.post1's only unpacking
    # EAGLE-3's auxiliary hidden states; v1/worker/gpu_worker.py compile_or_warm_up_model and
    # determine_available_memory; compilation/backends.py PiecewiseBackend;
    # distributed/parallel_state.py graph_capture), and the 0.8-era V1 logs that run it land at
    # ~0.9x memprof's executables: rows 1953 (0.8.1, A10), 951 (0.8.2, A100, LoRA) and 1952
    # (0.8.5.post1, A10; 1953 and 1952 with 311's 1,943 graphs and executables to the byte).
    # The RTX 3090 itself lands at later releases: rows 2471 (0.19.1) and 2482 (0.11.0, TP4).
    # Rows 311-313 hold 2.3-3.7x: what is left is their host's stack, whose driver the notebook
    # does not print (not modelled).
    _, p311 = _row_figure(311)
    assert p311["graph executables"] == _row_figure(1953)[1]["graph executables"] \
        == _row_figure(1952)[1]["graph executables"]
    landers = {r: _excess(r) for r in (951, 1952, 1953, 2471, 2482)}
    assert all(0.85 < x < 1.25 for x in landers.values()), landers
    misses = {r: _excess(r) for r in (311, 312, 313)}
    assert all(x > 2.0 for x in misses.values()), misses


def test_the_two_084_tp2_runs_log_one_figure() -> None:
    # rows 312 (14:34, Inductor graph compiled: 'Compiling a graph for general shape takes
    # 32.22 s') and 313 (15:04, loaded from the compile cache) are two runs of the same shapes
    # with two checkpoints: both ranks of both log 2.13 GiB, as memprof's parts are the same;
    # the figure does not move with the compile path (row 311 also loaded from the cache) and
    # is not another process's transient
    assert _row_figure(312) == _row_figure(313)
