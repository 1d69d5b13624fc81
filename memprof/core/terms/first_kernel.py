"""The process's first torch kernel: the CUDA driver's device-side assert/printf reservation, by
card.

Whichever torch kernel a process runs first pays a one-time step of non-torch memory: the
driver's reservation for the device-side system calls ``__assertfail`` and ``vprintf``, made once
per context when it loads the first module that calls either (aten's ``CUDA_KERNEL_ASSERT``
puts ``__assertfail`` in the fill kernel's module on every architecture torch builds;
reports/gpu/context/README.md, "what the first-kernel step is"). On one H100 (132 SMs × 2048
resident threads, driver 580.159.04, torch 2.11.0+cu130) it is 96,468,992 B before the first
GEMM and 94,371,840 B after it (the cuBLAS handle's last 2 MiB page takes the difference; the
two steps sum to the same 158 MiB in either order: reports/gpu/nccl/first-kernel-2x-h100.json).

**It follows the SMs the context sees.** Under an MPS server, a client limited by
``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` sees a device of fewer SMs (its
``multi_processor_count``), and its first torch kernel pays less, step for step with the SMs:
34 clients at 33 SM counts, 8 to 132 (2% and 5% both see 8 SMs; reports/gpu/context/
first-kernel-mps-sweep-h100.jsonl, from recorders/gpu_first_kernel_mps.sh; the stack
reservation of clients of 132, 66, 32 and 14 SMs is SMs × 2048 × 1,024 B byte for byte,
first-kernel-mps-h100.jsonl) pay 10 MiB at 8 SMs to 94 MiB at 132,
0.6865 MiB per SM by least squares (residuals within ±1.5 MiB: the figures are whole 2 MiB
pages), i.e. 351.5 B for each of an SM's 2,048 resident threads. At 132 SMs the MPS client pays
one page more than a plain process (98,566,144 B against 96,468,992 B).

It is not local memory: a kernel whose local frame is within the stack limit (1,024 B) adds
nothing, one of 4,096 B raises the limit and adds SMs × 2048 × 3,072 B, and torch's first
kernel still pays its 96,468,992 B after either (reports/gpu/context/first-kernel-lmem-h100.json,
recorders/gpu_first_kernel_lmem.py). A green context of fewer SMs, carved from a device that
shows all 132, pays the full figure (first-kernel-green-h100.json): the driver sizes the
reservation by the device's SM count as the context sees it, not by an SM partition.

**Another card** pays the H100's figure less 351.5 B for each resident thread it lacks (SMs ×
max resident threads per SM, the catalog's ``sm_count`` and ``MAX_THREADS_PER_SM``), rounded up
to the 2 MiB page; a card of more resident threads than the H100's 270,336 (B200, GB200, B300,
RTX PRO 6000) pays 351.5 B more for each thread beyond them, an extrapolation past the largest
client measured, stated in the component. Only the SM count was varied on the H100, not the
threads per SM: reading the slope per resident thread (as the stack's is) and not per SM is an
assumption, stated in the component. vLLM's published V0 TP1 readings of the profile run's
non-torch increase (the cuBLAS step and this one, and the code pages of the modules the run
loads, which only add; reports/published/non-torch-breakdown.md) bear it out: the per-thread
reading leaves each of the table's four (A10, RTX 3090 and RTX 4060 at 1,536 threads an SM,
A100 40GB at 2,048) at or above its sum within the log's 0.01 GiB rounding, while a
per-SM reading overshoots two (A10, RTX 3090) (tests/test_non_torch_published.py). The three
readings the same file lists from unidentified repositories (T4 and RTX 2060 at 1,024 threads an
SM, L40 at 1,536) agree: each is at or above its per-thread sum, and a per-SM reading would
overshoot the L40's.

ROCm, a card without an SM count (one described by ``--gpu-memory``) and an architecture whose
thread limit memprof lacks keep the H100's figure, and say so.
"""

from __future__ import annotations

import math

from memprof.core.gpus import GPU

# reports/gpu/context/first-kernel-syscalls-h100.json et al.: the first torch kernel's step on one
# H100 before the first GEMM (the 2-rank matrix's context step, a torch.zeros, pays the same:
# reports/gpu/nccl/first-kernel-2x-h100.json), and after it (measured_h100_overheads.json: the
# first Triton kernel after the first GEMM, 718,077,952 − 623,706,112 B).
FIRST_KERNEL_BEFORE_GEMM_BYTES = 96_468_992
FIRST_KERNEL_AFTER_GEMM_BYTES = 718_077_952 - 623_706_112
MEASURED_RESIDENT_THREADS = 132 * 2048
# Least-squares slope of first-kernel-mps-sweep-h100.jsonl over its 33 SM counts (8-132 SMs of
# 2,048 threads, each count once): 719,889 B per SM = 351.5 B per resident thread
# (tests/test_first_kernel_by_card.py recomputes it from the golden).
BYTES_PER_RESIDENT_THREAD = 351.5
PAGE = 2 * 2**20
SOURCE = ("reports/gpu/context/first-kernel-mps-sweep-h100.jsonl: 0.6865 MiB per SM of 2,048 "
          "threads under MPS; per thread, not per SM, assumed")


def first_kernel_bytes(gpu: GPU, threads_per_sm: int | None,
                       after_gemm: bool = False) -> tuple[int, str]:
    """The first torch kernel's one-time step on ``gpu`` (``threads_per_sm``: its architecture's
    max resident threads per SM, or None where memprof lacks it) and how it was reached: the
    H100's measured step (``FIRST_KERNEL_AFTER_GEMM_BYTES`` where the cuBLAS handle was made
    before) less ``BYTES_PER_RESIDENT_THREAD`` for each resident thread the card has fewer than
    the H100 (or plus, more), rounded up to the 2 MiB page; the H100's own figure on ROCm, on a
    card without an SM count and where ``threads_per_sm`` is None."""
    h100 = FIRST_KERNEL_AFTER_GEMM_BYTES if after_gemm else FIRST_KERNEL_BEFORE_GEMM_BYTES
    if gpu.is_rocm or threads_per_sm is None or gpu.sm_count is None:
        return h100, "the H100's measured step (not derived for this card)"
    resident = gpu.sm_count * threads_per_sm
    if resident == MEASURED_RESIDENT_THREADS:
        return h100, "the H100's measured step"
    raw = h100 - BYTES_PER_RESIDENT_THREAD * (MEASURED_RESIDENT_THREADS - resident)
    got = max(PAGE, math.ceil(raw / PAGE) * PAGE)
    if resident < MEASURED_RESIDENT_THREADS:
        rule = (f"the H100's measured step less {BYTES_PER_RESIDENT_THREAD} B a resident "
                "thread it lacks")
    else:  # beyond the sweep's largest client: the slope carried past what was measured
        rule = (f"the H100's measured step plus {BYTES_PER_RESIDENT_THREAD} B a resident thread "
                f"beyond its {MEASURED_RESIDENT_THREADS:,} "
                "[extrapolated: no client of more than 132 SMs × 2,048 threads was measured]")
    return got, (f"{gpu.sm_count} SMs × {threads_per_sm} threads: {got:,} B, first-kernel "
                 f"reservation by resident threads: {rule} ({SOURCE})")
