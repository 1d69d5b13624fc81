"""memprof.core.graph_log: what vLLM's "Graph capturing finished ... took X GiB" holds, per
release."""

from __future__ import annotations

import pytest

from memprof.base.units import KiB, MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.graph_log import (
    CAPTURE_STREAM,
    GRAPH_LOG_RULES,
    STREAM_POOL_IN_WINDOW,
    logged_graph,
)
from memprof.core.terms.activation import cublas_workspace_bytes
from memprof.core.terms.cudagraph import cudagraph_model
from memprof.core.version_diff import all_rules
from memprof.core.versions import value_at


def _parts(model: str, gpu: str, **kw: object) -> dict[str, int]:
    e = estimate(model, Deployment(**kw), gpu_name=gpu)  # type: ignore[arg-type]
    g = logged_graph(e, e.ranks[0])
    assert g is not None
    parts = {n: b for n, b, _w in g.parts}
    assert g.total == sum(parts.values())
    return parts


def test_v0_llama_8b_by_hand() -> None:
    # vLLM 0.7.2 V0, max_num_seqs 256: 35 capture sizes ([1, 2, 4] + 8..256), one FULL graph each.
    # A Llama decoder layer: GEMMs qkv, o_proj, gate_up, down (4); other kernels: add+RMSNorm,
    # rotary, SiLU-and-mul, add+RMSNorm (4) + cache write and decode attention in a FULL graph (2);
    # 0.7.2's wheel is built for CUDA 12.x: each kernel node at ~10 KiB (cudagraph.DRIVER_STACK)
    per_size = 110 * KiB + 32 * (4 + 6) * 10 * KiB
    p = _parts("llama-3.1-8b", "H100", engine_version="0.7.2")
    assert p["graph executables"] == 35 * per_size
    # TP1: no NCCL process group made torch's stream pool; 0.7.2 reads free memory before
    # graph_capture makes the capture stream
    assert p["stream pool"] == 73_400_320
    # V0 captures on the stream its warm-up ran on: the warm-up's activations are released by
    # torch.cuda.graph's empty_cache, its cuBLAS workspace (32 MiB on sm90, its own segment)
    # stays and serves the capture, so the private pool holds no workspace
    assert p["warm-up stream's cuBLAS workspace"] == 32 * MiB


@pytest.mark.parametrize(("version", "pool"), [("0.8.4+v0", True), ("0.9.2", True),
                                               ("0.10.1", True), ("0.11.0", False),
                                               ("0.20.0", False)])
def test_stream_pool_by_release(version: str, pool: bool) -> None:
    p = _parts("qwen3-0.6b", "H100", engine_version=version)
    assert ("stream pool" in p) is pool
    assert p["warm-up stream's cuBLAS workspace"] > 0


def test_no_stream_pool_where_the_profile_made_it() -> None:
    # TP2 at 0.9.2: vLLM's PyNccl communicator makes no torch stream before 0.14.0, but the
    # profile run's logits all-gather on torch's ProcessGroupNCCL does, before the window
    # (memprof.core.terms.pynccl_pool.LOGITS_GATHER_PROCESS_GROUP, up to 0.25.x)
    p = _parts("qwen3-32b", "H100", engine_version="0.9.2", tp=2)
    assert "stream pool" not in p


def test_cublas_workspace_counted_once_per_arch() -> None:
    # V0 (0.7.2): one workspace, the warm-up stream's, in its segment: 32 MiB on sm90; the 8 MiB
    # + 128 KiB one of sm80 in a 20 MiB segment (the allocator's kLargeBuffer)
    hopper = _parts("llama-3.1-8b", "H100", engine_version="0.7.2")
    ampere = _parts("llama-3.1-8b", "A100-80GB", engine_version="0.7.2")
    est = estimate("llama-3.1-8b", Deployment(engine_version="0.7.2"), gpu_name="A100-80GB")
    assert cublas_workspace_bytes(est.gpu) == 8 * MiB + 128 * KiB
    assert hopper["warm-up stream's cuBLAS workspace"] == 32 * MiB
    assert ampere["warm-up stream's cuBLAS workspace"] == 20 * MiB
    assert hopper["graph pool tensors"] == ampere["graph pool tensors"]


@pytest.mark.parametrize(("version", "in_pool"), [("0.9.2+v0", False), ("0.8.4", True),
                                                  ("0.13.0", True), ("0.14.0", False),
                                                  ("0.20.0", False)])
def test_second_workspace_where_torch_picks_the_capture_stream(version: str,
                                                               in_pool: bool) -> None:
    # V1 before 0.14.0 calls torch.cuda.graph without a stream: torch captures on its own
    # stream, whose workspace is allocated under capture, in the private pool (a second one)
    e = estimate("qwen3-0.6b", Deployment(engine_version=version), gpu_name="H100")
    g = logged_graph(e, e.ranks[0])
    assert g is not None
    m = cudagraph_model(rank_context(e, e.ranks[0]))
    pool = dict((n, b) for n, b, _w in g.parts)["graph pool tensors"]
    assert pool == m.actual - m.driver - (0 if in_pool else 32 * MiB)


def test_no_line_when_nothing_is_captured() -> None:
    e = estimate("qwen3-0.6b", Deployment(engine_version="0.9.2", enforce_eager=True),
                 gpu_name="H100")
    assert logged_graph(e, e.ranks[0]) is None
    s = estimate("qwen3-0.6b", Deployment(engine="sglang"), gpu_name="H100")
    assert logged_graph(s, s.ranks[0]) is None


def test_rules_are_in_the_rulebook_with_sources() -> None:
    book = all_rules()
    for rows in GRAPH_LOG_RULES:
        for r in rows:
            assert r in book
            assert r.source.strip() and r.introduced_by.strip()
    assert value_at(STREAM_POOL_IN_WINDOW, "0.7.2") is True
    assert value_at(STREAM_POOL_IN_WINDOW, "0.10.2+v0") is True
    assert value_at(STREAM_POOL_IN_WINDOW, "0.11.0") is False
    assert value_at(CAPTURE_STREAM, "0.9.2+v0") == "warmup"
    assert value_at(CAPTURE_STREAM, "0.13.0") == "torch_default"
    assert value_at(CAPTURE_STREAM, "0.14.0") == "warmup"


def test_explain_compares_the_logged_figure() -> None:
    from memprof.core.explain import ESTIMATED

    e = estimate("qwen3-0.6b", Deployment(engine_version="0.9.2"), gpu_name="H100")
    g = logged_graph(e, e.ranks[0])
    assert g is not None
    assert ESTIMATED["cudagraph_pool_bytes"](e, e.ranks[0]) == g.total
    # 0.9.2 runs no graph estimate in the budget: the category is the run-time pool, which
    # does not hold the warm-up stream's workspace (V1 0.9.2 captures on torch's own stream)
    assert g.total - e.ranks[0].category_bytes("cudagraph") == dict(
        (n, b) for n, b, _w in g.parts)["warm-up stream's cuBLAS workspace"]
