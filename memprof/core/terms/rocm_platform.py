"""The ROCm platform terms: what public sources say of the HIP context, the hipBLAS / rocBLAS /
hipBLASLt handles and RCCL on each ROCm architecture, which of memprof's non-torch figures are
therefore still the H100's measured ones on ROCm (the stand-in, tagged
``[ROCm: H100 figure, unverified]`` in the component or stated by the estimate's platform note),
and the published ROCm readings the stand-in is checked against.

Read by ``memprof.core.terms.non_torch`` (the tag). Nothing here moves a figure: a row whose
``status`` is ``"cited"`` names where its ROCm figure is already charged; a ``"stand-in"`` row says
why no public source gives one. A ROCm figure joins a term only through a row here that cites a
direct reading of that term (a vLLM breakdown line, a ``mem_get_info`` step of a ROCm bug report,
an engine or library constant), never a constant tuned until one log's KV matches.

What the searches of 2026-11 found (vLLM / SGLang / ROCm issues and pull requests, ROCm and
PyTorch source, ROCm documentation):

- no published ROCm start-up log prints vLLM's per-term breakdown ("non_torch_memory takes",
  "PyTorch activation peak memory takes") on a card memprof lists, no ROCm bug report steps
  ``mem_get_info`` through context creation, and no source states the "~6 GiB a GPU on MI308X"
  figure of issue 24 with what it holds;
- one published ROCm reading bounds the terms before SGLang's weight load together
  (``ROCM_READINGS``): it is the sum of the HIP context, the RCCL communicators and the custom
  all-reduce buffers, so it cannot replace any one of them, but it measures how far their H100
  stand-ins fall short on gfx942 at TP8.

Not a platform term, and charged apart: vLLM's ROCm weights figure is the load's drop in free
memory, so the blocks the allocator caches when a block-fp8 MoE load ends count as weights
(``memprof.core.terms.rocm_load_cache``).
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.base.units import GiB
from memprof.core.gpus import GPU

STAND_IN_TAG = " [ROCm: H100 figure, unverified]"
"""What a non-torch component on ROCm appends to its formula while its row is a stand-in."""

ROCM_ARCHS = ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1151")
"""The ROCm architectures the rows speak for: CDNA2 (MI210, MI250X), CDNA3 (MI300X, MI300A,
MI308X, MI325X), CDNA4 (MI355X), RDNA3 (RX 7900 XTX) and RDNA3.5 (Radeon 8060S, published
row 114)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RocmTerm:
    """One platform term on ROCm: the memprof component(s) it is (``components``: the names'
    prefixes), whether its ROCm figure is ``"cited"`` (charged elsewhere, ``charged_by``) or the
    H100's ``"stand-in"``, the architectures the row covers, what the sources say and which."""

    term: str
    components: tuple[str, ...]
    status: str  # "cited" | "stand-in"
    archs: tuple[str, ...]
    finding: str
    source: str
    charged_by: str = ""


ROCM_TERMS: tuple[RocmTerm, ...] = (
    RocmTerm(
        term="HIP context", components=("CUDA context",), status="stand-in", archs=ROCM_ARCHS,
        finding="No public source separates the HIP primary context's device memory on any "
        "gfx architecture: no ROCm issue steps mem_get_info (or amd-smi's per-process VRAM) "
        "through torch's first tensor. The CUDA context's per-thread stack reservation (SMs × "
        "resident threads × cudaLimitStackSize) has no documented HIP counterpart that is "
        "reserved at context creation, so the H100's whole context stands in, not the "
        "per-card derivation of memprof.core.terms.non_torch.cuda_context.",
        source="searched: vLLM, SGLang, ROCm/ROCm, ROCm/pytorch issues (2026-11); "
        "https://github.com/unslothai/unsloth/pull/8669 measures the context of "
        "torch.cuda.mem_get_info on B200 only (612 MiB), not on ROCm"),
    RocmTerm(
        term="hipBLAS / rocBLAS handle (the profile run's library step)",
        components=("non-torch increase (profile run)",), status="stand-in", archs=ROCM_ARCHS,
        finding="On sm90 the step is cuBLAS's default workspace pool, made at cublasCreate "
        "outside torch (64 MiB + 2 MiB of handle state). rocBLAS's handle constructor takes its "
        "default device-memory size with hipMallocAsync and frees it to the device's default "
        "memory pool at once, and rocblas_set_workspace frees any handle-managed memory and "
        "marks the workspace user-owned; PyTorch's ROCm build hands every handle a "
        "torch-allocated workspace through that call. So the sm90 pool has no standing "
        "counterpart on ROCm, but what the step holds there instead (bytes the stream-ordered "
        "pool retains, rocBLAS / hipBLASLt code objects loaded at the first GEMM) was never "
        "published: the H100's step stands in.",
        source="ROCm/rocBLAS library/src/handle.cpp (_rocblas_handle::_rocblas_handle: "
        "hipMallocAsync(getDefaultDeviceMemorySize()) then hipFreeAsync; rocblas_set_workspace "
        "-> free_existing_device_memory, device_memory_owner = user_owned); "
        "https://github.com/ROCm/pytorch/pull/1716 (aten/src/ATen/cuda/CublasHandlePool.cpp: "
        "hipblasSetWorkspace through rocblas_set_workspace); rocBLAS documentation, "
        "rocblas_set_workspace: \"Any previously allocated device memory managed by the handle "
        "is freed\""),
    RocmTerm(
        term="hipBLAS / hipBLASLt workspace (torch-allocated)", components=("cuBLAS workspace",),
        status="cited", archs=ROCM_ARCHS,
        finding="PyTorch sizes the workspace it hands each (handle, stream) by ROCm "
        "architecture: 128 MiB on gfx942 / gfx950 / gfx1250, 32 MiB elsewhere; hipBLASLt's "
        "(CUBLASLT_WORKSPACE_SIZE, 76 MiB default on ROCm) shares it as the larger of the two "
        "when the unified workspace is on. It is torch-allocated: the profile run's torch "
        "peak holds it.",
        source="PyTorch aten/src/ATen/cuda/CublasHandlePool.cpp (the hipified ROCm path)",
        charged_by="memprof.core.terms.activation.cublas_workspace_bytes"),
    RocmTerm(
        term="first kernel (code objects loaded at first use)",
        components=("non-torch increase (profile run)", "first kernel's modules"),
        status="stand-in", archs=ROCM_ARCHS,
        finding="HIP, like CUDA's lazy loading, defers loading a fat binary's code objects to "
        "their first use unless HIP_ENABLE_DEFERRED_LOADING=0 (tools that need every code "
        "object resident set it so), so a first-kernel step exists on ROCm too; its size "
        "(torch's gfx code objects) was never published: the H100's 90-92 MiB stands in.",
        source="ROCm/clr (HIP runtime) HIP_ENABLE_DEFERRED_LOADING; sm90's step: "
        "reports/gpu/context/context-first-kernel-h100.json"),
    RocmTerm(
        term="RCCL communicators",
        components=("NCCL TP communicator", "NCCL PP communicator", "NCCL DP communicator",
                    "NCCL EP communicator", "torch's NCCL TP communicator"),
        status="stand-in", archs=ROCM_ARCHS,
        finding="No public source gives ncclCommInitRank's or the first all_reduce's device "
        "memory under RCCL. The one ROCm reading (ROCM_READINGS, row 402) holds the TP "
        "communicator and custom all-reduce together with the HIP context (SGLang 0.4.8.post1 "
        "builds no DP or MoE communicator) and the first kernel of PyNccl's warm-up: at TP8 it "
        "is 1.86 GiB above the sum of their H100 stand-ins (with NCCL's cuMem off, as SGLang "
        "sets it; 2.21 GiB with the cuMem-on row).",
        source="ROCM_READINGS; sm90's rows: memprof.core.terms.nccl (reports/gpu/nccl)"),
    RocmTerm(
        term="custom all-reduce buffers", components=("custom all-reduce buffers",),
        status="stand-in", archs=ROCM_ARCHS,
        finding="vLLM's custom all-reduce runs on ROCm over HIP IPC with the same buffer "
        "sizes; the meta buffer's allocation granularity under hipMalloc was not published.",
        source="memprof.core.terms.custom_allreduce (vLLM custom_all_reduce.py)"),
    RocmTerm(
        term="torch's stream pool", components=("torch stream pool",), status="stand-in",
        archs=ROCM_ARCHS,
        finding="torch makes the same pool on ROCm (32 streams per priority, "
        "c10/cuda/CUDAStream.cpp hipified); a HIP stream's device memory (its AQL queue and "
        "signals) was never published: the H100's 73,400,320 B stands in, and the estimate's "
        "platform note says so (the component carries no tag).",
        source="memprof.core.terms.stream_pool; memprof.core.gpus.platform_note"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RocmReading:
    """A published ROCm figure that reads a sum of platform terms directly: the drop in free
    memory before the engine's weight load, on ``gpu`` (``arch``) under ``engine`` ``release``.
    ``free_before_load_gib`` is what the engine logged (or the sum of two figures it logged on
    one line), ``total_gib`` the catalog's total; ``terms`` the components the drop holds."""

    row_id: int  # its row in tests/data/published.json
    gpu: str
    arch: str
    engine: str
    release: str
    layout: str
    total_gib: float
    free_before_load_gib: float
    terms: tuple[str, ...]
    how: str
    source: str

    @property
    def before_load_bytes(self) -> int:
        """Device memory in use before the weight load (total − free), in bytes."""
        return round((self.total_gib - self.free_before_load_gib) * GiB)


ROCM_READINGS: tuple[RocmReading, ...] = (
    RocmReading(
        row_id=402, gpu="MI300X", arch="gfx942", engine="sglang", release="0.4.8.post1",
        layout="TP8, DP-attention 8, EP-MoE 8", total_gib=191.98,
        free_before_load_gib=21.73 + 166.59,
        terms=("CUDA context", "NCCL TP communicator", "NCCL DP communicator",
               "NCCL EP communicator", "custom all-reduce buffers", "first kernel's modules"),
        how="SGLang's 'Load weight end ... avail mem=21.73 GB, mem usage=166.59 GB' is "
        "free memory after the load and the load's drop in free memory (GB = GiB, "
        "get_available_gpu_memory divides by 1 << 30), so free before the load is 188.32 GiB "
        "of the MI300X's 191.98 GiB: 3.66 GiB held by the HIP context and every communicator "
        "SGLang's init_torch_distributed made before it",
        source="https://github.com/sgl-project/sglang/issues/7691 (comment of 2025-07-02, "
        "lmsysorg/sglang:v0.4.8.post1-rocm630-srt)"),
)


def rocm_term(component: str) -> RocmTerm | None:
    """The row of ``ROCM_TERMS`` a component's name belongs to (the first whose prefix it
    starts with), or None."""
    return next((t for t in ROCM_TERMS
                 if any(component.startswith(p) for p in t.components)), None)


def stand_in_tag(gpu: GPU, component: str = "CUDA context") -> str:
    """The tag ``component``'s formula carries on ``gpu``: ``STAND_IN_TAG`` on ROCm while its row
    of ``ROCM_TERMS`` is a stand-in, nothing on CUDA or for a cited row. Every non-torch row is a
    stand-in today, so ``memprof.core.terms.non_torch`` asks once, for the context."""
    row = rocm_term(component)
    return STAND_IN_TAG if gpu.is_rocm and row is not None and row.status == "stand-in" else ""
