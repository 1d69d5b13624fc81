"""NCCL's channels on PCIe-only cards (memprof.core.terms.nccl_channels): the channel count by
hand from NCCL's search, the bytes per channel against the channel sweep golden, and the rows
moved to a PCIe card's channels."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memprof.base.units import KiB, MiB
from memprof.core.gpus import find_gpu
from memprof.core.terms import nccl
from memprof.core.terms.nccl_channels import (
    DEFAULT_CHANNELS,
    GOLDEN,
    INTEL_P2P_OVERHEAD,
    PER_CHANNEL,
    SPEEDS_BELOW_SM90,
    SPEEDS_SM90,
    Channels,
    channel_delta,
    pcie_channels,
    search_channels,
)
from memprof.core.terms.nccl_image import image_delta
from memprof.core.terms.nccl_stack import stack_delta
from memprof.core.terms.nccl_torch import TORCH_COMM_ROWS, torch_comm_bytes
from memprof.core.terms.non_torch import MAX_THREADS_PER_SM as THREADS

ROOT = Path(__file__).resolve().parents[1]
INIT = "ncclCommInitRank (init_process_group, device_id)"
WARM = "warm-up all_reduce of 1 fp32"


def _runs() -> dict[str, dict[str, Any]]:
    doc = json.loads((ROOT / GOLDEN).read_text())
    return {r["config"]: r for r in doc["runs"] if r["exit_code"] == 0}


def _step(run: dict[str, Any], step: str) -> int:
    """The largest rank's growth (the legacy-IPC 4-rank rows differ by rank)."""
    return max(int(r["non_torch_growth_bytes"][step]) for r in run["ranks"])


# Hand counts (the module's docstring): a Gen4 x16 link is 16 x 120 / 80 = 24 GB/s; through an
# Intel root complex a channel at 20 charges 24, so one fits and two at 10 (2 x 12 = 24) carry
# no more; below 25 GB/s no duplication. Gen3 x16 = 12: 12 x 1.2 > 12, one at 10. Gen5 x16 = 48
# on the sm90 array: one at 40 (48), duplicated since 40 >= 25. Without the Intel overhead a Gen4
# pair finds two at 12 (= totalBw 24).
@pytest.mark.parametrize(("bw", "speeds", "overhead", "want"), [
    (24.0, SPEEDS_BELOW_SM90, INTEL_P2P_OVERHEAD, 1),
    (12.0, SPEEDS_BELOW_SM90, INTEL_P2P_OVERHEAD, 1),
    (48.0, SPEEDS_SM90, INTEL_P2P_OVERHEAD, 2),
    (24.0, SPEEDS_BELOW_SM90, 1.0, 2),
    (12.0, SPEEDS_BELOW_SM90, 1.0, 1),
])
def test_search_channels_by_hand(bw: float, speeds: tuple[float, ...], overhead: float,
                                 want: int) -> None:
    assert search_channels(bw, speeds, overhead) == want


@pytest.mark.parametrize(("gpu", "want"), [
    # P2P (no Intel root complex on the path, src/graph/paths.cc): Gen4 x16 2 x 12 GB/s -> 4
    ("L40S", (4, 4)), ("RTX-A6000", (4, 4)), ("A100-PCIe-80GB", (4, 4)),
    ("A40", (4, 4)), ("T4", (2, 2)), ("H100-PCIe", (4, 4)), ("RTX-PRO-6000", (4, 4)),
    # SHM through an Intel root complex: Gen4 x16 one at 20 -> 2; Gen5 one at 40, dup -> 4
    ("RTX-4090", (2, 2)), ("RTX-4060-Ti", (2, 2)), ("RTX-2080-Ti", (2, 2)), ("RTX-5090", (4, 4)),
    ("RTX-3090", (2, 2)),
    # NVLink, NVLink-bridged, xGMI, AMD PCIe: the measured rows stand
    ("H100", None), ("A100-80GB", None), ("H100-NVL", None), ("MI300X", None),
    ("RX-7900-XTX", None), ("V100-32GB", None),
])
def test_catalog_cards_channels(gpu: str, want: tuple[int, int] | None) -> None:
    got = pcie_channels(find_gpu(gpu))
    assert (got[:2] if got else None) == want


def test_no_gpu_peer_access_takes_the_shm_count() -> None:
    # --no-gpu-peer-access turns the card's peer access off (memprof/core/estimate.py): SHM
    # through the CPU, 2 channels on Gen4 as NVIDIA/nccl-tests#307's RTX 4090s log
    gpu = replace(find_gpu("RTX-3090"), peer_access=False)
    assert pcie_channels(gpu)[:2] == (2, 2)  # type: ignore[index]


@pytest.mark.parametrize(("peer", "cumem", "world", "tag"), [
    (True, False, 2, "w2-p2p-cumem-off"), (True, False, 4, "w4-p2p-cumem-off"),
    (True, True, 2, "w2-p2p-cumem-on"), (True, True, 4, "w4-p2p-cumem-on"),
    (False, False, 2, "w2-shm-cumem-off"), (False, False, 4, "w4-shm-cumem-off"),
    (False, True, 2, "w2-shm-cumem-on"), (False, True, 4, "w4-shm-cumem-on"),
])
def test_per_channel_bytes_are_the_sweeps_slopes(peer: bool, cumem: bool, world: int,
                                                 tag: str) -> None:
    """Each configuration's init and first all_reduce are a fixed part plus PER_CHANNEL's bytes
    per channel at every n measured up to 16, within the 64 KiB one rank of some SHM
    configurations shows beside the others (``GOLDEN``: 186.06 MiB at one channel)."""
    runs = _runs()
    per = PER_CHANNEL[(peer, cumem, world)]
    one = runs[f"{tag}-ch1"]
    for n in (2, 4, 8, 16):
        run = runs.get(f"{tag}-ch{n}")
        if run is None:  # 4-rank P2P cuMem on: measured up to 8 channels
            continue
        got = _step(run, INIT) - _step(one, INIT)
        assert abs(got - (per.init_coll + per.init_p2p) * (n - 1)) <= 64 * KiB
        assert _step(run, WARM) - _step(one, WARM) == per.all_reduce_coll * (n - 1)


def test_default_channels_reproduce_the_nvlink_rows() -> None:
    """The split by kind: the sweep's 1-channel figures plus the per-channel bytes at NCCL's
    NVLink defaults (24 collective, 32 P2P) are the matrix's measured rows to the byte."""
    runs = _runs()
    coll, p2p = DEFAULT_CHANNELS[True]
    for cumem, world, tag in ((False, 2, "w2-p2p-cumem-off"), (False, 4, "w4-p2p-cumem-off")):
        per = PER_CHANNEL[(True, cumem, world)]
        base = _step(runs[f"{tag}-ch1"], INIT) - per.init_coll - per.init_p2p
        assert base + per.init_coll * coll + per.init_p2p * p2p \
            == nccl.NCCL_ROWS[(True, cumem, world)][0]
    per = PER_CHANNEL[(True, True, 2)]
    on = runs["w2-p2p-cumem-on-ch1"]
    assert _step(on, INIT) - per.init_p2p + per.init_p2p * p2p == 390_070_272  # H100 matrix
    assert _step(on, WARM) - per.all_reduce_coll + per.all_reduce_coll * coll == 497_025_024


@pytest.mark.parametrize(("peer", "cumem", "world", "tag"), [
    (True, False, 2, "w2-p2p-cumem-off"), (True, False, 4, "w4-p2p-cumem-off"),
    (False, False, 2, "w2-shm-cumem-off"), (False, True, 2, "w2-shm-cumem-on"),
    (False, True, 4, "w4-shm-cumem-on"),
])
def test_moved_row_is_the_measured_two_channel_row(peer: bool, cumem: bool, world: int,
                                                   tag: str) -> None:
    ch = Channels(2, 2, "")
    row = nccl.nccl_row(peer, cumem, world, 0, ch)
    run = _runs()[f"{tag}-ch2"]
    assert (row.init, row.first_all_reduce) == (_step(run, INIT), _step(run, WARM))


def test_p2p_cumem_on_first_all_reduce_moves_to_the_measured_row() -> None:
    # init stays H200's (FIRST_KERNEL_IN_ROW), moved by 6 MiB per P2P channel
    row = nccl.nccl_row(True, True, 2, 0, Channels(2, 2, ""))
    assert row.first_all_reduce == _step(_runs()["w2-p2p-cumem-on-ch2"], WARM) == 210 * MiB
    assert row.init == 458 * MiB - 30 * 6 * MiB


def test_nvlink_rows_do_not_move() -> None:
    for key in PER_CHANNEL:
        peer = key[0]
        assert channel_delta(*key, Channels(*DEFAULT_CHANNELS[peer], "")) == (0, 0)
    assert nccl.nccl_row(True, False, 2, 0) == nccl.nccl_row(True, False, 2, 0, None)


def test_second_and_torch_communicators_move_by_the_same_bytes_per_channel() -> None:
    ch = Channels(2, 2, "")
    # cuMem off, 2 ranks: 546 MiB - 12 x 22 - 8 x 30 = 42 MiB
    got, how = torch_comm_bytes(True, False, 2, ch)
    assert got == TORCH_COMM_ROWS[(True, False, 2)] - (12 * 22 + 8 * 30) * MiB == 42 * MiB
    assert "NCCL_MIN/MAX_NCHANNELS" in how
    second = nccl.second_comm_row(True, False, 2, ch)
    assert second is not None and second.init == 42 * MiB


def test_first_p2p_op_on_pcie_uses_its_p2p_channels() -> None:
    row = nccl.nccl_row(True, True, 2, 1, Channels(2, 2, ""))
    assert row.first_p2p == nccl.P2P_FIRST_BASE_BYTES + 2 * 12 * MiB


def test_estimate_on_a_pcie_card_says_its_channels_and_assumption() -> None:
    """Row 1216's deployment (A40 x2, vLLM 0.6.4.post1, cuMem off; torch's stream pool stays in
    the row at that release, memprof.core.terms.pynccl_pool): the first communicator is the
    sweep's 4-channel P2P row, and its formula names the channels; on RTX 4090s (SHM) the
    formula names the assumed Intel root complex; the same deployment on H100s keeps the NVLink
    row (908 MiB)."""
    from memprof.core.deployment import Deployment
    from memprof.core.estimate import estimate

    dep = Deployment(tp=2, engine_version="0.6.4.post1")
    pcie = estimate("llama-3.1-8b", dep, gpu_name="A40")
    (c,) = [x for x in pcie.ranks[0].components if x.name == "NCCL TP communicator (2 ranks)"]
    run = _runs()["w2-p2p-cumem-off-ch4"]
    # and the first all_reduce's stack reservation at the A40's 84 SMs × 1536 threads and
    # NCCL 2.21.5's sm_80 kernel (memprof.core.terms.nccl_stack): 186 -> 36 MiB
    a40 = find_gpu("A40")
    stack = stack_delta(a40, THREADS[a40.arch], "2.21.5")[0]
    assert stack == -150 * MiB
    # and init's NCCL device code: 2.21.5's sm_80 image (24 pages) for the measured row's 2.28.9
    # sm_90 image (51; memprof.core.terms.nccl_image)
    image = image_delta(a40, "2.21.5")[0]
    assert image == -54 * MiB
    assert c.bytes == _step(run, INIT) + _step(run, WARM) + stack + image == 240 * MiB
    assert "4 collective / 4 P2P channels" in c.formula
    shm = estimate("llama-3.1-8b", dep, gpu_name="RTX-4090")
    (g,) = [x for x in shm.ranks[0].components if x.name == "NCCL TP communicator (2 ranks)"]
    assert "2 collective / 2 P2P channels" in g.formula and "[assumed host]" in g.formula
    nvl = estimate("llama-3.1-8b", dep, gpu_name="H100")
    (h,) = [x for x in nvl.ranks[0].components if x.name == "NCCL TP communicator (2 ranks)"]
    # (0.6.4.post1 runs NCCL 2.21.5: its sm_90 kernel's stack reservation, 62 MiB, not 186)
    h_stack = stack_delta(find_gpu("H100"), THREADS["sm90"], "2.21.5")[0]
    # (and 2.21.5's sm_90 image, 43 pages, for the measured 2.28.9 one's 51)
    h_image = image_delta(find_gpu("H100"), "2.21.5")[0]
    assert h_image == -16 * MiB
    assert h.bytes == nccl.NCCL_ROWS[(True, False, 2)][0] + 195_035_136 + h_stack + h_image \
        == 768 * MiB
    assert "channels" not in h.formula
