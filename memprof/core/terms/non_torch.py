"""Memory outside PyTorch's allocator: the CUDA context and eager NCCL state (before the
engine's baseline snapshot today, inside the budget in older releases: ``NCCL_PLACEMENT``), and
the library modules the profile run loads (vLLM's ``non_torch_increase``, vllm/utils/mem_utils.py
``memory_profiling`` @52a31cc), less the first kernel's where the worker ran it before its
snapshot (``FIRST_KERNEL_AT_SET_DEVICE``: vLLM V1 0.10.0-0.17.x) or the engine ran it before its
model load (``Engine.first_kernel_before_load``)."""

from __future__ import annotations

from typing import NamedTuple

from memprof.base.units import MiB, fmt_bytes
from memprof.core.components import Component, TermContext, Where
from memprof.core.deployment import Deployment
from memprof.core.engines import engine_of
from memprof.core.gpus import GPU, arch_cc
from memprof.core.nodes import spread
from memprof.core.terms.custom_allreduce import (
    CUSTOM_AR_RANK_DATA,
    RANK_DATA_UNBUDGETED,
    custom_all_reduce_applies,
    custom_all_reduce_bytes,
    rank_data_unbudgeted,
)
from memprof.core.terms.first_kernel import (
    FIRST_KERNEL_AFTER_GEMM_BYTES,
    FIRST_KERNEL_BEFORE_GEMM_BYTES,
    first_kernel_bytes,
)
from memprof.core.terms.multinode import MIXED_NOTE, net_row
from memprof.core.terms.nccl import (
    FIRST_KERNEL_AT_WARM_UP,
    NCCL_ROWS,
    NcclRow,
    ep_pynccl,
    nccl_row,
    nccl_version,
    second_comm_row,
)
from memprof.core.terms.nccl_channels import pcie_channels
from memprof.core.terms.nccl_image import on_image
from memprof.core.terms.nccl_stack import on_card, p2p_on_card
from memprof.core.terms.published_context import published_context_rest
from memprof.core.terms.pynccl_pool import pool_left_out
from memprof.core.terms.rocm_platform import stand_in_tag
from memprof.core.terms.symm_mem import custom_all_reduce_max_size, symm_mem_component
from memprof.core.versions import Rule, rule_in_force, value_at

# CUDA context: measured_h100_overheads.json step "CUDA context (first tensor)":
# used 554,500,096 − reserved 2,097,152 = 552,402,944 B (526.8 MiB). measured by this project on 2×
# H200, torch 2.11.0+cu130, NCCL 2.28.9, driver 580 measured
# 527-529 MiB on H200 (same driver/torch), i.e. within 2.3 MiB of this value.
CUDA_CONTEXT_BYTES = 554_500_096 - 2_097_152
CONTEXT_MEASURED = ("measured H100: used 554,500,096 − reserved 2,097,152 after the first tensor "
                    "(H200: 527-529 MiB)")

# Of that context, the per-thread stack's backing store depends on the GPU: the driver holds local
# memory of the stack limit (cudaLimitStackSize, "the stack size in bytes of each GPU thread",
# CUDA Runtime API cudaDeviceSetLimit) for every thread the device can keep resident, i.e.
# SMs × max resident threads per SM × the limit. Measured on one H100 (132 SMs × 2048 threads,
# limit 1,024 B after the context; reports/gpu/context/context-stack-h100.json from
# recorders/gpu_context_stack.py, driver 580.159.04, torch 2.11.0+cu130): lowering the limit to
# 0 freed 276,824,064 B and raising it to 2,048 / 4,096 B added 276,824,064 / 830,472,192 B,
# each exactly 132 × 2048 × Δlimit; the printf FIFO and device-heap limits reserve nothing when
# set. The same product is how https://github.com/cms-sw/cmssw/pull/51395 sizes it
# (cudaLimitStackSize × multiProcessorCount × maxThreadsPerMultiProcessor).
STACK_LIMIT_BYTES = 1024
MEASURED_SMS, MEASURED_THREADS_PER_SM = 132, 2048
CONTEXT_STACK_MEASURED_BYTES = MEASURED_SMS * MEASURED_THREADS_PER_SM * STACK_LIMIT_BYTES
# The rest of the context (275,578,880 B: driver state, the lazily loaded modules' images, ...)
# does not move with the stack limit; nothing derives it for another architecture, so every
# architecture keeps the H100's [assumption, stated in the component].
CONTEXT_REST_BYTES = CUDA_CONTEXT_BYTES - CONTEXT_STACK_MEASURED_BYTES
# Max resident threads per SM by architecture: PyTorch 2.13 torch/headeronly/macros/Macros.h
# l.273-280 (c10/macros/Macros.h before) CUDA_MAX_THREADS_PER_SM, after the CUDA C++
# Programming Guide's per-compute-capability table: 1024 for __CUDA_ARCH__ 750, 1536 for 860,
# 870, 890 and 1200, 2048 for the others (sm70, sm80, sm90, sm100, sm103 here); the H100 golden
# reads 2048 (``max_threads_per_multi_processor``). sm121 (GB10) is not named there: it keeps
# the sm90 context.
MAX_THREADS_PER_SM: dict[str, int] = {
    "sm70": 2048, "sm75": 1024, "sm80": 2048, "sm86": 1536, "sm89": 1536, "sm90": 2048,
    "sm100": 2048, "sm103": 2048, "sm120": 1536}

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
TRITON_NON_TORCH_BYTES = FIRST_KERNEL_AFTER_GEMM_BYTES  # 718,077,952 − 623,706,112 B
# The "first Triton kernel" step is not Triton's: it is the process's first fill kernel
# (torch.zeros), 94,371,840 B after a GEMM and 96,468,992 B before one (what it is: below); a
# Triton kernel launched after it adds 0 (reports/gpu/nccl/first-kernel-2x-h100.json, from
# recorders/gpu_graph_collectives_scaling.py: one process, context → first GEMM +71,303,168 →
# first torch.zeros +94,371,840 → ... → first Triton kernel +0). A TP rank runs that kernel
# before its profile run: vLLM's PyNccl warm-up makes its tensor with torch.zeros
# (vllm/distributed/device_communicators/pynccl.py "A small all_reduce for warmup": ``data =
# torch.zeros(1, device=device)``), and the communicator rows measured that way hold it
# (``memprof.core.terms.nccl.FIRST_KERNEL_IN_ROW``). Its profile run then adds the cuBLAS step
# alone: 69,206,016 B, measured after the communicator's warm-up (first-kernel-2x-h100.json,
# both ranks) and traced on every rank of every reports/gpu/ranks run (TP2 and TP4).
#
# What the first-kernel step is: the CUDA driver's reservation for the device-side system calls
# ``__assertfail`` and ``vprintf``, made once per context when it loads the first module that
# calls either (reports/gpu/context/first-kernel-syscalls-h100.json from
# recorders/gpu_first_kernel_syscalls.py, with first-kernel-modules-h100.json and
# first-kernel-cupti-h100.json beside it; one H100, torch 2.11.0+cu130, driver 580.159.04;
# reports/gpu/context/README.md, "what the first-kernel step is"). A 15 KB torch module that calls
# ``__assertfail``, loaded through ``cuModuleLoadData``, pays the whole 96,468,992 B at its load,
# before any of its functions, and the torch kernel after it 0; a module calling only ``vprintf``
# pays 67,108,864 B and the first ``__assertfail`` module after it 29,360,128 B; a module calling
# neither pays its code alone (a 14.6 MB image: 16 MiB), and a PTX kernel, a Triton kernel or a
# CUDA program without torch run first at 0. The printf FIFO and malloc heap limits (1 or 64 MiB)
# and the stack limit (0, 1,024 or 2,048 B) leave it unchanged. It is not torch's module images:
# CUPTI's module-loaded callback shows the first torch kernel loading its own module alone (the
# fill kernel's, 2,171,336 B of sm_90 image; the add kernel's, 5,727,264 B) for the 92 MiB, and the
# next one at 0. Whichever torch kernel runs first pays it because its module calls
# ``__assertfail`` (aten's ``CUDA_KERNEL_ASSERT``): the fill kernel's module does on every
# architecture of torch 2.5.1, 2.10.0 and 2.11.0 (reports/gpu/context/torch-fatbin-syscalls.json
# from recorders/torch_fatbin_syscalls.py, the wheels read without a GPU). Under
# ``CUDA_MODULE_LOADING=EAGER`` (PyTorch sets ``LAZY`` where unset, pytorch/pytorch#86509) the
# context is 767,557,632 B larger and the first kernel pays 0: the reservation comes with the
# eagerly loaded modules (reports/gpu/context/context-first-kernel-h100.json). So the binaries
# say that every card and torch build pays it at torch's first kernel, not how much: the size is
# the driver's. It follows the SMs the context sees: under MPS a client of fewer SMs pays less,
# 0.6865 MiB an SM (MPS clients at 33 SM counts, 8-132), so another card pays the H100's step
# less 351.5 B for each resident thread it lacks (``memprof.core.terms.first_kernel``, which
# cites the goldens and the published readings that bear the per-thread reading out).
CUBLAS_AFTER_FIRST_KERNEL_BYTES = 69_206_016
# The cuBLAS step is not module images: CUPTI shows the handle loading two modules of 6 KB in
# all and the first GEMM one of 18 KB (first-kernel-cupti-h100.json), so the per-architecture
# size of cuBLAS's images does not enter it under lazy loading. It moves with
# CUBLAS_WORKSPACE_CONFIG, which cuBLAS reads for a pool of its own outside torch's allocator
# (torch's own workspace stays 32 MiB on sm90 in all three): after a torch.randn, the first
# bf16 GEMM adds 69,206,016 B unset, 35,651,584 B with ":4096:8" and 4,194,304 B with ":1024:2"
# (reports/gpu/context/context-stack-h100.json, one H100, torch 2.11.0+cu130).
#
# That pool is cuBLAS's own default workspace, one per handle, sized by architecture
# (reports/gpu/context/cublas-pool-h100.json from recorders/gpu_cublas_pool.py, one H100, torch
# 2.11.0+cu130, cuBLAS 13.1.0): ``torch.cuda.current_blas_handle()`` alone (cublasCreate, no
# GEMM) adds the 69,206,016 B and the GEMM after it 0; the cuBLASLt (``F.linear`` with bias) and
# fp8 (``torch._scaled_mm``) paths add the same and nothing more; GEMMs on a 2nd and 3rd stream
# add 0 (torch's own workspace, per stream, is torch-allocated); the step is
# ⌈CUBLAS_WORKSPACE_CONFIG + the handle's state, 2 MiB⌉ for every setting tried, and unset it is
# byte for byte ":4096:16" / ":32768:2" (64 MiB). cuBLAS says why: ``cublasSetWorkspace()`` "If
# the cuBLAS library workspace is not set, all kernels will use the default workspace pool
# allocated during the cuBLAS context creation", and its table of recommended sizes, "based on the
# cuBLAS default workspace pool size which is GPU architecture dependent", gives 32 MiB for
# sm90, sm10x and sm12x and 4 MiB for every other architecture (cuBLAS documentation,
# https://docs.nvidia.com/cuda/cublas/#cublassetworkspace); the pre-Hopper default is two 4 MiB
# buffers and eight of 16 KiB, ":4096:2:16:8" (the default PyTorch documents and copies,
# aten/src/ATen/cuda/CublasHandlePool.cpp ``parseChosenWorkspaceSize`` "/* :4096:2:16:8
# default, 32MiB for Hopper */"; cuBLAS "Results Reproducibility": ":4096:8 (will increase
# library footprint in GPU memory by approximately 24MiB)"), as sm90's measured 64 MiB is two
# buffers of its 32 MiB. PyTorch never frees the pool: it makes its handles with
# ``cublasCreate`` and then hands each (handle, stream) a workspace of its own through
# ``cublasSetWorkspace`` (CublasHandlePool.cpp ``getCurrentCUDABlasHandle`` /
# ``setWorkspaceForHandle``), which it has done since pytorch/pytorch#83461 (torch 1.13, older
# than any torch a vLLM release memprof models pins), so no torch release changes the step
# [the cuBLAS a torch wheel bundles might: only cuBLAS 13.1's sm90 pool was measured].
# On H100 the pre-Hopper default ":4096:2:16:8" costs
# 10,485,760 B (cublas-pool-h100.json), which is the cuBLAS step on an architecture of the
# "other" row [assumption: the handle's own state is the same size there as on sm90; it shares
# the last 2 MiB page with the pool on H100].
CUBLAS_STEP_SMALL_POOL_BYTES = 10_485_760
CUBLAS_SMALL_POOL_SAVING_BYTES = CUBLAS_AFTER_FIRST_KERNEL_BYTES - CUBLAS_STEP_SMALL_POOL_BYTES
CUBLAS_POOL_SOURCE = ("cuBLAS default workspace pool: 4 MiB-class on {arch} (cuBLAS "
                      "cublasSetWorkspace table, \":4096:2:16:8\"), 10 MiB as measured on H100 "
                      "with that setting, reports/gpu/context/cublas-pool-h100.json")
# The process's first fill kernel when no GEMM ran before it: 96,468,992 B on H100, the card's own
# figure elsewhere (``memprof.core.terms.first_kernel``); the driver's device-side assert/printf
# reservation its module's load makes (above; the 2-rank matrix's context step, a torch.zeros,
# reports/gpu/nccl/README.md "The profile run's non-torch at TP"; with the cuBLAS step after it,
# 69,206,016 B, the same 158 MiB as the two steps the other way round). An engine whose load is a
# free-memory drop counts it there where nothing ran a kernel before the load
# (``first_kernel_in_load``).

# NCCL, one communicator per process group (ncclCommInitRank, then its first all_reduce, and its
# first send/recv where the group hands tensors point to point), per rank: the rows by transport,
# world size and cuMem setting are in ``memprof.core.terms.nccl`` (each citing its golden in
# reports/gpu/nccl). vLLM's PyNcclCommunicator runs init and a warm-up all_reduce in its
# constructor (pynccl.py "A small all_reduce for warmup"). The 2-rank (init, first all_reduce)
# figures by (peer access, cuMem on), kept under this name for the rules that cite it:
NCCL_MEASURED: dict[tuple[bool, bool], tuple[int, int]] = {
    (peer, cumem): NCCL_ROWS[(peer, cumem, 2)][:2]
    for peer in (True, False) for cumem in (True, False)}
NCCL_COMM_INIT_BYTES, NCCL_FIRST_COLLECTIVE_BYTES = NCCL_MEASURED[(True, True)]
# NVLink-multicast (NVLS) buffers, which NCCL adds on NVSwitch hosts, are derived from NCCL's
# source in memprof/core/terms/nccl_nvls.py (the lent machines forbid measuring them).


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
         since="0.6.0", until="0.6.4", value=Placement("baseline", "budget"),
         introduced_by="before 0.6.0",
         removed_by="peak = torch peak + (total − free) − torch allocated (0.6.4)",
         source="0.6.0, 0.6.1.post2, 0.6.2 and 0.6.3.post1 worker/worker.py Worker.init_device: "
         "init_gpu_memory = mem_get_info()[0] after the context, before "
         "init_worker_distributed_environment; determine_num_available_blocks: peak_memory = "
         "init_gpu_memory − free after the profile run (a free-memory drop)",
         generation="v0"),
    Rule(name="nccl_in_budget", changes="non-torch: NCCL (and the CUDA context) in the budget",
         since="0.6.4", until="0.6.5", value=Placement("budget", "budget"),
         introduced_by="peak = torch peak + (total − free) − torch allocated (0.6.4)",
         removed_by="memory_profiling with baseline_memory_in_bytes (first released in 0.6.5)",
         source="0.6.4 and 0.6.4.post1 worker/worker.py determine_num_available_blocks: after "
         "empty_cache, non_torch_allocations = (total − free) − allocated_bytes.all.current, "
         "peak_memory = allocated_bytes.all.peak + non_torch_allocations: everything on the "
         "device torch did not allocate (the context, NCCL, other processes) is charged "
         "(logged as 'initial_memory_usage' / 'non_torch_memory')", generation="v0"),
    Rule(name="nccl_in_budget", changes="non-torch: NCCL (and the CUDA context) in the budget",
         since="0.6.5", until="0.7.0", value=Placement("baseline", "budget"),
         introduced_by="memory_profiling with baseline_memory_in_bytes (0.6.5)",
         removed_by="MemorySnapshot baseline (0.7.0 row)",
         source="0.6.5 and 0.6.6.post1 worker/worker.py determine_num_available_blocks: "
         "memory_profiling(baseline_memory_in_bytes=total − init_gpu_memory (init_device, "
         "before init_worker_distributed_environment), weights_memory_in_bytes="
         "model_memory_usage); utils.py memory_profiling: non_torch_increase = used − baseline "
         "− weights − torch allocated increase", generation="v0"),
    Rule(name="nccl_in_budget", changes="non-torch: NCCL (and the CUDA context) in the budget",
         since="0.7.0", until="0.11.0", value=Placement("baseline", "budget"),
         introduced_by="V0 Worker.init_device: baseline_snapshot before "
         "init_worker_distributed_environment",
         removed_by="V0 engine removed (0.11.0)",
         source="0.7.2 worker/worker.py Worker.init_device (MemorySnapshot() l.161, "
         "init_worker_distributed_environment l.166); determine_num_available_blocks: "
         "memory_profiling(self.baseline_snapshot, ...); 0.7.0 (l.160 / l.165), 0.7.1 and "
         "0.7.3 alike; the same "
         "order in the V0 worker of 0.8.0, 0.8.5, 0.9.2 and 0.10.2", generation="v0"),
    Rule(name="nccl_in_budget", changes="non-torch: NCCL (and the CUDA context) in the budget",
         since="0.8.0", until="0.9.1", value=Placement("budget", "budget"),
         introduced_by="V1 Worker.determine_available_memory: everything on the device that "
         "torch did not allocate is charged",
         removed_by="V1 MemorySnapshot / memory_profiling (0.9.1)",
         source="0.8.0 v1/worker/gpu_worker.py determine_available_memory: non_torch_allocations "
         "= used − torch allocated, peak_memory += it, available = total × util − peak_memory "
         "(the same in every release 0.8.1–0.9.0.1)", generation="v1"),
    Rule(name="nccl_in_budget", changes="non-torch: NCCL (and the CUDA context) in the budget",
         since="0.9.1", until="0.11.0", value=Placement("baseline", "budget"),
         introduced_by="V1 init_snapshot = MemorySnapshot() before "
         "init_worker_distributed_environment",
         removed_by="#25359 (distributed init first: \"This ensures NCCL buffers are allocated "
         "before we measure available memory\")",
         source="0.9.2 v1/worker/gpu_worker.py Worker.init_device (l.140, l.158); "
         "utils memory_profiling: non_torch_increase = diff_from_create.non_torch_memory "
         "(the same order in 0.9.1, 0.10.0, 0.10.1 and 0.10.2)", generation="v1"),
    Rule(name="nccl_in_budget", changes="non-torch: NCCL (and the CUDA context) in the budget",
         since="0.11.0", until=None, value=Placement("baseline", "baseline"),
         introduced_by="#25359",
         source="0.11.0 v1/worker/gpu_worker.py Worker.init_device l.167–182 (the same in "
         "0.33.0)"),
)
# The engines' own setting of NCCL's cuMem allocator (no row: NCCL's default, on).
NCCL_CUMEM: tuple[Rule, ...] = (
    Rule(name="nccl_cumem_off", changes="non-torch: NCCL communicator size", since="0.6.0",
         until="0.10.2", value="NCCL_CUMEM_ENABLE=0", applies_to="nccl",
         introduced_by="vLLM sets NCCL_CUMEM_ENABLE=0 (0.6.x: in every worker)",
         removed_by="the override is gone from env_override.py in 0.10.2",
         source="vllm/worker/worker_base.py WorkerWrapperBase.init_worker in 0.6.0–0.6.6.post1 "
         "(os.environ['NCCL_CUMEM_ENABLE'] = '0', unconditionally; "
         "https://github.com/NVIDIA/nccl/issues/1234), vllm/__init__.py in 0.7.1–0.8.2 (0.7.2 "
         "l.30), vllm/env_override.py in 0.8.3–0.10.1.1: os.environ['NCCL_CUMEM_ENABLE'] = '0'"),
    Rule(name="nccl_cumem_off", changes="non-torch: NCCL communicator size", since=None,
         until=None, value="NCCL_CUMEM_ENABLE=0", applies_to="nccl", engine="sglang",
         introduced_by="SGLang's launcher sets NCCL_CUMEM_ENABLE=0 before its workers start "
         "(every release read)",
         source="sglang 0.4.3 / 0.4.6 / 0.4.9 / 0.4.10 srt/entrypoints/engine.py "
         "_set_envs_and_config: os.environ['NCCL_CUMEM_ENABLE'] = '0'; 0.5.1 / 0.5.4: "
         "str(int(server_args.enable_symm_mem)), --enable-symm-mem off by default "
         "(server_args.py); 0.5.9: the same unless NCCL_CUMEM_ENABLE is set already"),
)


def nccl_placement(dep: Deployment) -> Placement:
    """Where (the CUDA context, the NCCL communicators) fall for ``dep``'s engine release:
    ``"baseline"`` or ``"budget"`` (``NCCL_PLACEMENT``; SGLang and today's vLLM: both baseline)."""
    got = value_at(NCCL_PLACEMENT, dep.engine_version, None, dep.engine)
    return got if isinstance(got, Placement) else Placement("baseline", "baseline")


def nccl_cumem(dep: Deployment) -> bool:
    """Whether NCCL's cuMem allocator is on for ``dep``'s engine release (``NCCL_CUMEM``)."""
    return rule_in_force(NCCL_CUMEM, dep.engine_version, dep.engine) is None


# V1's worker runs the process's first fill kernel before its memory snapshot where it sets its
# device through the platform: CudaPlatform.set_device is ``torch.cuda.set_device(device)``
# followed by ``_ = torch.zeros(1, device=device)`` ("With this trick we can force the device to
# be set eagerly", pytorch/pytorch#155668), and Worker.init_device calls it first thing. What
# that kernel's module load reserves (the card's step before any GEMM, ``card_first_kernel``;
# ``FIRST_KERNEL_BEFORE_GEMM_BYTES`` on an H100) then lies before the
# snapshot on every rank, TP1 included, and the profile run's non-torch increase holds the cuBLAS
# step alone. ROCm's platform sets the device without the kernel (platforms/rocm.py
# RocmPlatform.set_device: torch.cuda.set_device alone, 0.12.0 and 0.17.1). V0's worker calls
# torch.cuda.set_device itself (worker/worker.py init_device, 0.10.0 and 0.10.2). What the
# breakdown line's non-torch figure counts is the same in every release read: memory_profiling's
# non_torch_increase = the non-torch memory (used - torch.cuda.memory_reserved) after the
# profile run less that of init_snapshot (utils/__init__.py in 0.11.0, utils/mem_utils.py in
# 0.12.0, 0.17.1 and 0.19.0), so what runs before the snapshot is outside it. At TP1 nothing
# else runs a kernel first: init_worker_distributed_environment builds no device communicator at
# world size 1, and set_random_seed and check_if_supports_dtype launch none.
FIRST_KERNEL_AT_SET_DEVICE: tuple[Rule, ...] = (
    Rule(name="first_kernel_at_set_device",
         changes="non-torch: the first kernel's modules before the snapshot",
         since="0.10.0", until="0.18.0", value=True, generation="v1",
         introduced_by="V1 Worker.init_device calls current_platform.set_device (read in "
         "0.10.0; 0.9.2 calls torch.cuda.set_device)",
         removed_by="Worker.init_device calls torch.accelerator.set_device_index (first read "
         "in 0.18.0)",
         source="0.10.0 / 0.10.1.1 / 0.10.2 / 0.11.0 / 0.12.0 / 0.13.0 / 0.14.1 / 0.17.0 / 0.17.1 "
         "v1/worker/gpu_worker.py "
         "Worker.init_device: current_platform.set_device(self.device) before "
         "init_snapshot = MemorySnapshot(); platforms/cuda.py CudaPlatformBase.set_device: "
         "torch.cuda.set_device(device); _ = torch.zeros(1, device=device); 0.9.2: "
         "torch.cuda.set_device(self.device); 0.18.0 / 0.18.1 / 0.19.0 / 0.19.1 / 0.20.0: "
         "torch.accelerator.set_device_index(self.device), no kernel before the snapshot at "
         "TP1"),
)


def first_kernel_at_set_device(dep: Deployment, gpu: GPU) -> bool:
    """Whether the worker's ``set_device`` ran the process's first fill kernel before the
    engine's memory snapshot (``FIRST_KERNEL_AT_SET_DEVICE``: vLLM V1 0.10.0-0.17.x on CUDA)."""
    return not gpu.is_rocm and rule_in_force(
        FIRST_KERNEL_AT_SET_DEVICE, dep.engine_version, dep.engine) is not None


def card_first_kernel(gpu: GPU, after_gemm: bool = False) -> tuple[int, str]:
    """The process's first kernel's step on ``gpu`` (``memprof.core.terms.first_kernel``), before
    the first GEMM or after it."""
    return first_kernel_bytes(gpu, MAX_THREADS_PER_SM.get(gpu.arch), after_gemm)


def set_device_first_kernel(ctx: TermContext, tag: str = "") -> Component:
    """The first fill kernel's modules where ``first_kernel_at_set_device`` holds: before the
    snapshot ("baseline"), the card's step before any GEMM (``card_first_kernel``)."""
    size, how = card_first_kernel(ctx.gpu)
    return Component(
        name="first kernel's modules (set_device)", category="non_torch",
        bytes=size, where="baseline", profiled=True,
        formula=f"{size:,} B: the process's first fill kernel, "
        "torch.zeros(1) in CudaPlatform.set_device, which V1's Worker.init_device calls before "
        "its memory snapshot (vLLM 0.10.0-0.17.x, FIRST_KERNEL_AT_SET_DEVICE); the driver's "
        "device-side assert/printf reservation, made at the load of the first module calling "
        "__assertfail, before any GEMM "
        f"(reports/gpu/context/first-kernel-syscalls-h100.json; {how})" + tag)


def first_kernel_before_load(dep: Deployment) -> str | None:
    """What ran the process's first kernel before the model load on a rank with no NCCL
    communicator, where the engine's release does (``Engine.first_kernel_before_load``), or
    None (a rank with a communicator: its warm-up ran it, charged with the communicator)."""
    return None if nccl_groups(dep) else engine_of(dep).first_kernel_before_load(dep)


def early_first_kernel(ctx: TermContext, what: str, tag: str = "") -> Component:
    """The first fill kernel's modules where ``first_kernel_before_load`` names what ran it:
    before the load's free-memory reading ("baseline"), the card's step before any GEMM
    (``card_first_kernel``)."""
    size, how = card_first_kernel(ctx.gpu)
    return Component(
        name="first kernel's modules (before the load)", category="non_torch",
        bytes=size, where="baseline", profiled=True,
        formula=f"{size:,} B: the process's first kernel, run before "
        f"the model load by {what}; the driver's device-side assert/printf reservation, made at "
        "the load of the first module calling __assertfail, before any GEMM "
        f"(reports/gpu/context/first-kernel-syscalls-h100.json; {how})" + tag)


def first_kernel_in_load(dep: Deployment, gpu: GPU) -> int:
    """The one-time non-torch memory of the process's first kernel, where the model load runs
    that kernel: the card's step before any GEMM (``card_first_kernel``) on a rank without an
    NCCL communicator
    where nothing ran a kernel before the load, 0 where a communicator's warm-up ran it before
    (``nccl_groups``) or, on a rank without one, the engine's release ran it before the load
    (``first_kernel_before_load``). The profile-run component keeps the whole 158 MiB where the
    load runs it: this says which part of it an engine sees inside its load
    (``Engine.load_figure``)."""
    if nccl_groups(dep) or first_kernel_before_load(dep) is not None:
        return 0
    return card_first_kernel(gpu)[0]


def p2p_peers(group: str, size: int) -> int:
    """Distinct peers a rank's communicator of ``group`` sends to point to point (0: none).

    PP hands the stage's hidden states on with send/recv over the PP group's PyNccl
    communicator (vLLM ``CudaCommunicator.send`` / ``recv`` → ``pynccl_comm.send`` / ``recv``,
    vllm/distributed/device_communicators/cuda_communicator.py; SGLang's
    ``GroupCoordinator.send`` in python/sglang/srt/distributed/parallel_state.py the same, else
    ``torch.distributed.send`` on the group): one peer's channels [with pp > 2 a rank sends to
    the next stage and receives from the previous one; only 2 ranks' send/recv was measured,
    nccl-matrix-2x-h100-sendrecv-first.json]. TP, DP and EP issue collectives only (vLLM's naive
    and all-gather/reduce-scatter all-to-all are broadcasts / all_gatherv / reduce_scatterv,
    vllm/distributed/device_communicators/all2all.py), which add nothing after the first
    all_reduce (nccl-matrix-2x-h100.json)."""
    return 1 if group == "PP" and size > 1 else 0


# groups whose communicator is always made after another group's on the same GPUs: vLLM's EP,
# SGLang's MoE EP and MoE TP, and SGLang 0.4.3 - 0.4.6's world group (torch's, at its free-memory
# all_reduce: SGLANG_FREE_MEMORY_OVER_NCCL) (``Engine.nccl_groups``)
SECOND_GROUPS = frozenset({"EP", "MoE EP", "MoE TP", "world"})

# vLLM makes every group's communicator in the same worker process, in one order:
# ``initialize_model_parallel`` builds TP's GroupCoordinator, then (DCP's, PCP's: one rank by
# default, no communicator) PP's, then DP's, then EP's, each through
# ``init_model_parallel_group``, whose GroupCoordinator makes a PyNcclCommunicator (init and a
# warm-up all_reduce) for every group of more than one rank (0.6.0 / 0.7.2 GroupCoordinator
# ``use_pynccl``, True for every model-parallel group; 0.8.5 / 0.10.1.1 / 0.11.0 / 0.20.0 /
# 0.33.0 device_communicators/cuda_communicator.py ``if self.world_size > 1:
# self.pynccl_comm = PyNcclCommunicator(...)``; vllm/distributed/parallel_state.py of each). So
# every group after the first one of more than one rank (``nccl_groups`` keeps that order) is a
# later communicator of the process: the second-communicator row, measured for PP, DP and EP
# after TP's on 4× H100 (``memprof.core.terms.nccl.LATER_COMM_GOLDEN``). SGLang's
# ``initialize_model_parallel`` is the same shape: TP's GroupCoordinator, then (0.5.x) the MoE
# EP / MoE TP groups, then PP's, each a PyNcclCommunicator in the same process (sglang 0.4.6 and
# 0.5.4 srt/distributed/parallel_state.py: ``init_model_parallel_group`` with
# ``use_pynccl=True`` / ``not (_is_npu or _is_xpu)``), which ``Engine.nccl_groups`` lists in
# that order.
VLLM_GROUP_ORDER = ("TP", "PP", "DP", "EP")


def made_after_another(dep: Deployment, group: str) -> bool:
    """Whether ``group``'s communicator is made after another one in the same process: the
    groups of ``SECOND_GROUPS``, and every group but the first of more than one rank in the
    order the engine makes them (``nccl_groups``: vLLM's ``VLLM_GROUP_ORDER``, SGLang's
    ``Engine.nccl_groups``)."""
    if group in SECOND_GROUPS:
        return True
    names = [n for n, _ in nccl_groups(dep)]
    return group in names and names.index(group) > 0


def nccl_comm(dep: Deployment, gpu: GPU, group: str, size: int) -> NcclRow:
    """One communicator of ``group`` (``size`` ranks): its rows by transport (``GPU.peer_access``:
    P2P or SHM), world size and the release's cuMem setting (``memprof.core.terms.nccl``); one
    made after another in the same process (``made_after_another``: vLLM's PP, DP and EP after
    TP's, ...) the second-communicator row where it was measured (``second_comm_row``), its
    first send/recv's stack reservation moved to the card (``nccl_stack.p2p_on_card``). A group
    across nodes (``--nnodes``, ``memprof.core.nodes``): NCCL's
    NET rows where each rank has a node of its own (``memprof.core.terms.multinode``). A first
    communicator's row leaves torch's stream pool out where the engine's communicators make
    none (``memprof.core.terms.pynccl_pool``), and a later one's NET row always does (the pool
    is made once a process). A first communicator's row is moved to the card
    and the engine's NCCL release: its first all_reduce's stack reservation
    (``memprof.core.terms.nccl_stack``) and its init's NCCL device code
    (``memprof.core.terms.nccl_image``)."""
    on_nodes = spread(dep, group) if dep.nnodes > 1 else "one node"
    if on_nodes == "one rank per node":
        return pool_left_out(dep, net_row(nccl_cumem(dep), size, p2p_peers(group, size) > 0),
                             gpu.is_rocm, later=made_after_another(dep, group))
    ch = pcie_channels(gpu)
    row = second_comm_row(gpu.peer_access, nccl_cumem(dep), size, ch, p2p_peers(group, size)) \
        if made_after_another(dep, group) else None
    if row is not None:
        row = p2p_on_card(row, gpu, MAX_THREADS_PER_SM.get(gpu.arch), nccl_version(dep))
    else:
        row = pool_left_out(dep, nccl_row(gpu.peer_access, nccl_cumem(dep), size,
                                          p2p_peers(group, size), ch), gpu.is_rocm)
        row = on_card(row, gpu, MAX_THREADS_PER_SM.get(gpu.arch), nccl_version(dep))
        row = on_image(row, gpu, nccl_version(dep))
        if row.first_kernel:  # the row's init holds the H100's first-kernel step: the card's
            step, how = card_first_kernel(gpu)  # (not ``size``: that is the group's)
            if step != FIRST_KERNEL_BEFORE_GEMM_BYTES:
                row = row._replace(init=row.init + step - FIRST_KERNEL_BEFORE_GEMM_BYTES,
                                   basis=row.basis + f"; its first-kernel step the card's, {how}")
    return row if on_nodes == "one node" else row._replace(basis=row.basis + MIXED_NOTE)


def nccl_groups(dep: Deployment) -> list[tuple[str, int]]:
    """Process groups that get an NCCL communicator on a rank: the engine's where it lists them
    (``Engine.nccl_groups``), else TP, PP, DP and EP in the order vLLM makes them
    (``VLLM_GROUP_ORDER``), each only when its size is > 1 (vLLM
    ``initialize_model_parallel``; EP only with --enable-expert-parallel, and not in vLLM
    0.9.0 - 0.10.x, ``memprof.core.terms.nccl.EP_PYNCCL``)."""
    own = engine_of(dep).nccl_groups(dep)
    if own is not None:
        return own
    ep = dep.enable_expert_parallel and ep_pynccl(dep.engine_version, dep.engine)
    sizes = {"TP": dep.tp, "PP": dep.pp, "DP": dep.dp, "EP": dep.ep_size if ep else 1}
    return [(n, sizes[n]) for n in VLLM_GROUP_ORDER if sizes[n] > 1]


def non_torch_terms(ctx: TermContext) -> list[Component]:
    """Memory outside PyTorch's allocator (category "non_torch", measured by this project, see the
    constants).

    Before vLLM's ``init_snapshot`` today (where "baseline", outside ``requested``):

    - CUDA context: 552,402,944 B (H100 measured; 527-529 MiB on H200), of which the
      per-thread stack's backing store (SMs × max resident threads per SM × 1 KiB, 264 MiB on
      an H100) is the card's own on other CUDA architectures (``cuda_context``);
    - per process group of size > 1: one NCCL communicator, ncclCommInitRank and the buffers of
      its first all_reduce, plus its first send/recv for PP (``nccl_comm``: rows by transport,
      world size and cuMem in ``memprof.core.terms.nccl``, each citing its golden in
      reports/gpu/nccl; one made after another in the same process, vLLM's PP, DP and EP after
      TP's, the second-communicator row: ``made_after_another``). vLLM creates each group's
      ``PyNcclCommunicator`` in
      ``init_worker_distributed_environment``, and its constructor runs ``ncclCommInitRank``
      *and a warm-up all_reduce* (vllm/distributed/device_communicators/pynccl.py: "A small
      all_reduce for warmup."), before the snapshot ("NCCL buffers are allocated before we
      measure available memory", vLLM@52a31cc gpu_worker.py). PP's first send/recv comes later
      (the profile run) and is counted with its communicator [approximation of its timing].

    - the process's first fill kernel, 96,468,992 B on H100 and the card's own step elsewhere
      (``memprof.core.terms.first_kernel``), where vLLM V1 0.10.0-0.17.x's
      ``CudaPlatform.set_device`` runs it (``torch.zeros(1)``) before the snapshot, TP1
      included (``FIRST_KERNEL_AT_SET_DEVICE``); a communicator row measured with that kernel
      in it (``nccl.FIRST_KERNEL_IN_ROW``) is charged without it there; likewise on a rank
      with no NCCL communicator where the engine's release runs it before the model load
      (``first_kernel_before_load``: SGLang 0.4.7 - 0.4.9 and from 0.5.8).

    Older releases took the snapshot first (``NCCL_PLACEMENT``): V0 and V1 0.9.1–0.10.2 charge
    the communicators to the budget, V1 0.8.0–0.9.0 the CUDA context too; vLLM 0.7.x–0.10.1.1
    turned NCCL's cuMem allocator off (``NCCL_CUMEM``), which changes the communicator's size.

    Seen by the profile run (where "budget", vLLM's ``non_torch_increase``):

    - cuBLAS handle + kernels 68 MiB, cuBLASLt 0 MiB, first Triton kernel 90 MiB (H100 steps;
      the last is the process's first fill kernel, which a rank with an NCCL communicator ran
      in its warm-up, and which vLLM V1 0.10.0-0.17.x ran on every rank in ``set_device``
      before the snapshot: there 66 MiB in all, ``profile_run_increase``). The cuBLAS step is
      cuBLAS's default workspace pool: 56 MiB less on the architectures of cuBLAS's 4 MiB row
      (Volta, Turing, Ampere, Ada: ``cublas_small_pool``). The first-kernel step is the card's
      (``memprof.core.terms.first_kernel``: 351.5 B less for each resident thread the card has
      fewer than the H100, 0.6865 MiB an SM of 2,048 threads).

    - the TP group's custom all-reduce buffers where the engine uses it
      (``memprof.core.terms.custom_allreduce``), made with the communicator.

    NVLS buffers and V0's second TP communicator (torch's, for the logits gather) are
    ``memprof.core.terms.nccl_nvls``'s, V1's ``memprof.core.terms.nccl_torch``'s.

    Not modelled: the code of other kernel modules loaded lazily (FlashAttention, FlashInfer, vLLM
    custom ops: a module costs its code's pages, 16 MiB for a 14.6 MB torch image,
    reports/gpu/context/first-kernel-syscalls-h100.json),
    NCCL communicators that torch's ProcessGroupNCCL creates at their first use on groups other
    than TP in V1's profile run, DeepEP/NVSHMEM heaps.
    The cuBLAS *workspace* is torch-allocated and counted once, in ``activation_terms``.

    ROCm: the same constants are used [unverified: no public source gives the HIP context,
    the hipBLAS/rocBLAS step or RCCL's communicators on any gfx architecture; what the sources
    do say, and the one published ROCm reading they are checked against, is in
    ``memprof.core.terms.rocm_platform``]; the workspace that differs (128 MiB on
    gfx942/gfx950) is in ``cublas_workspace_bytes``.
    """
    tag = stand_in_tag(ctx.gpu)
    context_where, nccl_where = nccl_placement(ctx.dep)
    context, how = cuda_context(ctx.gpu)
    comps = [Component(name="CUDA context", category="non_torch", bytes=context,
                       where=context_where, profiled=True, formula=how + tag)]
    at_set_device = first_kernel_at_set_device(ctx.dep, ctx.gpu)
    if at_set_device:
        comps.append(set_device_first_kernel(ctx, tag))
    early = first_kernel_before_load(ctx.dep)
    if early is not None:
        comps.append(early_first_kernel(ctx, early, tag))
    for name, size in nccl_groups(ctx.dep):
        row = nccl_comm(ctx.dep, ctx.gpu, name, size)
        held, basis = 0, row.basis
        if at_set_device and row.first_kernel:
            # the row was measured with the process's first kernel in it; set_device ran it
            held = card_first_kernel(ctx.gpu)[0]
            basis += (f", less the first kernel's {held:,} B that "
                      "set_device ran before (FIRST_KERNEL_AT_SET_DEVICE)")
        comps.append(Component(
            name=f"NCCL {name} communicator ({size} ranks)", category="non_torch",
            bytes=row.init + row.first_all_reduce + row.first_p2p - held, count=1,
            where=nccl_where, profiled=True, formula=basis + tag))
        if name == "TP" and custom_all_reduce_applies(ctx.dep, ctx.gpu):
            ar, how = custom_all_reduce_bytes(custom_all_reduce_max_size(ctx, size))
            if rank_data_unbudgeted(ctx.dep):
                # rank_data is a torch tensor the release's budget does not count
                ar -= CUSTOM_AR_RANK_DATA
                how += (f"; rank_data ({CUSTOM_AR_RANK_DATA // MiB} MiB) on its own row: "
                        "outside this release's budget")
                comps.append(Component(
                    name=f"custom all-reduce rank_data (TP, {size} ranks)", category="scratch",
                    bytes=CUSTOM_AR_RANK_DATA, count=1, where="runtime", profiled=False,
                    formula=f"torch.empty({CUSTOM_AR_RANK_DATA // MiB} MiB) after the memory "
                    "snapshot: neither weights, nor non-torch (torch reserves it), nor the "
                    "profile's torch peak increase (allocated before its peak reset), so the "
                    "budget leaves it out (" + RANK_DATA_UNBUDGETED[0].source.split(";")[0]
                    + ")" + tag))
            comps.append(Component(
                name=f"custom all-reduce buffers (TP, {size} ranks)", category="non_torch",
                bytes=ar, count=1, where=nccl_where, profiled=True,
                formula=how + " (not with --disable-custom-all-reduce)" + tag))
        if name == "TP":  # vLLM's symmetric-memory all-reduce (memprof/core/terms/symm_mem.py)
            symm = symm_mem_component(ctx, size, nccl_where, tag)
            if symm is not None:
                comps.append(symm)
    comps.append(profile_run_increase(ctx, tag))
    return comps


def cuda_context(gpu: GPU) -> tuple[int, str]:
    """The CUDA context on ``gpu`` and how it was reached: the rest of the H100's measured context
    (``CONTEXT_REST_BYTES``) plus the card's own stack reservation, SMs × max resident threads
    per SM × 1 KiB (``MAX_THREADS_PER_SM``, the catalog's ``sm_count``), which is the H100's
    measured figure byte for byte on every 132-SM sm90 card and 36 MiB less on the 114-SM H100
    PCIe; on an architecture where a published log prints the remainder
    (``memprof.core.terms.published_context``: sm86) that reading replaces the H100's remainder.
    ROCm keeps the H100's figure (the stack reservation is the CUDA driver's; a ROCm row's
    count is HIP's compute units, which only the sampler's buffer reads), and so does a card
    without an SM count (one described by ``--gpu-memory``) or whose architecture's thread limit
    memprof lacks (sm121), as the estimate's platform note (``memprof.core.gpus.platform_note``)
    says of every architecture other than sm90."""
    threads = MAX_THREADS_PER_SM.get(gpu.arch)
    if gpu.is_rocm or threads is None or gpu.sm_count is None:
        return CUDA_CONTEXT_BYTES, CONTEXT_MEASURED
    stack = gpu.sm_count * threads * STACK_LIMIT_BYTES
    published = published_context_rest(gpu.arch)
    if published is not None:  # the remainder as a published log prints it
        return published.rest_bytes + stack, (
            f"stack reservation {gpu.sm_count} SMs × {threads} threads × 1 KiB = {stack:,} B + "
            f"the rest {published.rest_bytes:,} B ({published.source}; the stack rule: "
            "reports/gpu/context/context-stack-h100.json)")
    if stack == CONTEXT_STACK_MEASURED_BYTES:
        return CUDA_CONTEXT_BYTES, CONTEXT_MEASURED
    where = ("H100 measured" if gpu.arch == "sm90"
             else f"H100 measured, not derived for {gpu.arch}")
    return CONTEXT_REST_BYTES + stack, (
        f"stack reservation {gpu.sm_count} SMs × {threads} threads × 1 KiB = {stack:,} B + "
        f"the rest {CONTEXT_REST_BYTES:,} B ({where}; "
        "reports/gpu/context/context-stack-h100.json)")


def cublas_small_pool(gpu: GPU) -> bool:
    """Whether cuBLAS's default workspace pool on ``gpu`` is the 4 MiB-class one (two 4 MiB
    buffers and eight of 16 KiB): every CUDA architecture outside cuBLAS's 32 MiB rows (sm90,
    sm10x, sm12x). ROCm (hipBLAS, not measured) and an unknown architecture keep the measured
    sm90 pool."""
    arch = gpu.arch
    if gpu.is_rocm or arch_cc(arch) is None:
        return False
    return not (arch == "sm90" or arch.startswith(("sm10", "sm12")))


def profile_run_increase(ctx: TermContext, tag: str = "") -> Component:
    """The non-torch memory the profile run adds: the cuBLAS handle (its default workspace
    pool, made at ``cublasCreate``) and the process's first fill kernel (the card's step after
    the cuBLAS handle, ``card_first_kernel``; ``TRITON_NON_TORCH_BYTES`` on an H100), or the
    cuBLAS step alone on a rank whose NCCL communicator's
    warm-up ran that kernel first and whose communicator row holds it, or whose engine charges
    it at that warm-up (``nccl.FIRST_KERNEL_AT_WARM_UP``, ``memprof.core.terms.nccl_warmup``)
    (``CUBLAS_AFTER_FIRST_KERNEL_BYTES``; rows measured after the kernel leave it here). On an
    architecture of cuBLAS's 4 MiB row (``cublas_small_pool``) the pool is 56 MiB smaller
    (``CUBLAS_SMALL_POOL_SAVING_BYTES``); the first-fill-kernel step (the driver's
    device-side assert/printf reservation at the first module calling ``__assertfail``:
    reports/gpu/context/first-kernel-syscalls-h100.json) is the card's, after the cuBLAS step
    (``card_first_kernel``, ``memprof.core.terms.first_kernel``). Where vLLM V1's
    ``set_device`` ran the first kernel before the snapshot (``first_kernel_at_set_device``:
    0.10.0-0.17.x on CUDA) the cuBLAS step alone is left, at any TP, the same way."""
    small = cublas_small_pool(ctx.gpu)
    saving = CUBLAS_SMALL_POOL_SAVING_BYTES if small else 0
    pool = "; " + CUBLAS_POOL_SOURCE.format(arch=ctx.gpu.arch) if small else ""
    groups = nccl_groups(ctx.dep)
    in_row = any(nccl_comm(ctx.dep, ctx.gpu, n, size).first_kernel for n, size in groups)
    at_warm_up = bool(groups) and rule_in_force(
        FIRST_KERNEL_AT_WARM_UP, ctx.dep.engine_version, ctx.dep.engine) is not None
    if first_kernel_at_set_device(ctx.dep, ctx.gpu):
        return Component(
            name="non-torch increase (profile run)", category="non_torch",
            bytes=CUBLAS_AFTER_FIRST_KERNEL_BYTES - saving, where="budget", profiled=True,
            formula=f"cuBLAS {'10' if small else '66'} MiB (measured after the process's "
            "first kernel, which set_device ran before the snapshot: its step is in the "
            "baseline, FIRST_KERNEL_AT_SET_DEVICE" + pool + ")" + tag)
    early = first_kernel_before_load(ctx.dep)
    if early is not None:
        return Component(
            name="non-torch increase (profile run)", category="non_torch",
            bytes=CUBLAS_AFTER_FIRST_KERNEL_BYTES - saving, where="budget", profiled=True,
            formula=f"cuBLAS {'10' if small else '66'} MiB (measured after the process's "
            "first kernel, which ran before the model load: its step is in the baseline, "
            "first kernel's modules (before the load)" + pool + ")" + tag)
    if in_row or at_warm_up:
        held = "the communicator's row" if in_row else "the warm-up's own row"
        if small:
            return Component(
                name="non-torch increase (profile run)", category="non_torch",
                bytes=CUBLAS_AFTER_FIRST_KERNEL_BYTES - saving, where="budget",
                profiled=True,
                formula="cuBLAS 10 MiB (measured after the NCCL warm-up, whose torch.zeros "
                "ran the process's first kernel: its step is in " + held
                + pool + ")" + tag)
        return Component(
            name="non-torch increase (profile run)", category="non_torch",
            bytes=CUBLAS_AFTER_FIRST_KERNEL_BYTES, where="budget", profiled=True,
            formula="cuBLAS 66 MiB (H100, measured after the NCCL warm-up, whose torch.zeros "
            "ran the process's first kernel: its step is in " + held + ")" + tag)
    kernel, how = card_first_kernel(ctx.gpu, after_gemm=True)
    libs = CUBLAS_NON_TORCH_BYTES + CUBLASLT_NON_TORCH_BYTES + kernel
    if small:
        return Component(
            name="non-torch increase (profile run)", category="non_torch", bytes=libs - saving,
            where="budget", profiled=True,
            formula=f"cuBLAS 12 MiB + cuBLASLt 0 MiB + first kernel {fmt_bytes(kernel)} (the "
            "H100's measured cuBLAS step with " + CUBLAS_POOL_SOURCE.format(arch=ctx.gpu.arch)
            + f"; the first kernel's: {how})" + tag)
    if kernel != TRITON_NON_TORCH_BYTES:
        return Component(
            name="non-torch increase (profile run)", category="non_torch", bytes=libs,
            where="budget", profiled=True,
            formula=f"cuBLAS 68 MiB + cuBLASLt 0 MiB + first kernel {fmt_bytes(kernel)} (H100 "
            f"measured cuBLAS step; the first kernel's: {how})" + tag)
    return Component(
        name="non-torch increase (profile run)", category="non_torch", bytes=libs,
        where="budget", profiled=True,
        formula="cuBLAS 68 MiB + cuBLASLt 0 MiB + first Triton kernel 90 MiB (H100 measured "
        "steps)" + tag)
