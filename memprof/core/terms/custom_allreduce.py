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
  an IPC buffer of ``max_size`` (``create_shared_buffer``; the peers' buffers are mapped, not
  allocated), and a ``rank_data`` tensor of 8 MiB (vLLM) or ``max_size`` (SGLang) — 8 MiB either
  way at the default ``max_size=8192 * 1024``;
- during capture its kernel is what the graph holds, with the graph's input buffers registered
  by IPC handle (``register_graph_buffers``: the peers' addresses go into ``rank_data``, no new
  allocation), so the graph holds a kernel node where NCCL would have put an NCCL node.

Not modelled: vLLM's smaller ``max_size`` when symmetric memory is enabled
(``CUSTOM_ALL_REDUCE_MAX_SIZES``, vllm/distributed/device_communicators/all_reduce_utils.py), the
``meta_size()`` bytes (the kernel's signal structures, a few KiB, inside cudaMalloc's 2 MiB
rounding) and ROCm's quick all-reduce. Above 2 ranks it needs the GPU row's ``fully_connected``
(``CustomAllreduce.__init__``: "not supported on more than two PCIe-only GPUs").
"""

from __future__ import annotations

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.gpus import GPU
from memprof.core.nodes import spans_nodes

CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)
CUSTOM_AR_MAX_SIZE = 8192 * 1024  # the constructor's default ``max_size`` in both engines
CUSTOM_AR_RANK_DATA = 8 * MiB  # vLLM: 8 MiB; SGLang: max_size, the same at the default
CUDA_MALLOC_GRANULE = 2 * MiB  # cudaMalloc rounds allocations of ≥ 2 MiB up to 2 MiB pages


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


def custom_all_reduce_bytes() -> tuple[int, str]:
    """Per-rank bytes of its buffers and how they add up: meta (max_size + meta_size(), rounded
    to cudaMalloc's 2 MiB) + IPC buffer (max_size) + rank_data (8 MiB)."""
    meta = _granule(CUSTOM_AR_MAX_SIZE + 1)
    buf = _granule(CUSTOM_AR_MAX_SIZE)
    total = meta + buf + CUSTOM_AR_RANK_DATA
    return total, (f"meta {meta // MiB} MiB (8 MiB max_size + meta_size(), cudaMalloc's 2 MiB "
                   f"pages) + IPC buffer {buf // MiB} MiB + rank_data "
                   f"{CUSTOM_AR_RANK_DATA // MiB} MiB (custom_all_reduce.py CustomAllreduce "
                   "constructor, vLLM and SGLang)")
