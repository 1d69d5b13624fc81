"""Whether an engine's NCCL communicators make torch's CUDA stream pool, and a communicator's
figure without it where they do not.

Every init figure of ``memprof.core.terms.nccl`` (and of ``memprof.core.terms.multinode``) was
measured through ``torch.distributed.init_process_group("nccl", device_id=…)``: ProcessGroupNCCL
makes its communicator at once and takes its NCCL stream from torch's stream pool, so the figure
holds the pool, 73,400,320 B (``nccl.TORCH_STREAM_POOL_BYTES``; with a ``torch.cuda.Stream()``
made first, init is smaller by exactly that, ``nccl-matrix-2x-h100-stream-first.json``).

vLLM never makes a communicator that way (read in the wheels of 0.7.2, 0.8.4, 0.10.1.1, 0.11.0,
0.17.1 and 0.33.0, ``vllm/distributed/parallel_state.py``):

- ``init_distributed_environment`` calls ``torch.distributed.init_process_group(backend=…,
  init_method=…, world_size=…, rank=…)`` with no ``device_id``, so ProcessGroupNCCL stays lazy:
  it makes no communicator (and takes no stream) before a collective runs on a device group
  (0.33.0 binds a ``device_id`` only on its ``split_group`` path, behind
  ``VLLM_DISTRIBUTED_USE_SPLIT_GROUP``, default 0 in ``vllm/envs.py``);
- each group's NCCL communicator is vLLM's ``PyNcclCommunicator(group=self.cpu_group, …)``
  (``GroupCoordinator.__init__`` in 0.7.2, ``CudaCommunicator.__init__`` in
  ``distributed/device_communicators/cuda_communicator.py`` from 0.8.x): ``ncclCommInitRank``
  through ctypes with the unique id passed over the gloo group, and a warm-up all_reduce on
  ``vllm.utils.current_stream()``. Until 0.13.x that is torch's current (default) stream on
  CUDA; on ROCm from 0.7.3 (0.7.2's ``vllm/utils.py`` returns ``torch.cuda.current_stream()`` on
  every platform), and on CUDA too from 0.14.0 (``vllm/utils/torch_utils.py``: "we create a
  dedicated stream per process", read in 0.14.0, 0.17.1, 0.18.1 and 0.33.0; 0.13.0 keeps the
  default stream on CUDA), its first call makes and sets a ``torch.cuda.Stream()``, so the first
  communicator's warm-up makes torch's stream pool (``PYNCCL_NO_STREAM_POOL`` and its ROCm row
  end there);
- the device group's collectives (``torch.distributed.all_reduce(…, group=self.device_group)``)
  are a fallback for a disabled PyNccl communicator and for CPU tensors only.

So no torch stream is made by vLLM's distributed init before those releases. Measured the same
way on 2× H100 (reports/gpu/nccl/graph-collectives-2x-h100-stream.json, kind ``pynccl``: a
communicator made as PyNccl makes it, warmed up, and then the first ``torch.cuda.Stream()``
still costs 73,400,320 B on both ranks; 0 B in the kind that holds a ProcessGroupNCCL
communicator). There the pool comes later, from the first torch stream the process does make
(``stream_pool``):

- the model runner's ``comm_stream`` (``memprof.core.terms.stream_pool``, 0.11.0-0.19.x);
- else, on a TP rank of the last PP stage, ProcessGroupNCCL's own communicator, which the
  profile run's logits gather makes (``LOGITS_GATHER_PROCESS_GROUP``): ``LogitsProcessor``
  gathers the vocab-parallel logits over the TP group (``_gather_logits``: all-gather under V1,
  gather under V0) and the device communicator's ``all_gather`` / ``gather`` is the base class's
  ``torch.distributed.all_gather_into_tensor`` / ``torch.distributed.gather`` on
  ``self.device_group`` (0.7.2 ``GroupCoordinator``; 0.8.4, 0.10.1.1, 0.11.0, 0.17.1, 0.20.0,
  0.22.0, 0.24.0 and 0.25.0 ``base_device_communicator.py``, ``CudaCommunicator`` not
  overriding it for the logits); from 0.26.0 ``CudaCommunicator.all_gather`` sends it through
  PyNccl on CUDA (0.26.0, 0.27.0, 0.28.0, 0.30.0, 0.33.0), keeping the base class on ROCm. The
  first such collective makes ProcessGroupNCCL's communicator and takes its NCCL stream from
  torch's pool inside the profile run: the pool is charged to the budget there. That
  communicator's own NCCL memory (a second ncclCommInitRank and its first collective's buffers)
  is ``memprof.core.terms.nccl_torch``'s (V1) and ``memprof.core.terms.nccl_nvls``'s (V0);
- else the capture stream of ``graph_capture``
  (``memprof.core.terms.cudagraph.graph_driver_first``).

SGLang keeps the measured rows as they are (no row here): its distributed init was not read for
this rule.

Whatever the engine, the pool is made once a process (PyTorch c10/cuda/CUDAStream.cpp
``initDeviceStreamState``, once per device): a communicator made after another one of the process
(``non_torch.made_after_another``) holds none. The second-communicator rows were measured so; a
later communicator charged NCCL's NET row, measured as a first one, is that row less the pool
(``pool_left_out(..., later=True)``), SGLang's too.
"""

from __future__ import annotations

from functools import lru_cache

from memprof.base.units import fmt_bytes
from memprof.core.components import TermContext
from memprof.core.deployment import Deployment
from memprof.core.terms.nccl import TORCH_STREAM_POOL_BYTES, NcclRow
from memprof.core.versions import Rule, value_at

PYNCCL_NO_STREAM_POOL: tuple[Rule, ...] = (
    Rule(name="pynccl_no_stream_pool",
         changes="non-torch: NCCL communicator without torch's stream pool",
         since="0.7.0", until="0.14.0", value=True, applies_to="nccl",
         introduced_by="PyNcclCommunicator over the CPU (gloo) group and a lazy "
         "ProcessGroupNCCL; its warm-up on the current stream (read in 0.7.0 and 0.7.1: "
         "0.6.0 – 0.6.6.post1 device_communicators/pynccl.py make self.stream = "
         "torch.cuda.Stream(), "
         "a stream of torch's pool, as the measured rows do)",
         removed_by="0.14.0 utils/torch_utils.py current_stream: on CUDA too, the first call "
         "sets torch.cuda.Stream() (read in 0.14.0, 0.17.1, 0.18.1, 0.33.0), so PyNccl's "
         "warm-up makes torch's pool",
         source="0.7.0 / 0.7.2 / 0.8.4 / 0.10.1.1 / 0.11.0 "
         "distributed/parallel_state.py init_distributed_environment: init_process_group without "
         "device_id (0.33.0: device_id only under VLLM_DISTRIBUTED_USE_SPLIT_GROUP=1, default "
         "0); PyNcclCommunicator(group=self.cpu_group) (0.7.2 GroupCoordinator, 0.8.4+ "
         "device_communicators/cuda_communicator.py), its warm-up all_reduce on "
         "utils current_stream() = torch.cuda.current_stream() on CUDA (0.7.2, 0.8.4, "
         "0.10.1.1, 0.11.0, 0.13.0)"),
)
# On ROCm current_stream() made a dedicated torch.cuda.Stream() from 0.7.3 ("using the default 0
# stream in combination with RCCL is hurting performance": 0.7.3 / 0.8.0 / 0.8.4 vllm/utils.py,
# 0.10.1.1 / 0.11.0 vllm/utils/__init__.py, 0.13.0 utils/torch_utils.py; 0.7.2 returns
# torch.cuda.current_stream() on every platform)
PYNCCL_NO_STREAM_POOL_ROCM: tuple[Rule, ...] = (
    Rule(name="pynccl_no_stream_pool_rocm",
         changes="non-torch: NCCL communicator without torch's stream pool (ROCm)",
         since="0.7.0", until="0.7.3", value=True, applies_to="nccl",
         introduced_by="as pynccl_no_stream_pool (0.7.0)",
         removed_by="0.7.3 vllm/utils.py current_stream: torch.cuda.Stream() if "
         "current_platform.is_rocm()",
         source="0.7.2 vllm/utils.py current_stream: torch.cuda.current_stream(); 0.7.3 / "
         "0.8.0 / 0.8.4 vllm/utils.py, 0.10.1.1 / 0.11.0 vllm/utils/__init__.py, 0.13.0 "
         "utils/torch_utils.py: a torch.cuda.Stream() on ROCm"),
)


LOGITS_GATHER_PROCESS_GROUP: tuple[Rule, ...] = (
    Rule(name="logits_gather_process_group",
         changes="non-torch: torch's stream pool at the profile run's logits gather (TP > 1)",
         since="0.6.0", until="0.26.0", value=True, applies_to="nccl",
         introduced_by="LogitsProcessor gathers over the TP device group (before 0.6.0; read "
         "in 0.6.0, 0.6.4.post1 and 0.6.6.post1 distributed/parallel_state.py "
         "GroupCoordinator.gather)",
         removed_by="CudaCommunicator.all_gather through PyNccl on CUDA (first read in 0.26.0)",
         source="0.7.2 distributed/parallel_state.py GroupCoordinator.gather: "
         "torch.distributed.gather(group=self.device_group); 0.8.4 / 0.10.1.1 / 0.11.0 / 0.17.1 "
         "/ 0.20.0 / 0.22.0 / 0.24.0 / 0.25.0 device_communicators/base_device_communicator.py "
         "all_gather: dist.all_gather_into_tensor(group=self.device_group), not overridden for "
         "the logits by cuda_communicator.py; model_executor/layers/logits_processor.py "
         "_gather_logits; 0.26.0 / 0.27.0 / 0.28.0 / 0.30.0 / 0.33.0 cuda_communicator.py "
         "all_gather: pynccl_comm.all_gather (base class on ROCm)"),
)
# ROCm keeps the base class's all-gather after 0.26.0 ("On ROCm, the base-class all_gather
# (all_gather_into_tensor) is faster", cuda_communicator.py all_gather, 0.26.0 - 0.33.0)
LOGITS_GATHER_PROCESS_GROUP_ROCM: tuple[Rule, ...] = (
    Rule(name="logits_gather_process_group_rocm",
         changes="non-torch: torch's stream pool at the profile run's logits gather (ROCm)",
         since="0.26.0", until=None, value=True, applies_to="nccl",
         introduced_by="CudaCommunicator.all_gather keeps the base class on ROCm (0.26.0)",
         source="0.26.0 / 0.28.0 / 0.30.0 / 0.33.0 device_communicators/cuda_communicator.py "
         "all_gather: if current_platform.is_rocm(): return super().all_gather(input_, dim)"),
)


def logits_gather_makes_pool(ctx: TermContext) -> bool:
    """Whether the rank's profile run makes torch's stream pool through ProcessGroupNCCL's
    communicator at the TP logits gather: TP > 1 on the last PP stage, a vLLM release (and
    platform) whose gather goes through torch's process group (``LOGITS_GATHER_PROCESS_GROUP``,
    ``LOGITS_GATHER_PROCESS_GROUP_ROCM``), and no engine communicator that made the pool."""
    dep = ctx.dep
    if dep.tp < 2 or ctx.coord.pp_stage != dep.pp - 1 or \
            comm_makes_stream_pool(dep, ctx.gpu.is_rocm):
        return False
    return gather_on_process_group(dep.engine, dep.engine_version, ctx.gpu.is_rocm)


@lru_cache(maxsize=64)
def gather_on_process_group(engine: str, version: str | None, rocm: bool) -> bool:
    """Whether the release's (and platform's) TP logits gather runs on torch's process group
    (``LOGITS_GATHER_PROCESS_GROUP``, ``LOGITS_GATHER_PROCESS_GROUP_ROCM``)."""
    rows = LOGITS_GATHER_PROCESS_GROUP + (LOGITS_GATHER_PROCESS_GROUP_ROCM if rocm else ())
    return bool(value_at(rows, version, False, engine))


def comm_makes_stream_pool(dep: Deployment, rocm: bool) -> bool:
    """Whether the engine's NCCL communicators make torch's stream pool when they are built
    (``PYNCCL_NO_STREAM_POOL``, ``PYNCCL_NO_STREAM_POOL_ROCM``: vLLM's from 0.14.0 on CUDA and
    0.7.3 on ROCm; the measured rows' own case elsewhere)."""
    return _comm_makes_pool(dep.engine, dep.engine_version, rocm)


@lru_cache(maxsize=64)
def _comm_makes_pool(engine: str, version: str | None, rocm: bool) -> bool:
    rows = PYNCCL_NO_STREAM_POOL_ROCM if rocm else PYNCCL_NO_STREAM_POOL
    return not value_at(rows, version, False, engine)


def pool_left_out(dep: Deployment, row: NcclRow, rocm: bool, later: bool = False) -> NcclRow:
    """``row`` (a first communicator's measured figure, torch's stream pool in its init) as the
    engine builds the communicator: the pool taken out of init where the engine's communicators
    make none (``comm_makes_stream_pool``) or where the process made another communicator
    before this one (``later``: the pool is made once, by the first), unchanged otherwise."""
    if comm_makes_stream_pool(dep, rocm) and not later:
        return row
    why = ("made after another communicator of the process, whose warm-up made it" if later else
           "vLLM's PyNccl communicator over the gloo group makes no torch stream before "
           + ("0.7.3 on ROCm" if rocm else "0.14.0 on CUDA")
           + "; init_process_group without device_id")
    return row._replace(
        init=row.init - TORCH_STREAM_POOL_BYTES,
        basis=row.basis + f" − {fmt_bytes(TORCH_STREAM_POOL_BYTES)} torch stream pool ({why})")
