"""The first-kernel step (``memprof.core.terms.non_torch.FIRST_KERNEL_BEFORE_GEMM_BYTES``) against
the goldens that say what it is: the driver's reservation for the device-side ``__assertfail`` /
``vprintf``, made when the first module that calls them is loaded (reports/gpu/context/README.md,
"first-kernel-*-h100.json"), and the recorders that wrote them."""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from memprof.core.terms.non_torch import (
    CUBLAS_NON_TORCH_BYTES,
    FIRST_KERNEL_BEFORE_GEMM_BYTES,
    TRITON_NON_TORCH_BYTES,
)

ROOT = Path(__file__).resolve().parents[1]
CTX = ROOT / "reports/gpu/context"


def _golden(name: str) -> Any:
    return json.loads((CTX / name).read_text())


def _steps(runs: list[dict[str, Any]], spec: str) -> list[Any]:
    return next(r["d"] for r in runs if r["steps"] == spec)


@pytest.mark.parametrize("name", ["modules", "cupti", "syscalls", "green"])
def test_each_recorder_is_the_script_that_ran(name: str) -> None:
    """recorders/gpu_first_kernel_<name>.py is the as-run script laid out one statement a line
    (the same Python AST); the README names the as-run copy's sha256."""
    as_run = CTX / f"gpu_first_kernel_{name}.as-run.py"
    laid_out = ROOT / f"recorders/gpu_first_kernel_{name}.py"
    assert ast.dump(ast.parse(as_run.read_text())) == ast.dump(ast.parse(laid_out.read_text()))
    assert hashlib.sha256(as_run.read_bytes()).hexdigest() in (CTX / "README.md").read_text()


def test_the_step_is_paid_by_the_first_module_calling_assert() -> None:
    """A 15 KB torch module that calls __assertfail pays the whole step at its load and the torch
    kernel after it nothing; one that calls neither pays nothing and leaves the step to the torch
    kernel; a vprintf module pays 64 MiB and the kernel the rest; the FIFO and heap limits do not
    move it."""
    runs = _golden("first-kernel-syscalls-h100.json")
    load = _steps(runs, "f:246,zeros")
    assert load[0][2][1] == load[0][1] == FIRST_KERNEL_BEFORE_GEMM_BYTES
    assert load[1][1] == 0
    plain = _steps(runs, "f:443,zeros")
    assert [plain[0][1], plain[1][1]] == [0, FIRST_KERNEL_BEFORE_GEMM_BYTES]
    printf = _steps(runs, "f:134,zeros")
    assert printf[0][1] == 64 * 2**20
    assert printf[0][1] + printf[1][1] == FIRST_KERNEL_BEFORE_GEMM_BYTES
    fill = _steps(runs, "f:223,zeros")  # the fill kernel's own module: the step at its load
    assert fill[0][2][1] == FIRST_KERNEL_BEFORE_GEMM_BYTES and fill[1][1] == 0
    for spec in ("fifo:67108864,zeros", "heap:67108864,zeros", "fifo:1048576,f:246,zeros"):
        assert sum(d[1] for d in _steps(runs, spec)) == FIRST_KERNEL_BEFORE_GEMM_BYTES, spec
    big = _steps(runs, "f:293,zeros")  # 14.6 MB of code, no syscall: its pages, then the step
    assert big[0][1] < 20 * 2**20
    assert big[0][1] + big[1][1] < FIRST_KERNEL_BEFORE_GEMM_BYTES + 20 * 2**20


def test_other_first_kernels_pay_nothing_and_torch_then_pays_it_all() -> None:
    modules = _golden("first-kernel-modules-h100.json")
    ptx = _steps(modules["runs"], "ptxload,ptxrun,zeros,add")
    assert [d[1] for d in ptx] == [0, 0, FIRST_KERNEL_BEFORE_GEMM_BYTES, 0]
    for spec in ("tv,zeros", "linalg,zeros"):
        assert [d[1] for d in _steps(modules["runs"], spec)] == [0, FIRST_KERNEL_BEFORE_GEMM_BYTES]
    assert all(p[1][1:] == [0, 0] for p in modules["programs"])  # no torch: first kernel 0
    triton = _golden("first-kernel-triton-h100.json")
    assert [d["non_torch_delta_bytes"] for d in triton["deltas"]] == [
        0, FIRST_KERNEL_BEFORE_GEMM_BYTES, 0]


def test_the_first_torch_kernel_loads_one_small_module() -> None:
    """CUPTI: the first torch kernel loads its own module alone (2-6 MB), 30 times smaller than
    the step; cuBLAS's handle and GEMM load 24 KB of modules for their 68 MiB."""
    cupti = _golden("first-kernel-cupti-h100.json")
    zeros, add = _steps(cupti["runs"], "zeros,add")[1:]
    assert zeros[1] == FIRST_KERNEL_BEFORE_GEMM_BYTES and add[1] == 0
    assert len(zeros[2]) == 1 and zeros[2][0][0] < 3 * 2**20
    blas, mm, then = _steps(cupti["runs"], "blas,mm,zeros")[1:]
    assert blas[1] + mm[1] == CUBLAS_NON_TORCH_BYTES
    assert sum(m[0] for m in blas[2] + mm[2]) < 2**20
    assert then[1] == TRITON_NON_TORCH_BYTES


def test_every_torch_build_read_runs_the_fill_kernel_from_an_assert_module() -> None:
    wheels = _golden("torch-fatbin-syscalls.json")["wheels"]
    assert {w.split("-")[1] for w in wheels} == {"2.5.1", "2.10.0", "2.11.0"}
    for wheel, got in wheels.items():
        fills = {a: r["fill_module"] for a, r in got["architectures"].items() if "fill_module" in r}
        assert len(fills) >= 6, wheel
        assert all(f["references"] == ["__assertfail"] for f in fills.values()), wheel


def test_a_green_context_of_fewer_sms_reserves_the_same() -> None:
    """One reservation per device, whatever the green context's SM partition: the module pays it
    in a green context of 8-128 SMs, and the primary context and torch's kernel then pay 0."""
    for run in _golden("first-kernel-green-h100.json"):
        steps = {d[0]: d[1] for d in run["d"]}
        first = steps.get("f:246 green", steps["f:246 primary"])
        assert first == FIRST_KERNEL_BEFORE_GEMM_BYTES, run["N"]
        assert steps["zeros"] == 0
        if run["N"]:
            assert run["sms"][1] == run["N"]
            assert not any(run["d"][0][2])  # every driver call of the green context returned 0
            assert steps["f:246 primary"] == 0
