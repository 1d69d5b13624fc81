"""torch's CUDA stream pool where vLLM's model runner (V1's, or Model Runner V2) makes it before
the profile run.

The first ``torch.cuda.Stream()`` of a process makes torch's stream pool for the device,
73,400,320 B of device memory outside the caching allocator (``TORCH_STREAM_POOL_BYTES``,
reports/gpu/nccl/README.md). The pool is 32 streams for each of min(the device's priority range,
4) priorities (PyTorch c10/cuda/CUDAStream.cpp ``initDeviceStreamState``; H100: range [0, -5],
so 128 streams), each holding about 560 KiB of driver memory: 128 streams made directly with
``cudaStreamCreateWithPriority`` cost the same 73,400,320 B, and neither the stack limit, the
first kernel, eager module loading nor ``CUDA_DEVICE_MAX_CONNECTIONS`` moves it
(reports/gpu/context/context-first-kernel-h100.json, one H100). Nothing measured derives a
stream's size on another architecture, so every card keeps the H100's figure [assumption].
Where it lands depends on what makes the first stream:

- on a rank with an NCCL communicator whose engine makes the pool with it (SGLang's rows as
  measured through ``init_process_group``), before the engine's memory snapshot (inside the
  communicator's init figure, ``memprof.core.terms.nccl``), and vLLM's PyNccl communicators
  from 0.14.0 on CUDA and 0.7.3 on ROCm, whose warm-up's ``current_stream()`` makes a torch
  stream; before those releases they make none (``memprof.core.terms.pynccl_pool``), so on
  vLLM's ranks the cases below hold at any TP;
- from 0.11.0 to 0.19.x, ``GPUModelRunner.__init__`` makes ``self.comm_stream`` unconditionally,
  after ``init_device`` took ``init_snapshot``: the profile sees it as non-torch increase, so it
  is charged to the budget (this term), and the capture stream made later costs nothing
  (``cudagraph.graph_driver_first``);
- where Model Runner V2 runs the model (0.22.0 on, ``runner_v2_profile.runs_v2``), its
  ``GPUModelRunner.__init__`` makes ``self.output_copy_stream``, constructed by
  ``Worker.init_device`` after ``init_snapshot``, as V1's ``comm_stream`` was: charged to the
  budget the same way (``V2_OUTPUT_COPY_STREAM``), and neither V2's CUDA-graph estimate (0.29.0
  on: its capture window opens after it, ``memprof.core.terms.runner_v2_graphs``) nor the
  capture holds it;
- otherwise (V0, V1 before 0.11.0, and V1 from 0.20.0, where the only early stream is the async
  scheduling copy stream) the capture stream makes it: memprof counts it with the first graph
  (``cudagraph.graph_driver_first``).

Checked against vLLM's own breakdown lines (tests/data/published_breakdown.json): at 0.12.0 on
an H100 at TP1 (rows 511-519) the logged non-torch increase, 0.13-0.14 GiB, is the cuBLAS step
plus this pool (142,606,336 B, 0.133 GiB) once the process's first kernel, which 0.10.0-0.17.x's
``CudaPlatform.set_device`` runs before the snapshot, is left out of it
(``memprof.core.terms.non_torch.FIRST_KERNEL_AT_SET_DEVICE``); with that kernel and without the
pool it would be 0.154 GiB. ``self.comm_stream = torch.cuda.Stream()`` is unconditional in
``GPUModelRunner.__init__`` in the 0.11.0, 0.12.0, 0.13.0, 0.17.1, 0.18.0, 0.18.1, 0.19.0 and
0.19.1 wheels, constructed after ``init_snapshot``; the 0.10.2 and 0.20.0 runners make none.
"""

from __future__ import annotations

from memprof.core.components import Component, TermContext
from memprof.core.deployment import Deployment
from memprof.core.terms.nccl import TORCH_STREAM_POOL_BYTES
from memprof.core.terms.non_torch import nccl_groups
from memprof.core.terms.pynccl_pool import comm_makes_stream_pool, logits_gather_makes_pool
from memprof.core.terms.rocm_platform import stand_in_tag
from memprof.core.terms.runner_v2_profile import runs_v2
from memprof.core.versions import Rule, value_at

COMM_STREAM_POOL: tuple[Rule, ...] = (
    Rule(name="comm_stream_pool", changes="non-torch: torch's stream pool (comm_stream)",
         since="0.11.0", until="0.20.0", value=True,
         introduced_by="GPUModelRunner.__init__ makes comm_stream (0.11.0)",
         removed_by="comm_stream no longer made in GPUModelRunner.__init__ (0.20.0)",
         generation="v1", applies_to="all",
         source="0.11.0 / 0.14.1 / 0.16.0 / 0.17.0 / 0.18.0 / 0.19.0 "
         "v1/worker/gpu_model_runner.py GPUModelRunner.__init__: self.comm_stream = "
         "torch.cuda.Stream(), constructed by v1/worker/gpu_worker.py init_device after "
         "init_snapshot = MemorySnapshot() (0.11.0); 0.20.0: no comm_stream, only the "
         "async-scheduling copy stream"),
)


# Model Runner V2's output copy stream, made in ``GPUModelRunner.__init__`` after the init
# snapshot (read in the 0.22.1, 0.23.0, 0.26.0, 0.28.0, 0.29.0, 0.30.0, 0.31.0, 0.32.0 and 0.33.0
# wheels; V2 runs by default from 0.22.0)
V2_OUTPUT_COPY_STREAM: tuple[Rule, ...] = (
    Rule(name="v2_output_copy_stream_pool",
         changes="non-torch: torch's stream pool (Model Runner V2's output_copy_stream)",
         since="0.22.0", until=None, value=True,
         introduced_by="Model Runner V2 by default (0.22.0)", generation="v1",
         applies_to="all",
         source="0.22.1 / 0.23.0 / 0.26.0 / 0.28.0 / 0.29.0 / 0.33.0 v1/worker/gpu/model_runner.py "
         "GPUModelRunner.__init__: self.output_copy_stream = torch.cuda.Stream(self.device), "
         "constructed by v1/worker/gpu_worker.py init_device after self.init_snapshot = "
         "MemorySnapshot(device=self.device)"),
)


def nccl_made_stream_pool(dep: Deployment, rocm: bool) -> bool:
    """Whether a rank's NCCL communicators made torch's stream pool before the profile run: it
    holds one (``nccl_groups``) and the engine's communicators make the pool
    (``memprof.core.terms.pynccl_pool``: vLLM's PyNccl communicators make none before 0.14.0 on
    CUDA, 0.7.3 on ROCm)."""
    return bool(nccl_groups(dep)) and comm_makes_stream_pool(dep, rocm)


def comm_stream_pool_made(dep: Deployment, rocm: bool) -> bool:
    """Whether vLLM's model runner makes torch's stream pool after the memory snapshot and before
    the profile run, on a rank where no NCCL communicator made it earlier."""
    return (not nccl_made_stream_pool(dep, rocm)
            and bool(value_at(COMM_STREAM_POOL, dep.engine_version, False)))


def v2_stream_pool_made(ctx: TermContext) -> bool:
    """Whether Model Runner V2's ``output_copy_stream`` makes torch's stream pool after the
    memory snapshot and before the profile run (``V2_OUTPUT_COPY_STREAM``), on a rank where no
    NCCL communicator made it earlier and where V2 runs the model."""
    return (not nccl_made_stream_pool(ctx.dep, ctx.gpu.is_rocm)
            and bool(value_at(V2_OUTPUT_COPY_STREAM, ctx.dep.engine_version, False))
            and runs_v2(ctx))


def pool_before_graphs(ctx: TermContext) -> bool:
    """Whether torch's stream pool exists before the rank captures its CUDA graphs: made by an
    NCCL communicator (``nccl_made_stream_pool``), by the model runner's ``comm_stream``
    (``comm_stream_pool_made``), by Model Runner V2's ``output_copy_stream``
    (``v2_stream_pool_made``) or by ProcessGroupNCCL at the profile run's logits gather
    (``memprof.core.terms.pynccl_pool.logits_gather_makes_pool``)."""
    rocm = ctx.gpu.is_rocm
    return (nccl_made_stream_pool(ctx.dep, rocm) or comm_stream_pool_made(ctx.dep, rocm)
            or v2_stream_pool_made(ctx) or logits_gather_makes_pool(ctx))


def stream_pool_terms(ctx: TermContext) -> list[Component]:
    """One non-torch component, "budget": the stream pool ``comm_stream`` makes
    (``comm_stream_pool_made``) or Model Runner V2's ``output_copy_stream``
    (``v2_stream_pool_made``), else the one ProcessGroupNCCL makes at the profile run's TP
    logits gather (``logits_gather_makes_pool``); nothing elsewhere."""
    if comm_stream_pool_made(ctx.dep, ctx.gpu.is_rocm):
        return [Component(
            name="torch stream pool (model runner's comm_stream)", category="non_torch",
            bytes=TORCH_STREAM_POOL_BYTES, where="budget", profiled=True,
            formula="73,400,320 B: torch's CUDA stream pool, made by GPUModelRunner.__init__'s "
            "torch.cuda.Stream() after vLLM's memory snapshot (vLLM 0.11.0-0.19.x)")]
    if v2_stream_pool_made(ctx):
        return [Component(
            name="torch stream pool (Model Runner V2's output_copy_stream)",
            category="non_torch", bytes=TORCH_STREAM_POOL_BYTES, where="budget", profiled=True,
            formula="73,400,320 B: torch's CUDA stream pool, made by Model Runner V2's "
            "GPUModelRunner.__init__ (output_copy_stream = torch.cuda.Stream()) after vLLM's "
            "memory snapshot" + stand_in_tag(ctx.gpu, "torch stream pool"))]
    if logits_gather_makes_pool(ctx):
        return [Component(
            name="torch stream pool (profile run's logits gather)", category="non_torch",
            bytes=TORCH_STREAM_POOL_BYTES, where="budget", profiled=True,
            formula="73,400,320 B: torch's CUDA stream pool, made when the profile run's TP "
            "logits gather first runs on torch's ProcessGroupNCCL (memprof.core.terms."
            "pynccl_pool, vLLM up to 0.25.x; ROCm later too); that communicator's own NCCL "
            "memory is not modelled" + stand_in_tag(ctx.gpu, "torch stream pool"))]
    return []
