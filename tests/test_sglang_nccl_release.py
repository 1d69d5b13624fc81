"""The NCCL release each SGLang release runs (``memprof.core.terms.nccl.NCCL_VERSION``'s SGLang
rows: torch 2.5.1 / 2.6.0 pin nvidia-nccl-cu12 2.21.5, torch 2.7.1 2.26.2, torch 2.8.0 / 2.9.1
2.27.x, torch 2.11.0 the measured 2.28.9, torch 2.13.0 2.29.7, torch 2.14.1 2.30.7) and what it
moves: the stack reservation of the first all_reduce, read from 2.21.5's kernel images instead
of 2.28.9's (``memprof.core.terms.nccl_stack``). Row 1201's log prints the release it ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.gpus import find_gpu
from memprof.core.terms.nccl import nccl_version
from memprof.core.terms.nccl_stack import first_all_reduce_stack
from memprof.core.terms.non_torch import MAX_THREADS_PER_SM

ROOT = Path(__file__).resolve().parents[1]


def _sglang(version: str) -> Deployment:
    return Deployment(engine="sglang", engine_version=version, tp=4)


@pytest.mark.parametrize(("version", "nccl"), [
    ("0.4.3", "2.21.5"), ("0.4.4", "2.21.5"), ("0.4.5", "2.21.5"), ("0.4.6", "2.21.5"),
    ("0.4.7", "2.26.2"), ("0.4.10", "2.26.2"), ("0.5.1", "2.27.3"), ("0.5.6", "2.27.5"),
    ("0.5.10", "2.27.5"),
    ("0.5.11", "2.28.9"), ("0.5.17", "2.28.9"), ("0.5.18", "2.29.7"), ("0.5.21", "2.29.7"),
    ("0.5.22", "2.30.7"),
])
def test_sglang_releases_map_the_nccl_their_torch_pins(version: str, nccl: str | None) -> None:
    assert nccl_version(_sglang(version)) == nccl


def test_the_row_1201_log_prints_the_release_the_row_maps() -> None:
    log = (ROOT / "tests/data/logs/sglang-qwq-32b-tp4-l4-0.4.3.post4.log").read_text()
    assert "sglang is using nccl==2.21.5" in log
    assert nccl_version(_sglang("0.4.3")) == "2.21.5"


def _stack(gpu_name: str, version: str) -> int:
    gpu = find_gpu(gpu_name)
    got = first_all_reduce_stack(gpu, MAX_THREADS_PER_SM.get(gpu.arch),
                                 nccl_version(_sglang(version)))
    assert got is not None
    return got.bytes


def test_l4_stack_at_0_4_3_is_2_21_5_s_sm80_kernel() -> None:
    # 58 SMs x 1536 threads = 89,088; 2.21.5's sm_80 ring LL kernel 1,312 B:
    # ceil_2MiB(1312 x 89,088) = 56 pages, ceil_2MiB(1024 x 89,088) = 44 pages -> 12 x 2 MiB
    assert _stack("L4", "0.4.3") == 24 * MiB
    # 0.4.7 (NCCL 2.26.2, whose kernel images were not read) keeps 2.28.9's 1,328 B: 57 - 44 pages
    assert _stack("L4", "0.4.7") == 26 * MiB


def test_h100_stack_at_0_4_5_is_a_third_of_the_measured_one() -> None:
    # 132 x 2048 = 270,336 threads; 2.21.5's sm_90 kernel 1,264 B: ceil_2MiB(341,704,704) =
    # 163 pages, 1,024 B = 132 pages exactly -> 31 x 2 MiB = 62 MiB, where 2.28.9's 1,736 B
    # gives the measured 186 MiB
    assert _stack("H100", "0.4.5") == 62 * MiB
    assert _stack("H100", "0.4.7") == 186 * MiB
