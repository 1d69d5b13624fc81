"""The first torch kernel's step by card (``memprof.core.terms.first_kernel``) against the goldens
it rests on: reports/gpu/context/first-kernel-mps-sweep-h100.jsonl (34 MPS clients at 33 SM
counts, 8-132), first-kernel-mps-h100.jsonl (the stack reservation of such clients) and
first-kernel-lmem-h100.json (the step is not local memory)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from memprof.core.gpus import find_gpu
from memprof.core.terms.first_kernel import (
    BYTES_PER_RESIDENT_THREAD,
    FIRST_KERNEL_AFTER_GEMM_BYTES,
    FIRST_KERNEL_BEFORE_GEMM_BYTES,
    MEASURED_RESIDENT_THREADS,
    PAGE,
    first_kernel_bytes,
)
from memprof.core.terms.non_torch import (
    CUBLAS_AFTER_FIRST_KERNEL_BYTES,
    CUBLAS_NON_TORCH_BYTES,
    MAX_THREADS_PER_SM,
    card_first_kernel,
)

GOLD = Path(__file__).resolve().parent.parent / "reports/gpu/context"


def _jsonl(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (GOLD / name).read_text().splitlines() if line.strip()]


def _sweep() -> list[tuple[int, int]]:
    return sorted({(r["sms"], r["d"][0]["delta"]) for r in _jsonl(
        "first-kernel-mps-sweep-h100.jsonl")})


def test_the_sweep_is_33_clients_of_2048_threads_in_whole_pages() -> None:
    rows = _jsonl("first-kernel-mps-sweep-h100.jsonl")
    assert {r["max_threads_per_sm"] for r in rows} == {2048}
    pts = _sweep()
    assert len(pts) == 33 and pts[0] == (8, 10 * 2**20) and pts[-1] == (132, 98_566_144)
    assert all(v % PAGE == 0 for _, v in pts)
    # more SMs never cost less
    assert all(b[1] >= a[1] for a, b in itertools.pairwise(pts))


def test_the_slope_per_resident_thread_is_the_sweeps_least_squares() -> None:
    pts = _sweep()
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    slope = (sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts))
    assert slope / 2048 == pytest.approx(BYTES_PER_RESIDENT_THREAD, abs=0.05)
    intercept = my - slope * mx
    assert all(abs(y - (slope * x + intercept)) < 1.5 * 2**20 for x, y in pts)


def test_the_rule_against_every_client_of_the_sweep() -> None:
    # the rule for a card of the client's SMs × 2,048 threads, anchored at the plain process's
    # 96,468,992 B, is never above what the MPS client paid (which pays one page more at 132
    # SMs) and at most two pages below it
    h100 = find_gpu("H100")
    for sms, paid in _sweep():
        got, _ = first_kernel_bytes(dataclasses.replace(h100, sm_count=sms), 2048)
        assert paid - 2 * PAGE <= got <= paid, sms


def test_mps_clients_stack_follows_their_sms_and_so_does_the_step() -> None:
    rows = _jsonl("first-kernel-mps-h100.jsonl")
    for r in rows:
        steps = {d["step"]: d["delta"] for d in r["d"]}
        if "stack:0" in steps:
            assert steps["stack:0"] == -r["sms"] * 2048 * 1024
    by_sms = {r["sms"]: r["d"][-1]["delta"] for r in rows if r["steps"] == "zeros"}
    assert by_sms == {132: 98_566_144, 66: 50_331_648, 32: 27_262_976, 14: 14_680_064}


def test_the_step_is_not_local_memory() -> None:
    doc = json.loads((GOLD / "first-kernel-lmem-h100.json").read_text())
    assert doc["resident_threads"] == MEASURED_RESIDENT_THREADS
    runs = {r["steps"]: r["d"] for r in doc["variants"]}
    # a local frame within the 1,024 B stack limit costs nothing; torch's kernel after it pays all
    for spec in ("ptx:352,zeros", "ptx:1024,zeros"):
        assert [d["delta"] for d in runs[spec]] == [0, FIRST_KERNEL_BEFORE_GEMM_BYTES]
    # a 4,096 B frame raises the stack limit: SMs × 2048 × 3,072 B, and the step still follows
    big = runs["ptx:4096,zeros"]
    assert big[0]["delta"] == MEASURED_RESIDENT_THREADS * 3072 and big[0]["stack_limit"] == 4096
    assert big[1]["delta"] == FIRST_KERNEL_BEFORE_GEMM_BYTES
    # after torch's kernel, no frame up to the stack limit adds anything
    for n in (256, 352, 360, 512, 1024):
        assert [d["delta"] for d in runs[f"zeros,ptx:{n}"]] == [FIRST_KERNEL_BEFORE_GEMM_BYTES, 0]


@pytest.mark.parametrize(("card", "mib"), [
    ("H100", 92), ("H200", 92), ("H100-PCIE", 80), ("A100-80GB", 76), ("B200", 104),
    ("RTX-3090", 44), ("RTX-4090", 68), ("L4", 32), ("T4", 16), ("RTX-5060-TI", 20)])
def test_by_card(card: str, mib: int) -> None:
    gpu = find_gpu(card)
    before, how = card_first_kernel(gpu)
    after, _ = card_first_kernel(gpu, after_gemm=True)
    assert before == mib * 2**20
    assert before - after == FIRST_KERNEL_BEFORE_GEMM_BYTES - FIRST_KERNEL_AFTER_GEMM_BYTES
    resident = (gpu.sm_count or 0) * MAX_THREADS_PER_SM[gpu.arch]
    if resident != MEASURED_RESIDENT_THREADS:
        assert f"{gpu.sm_count} SMs × {MAX_THREADS_PER_SM[gpu.arch]} threads" in how
        raw = FIRST_KERNEL_BEFORE_GEMM_BYTES - BYTES_PER_RESIDENT_THREAD * (
            MEASURED_RESIDENT_THREADS - resident)
        assert before - PAGE < raw <= before


@pytest.mark.parametrize("card", ["MI300X", "MI355X"])
def test_rocm_keeps_the_h100_step(card: str) -> None:
    gpu = find_gpu(card)
    assert gpu.sm_count  # a compute-unit count the per-thread reading could otherwise take
    for got, how in (card_first_kernel(gpu), first_kernel_bytes(gpu, 2048)):
        assert got == FIRST_KERNEL_BEFORE_GEMM_BYTES and "not derived" in how


def test_an_architecture_without_a_thread_limit_keeps_the_h100_step() -> None:
    gpu = find_gpu("GB10")  # sm121: not in MAX_THREADS_PER_SM
    assert gpu.arch not in MAX_THREADS_PER_SM and gpu.sm_count
    got, how = card_first_kernel(gpu)
    assert got == FIRST_KERNEL_BEFORE_GEMM_BYTES and "not derived" in how


@pytest.mark.parametrize(("card", "beyond"), [("B200", True), ("RTX-PRO-6000", True),
                                              ("RTX-5090", False), ("H100-PCIE", False)])
def test_a_card_beyond_the_h100s_threads_is_said_to_be_extrapolated(card: str,
                                                                    beyond: bool) -> None:
    gpu = find_gpu(card)
    resident = (gpu.sm_count or 0) * MAX_THREADS_PER_SM[gpu.arch]
    assert (resident > MEASURED_RESIDENT_THREADS) == beyond
    got, how = card_first_kernel(gpu)
    assert (got > FIRST_KERNEL_BEFORE_GEMM_BYTES) == beyond
    assert ("extrapolated" in how) == beyond and ("it lacks" in how) != beyond


def test_the_cublas_and_stream_steps_do_not_follow_the_sms() -> None:
    rows = _jsonl("first-kernel-mps-steps-h100.jsonl")
    assert {r["sms"] for r in rows} == {132, 66, 32, 14}
    for r in rows:
        d = {s["step"]: s["delta"] for s in r["d"]}
        assert d["stream"] == 73_400_320
        if r["steps"].startswith("zeros"):
            assert d["gemm"] == CUBLAS_AFTER_FIRST_KERNEL_BYTES
            assert d["graph:100"] == d["graph:1000"] == 0
        else:
            assert d["gemm"] == CUBLAS_NON_TORCH_BYTES
    # the first kernel after the handle pays one page less, at every SM count
    for sms in (132, 66, 32, 14):
        for mps in {r["mps_active_thread_percentage"] for r in rows if r["sms"] == sms}:
            pair = {r["steps"]: r["d"] for r in rows
                    if r["sms"] == sms and r["mps_active_thread_percentage"] == mps}
            before = pair["zeros,gemm,stream,graph:100,graph:1000"][0]["delta"]
            after = pair["gemm,zeros,stream"][1]["delta"]
            assert before - after == PAGE, (sms, mps)
