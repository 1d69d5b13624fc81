"""The first NCCL all_reduce's stack reservation (memprof/core/terms/nccl_stack.py) against its
goldens (reports/gpu/nccl-stack/) and on the cards it moves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memprof.core.deployment import Deployment
from memprof.core.gpus import find_gpu
from memprof.core.terms.nccl import NCCL_ROWS, P2P_FIRST_BASE_BYTES, nccl_row
from memprof.core.terms.nccl_stack import (
    GOLDEN,
    KERNEL_GOLDEN,
    KERNEL_STACK,
    MEASURED_GROWTH_BYTES,
    MEASURED_P2P_GROWTH_BYTES,
    MEASURED_THREADS,
    SENDRECV_STACK,
    _reservation,
    first_all_reduce_stack,
    first_p2p_stack,
    image_for,
    on_card,
    p2p_stack_delta,
    stack_delta,
)
from memprof.core.terms.non_torch import MAX_THREADS_PER_SM, nccl_comm

ROOT = Path(__file__).resolve().parents[1]


def _golden(path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / path).read_text())
    return data


def _steps(case: str) -> dict[str, dict[str, Any]]:
    runs = [r for r in _golden(GOLDEN)["runs"] if r["case"] == case]
    assert len(runs) == 2
    # both ranks grew alike at every step
    assert [s.get("non_torch_growth_bytes") for s in runs[0]["steps"]] == \
        [s.get("non_torch_growth_bytes") for s in runs[1]["steps"]]
    return {s["step"].split(" (")[0].split(",")[0]: s for s in runs[0]["steps"]}


def test_first_all_reduce_is_the_stack_reservation_on_every_transport() -> None:
    for case in ("shm-cumem0", "shm-cumem1", "p2p-cumem0", "shm-cumem0-eager"):
        s = _steps(case)
        assert s["first all_reduce"]["stack_limit"] == 1744
        assert s["first all_reduce"]["non_torch_growth_bytes"] == MEASURED_GROWTH_BYTES
    assert _reservation(1744, MEASURED_THREADS) - 1024 * MEASURED_THREADS == MEASURED_GROWTH_BYTES
    # a limit already above the kernel's need: nothing grows
    assert _steps("shm-cumem0-preset4096")["first all_reduce"]["non_torch_growth_bytes"] == 0
    # NCCL_SET_STACK_SIZE=1 moves it to init, at the largest kernel's stack (1,976 -> 1,984)
    plain, moved = _steps("shm-cumem0"), _steps("shm-cumem0-setstack")
    extra = (moved["init_process_group"]["non_torch_growth_bytes"]
             - plain["init_process_group"]["non_torch_growth_bytes"])
    assert extra == _reservation(1984, MEASURED_THREADS) - 1024 * MEASURED_THREADS
    assert moved["first all_reduce"]["non_torch_growth_bytes"] == 0
    # P2P cuMem on: what is left is the buffers the rows' 474 MiB holds besides the reservation
    p2p = _steps("p2p-cumem1-setstack")["first all_reduce"]["non_torch_growth_bytes"]
    assert p2p == NCCL_ROWS[(True, True, 2)][1] - MEASURED_GROWTH_BYTES


def test_kernel_stacks_are_the_dumped_ones() -> None:
    dump = _golden(KERNEL_GOLDEN)
    name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    for release, key in (("2.28.9", "nccl_2.28.9"), ("2.21.5", "nccl_2.21.5_sm80_sm90")):
        per_arch = dump[key]["per_arch"]
        for image, stack in KERNEL_STACK[release].items():
            kernels = per_arch[f"sm_{image}"]
            got = [v for k, v in kernels.items() if k.startswith(name)]
            assert got == [stack], (release, image, got)
    # the measured limit is the sm_90 2.28.9 kernel's stack rounded up to 16 B
    assert -(-KERNEL_STACK["2.28.9"][90] // 16) * 16 == 1744


def test_image_each_card_runs() -> None:
    images = (75, 80, 90, 100, 110, 120)
    assert image_for("sm89", images) == 80
    assert image_for("sm86", images) == 80
    assert image_for("sm90", images) == 90
    assert image_for("sm103", images) == 100
    assert image_for("sm121", images) == 120
    assert image_for("sm70", images) is None
    assert image_for("gfx942", images) is None


def test_measured_card_keeps_its_figure_and_pcie_cards_move() -> None:
    h100 = find_gpu("H100")
    assert stack_delta(h100, MAX_THREADS_PER_SM["sm90"], "2.28.9") == (0, "")
    # L4: 58 SMs × 1536 threads, sm_80 image, 2.21.5's 1,312 B: 24 MiB instead of 186
    l4 = find_gpu("L4")
    got = first_all_reduce_stack(l4, MAX_THREADS_PER_SM[l4.arch], "2.21.5")
    assert got is not None and l4.sm_count == 58
    assert got.bytes == _reservation(1312, 58 * 1536) - _reservation(1024, 58 * 1536)
    assert got.bytes == 24 * 2**20
    # H100 under NCCL 2.21.5: its sm_90 kernel needs less stack than 2.28.9's
    old = first_all_reduce_stack(h100, 2048, "2.21.5")
    assert old is not None and old.bytes < MEASURED_GROWTH_BYTES
    # ROCm and a card without an SM count keep the measured row
    assert first_all_reduce_stack(find_gpu("MI300X"), 2048, None) is None


def test_first_communicator_on_a_pcie_card_moves_second_does_not() -> None:
    dep = Deployment(tp=2, engine_version="0.8.4")
    gpu = find_gpu("RTX-3090")
    row = nccl_row(gpu.peer_access, False, 2, 0)
    moved = on_card(row, gpu, MAX_THREADS_PER_SM[gpu.arch], "2.21.5")
    assert moved.first_all_reduce < row.first_all_reduce
    assert "stack reservation" in moved.basis
    comm = nccl_comm(dep, gpu, "TP", 2)
    assert comm.first_all_reduce < MEASURED_GROWTH_BYTES
    # EP's is a second communicator: its measured row already holds no reservation
    second = nccl_comm(dep, gpu, "EP", 2)
    assert "stack reservation" not in second.basis


SENDRECV_FIRST = "reports/gpu/nccl/nccl-matrix-2x-h100-sendrecv-first.json"


def test_first_send_recv_is_the_sendrecv_kernels_stack_reservation() -> None:
    # over SHM and sockets (no buffers in device memory) the first batch_isend_irecv after the
    # first all_reduce adds 65,011,712 B on every rank: the reservation from the ring LL
    # kernel's 1,744 B limit to the SendRecv kernel's 1,976 B (1,984 read, as under
    # NCCL_SET_STACK_SIZE=1), on 132 SMs × 2,048 threads
    runs = {r["config"]: r for r in _golden(SENDRECV_FIRST)["runs"]}
    for config in ("shm-cumem-on", "net-cumem-on"):
        for rank in runs[config]["ranks"]:
            grown = rank["non_torch_growth_bytes"]
            assert grown["first batch_isend_irecv (send next, recv previous), 1 MiB"] == \
                MEASURED_P2P_GROWTH_BYTES
    assert MEASURED_P2P_GROWTH_BYTES == P2P_FIRST_BASE_BYTES == \
        _reservation(1984, MEASURED_THREADS) - _reservation(1744, MEASURED_THREADS)
    h100 = find_gpu("H100")
    got = first_p2p_stack(h100, MAX_THREADS_PER_SM["sm90"], "2.28.9")
    assert got is not None and got.bytes == MEASURED_P2P_GROWTH_BYTES
    assert p2p_stack_delta(h100, MAX_THREADS_PER_SM["sm90"], "2.28.9") == (0, "")


def test_sendrecv_stacks_are_the_dumped_ones() -> None:
    dump = _golden(KERNEL_GOLDEN)
    for release, key in (("2.28.9", "nccl_2.28.9"), ("2.21.5", "nccl_2.21.5_sm80_sm90")):
        per_arch = dump[key]["per_arch"]
        for image, stack in SENDRECV_STACK[release].items():
            got = [v for k, v in per_arch[f"sm_{image}"].items()
                   if k.startswith("ncclDevKernel_SendRecv")]
            assert got == [stack], (release, image, got)
        # every image read for the ring LL kernel has its SendRecv kernel too
        assert set(SENDRECV_STACK[release]) == set(KERNEL_STACK[release])


def test_first_send_recv_on_pcie_cards() -> None:
    # an A40 / RTX A6000 (84 SMs × 1536 threads) under NCCL 2.21.5's sm_80 image: the ring LL
    # kernel leaves 1,312 B, SendRecv needs 1,568 B: 32 MiB, not the H100's 62
    a40 = find_gpu("A40")
    threads = 84 * 1536
    got = first_p2p_stack(a40, MAX_THREADS_PER_SM[a40.arch], "2.21.5")
    assert got is not None and a40.sm_count == 84
    assert got.bytes == _reservation(1568, threads) - _reservation(1312, threads) == 32 * 2**20
    assert p2p_stack_delta(a40, MAX_THREADS_PER_SM[a40.arch], "2.21.5")[0] == -30 * 2**20
    # a PP group's first send/recv moves with it; a group that sends nothing does not
    pp = on_card(nccl_row(True, False, 2, 1), a40, MAX_THREADS_PER_SM[a40.arch], "2.21.5")
    tp = on_card(nccl_row(True, False, 2, 0), a40, MAX_THREADS_PER_SM[a40.arch], "2.21.5")
    assert pp.first_p2p == nccl_row(True, False, 2, 1).first_p2p - 30 * 2**20
    assert tp.first_p2p == 0 and "first send/recv" not in tp.basis
    assert first_p2p_stack(find_gpu("MI300X"), 2048, None) is None
    # sm_75 under 2.28.9: the ring LL kernel (928 B) leaves the driver's 1,024 B default, from
    # which SendRecv's 1,040 B grows the reservation
    t4 = find_gpu("T4")
    t4_threads = t4.sm_count * MAX_THREADS_PER_SM[t4.arch]
    got_t4 = first_p2p_stack(t4, MAX_THREADS_PER_SM[t4.arch], "2.28.9")
    assert got_t4 is not None
    assert got_t4.bytes == _reservation(1040, t4_threads) - _reservation(1024, t4_threads)


def test_v0_gather_charges_the_cards_send_recv_stack() -> None:
    from memprof.core.estimate import estimate
    e = estimate("llama-3.1-8b", Deployment(tp=2, engine_version="0.7.1"), gpu_name="RTX-4090")
    for rank in e.ranks:
        (c,) = [x for x in rank.components if x.name.startswith("NCCL TP communicator of torch")]
        # no peer access: a second communicator's SHM init (6 MiB at 2 channels) + the gather's
        # SendRecv stack on 128 SMs × 1536 threads, 1,312 -> 1,568 B = 48 MiB
        threads = 128 * 1536
        assert c.bytes == 6 * 2**20 + _reservation(1568, threads) - _reservation(1312, threads)
        assert "first send/recv" in c.formula
