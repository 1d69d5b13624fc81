"""Recorder of reports/gpu/symm-mem/: what vLLM's ``SymmMemCommunicator`` holds on each TP rank.

vLLM 0.11.0 on (``VLLM_ALLREDUCE_USE_SYMM_MEM`` default 1) builds, for the TP group of a
compute capability 9.0 / 10.0 (10.3 from 0.19.0) card at TP 2, 4, 6 or 8,
``torch_symm_mem.empty(max_size // 2, dtype=bfloat16)`` and ``torch_symm_mem.rendezvous(buffer,
cpu_group.group_name)`` (vllm/distributed/device_communicators/symm_mem.py), keeping the buffer
whether or not multicast is there. This program does the same, one process a GPU under torchrun,
for each size of vLLM's ``SYMM_MEM_ALL_REDUCE_MAX_SIZES`` (all_reduce_utils.py) given in SIZES
(MiB), and records per step the device memory in use (``mem_get_info``) and torch's reserved
memory, so the bytes each step holds outside torch's caching allocator are read directly.

    SIZES=64,32,8 torchrun --nproc-per-node 2 recorders/gpu_symm_mem.py   (writes $OUT)

NVLink multicast stays off (TORCH_SYMM_MEM_DISABLE_MULTICAST=1, as the lent hosts set it): the
multicast object vLLM's communicator asks for on an NVSwitch host is not made here.
"""

from __future__ import annotations

import json
import os
import subprocess

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm

MiB = 1 << 20


def used() -> tuple[int, int]:
    """(device bytes in use, torch's reserved bytes) after a synchronize."""
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return total - free, torch.cuda.memory_reserved()


def main() -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    torch.zeros(1, device="cuda")  # the context and the first kernel, before anything measured
    dist.init_process_group("nccl")  # vLLM's: no device_id, ProcessGroupNCCL stays lazy
    cpu_group = dist.new_group(backend="gloo")  # vLLM's GroupCoordinator.cpu_group
    steps = []
    kept = []  # vLLM keeps each communicator's buffer for the process
    for mib in (int(x) for x in os.environ.get("SIZES", "64,32,8").split(",")):
        before = used()
        buf = symm.empty(mib * MiB // 2, device=f"cuda:{rank}", dtype=torch.bfloat16)
        allocated = used()
        error, multicast = "", None
        try:
            handle = symm.rendezvous(buf, cpu_group.group_name)
            multicast = int(handle.multicast_ptr)
        except RuntimeError as exc:  # vLLM 0.14.0 on catches it and keeps the buffer
            error = str(exc)[:300]
        after = used()
        kept.append(buf)
        steps.append({
            "max_size_mib": mib,
            "empty_used_bytes": allocated[0] - before[0],
            "empty_reserved_bytes": allocated[1] - before[1],
            "rendezvous_used_bytes": after[0] - allocated[0],
            "rendezvous_reserved_bytes": after[1] - allocated[1],
            "multicast_ptr": multicast,
            "error": error,
        })
    dist.barrier(group=cpu_group)
    record = {
        "rank": rank, "world": world, "steps": steps,
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "device": torch.cuda.get_device_name(rank),
        "env": {k: os.environ.get(k) for k in ("TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                               "NCCL_NVLS_ENABLE", "SIZES")},
    }
    if rank == 0:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=False)
        topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True,
                              check=False)
        record["driver"] = smi.stdout.strip().splitlines()[0] if smi.stdout.strip() else ""
        record["topology"] = topo.stdout
    out = os.environ.get("OUT", ".")
    with open(os.path.join(out, f"symm-mem-rank{rank}.json"), "w") as f:
        json.dump(record, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
