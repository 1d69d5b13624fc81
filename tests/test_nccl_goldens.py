"""The NCCL and graph-with-collectives goldens of ``reports/gpu/nccl`` (2× and 4× H100 NV18,
NCCL 2.28.9, torch 2.11.0+cu130, from ``recorders/gpu_nccl.py`` and
``recorders/gpu_graph_collectives.py``): each file is whole (every run exited 0, every
collective's result checked, ranks alike), the matrix reproduces the older ``nccl-2x-h100.json``
to the byte, and the figures that ``reports/gpu/nccl/README.md`` reads off them hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

NCCL = Path(__file__).resolve().parents[1] / "reports" / "gpu" / "nccl"
INIT = "ncclCommInitRank (init_process_group, device_id)"
WARM = "warm-up all_reduce of 1 fp32"
A2A = "first all_to_all_single, 1 MiB"
SENDRECV = "first batch_isend_irecv (send next, recv previous), 1 MiB"
STREAM_POOL = 73_400_320  # torch's first pool stream in a process (70 MiB)
P2P_FIRST = 467_664_896  # first point-to-point op over P2P (446 MiB)
SHM_FIRST = 65_011_712  # the same over SHM or sockets (62 MiB)


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((NCCL / name).read_text())
    return doc


def _growth(doc: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Rank 0's non-torch growth per step, by configuration."""
    return {r["config"]: r["ranks"][0]["non_torch_growth_bytes"] for r in doc["runs"]}


MATRICES = sorted(p.name for p in NCCL.glob("nccl-matrix-*.json"))


@pytest.mark.parametrize("name", MATRICES)
def test_matrix_files_are_whole(name: str) -> None:
    doc = _load(name)
    assert doc["runs"] and "NV18" in doc["nvidia_smi_topo"]
    for run in doc["runs"]:
        assert run["exit_code"] == 0 and run["nccl"] == "2.28.9"
        assert run["communicators_initialised_per_rank"] == 1  # p2p reuses the one communicator
        ranks = run["ranks"]
        words = run["command"].split()
        world = int(words[words.index("nccl_child.py") + 1])
        assert len(ranks) == world and all(r["ok"] for r in ranks)
        first = ranks[0]["non_torch_growth_bytes"]
        for r in ranks[1:]:
            g = r["non_torch_growth_bytes"]
            # legacy IPC (cuMem off) maps a different number of peer buffers at init by ring
            # position once there are more than two ranks; every other step is alike
            alike = [k for k in g if not (k == INIT and "cumem-off" in run["config"])]
            assert {k: g[k] for k in alike} == {k: first[k] for k in alike}, run["config"]


def test_matrix_reproduces_the_old_golden() -> None:
    old, new = _load("nccl-2x-h100.json"), _load("nccl-matrix-2x-h100.json")
    assert [r["config"] for r in old["runs"]] == [r["config"] for r in new["runs"]][:4]
    for o, n in zip(old["runs"], new["runs"], strict=False):
        for ro, rn in zip(o["ranks"], n["ranks"], strict=True):
            got = {k: rn["non_torch_growth_bytes"][k] for k in ro["non_torch_growth_bytes"]}
            assert got == ro["non_torch_growth_bytes"], o["config"]


@pytest.mark.parametrize(("name", "first"), [("nccl-matrix-2x-h100.json", A2A),
                                             ("nccl-matrix-2x-h100-sendrecv-first.json",
                                              SENDRECV)])
def test_only_init_the_first_all_reduce_and_the_first_p2p_op_grow(name: str, first: str) -> None:
    for config, g in _growth(_load(name)).items():
        assert g[INIT] > 0 and g[WARM] > 0, config
        assert all(v == 0 for k, v in g.items() if k not in (INIT, WARM, first)), config
        if "max-p2p" in config or "maxchannels" in config or "buffsize" in config:
            continue
        assert g[first] == (P2P_FIRST if config.startswith("p2p") else SHM_FIRST), config


def test_buffer_size_and_channel_caps() -> None:
    g = _growth(_load("nccl-matrix-2x-h100.json"))
    on, off = g["p2p-cumem-on"], g["p2p-cumem-off"]
    assert g["p2p-cumem-on-buffsize-1m"][WARM] < on[WARM]
    assert g["p2p-cumem-on-buffsize-1m"][A2A] < on[A2A]
    assert g["p2p-cumem-off-buffsize-1m"][INIT] < off[INIT]
    assert g["shm-cumem-on-buffsize-1m"] == g["shm-cumem-on"]  # SHM: the same to the byte
    capped = g["p2p-cumem-on-maxchannels-2"]
    assert sum(capped.values()) * 2 < sum(on.values())
    assert g["p2p-cumem-on-minchannels-32"][WARM] > on[WARM]
    p2p = _growth(_load("nccl-matrix-2x-h100-max-p2p-nchannels.json"))
    assert p2p["p2p-cumem-on-max-p2p-nchannels-8"][A2A] < on[A2A] // 2
    assert p2p["shm-cumem-on-max-p2p-nchannels-8"][A2A] == SHM_FIRST


def test_init_figures_hold_torchs_stream_pool() -> None:
    plain = _growth(_load("nccl-matrix-2x-h100.json"))
    first = _growth(_load("nccl-matrix-2x-h100-stream-first.json"))
    for config, g in first.items():
        assert g["torch.cuda.Stream() before init"] == STREAM_POOL
        assert g[INIT] == plain[config][INIT] - STREAM_POOL, config
        assert g[WARM] == plain[config][WARM], config
    probe = _growth(_load("nccl-matrix-2x-h100-stream-probe-stream-probe.json"))
    assert all(g["torch.cuda.Stream() at the end"] == 0 for g in probe.values())


def _cases(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["case"]: c for c in run["ranks"][0]["cases"]}


GRAPHS = ["graph-collectives-2x-h100.json", "graph-collectives-2x-h100-g1000.json",
          "graph-collectives-2x-h100-stream.json"]


@pytest.mark.parametrize("name", GRAPHS)
def test_graph_files_are_whole(name: str) -> None:
    for run in _load(name)["runs"]:
        assert run["exit_code"] == 0
        r0, r1 = run["ranks"]
        assert r0["warm_up_ok"] and r1["warm_up_ok"]
        for a, b in zip(r0["cases"], r1["cases"], strict=True):
            assert a["ok"] and b["ok"] and a["driver_bytes"] == b["driver_bytes"], a["case"]
            assert a["after_replay_driver_bytes"] == a["driver_bytes"]  # replay adds nothing


def test_an_all_reduce_node_costs_about_8_6_kib() -> None:
    runs = {r["kind"]: _cases(r) for r in _load("graph-collectives-2x-h100-g1000.json")["runs"]}
    for shape in ("1x4096", "64x4096", "256x5120"):
        one, many = f"{shape}, 1 nodes", f"{shape}, 64 nodes"
        node = {k: (c[many]["driver_bytes"] - c[one]["driver_bytes"]) // (63 * 1000)
                for k, c in runs.items()}
        assert 8_500 <= node["pynccl"] <= 8_800, (shape, node)
        assert 2_250 <= node["local"] <= 2_400 and 2_250 <= node["alone"] <= 2_400, (shape, node)
        tensors = {c[f"{shape}, 64 nodes"]["tensors_bytes"] for c in runs.values()}
        assert len(tensors) == 1  # the pool's tensors do not depend on the node


def test_pynccl_and_c10d_and_cumem_alike() -> None:
    runs = _load("graph-collectives-2x-h100.json")["runs"]
    by = {(r["kind"], r["env"]["NCCL_CUMEM_ENABLE"]): _cases(r) for r in runs}
    for case in by[("pynccl", "1")]:
        drivers = {k: c[case]["driver_bytes"] for k, c in by.items() if k[0] != "local"}
        assert len(set(drivers.values())) == 1, (case, drivers)
        assert by[("local", "0")][case]["driver_bytes"] == by[("local", "1")][case]["driver_bytes"]


def test_the_first_graph_cost_is_the_capture_stream() -> None:
    side = {r["kind"]: r["ranks"][0]["side_stream_non_torch_bytes"]
            for r in _load("graph-collectives-2x-h100-stream.json")["runs"]}
    assert side == {"alone": STREAM_POOL, "local": 0, "pynccl": STREAM_POOL}
    h100 = _load("graph-costs-1x-h100.json")["cases"]
    h200 = json.loads((NCCL.parent / "trace" / "graph-costs-h200.json").read_text())["cases"]
    first = [c for c in h100 if c["graphs"] == 1]
    assert {c["driver_bytes"] for c in first} == {STREAM_POOL}
    assert [c["driver_bytes"] for c in h100] == [c["driver_bytes"] for c in h200]


def test_world_4_init_and_first_all_reduce_equal_world_2_the_first_p2p_op_grows() -> None:
    two = _growth(_load("nccl-matrix-2x-h100.json"))
    four = _growth(_load("nccl-matrix-4x-h100.json"))
    for config in ("p2p-cumem-on", "shm-cumem-on", "shm-cumem-off"):
        assert (four[config][INIT], four[config][WARM]) == (two[config][INIT], two[config][WARM])
    assert two["p2p-cumem-on"][A2A] == P2P_FIRST
    assert four["p2p-cumem-on"][A2A] == 1_272_971_264  # three peers: 1,214 MiB
    assert four["shm-cumem-on"][A2A] == SHM_FIRST == two["shm-cumem-on"][A2A]
    assert sum(four["p2p-cumem-on"].values()) == 2060 * 2**20


def test_world_4_all_reduce_graph_node_costs_what_it_costs_at_2() -> None:
    doc = _load("graph-collectives-4x-h100.json")
    pynccl = next(r for r in doc["runs"] if r["kind"] == "pynccl")
    cases = {c["case"]: c["driver_bytes"] for c in pynccl["ranks"][0]["cases"]}
    per_node = (cases["64x4096, 64 nodes"] - cases["64x4096, 1 nodes"]) / 63 / 250
    assert 8_500 < per_node < 8_800
