"""The first NCCL all_reduce's stack reservation (memprof/core/terms/nccl_stack.py) against its
goldens (reports/gpu/nccl-stack/) and on the cards it moves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memprof.core.deployment import Deployment
from memprof.core.gpus import find_gpu
from memprof.core.terms.nccl import NCCL_ROWS, nccl_row
from memprof.core.terms.nccl_stack import (
    GOLDEN,
    KERNEL_GOLDEN,
    KERNEL_STACK,
    MEASURED_GROWTH_BYTES,
    MEASURED_THREADS,
    _reservation,
    first_all_reduce_stack,
    image_for,
    on_card,
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
