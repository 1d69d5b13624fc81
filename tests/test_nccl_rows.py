"""The estimator's NCCL rows (``memprof.core.terms.nccl``), the custom all-reduce row
(``memprof.core.terms.custom_allreduce``) and the graph model's collective nodes and stream pool
(``memprof.core.terms.cudagraph``) against the goldens of ``reports/gpu/nccl`` they cite: each
figure is read from the file here, not copied."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memprof.base.units import MiB
from memprof.core.components import Component
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate, rank_context
from memprof.core.gpus import find_gpu
from memprof.core.terms import cudagraph, nccl
from memprof.core.terms.custom_allreduce import custom_all_reduce_applies
from memprof.core.terms.nccl_image import image_delta
from memprof.core.terms.nccl_stack import stack_delta
from memprof.core.terms.non_torch import MAX_THREADS_PER_SM as THREADS

GOLD = Path(__file__).resolve().parents[1] / "reports" / "gpu" / "nccl"
INIT = "ncclCommInitRank (init_process_group, device_id)"
WARM = "warm-up all_reduce of 1 fp32"
A2A = "first all_to_all_single, 1 MiB"
SENDRECV = "first batch_isend_irecv (send next, recv previous), 1 MiB"
STREAM = "torch.cuda.Stream() before init"


def _runs(name: str) -> dict[str, dict[str, Any]]:
    doc = json.loads((GOLD / name).read_text())
    return {r["config"]: r for r in doc["runs"]}


def _step(run: dict[str, Any], step: str, largest: bool = False) -> int:
    got = [r["non_torch_growth_bytes"][step] for r in run["ranks"]]
    return max(got) if largest else int(got[0])


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize(("peer", "cumem", "config"), [
    (True, False, "p2p-cumem-off"), (False, True, "shm-cumem-on"),
    (False, False, "shm-cumem-off")])
def test_rows_are_the_goldens_bytes(world: int, peer: bool, cumem: bool, config: str) -> None:
    run = _runs(f"nccl-matrix-{world}x-h100.json")[config]
    row = nccl.nccl_row(peer, cumem, world, 0)
    # the largest rank where ranks differ (legacy IPC init at 4 ranks)
    assert row.init == _step(run, INIT, largest=True)
    assert row.first_all_reduce == _step(run, WARM)
    assert row.first_p2p == 0
    assert f"nccl-matrix-{world}x-h100.json" in row.basis


def test_the_default_row_keeps_its_h200_init_and_says_so() -> None:
    h100 = _runs("nccl-matrix-2x-h100.json")["p2p-cumem-on"]
    row = nccl.nccl_row(True, True, 2, 0)
    assert row.first_all_reduce == _step(h100, WARM) == 474 * MiB
    assert row.init == 458 * MiB != _step(h100, INIT)  # H200's; H100 measured 372 MiB
    assert "2× H200" in row.basis and f"{_step(h100, INIT):,}" in row.basis


def test_init_and_all_reduce_do_not_grow_from_2_to_4_ranks() -> None:
    two, four = _runs("nccl-matrix-2x-h100.json"), _runs("nccl-matrix-4x-h100.json")
    for config in ("p2p-cumem-on", "shm-cumem-on", "shm-cumem-off"):
        assert _step(two[config], INIT) == _step(four[config], INIT)
        assert _step(two[config], WARM) == _step(four[config], WARM)
    for peer, cumem in ((True, True), (False, True), (False, False)):
        assert nccl.nccl_row(peer, cumem, 4, 0)[:2] == nccl.nccl_row(peer, cumem, 2, 0)[:2]
    # legacy IPC grows: 757,071,872 B at 2 ranks, the largest of 4 ranks 1,059,061,760 B
    assert nccl.nccl_row(True, False, 4, 0).init > nccl.nccl_row(True, False, 2, 0).init


def test_unmeasured_world_sizes_are_stated() -> None:
    eight = nccl.nccl_row(True, True, 8, 0)
    assert eight[:2] == nccl.nccl_row(True, True, 4, 0)[:2]
    assert "8 ranks extrapolated from 4" in eight.basis
    assert "not measured" in nccl.nccl_row(False, True, 3, 0).basis
    assert "extrapolated" not in nccl.nccl_row(True, True, 4, 0).basis


@pytest.mark.parametrize(("name", "config", "channels"), [
    ("nccl-matrix-2x-h100.json", "p2p-cumem-on", 32),
    ("nccl-matrix-2x-h100.json", "p2p-cumem-off", 32),
    ("nccl-matrix-2x-h100.json", "p2p-cumem-on-minchannels-32", 32),
    ("nccl-matrix-2x-h100.json", "p2p-cumem-on-maxchannels-2", 2),
    ("nccl-matrix-2x-h100-max-p2p-nchannels.json", "p2p-cumem-on-max-p2p-nchannels-8", 8),
    ("nccl-matrix-4x-h100.json", "p2p-cumem-on", 32),
    ("nccl-matrix-4x-h100.json", "p2p-cumem-off", 32),
    ("nccl-matrix-4x-h100.json", "p2p-cumem-on-minchannels-32", 32),
    ("nccl-matrix-4x-h100.json", "p2p-cumem-on-maxchannels-2", 2),
    ("nccl-matrix-4x-h100.json", "p2p-cumem-on-max-p2p-nchannels-8", 8),
])
def test_first_p2p_op_is_base_plus_peers_times_channels(name: str, config: str,
                                                        channels: int) -> None:
    # every P2P configuration at NCCL's default buffer size, in both matrices
    run = _runs(name)[config]
    peers = len(run["ranks"]) - 1
    assert _step(run, A2A) == (nccl.P2P_FIRST_BASE_BYTES
                               + peers * channels * nccl.P2P_PER_PEER_CHANNEL_BYTES)
    if channels == nccl.P2P_CHANNELS_PER_PEER:
        assert _step(run, A2A) == nccl.first_p2p_bytes(True, peers)


@pytest.mark.parametrize("name", ["nccl-matrix-2x-h100.json", "nccl-matrix-4x-h100.json"])
def test_first_p2p_op_over_shm_is_the_base(name: str) -> None:
    for config, run in _runs(name).items():
        if config.startswith("shm"):
            assert _step(run, A2A) == nccl.first_p2p_bytes(False, len(run["ranks"]) - 1)


def test_send_recv_first_gives_the_same_p2p_figure() -> None:
    run = _runs("nccl-matrix-2x-h100-sendrecv-first.json")["p2p-cumem-on"]
    assert _step(run, SENDRECV) == nccl.first_p2p_bytes(True, 1)


def _est(model: str, gpu: str, **kw: Any) -> Estimate:
    return estimate(model, Deployment(**kw), gpu_name=gpu)


def _named(e: Estimate, prefix: str) -> list[Component]:
    return [c for c in e.ranks[0].components if c.name.startswith(prefix)]


def test_pp_communicator_carries_its_first_send_recv_tp_does_not() -> None:
    # at TP2 × PP2 PP's is the process's second communicator (made after TP's,
    # reports/gpu/nccl-later): the second-communicator row plus its first send/recv
    e = _est("llama-3.1-8b", "H100", tp=2, pp=2)
    (pp,) = _named(e, "NCCL PP")
    init, first, _ = nccl.SECOND_COMM_ROWS[(True, True, 2)]
    assert pp.bytes - (init + first) == nccl.first_p2p_bytes(True, 1) == 446 * MiB
    # at TP1 × PP2 it is the first one: the first row, which the TP1 rank's lacks no part of
    (alone,) = _named(_est("llama-3.1-8b", "H100", pp=2), "NCCL PP")
    (tp,) = _named(_est("llama-3.1-8b", "H100", tp=2), "NCCL TP")
    assert alone.bytes - tp.bytes == 446 * MiB


def test_transport_follows_the_gpus_peer_access() -> None:
    # the RTX 4090 (PCIe Gen4, no P2P) runs NCCL's 2 channels over SHM
    # (memprof.core.terms.nccl_channels): the channel sweep's 2-channel SHM row
    shm = _runs("nccl-channels-4x-h100.json")["w2-shm-cumem-on-ch2"]
    assert find_gpu("RTX-4090").peer_access is False
    # the measured rows with torch's stream pool, which vLLM's PyNccl communicator's warm-up
    # makes at the default release (from 0.14.0: memprof.core.terms.pynccl_pool)
    pool = 0
    (c,) = _named(_est("qwen3-0.6b", "RTX-4090", tp=2), "NCCL TP")
    # and its first all_reduce's stack reservation at the 4090's SMs and NCCL's sm_80 kernel
    # (memprof.core.terms.nccl_stack; the default release's NCCL 2.30.7 reads 2.28.9's images)
    g = find_gpu("RTX-4090")
    stack = stack_delta(g, THREADS[g.arch], "2.30.7")[0]
    assert stack < 0
    # and init's NCCL device code at NCCL 2.30.7's sm_80 image, 25 pages for the measured 2.28.9
    # sm_90 image's 51 (memprof.core.terms.nccl_image)
    image = image_delta(g, "2.30.7")[0]
    assert image == -52 * MiB
    assert c.bytes == _step(shm, INIT) + _step(shm, WARM) - pool + stack + image
    (p,) = _named(_est("qwen3-0.6b", "H100", tp=2), "NCCL TP")
    # (2.30.7's sm_90 image, 52 pages, for the measured 2.28.9 one's 51)
    h_image = image_delta(find_gpu("H100"), "2.30.7")[0]
    assert h_image == 2 * MiB
    assert p.bytes == (458 + 474) * MiB - pool + h_image


def test_stream_pool_counted_once() -> None:
    first = _runs("nccl-matrix-2x-h100-stream-first.json")["p2p-cumem-on"]
    plain = _runs("nccl-matrix-2x-h100.json")["p2p-cumem-on"]
    assert _step(first, STREAM) == nccl.TORCH_STREAM_POOL_BYTES == cudagraph.GRAPH_DRIVER_FIRST
    assert _step(plain, INIT) - _step(first, INIT) == nccl.TORCH_STREAM_POOL_BYTES
    # vLLM's PyNccl communicator made no pool before 0.14.0 (memprof.core.terms.pynccl_pool): at
    # 0.13.0 the TP2 communicator's figure leaves it out; from 0.14.0 its warm-up's
    # current_stream() makes it, and the figure keeps the measured init
    (c,) = _named(_est("qwen3-0.6b", "H100", tp=2, max_num_seqs=64), "NCCL TP")
    # (init's NCCL device code at the default release's NCCL 2.30.7: memprof.core.terms.nccl_image)
    image = image_delta(find_gpu("H100"), "2.30.7")[0]
    assert c.bytes == (458 + 474) * MiB + image
    (old,) = _named(_est("qwen3-0.6b", "H100", tp=2, max_num_seqs=64, engine_version="0.13.0"),
                    "NCCL TP")
    (new,) = _named(_est("qwen3-0.6b", "H100", tp=2, max_num_seqs=64, engine_version="0.14.0"),
                    "NCCL TP")
    assert new.bytes - old.bytes == nccl.TORCH_STREAM_POOL_BYTES
    # on the V1 runner at TP1 (0.21.0; Model Runner V2 runs Qwen3 by default from 0.22.0) the
    # graph model's first 70 MiB holds it; where Model Runner V2 runs the model (0.33.0, TP1) its
    # output_copy_stream makes the pool before the profile run, in the budget
    # (terms.stream_pool.V2_OUTPUT_COPY_STREAM); at TP2 the communicator made it before either,
    # and neither the graphs nor a stream's row hold it
    for version, tp, first_cost, pools_made in (
            ("0.21.0", 1, cudagraph.GRAPH_DRIVER_FIRST, []),
            ("0.33.0", 1, 0, [nccl.TORCH_STREAM_POOL_BYTES]), ("0.33.0", 2, 0, [])):
        e = _est("qwen3-0.6b", "H100", tp=tp, max_num_seqs=64, engine_version=version)
        ctx = rank_context(e, e.ranks[0])
        g = cudagraph.cudagraph_model(ctx)
        parts = sum(cudagraph.graph_driver_bytes(ctx, m, len(v)) for m, v in g.modes.items())
        assert g.driver == parts + first_cost
        assert cudagraph.graph_driver_first(ctx) == first_cost
        assert [c.bytes for c in _named(e, "torch stream pool")] == pools_made


def test_nccl_node_cost_is_the_goldens() -> None:
    doc = json.loads((GOLD / "graph-collectives-4x-h100.json").read_text())
    (run,) = [r for r in doc["runs"] if r["kind"] == "pynccl"]
    cases = {c["case"]: c for c in run["ranks"][0]["cases"]}
    for shape in ("1x4096", "64x4096", "256x5120"):
        one, many = cases[f"{shape}, 1 nodes"], cases[f"{shape}, 64 nodes"]
        per_node = (many["driver_bytes"] - one["driver_bytes"]) / 63 / one["graphs"]
        assert round(per_node) == cudagraph.GRAPH_DRIVER_PER_NCCL_NODE


def test_collective_nodes_in_the_graph_count() -> None:
    on = _est("qwen3-0.6b", "H100", tp=2, max_num_seqs=64)
    off = _est("qwen3-0.6b", "H100", tp=2, max_num_seqs=64, disable_custom_all_reduce=True)
    c_on, c_off = rank_context(on, on.ranks[0]), rank_context(off, off.ranks[0])
    layers = cudagraph.graph_pieces(c_on) - 1  # Qwen3-0.6B: 28 decoder layers, 2 all-reduces each
    assert layers == 28
    assert cudagraph.graph_nccl_nodes(c_on) == 0
    # and the vocabulary-parallel embedding's on the first stage
    assert cudagraph.graph_nccl_nodes(c_off) == cudagraph.tp_all_reduces(c_off) == 2 * layers + 1
    g_on, g_off = cudagraph.cudagraph_model(c_on), cudagraph.cudagraph_model(c_off)
    sizes = sum(len(v) for v in g_on.modes.values())
    per = (cudagraph.GRAPH_DRIVER_PER_NCCL_NODE + cudagraph.GRAPH_DRIVER_NCCL_MIXING
           - cudagraph.GRAPH_DRIVER_PER_KERNEL_NODE)
    assert g_off.driver - g_on.driver == sizes * (2 * layers + 1) * per


def test_custom_all_reduce_on_and_off() -> None:
    h100, rtx = find_gpu("H100"), find_gpu("RTX-4090")
    assert custom_all_reduce_applies(Deployment(tp=2), h100)
    assert custom_all_reduce_applies(Deployment(tp=8), h100)
    assert not custom_all_reduce_applies(Deployment(tp=3), h100)  # world sizes 2, 4, 6, 8
    assert not custom_all_reduce_applies(Deployment(tp=2), rtx)  # no peer access
    assert not custom_all_reduce_applies(Deployment(tp=2, disable_custom_all_reduce=True), h100)
    on = _est("qwen3-0.6b", "H100", tp=2)
    off = _est("qwen3-0.6b", "H100", tp=2, disable_custom_all_reduce=True)
    (ar,) = _named(on, "custom all-reduce buffers")
    # meta 8 MiB + meta_size() in 2 MiB pages, IPC buffer 8 MiB, rank_data 8 MiB
    assert ar.bytes == 26 * MiB and ar.where == _named(on, "NCCL TP")[0].where
    assert not _named(off, "custom all-reduce buffers")
    assert not _named(_est("qwen3-0.6b", "H100", tp=1), "custom all-reduce buffers")


@pytest.mark.parametrize(("version", "outside"), [
    ("0.7.1", True),  # V0: memory_profiling from the snapshot before the distributed init
    ("0.8.5", False),  # V1 0.8.x: the torch allocated peak holds every tensor, rank_data too
    ("0.10.1.1", True),  # V1 0.9.1 - 0.10.x: memory_profiling from init_snapshot, as V0
    ("0.11.0", False),  # the distributed init before the snapshot: all of it in the baseline
])
def test_custom_all_reduce_rank_data_outside_memory_profilings_budget(version: str,
                                                                      outside: bool) -> None:
    # custom_all_reduce.py: rank_data = torch.empty(8 MiB) is torch memory (not non-torch),
    # allocated before the load and before the profile's peak reset: where the budget is
    # weights + non-torch increase + torch peak increase it is in none of them (Qwen2.5: in
    # 0.7.1's model registry, which has no Qwen3)
    e = _est("qwen2.5-0.5b", "H100", tp=2, engine_version=version)
    (ar,) = _named(e, "custom all-reduce buffers")
    data = _named(e, "custom all-reduce rank_data")
    if outside:
        assert ar.bytes == 18 * MiB and ar.where == "budget"
        assert [(d.bytes, d.where, d.category) for d in data] == [(8 * MiB, "runtime", "scratch")]
    else:
        assert ar.bytes == 26 * MiB and not data
