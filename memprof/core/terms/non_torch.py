"""Memory outside PyTorch's allocator: the CUDA context and eager NCCL state (before the
engine's baseline snapshot today, inside the budget in older releases: ``NCCL_PLACEMENT``), and
the library modules the profile run loads (vLLM's ``non_torch_increase``, vllm/utils/mem_utils.py
``memory_profiling`` @52a31cc)."""

from __future__ import annotations

from typing import NamedTuple

from memprof.base.units import MiB, fmt_bytes
from memprof.core.components import Component, TermContext, Where
from memprof.core.deployment import Deployment
from memprof.core.gpus import GPU
from memprof.core.versions import Rule, rule_in_force, value_at

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

# NCCL, one communicator (ncclCommInitRank, then its first collective), per rank. vLLM's
# PyNcclCommunicator runs both in its constructor (pynccl.py "A small all_reduce for warmup"). No
# growth after (128 MiB all_reduce, 256 MiB all_gather). NVLink multicast (NVLS) off. Measured at
# 2 ranks only; NCCL's ring/tree buffers connect a bounded number of neighbours per channel, so
# memprof keeps the 2-rank figures for larger groups [unverified: channel count and NVLS buffers
# depend on topology and size].
# - GPUs with peer access, NCCL's cuMem allocator on (its default; vLLM ≥ 0.10.2): measured by
#   this project on 2× H200 (NVLink, NCCL 2.28.9, torch 2.11.0+cu130, driver 580): init +458 MiB,
#   first collective +474 MiB (2× H100 NV18, same versions: +372 / +474 MiB,
#   reports/gpu/nccl/nccl-2x-h100.json).
NCCL_COMM_INIT_BYTES = 458 * MiB
NCCL_FIRST_COLLECTIVE_BYTES = 474 * MiB
# - The same with NCCL_CUMEM_ENABLE=0 (what vLLM 0.7.x–0.10.1.1 set, ``NCCL_CUMEM``), and over
#   host shared memory (NCCL_P2P_DISABLE=1: the transport between GPUs without peer access,
#   GPU.peer_access), cuMem on and off: 2× H100 NV18, NCCL 2.28.9, torch 2.11.0+cu130, driver
#   580.159.04, every rank alike (reports/gpu/nccl/nccl-2x-h100.json, recorders/gpu_nccl.py).
#   (init, first collective) in bytes, by (peer access, cuMem on):
NCCL_MEASURED: dict[tuple[bool, bool], tuple[int, int]] = {
    (True, True): (NCCL_COMM_INIT_BYTES, NCCL_FIRST_COLLECTIVE_BYTES),
    (True, False): (757_071_872, 195_035_136),
    (False, True): (213_909_504, 195_035_136),
    (False, False): (195_035_136, 195_035_136),
}
# Not modelled: NVLink-multicast (NVLS) buffers, which NCCL adds on NVSwitch hosts (2.22+:
# nvls.cc ncclNvlsBufferSetup, 16 channels on SM90 × 2 × 8 steps × 128 KiB per head, e.g.
# 256 MiB a rank at TP8); the lent machines forbid NVLS, so it was never measured here.


class Placement(NamedTuple):
    """Where the CUDA context and the NCCL communicators fall: "baseline" or "budget"."""

    context: Where
    nccl: Where

    def __str__(self) -> str:
        return f"CUDA context: {self.context}, NCCL: {self.nccl}"


# Where the engine's baseline snapshot falls: the (CUDA context, NCCL communicators) are either
# before it ("baseline": outside ``requested``) or inside the profiled budget ("budget": vLLM's
# non-torch figure). Read in the wheels of each release.
NCCL_PLACEMENT: tuple[Rule, ...] = (
    Rule(name="nccl_in_budget", changes="non-torch: NCCL (and the CUDA context) in the budget",
         since="0.7.1", until="0.8.0", value=Placement("baseline", "budget"),
         introduced_by="V0 Worker.init_device: baseline_snapshot before "
         "init_worker_distributed_environment",
         removed_by="V1 on by default in 0.8.0",
         source="0.7.2 worker/worker.py Worker.init_device (MemorySnapshot() l.161, "
         "init_worker_distributed_environment l.166); determine_num_available_blocks: "
         "memory_profiling(self.baseline_snapshot, ...); 0.7.1 and 0.7.3 alike"),
    Rule(name="nccl_in_budget", changes="non-torch: NCCL (and the CUDA context) in the budget",
         since="0.8.0", until="0.9.1", value=Placement("budget", "budget"),
         introduced_by="V1 Worker.determine_available_memory: everything on the device that "
         "torch did not allocate is charged",
         removed_by="V1 MemorySnapshot / memory_profiling (0.9.1)",
         source="0.8.0 v1/worker/gpu_worker.py determine_available_memory: non_torch_allocations "
         "= used − torch allocated, peak_memory += it, available = total × util − peak_memory "
         "(the same in every release 0.8.1–0.9.0.1)"),
    Rule(name="nccl_in_budget", changes="non-torch: NCCL (and the CUDA context) in the budget",
         since="0.9.1", until="0.11.0", value=Placement("baseline", "budget"),
         introduced_by="V1 init_snapshot = MemorySnapshot() before "
         "init_worker_distributed_environment",
         removed_by="#25359 (distributed init first: \"This ensures NCCL buffers are allocated "
         "before we measure available memory\")",
         source="0.9.2 v1/worker/gpu_worker.py Worker.init_device (l.140, l.158); "
         "utils memory_profiling: non_torch_increase = diff_from_create.non_torch_memory "
         "(the same order in 0.9.1, 0.10.0, 0.10.1 and 0.10.2)"),
    Rule(name="nccl_in_budget", changes="non-torch: NCCL (and the CUDA context) in the budget",
         since="0.11.0", until=None, value=Placement("baseline", "baseline"),
         introduced_by="#25359",
         source="0.11.0 v1/worker/gpu_worker.py Worker.init_device l.167–182 (the same in "
         "0.33.0)"),
)
# vLLM's own setting of NCCL's cuMem allocator (no row: NCCL's default, on).
NCCL_CUMEM: tuple[Rule, ...] = (
    Rule(name="nccl_cumem_off", changes="non-torch: NCCL communicator size", since="0.7.1",
         until="0.10.2", value="NCCL_CUMEM_ENABLE=0", applies_to="nccl",
         introduced_by="vLLM sets NCCL_CUMEM_ENABLE=0 unless the user set it",
         removed_by="the override is gone from env_override.py in 0.10.2",
         source="vllm/__init__.py in 0.7.1–0.8.2 (0.7.2 l.30), vllm/env_override.py in "
         "0.8.3–0.10.1.1: os.environ['NCCL_CUMEM_ENABLE'] = '0'"),
)


def nccl_placement(dep: Deployment) -> Placement:
    """Where (the CUDA context, the NCCL communicators) fall for ``dep``'s engine release:
    ``"baseline"`` or ``"budget"`` (``NCCL_PLACEMENT``; SGLang and today's vLLM: both baseline)."""
    got = value_at(NCCL_PLACEMENT, dep.engine_version, None, dep.engine)
    return got if isinstance(got, Placement) else Placement("baseline", "baseline")


def nccl_comm_bytes(dep: Deployment, gpu: GPU) -> tuple[int, int, str]:
    """One NCCL communicator's (init, first collective) bytes per rank and how they were
    measured: by the transport (``GPU.peer_access``) and by whether the engine release turns
    NCCL's cuMem allocator off (``NCCL_CUMEM``)."""
    cumem = rule_in_force(NCCL_CUMEM, dep.engine_version, dep.engine) is None
    init, first = NCCL_MEASURED[(gpu.peer_access, cumem)]
    how = ("peer-to-peer" if gpu.peer_access else "host shared memory (no peer access)") + \
        (", cuMem on" if cumem else ", NCCL_CUMEM_ENABLE=0")
    where = "2 ranks, H200, NCCL 2.28.9" if (gpu.peer_access and cumem) else \
        "2 ranks, 2× H100, NCCL 2.28.9"
    return init, first, (f"{fmt_bytes(init)} ncclCommInitRank + {fmt_bytes(first)} at its first "
                         f"collective (PyNccl's warm-up all_reduce): {how} ({where}); kept for "
                         "larger groups [unverified]")


def nccl_groups(dep: Deployment) -> list[tuple[str, int]]:
    """Process groups that get an NCCL communicator on a rank: TP, PP, DP and EP, each only when its
    size is > 1 (vLLM ``initialize_model_parallel``; EP only with --enable-expert-parallel)."""
    groups = [("TP", dep.tp), ("PP", dep.pp), ("DP", dep.dp),
              ("EP", dep.ep_size if dep.enable_expert_parallel else 1)]
    return [(n, size) for n, size in groups if size > 1]


def non_torch_terms(ctx: TermContext) -> list[Component]:
    """Memory outside PyTorch's allocator (category "non_torch", measured by this project, see the
    constants).

    Before vLLM's ``init_snapshot`` today (where "baseline", outside ``requested``):

    - CUDA context: 552,402,944 B (H100 measured; 527-529 MiB on H200);
    - per process group of size > 1: one NCCL communicator, ncclCommInitRank and the buffers of
      its first collective (``nccl_comm_bytes``: 458 + 474 MiB with peer access, measured on 2×
      H200; other transports and cuMem settings in ``NCCL_MEASURED``). vLLM creates each group's
      ``PyNcclCommunicator`` in ``init_worker_distributed_environment``, and its constructor runs
      ``ncclCommInitRank`` *and a warm-up all_reduce* (vllm/distributed/device_communicators/
      pynccl.py: "A small all_reduce for warmup."), before the snapshot ("NCCL buffers are
      allocated before we measure available memory", vLLM@52a31cc gpu_worker.py).

    Older releases took the snapshot first (``NCCL_PLACEMENT``): V0 and V1 0.9.1–0.10.2 charge
    the communicators to the budget, V1 0.8.0–0.9.0 the CUDA context too; vLLM 0.7.x–0.10.1.1
    turned NCCL's cuMem allocator off (``NCCL_CUMEM``), which changes the communicator's size.

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
    context_where, nccl_where = nccl_placement(ctx.dep)
    comps = [Component(name="CUDA context", category="non_torch", bytes=CUDA_CONTEXT_BYTES,
                       where=context_where, profiled=True,
                       formula="measured H100: used 554,500,096 − reserved 2,097,152 after the "
                       "first tensor (H200: 527-529 MiB)" + tag)]
    groups = nccl_groups(ctx.dep)
    if groups:
        init, first, formula = nccl_comm_bytes(ctx.dep, ctx.gpu)
        for name, size in groups:
            comps.append(Component(
                name=f"NCCL {name} communicator ({size} ranks)", category="non_torch",
                bytes=init + first, count=1, where=nccl_where,
                profiled=True, formula=formula + tag))
    libs = CUBLAS_NON_TORCH_BYTES + CUBLASLT_NON_TORCH_BYTES + TRITON_NON_TORCH_BYTES
    comps.append(Component(
        name="non-torch increase (profile run)", category="non_torch", bytes=libs,
        where="budget", profiled=True,
        formula="cuBLAS 68 MiB + cuBLASLt 0 MiB + first Triton kernel 90 MiB (H100 measured "
        "steps)" + tag))
    return comps
