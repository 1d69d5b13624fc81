"""memprof.core.graph_log: what vLLM's "Graph capturing finished ... took X GiB" holds, per
release."""

from __future__ import annotations

import pytest

from memprof.base.units import KiB, MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.graph_log import (
    GRAPH_LOG_RULES,
    STREAM_POOL_IN_WINDOW,
    logged_graph,
)
from memprof.core.terms.activation import cublas_workspace_bytes
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
    # rotary, SiLU-and-mul, add+RMSNorm (4) + cache write and decode attention in a FULL graph (2)
    per_size = 110 * KiB + 32 * 4 * 3350 + 32 * 6 * 2310
    p = _parts("llama-3.1-8b", "H100", engine_version="0.7.2")
    assert p["graph executables"] == 35 * per_size
    # TP1: no NCCL process group made torch's stream pool; 0.7.2 reads free memory before
    # graph_capture makes the capture stream
    assert p["stream pool"] == 73_400_320
    # the warm-up reserves the same live set as the captured graph (one mode, the same largest
    # size) in the ordinary pool; the private pool holds the capture stream's cuBLAS workspace too
    assert p["graph pool tensors"] - p["warm-up on the capture stream"] == 32 * MiB


@pytest.mark.parametrize(("version", "pool"), [("0.8.4+v0", True), ("0.9.2", True),
                                               ("0.10.1", True), ("0.11.0", False),
                                               ("0.20.0", False)])
def test_stream_pool_by_release(version: str, pool: bool) -> None:
    p = _parts("qwen3-0.6b", "H100", engine_version=version)
    assert ("stream pool" in p) is pool
    assert p["warm-up on the capture stream"] > 0


def test_no_stream_pool_where_nccl_made_it() -> None:
    # TP2: ProcessGroupNCCL made the pool at init, before the window (reports/gpu/nccl/README.md)
    p = _parts("qwen3-32b", "H100", engine_version="0.9.2", tp=2)
    assert "stream pool" not in p


def test_cublas_workspace_counted_once_per_arch() -> None:
    hopper = _parts("llama-3.1-8b", "H100", engine_version="0.7.2")
    ampere = _parts("llama-3.1-8b", "A100-80GB", engine_version="0.7.2")
    est = estimate("llama-3.1-8b", Deployment(engine_version="0.7.2"), gpu_name="A100-80GB")
    assert (hopper["graph pool tensors"] - ampere["graph pool tensors"]
            == 32 * MiB - cublas_workspace_bytes(est.gpu))


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


def test_explain_compares_the_logged_figure() -> None:
    from memprof.core.explain import ESTIMATED

    e = estimate("qwen3-0.6b", Deployment(engine_version="0.9.2"), gpu_name="H100")
    g = logged_graph(e, e.ranks[0])
    assert g is not None
    assert ESTIMATED["cudagraph_pool_bytes"](e, e.ranks[0]) == g.total
    # 0.9.2 runs no graph estimate in the budget: the category is the run-time pool, which
    # holds neither the warm-up segments nor anything else outside the graph pool
    assert g.total - e.ranks[0].category_bytes("cudagraph") == dict(
        (n, b) for n, b, _w in g.parts)["warm-up on the capture stream"]
