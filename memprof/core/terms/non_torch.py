"""Memory outside PyTorch's allocator: the CUDA context and eager NCCL state (before the
engine's baseline snapshot), and the library modules the profile run loads (vLLM's
``non_torch_increase``, vllm/utils/mem_utils.py ``memory_profiling`` @52a31cc)."""

from __future__ import annotations

from memprof.base.units import MiB
from memprof.core.components import Component, TermContext
from memprof.core.deployment import Deployment

# CUDA context: measured_h100_overheads.json step "CUDA context (first tensor)":
# used 554,500,096 − reserved 2,097,152 = 552,402,944 B (526.8 MiB). measured by this project on 2×
# H200, torch 2.11.0+cu130, NCCL 2.28.9, driver 580 measured
# 527-529 MiB on H200 (same driver/torch), i.e. within 2.3 MiB of this value.
CUDA_CONTEXT_BYTES = 554_500_096 - 2_097_152

# Library modules the profile run loads (non-torch, measured_h100_overheads.json, non-torch =
# used − reserved after each step):
#   first bf16 GEMM (cuBLAS):    623,706,112 − 552,402,944 = 71,303,168 B (68 MiB)
#   first Linear+bias (cuBLASLt): 623,706,112 − 623,706,112 = 0 B on H100
#   first Triton kernel:         718,077,952 − 623,706,112 = 94,371,840 B (90 MiB)
# measured by this project on 2× H200, torch 2.11.0+cu130, NCCL 2.28.9, driver 580 (H200): cuBLAS
# +66 MiB, cuBLASLt +90 MiB, Triton not measured. Both devices add
# ≈158 MiB for the libraries they exercised; memprof uses the H100 steps (all three measured on
# one device) and so counts 158 MiB once.
CUBLAS_NON_TORCH_BYTES = 623_706_112 - 552_402_944
CUBLASLT_NON_TORCH_BYTES = 0
TRITON_NON_TORCH_BYTES = 718_077_952 - 623_706_112

# NCCL, measured by this project on 2× H200, torch 2.11.0+cu130, NCCL 2.28.9, driver 580 (2× H200,
# NVLink, NCCL 2.28.9, cuMem on): communicator init +458 MiB, first
# collective +474 MiB, no growth after (128 MiB all_reduce, 256 MiB all_gather). Measured at 2
# ranks only. NCCL's ring/tree buffers connect a bounded number of neighbours per channel, so
# memprof keeps the 2-rank figures for larger groups [unverified: channel count and NVLS
# buffers depend on topology and size]. NCCL_CUMEM_ENABLE=0 measured +808 MiB at init instead.
NCCL_COMM_INIT_BYTES = 458 * MiB
NCCL_FIRST_COLLECTIVE_BYTES = 474 * MiB

def nccl_groups(dep: Deployment) -> list[tuple[str, int]]:
    """Process groups that get an NCCL communicator on a rank: TP, PP, DP and EP, each only when its
    size is > 1 (vLLM ``initialize_model_parallel``; EP only with --enable-expert-parallel)."""
    groups = [("TP", dep.tp), ("PP", dep.pp), ("DP", dep.dp),
              ("EP", dep.ep_size if dep.enable_expert_parallel else 1)]
    return [(n, size) for n, size in groups if size > 1]


def non_torch_terms(ctx: TermContext) -> list[Component]:
    """Memory outside PyTorch's allocator (category "non_torch", measured by this project, see the
    constants).

    Before vLLM's ``init_snapshot`` (where "baseline", outside ``requested``):

    - CUDA context: 552,402,944 B (H100 measured; 527-529 MiB on H200);
    - per process group of size > 1: NCCL communicator init (+458 MiB) and the buffers of its
      first collective (+474 MiB) (2-rank H200 measurement, measured on 2× H200). vLLM creates each
      group's
      ``PyNcclCommunicator`` in ``init_worker_distributed_environment``, and its constructor runs
      ``ncclCommInitRank`` *and a warm-up all_reduce* (vllm/distributed/device_communicators/
      pynccl.py: "A small all_reduce for warmup."), before the snapshot ("NCCL buffers are
      allocated before we measure available memory", vLLM@52a31cc gpu_worker.py). So both sit in the
      baseline.

    Seen by the profile run (where "budget", vLLM's ``non_torch_increase``):

    - cuBLAS handle + kernels 68 MiB, cuBLASLt 0 MiB, first Triton kernel 90 MiB (H100 steps).

    Not modelled: other kernel modules loaded lazily (FlashAttention, FlashInfer, vLLM custom ops),
    NCCL communicators that torch's ProcessGroupNCCL creates at their first use in the profile,
    NVLS buffers, custom all-reduce IPC buffers (~8 MiB), DeepEP/NVSHMEM heaps.
    The cuBLAS *workspace* is torch-allocated and counted once, in ``activation_terms``.

    ROCm: the same constants are used [unverified: HIP context and hipBLAS/hipBLASLt module sizes
    were not measured]; the workspace that differs (128 MiB on gfx942/gfx950) is in
    ``cublas_workspace_bytes``.
    """
    rocm = ctx.gpu.is_rocm
    tag = " [ROCm: H100 figure, unverified]" if rocm else ""
    comps = [Component(name="CUDA context", category="non_torch", bytes=CUDA_CONTEXT_BYTES,
                       where="baseline", profiled=True,
                       formula="measured H100: used 554,500,096 − reserved 2,097,152 after the "
                       "first tensor (H200: 527-529 MiB)" + tag)]
    for name, size in nccl_groups(ctx.dep):
        comps.append(Component(
            name=f"NCCL {name} communicator ({size} ranks)", category="non_torch",
            bytes=NCCL_COMM_INIT_BYTES + NCCL_FIRST_COLLECTIVE_BYTES, count=1, where="baseline",
            profiled=True,
            formula="458 MiB ncclCommInitRank + 474 MiB buffers of PyNccl's warm-up all_reduce "
            "(2 ranks, H200, NCCL 2.28.9); kept for larger groups [unverified]"))
    libs = CUBLAS_NON_TORCH_BYTES + CUBLASLT_NON_TORCH_BYTES + TRITON_NON_TORCH_BYTES
    comps.append(Component(
        name="non-torch increase (profile run)", category="non_torch", bytes=libs,
        where="budget", profiled=True,
        formula="cuBLAS 68 MiB + cuBLASLt 0 MiB + first Triton kernel 90 MiB (H100 measured "
        "steps)" + tag))
    return comps
