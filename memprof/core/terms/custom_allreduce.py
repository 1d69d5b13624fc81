"""The engines' custom all-reduce (CUDA IPC buffers shared between the TP ranks): when it replaces
NCCL for the TP group's all-reduce, and the buffers it allocates per rank.

Both engines carry the same design (vLLM vllm/distributed/device_communicators/custom_all_reduce.py
``CustomAllreduce``, present in every release memprof models; SGLang
python/sglang/srt/distributed/device_communicators/custom_all_reduce.py ``CustomAllreduce``):

- it is built for the TP group only (vLLM cuda_communicator.py: "only tp uses custom allreduce"),
  for world sizes 2, 4, 6 and 8 (``_SUPPORTED_WORLD_SIZES``), where the GPUs have peer access
  (``_can_p2p`` / ``can_use_custom_all_reduce_with_nvlink``) and, above 2 ranks, are fully
  connected by NVLink; ``--disable-custom-all-reduce`` turns it off;
- its constructor allocates with ``cudaMalloc`` a meta buffer of ``meta_size() + max_size`` and
  an IPC buffer of ``max_size`` (``create_shared_buffer``; the peers' buffers are mapped, which
  holds no device memory on either GPU: reports/gpu/ipc-open/, up to 1,536 opened handles from
  three peers), and a ``rank_data`` tensor of 8 MiB (vLLM) or ``max_size`` (SGLang) — 8 MiB either
  way at the default ``max_size=8192 * 1024``;
- during capture its kernel is what the graph holds, with the graph's input buffers registered
  by IPC handle (``register_graph_buffers``: the peers' addresses go into ``rank_data``; opening
  the peers' handles holds no device memory, measured: reports/gpu/ipc-open/), so the graph
  holds a kernel node where NCCL would have put an NCCL node.

Where the budget sees them: the meta and IPC buffers are ``cudaMalloc`` memory, non-torch, placed
with the communicators (``memprof.core.terms.non_torch.NCCL_PLACEMENT``). ``rank_data`` is a torch
tensor (``torch.empty(8 * 1024 * 1024, dtype=torch.uint8)``), and where vLLM's budget is
``memory_profiling``'s weights + non-torch increase + torch peak increase, measured from a snapshot
taken before the distributed init (``RANK_DATA_UNBUDGETED``), it falls in none of the three: torch
memory is not non-torch (``MemorySnapshot.non_torch_memory = cuda_memory − memory_reserved()``), it
is allocated before the load (not weights) and before the profile's peak reset (not its torch peak
increase). There it is memory the engine holds beside its budget (``where="runtime"``).

vLLM's smaller ``max_size`` where its symmetric-memory all-reduce runs
(``CUSTOM_ALL_REDUCE_MAX_SIZES``, vllm/distributed/device_communicators/all_reduce_utils.py) is
``memprof.core.terms.symm_mem``'s. Not modelled: the
``meta_size()`` bytes (the kernel's signal structures, a few KiB, inside cudaMalloc's 2 MiB
rounding) and ROCm's quick all-reduce. Above 2 ranks it needs the GPU row's ``fully_connected``
(``CustomAllreduce.__init__``: "not supported on more than two PCIe-only GPUs").
"""

from __future__ import annotations

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.gpus import GPU
from memprof.core.nodes import spans_nodes
from memprof.core.versions import Rule, rule_in_force

CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)
CUSTOM_AR_MAX_SIZE = 8192 * 1024  # the constructor's default ``max_size`` in both engines
CUSTOM_AR_RANK_DATA = 8 * MiB  # vLLM: 8 MiB; SGLang: max_size, the same at the default
CUDA_MALLOC_GRANULE = 2 * MiB  # cudaMalloc rounds allocations of ≥ 2 MiB up to 2 MiB pages


# Releases whose budget leaves the custom all-reduce's ``rank_data`` tensor out (see the module).
RANK_DATA_UNBUDGETED: tuple[Rule, ...] = (
    Rule(name="custom_ar_rank_data_unbudgeted", changes="custom all-reduce rank_data outside the "
         "budget", since="0.7.0", until="0.11.0", value=True, generation="v0",
         introduced_by="V0 Worker.init_device: MemorySnapshot before "
         "init_worker_distributed_environment, memory_profiling from it",
         removed_by="V0 engine removed (0.11.0)",
         source="0.7.0 / 0.7.1 / 0.8.5 / 0.10.1.1 distributed/device_communicators/"
         "custom_all_reduce.py CustomAllreduce.__init__: rank_data = torch.empty(8 MiB) "
         "after the snapshot; utils.py "
         "MemorySnapshot.non_torch_memory = cuda_memory - memory_reserved(), memory_profiling: "
         "reset_peak_memory_stats before before_profile, torch_peak_increase = the profile's "
         "allocated-peak increase, non_kv_cache_memory = non_torch_increase + "
         "torch_peak_increase + weights_memory (worker/worker.py determine_num_available_blocks)"),
    Rule(name="custom_ar_rank_data_unbudgeted", changes="custom all-reduce rank_data outside the "
         "budget", since="0.9.1", until="0.11.0", value=True, generation="v1",
         introduced_by="V1 init_snapshot = MemorySnapshot() before "
         "init_worker_distributed_environment, memory_profiling from it",
         removed_by="#25359 (distributed init before the init snapshot, first released in 0.11.0)",
         source="0.10.1.1 distributed/device_communicators/custom_all_reduce.py rank_data = "
         "torch.empty(8 MiB); utils/__init__.py MemorySnapshot / memory_profiling as in V0; "
         "v1/worker/gpu_worker.py determine_available_memory: memory_profiling("
         "self.init_snapshot, weights_memory=model_memory_usage)"),
)


def rank_data_unbudgeted(dep: Deployment) -> bool:
    """Whether ``dep``'s engine release leaves the custom all-reduce's ``rank_data`` tensor out
    of its budget (``RANK_DATA_UNBUDGETED``)."""
    return rule_in_force(RANK_DATA_UNBUDGETED, dep.engine_version, dep.engine) is not None


def custom_all_reduce_applies(dep: Deployment, gpu: GPU) -> bool:
    """Whether the TP group's all-reduce is the engine's custom kernel (see the module); never
    for a TP group that spans nodes (``memprof.core.nodes``: "Custom allreduce is disabled
    because this process group spans across nodes")."""
    return (dep.tp in CUSTOM_AR_WORLD_SIZES and gpu.peer_access
            and (dep.tp <= 2 or gpu.fully_connected)
            and not dep.disable_custom_all_reduce
            and not (dep.nnodes > 1 and spans_nodes(dep, "TP")))


def _granule(n: int) -> int:
    return -(-n // CUDA_MALLOC_GRANULE) * CUDA_MALLOC_GRANULE


def custom_all_reduce_bytes(max_size: int = CUSTOM_AR_MAX_SIZE) -> tuple[int, str]:
    """Per-rank bytes of its buffers and how they add up: meta (max_size + meta_size(), rounded
    to cudaMalloc's 2 MiB) + IPC buffer (max_size) + rank_data (8 MiB). ``max_size``: the
    constructor's default, or vLLM's smaller one beside its symmetric-memory all-reduce
    (``memprof.core.terms.symm_mem.custom_all_reduce_max_size``)."""
    meta = _granule(max_size + 1)
    buf = _granule(max_size)
    total = meta + buf + CUSTOM_AR_RANK_DATA
    size = (f"{max_size // MiB} MiB" if max_size >= MiB else f"{max_size // 1024} KiB")
    return total, (f"meta {meta // MiB} MiB ({size} max_size + meta_size(), cudaMalloc's 2 MiB "
                   f"pages) + IPC buffer {buf // MiB} MiB + rank_data "
                   f"{CUSTOM_AR_RANK_DATA // MiB} MiB (custom_all_reduce.py CustomAllreduce "
                   "constructor, vLLM and SGLang)")
