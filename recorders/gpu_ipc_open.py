"""Recorder of reports/gpu/ipc-open/: device memory that opening a peer's CUDA IPC handle holds.

vLLM's and SGLang's custom all-reduce share buffers between the TP ranks with the legacy CUDA IPC
API: the constructor's IPC and meta buffers (``create_shared_buffer``) and, after each CUDA-graph
capture, every graph input the captured all-reduces read (``register_graph_buffers``: each rank
sends ``cudaIpcGetMemHandle`` of the allocation holding each input and opens its peers' handles
with ``cudaIpcOpenMemHandle(..., cudaIpcMemLazyEnablePeerAccess)``; csrc/custom_all_reduce.cuh).
memprof has charged no device memory to the opening rank (a mapping of peer memory, not an
allocation). This program measures that, one process a GPU under torchrun: per case, every rank
``cuMemAlloc``s COUNT segments of SIZE bytes, exchanges their IPC handles over gloo, and then
rank 0 alone, then every rank, opens all its peers' handles (the driver API's
``cuIpcOpenMemHandle`` with ``CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS``, the call the runtime's makes),
with the device memory in use (``mem_get_info``) read on every rank after each step. The first
case opens one segment per peer, so the first open (which enables peer access between the pair)
is read apart from the rest.

    torchrun --nproc-per-node 4 recorders/gpu_ipc_open.py   (writes $OUT/ipc-open-rank<r>.json)
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess

import torch
import torch.distributed as dist

MiB = 1 << 20
CASES = ((2 * MiB, 1), (2 * MiB, 64), (20 * MiB, 16), (64 * MiB, 64), (2 * MiB, 512))
LAZY_ENABLE_PEER_ACCESS = 1  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def driver() -> ctypes.CDLL:
    cuda = ctypes.CDLL("libcuda.so.1")
    ptr = ctypes.POINTER(ctypes.c_uint64)
    cuda.cuMemAlloc_v2.argtypes = [ptr, ctypes.c_size_t]
    cuda.cuMemFree_v2.argtypes = [ctypes.c_uint64]
    cuda.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(IpcHandle), ctypes.c_uint64]
    cuda.cuIpcOpenMemHandle_v2.argtypes = [ptr, IpcHandle, ctypes.c_uint]
    cuda.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
    return cuda


def check(code: int, what: str) -> None:
    if code != 0:
        raise RuntimeError(f"{what}: CUresult {code}")


def used() -> int:
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return total - free


def open_peers(cuda: ctypes.CDLL, rank: int, gathered: list[list[bytes]],
               opened: list[int]) -> None:
    """Open every peer's handles on this rank, as register_graph_buffers does."""
    for peer, raws in enumerate(gathered):
        if peer == rank:
            continue
        for raw in raws:
            h = IpcHandle()
            ctypes.memmove(ctypes.addressof(h), raw, 64)  # the raw 64 bytes, NULs included
            p = ctypes.c_uint64()
            check(cuda.cuIpcOpenMemHandle_v2(ctypes.byref(p), h, LAZY_ENABLE_PEER_ACCESS),
                  "cuIpcOpenMemHandle")
            opened.append(p.value)


def main() -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    torch.zeros(1, device="cuda")  # the primary context and the first kernel, before any step
    dist.init_process_group("gloo")  # handles travel over gloo, as vLLM's cpu_group sends them
    cuda = driver()
    cases = []
    for size, count in CASES:
        step = {"segment_bytes": size, "segments_per_rank": count, "peers": world - 1}
        u0 = used()
        mine = []
        for _ in range(count):
            p = ctypes.c_uint64()
            check(cuda.cuMemAlloc_v2(ctypes.byref(p), size), "cuMemAlloc")
            mine.append(p.value)
        u1 = used()
        handles = []
        for p in mine:
            h = IpcHandle()
            check(cuda.cuIpcGetMemHandle(ctypes.byref(h), p), "cuIpcGetMemHandle")
            handles.append(ctypes.string_at(ctypes.addressof(h), 64))
        u2 = used()
        gathered: list[list[bytes]] = [[] for _ in range(world)]
        dist.all_gather_object(gathered, handles)
        dist.barrier()
        u3 = used()
        opened: list[int] = []

        if rank == 0:
            open_peers(cuda, rank, gathered, opened)
        dist.barrier()
        u4 = used()
        if rank != 0:
            open_peers(cuda, rank, gathered, opened)
        dist.barrier()
        u5 = used()
        for p in opened:
            check(cuda.cuIpcCloseMemHandle(p), "cuIpcCloseMemHandle")
        dist.barrier()
        u6 = used()
        for p in mine:
            check(cuda.cuMemFree_v2(p), "cuMemFree")
        dist.barrier()
        u7 = used()
        step.update({
            "alloc_used_bytes": u1 - u0,
            "get_handle_used_bytes": u2 - u1,
            "exchange_used_bytes": u3 - u2,
            "rank0_opens_used_bytes": u4 - u3,
            "all_open_used_bytes": u5 - u3,
            "opened_here": len(opened),
            "close_used_bytes": u6 - u5,
            "free_used_bytes": u7 - u6,
        })
        cases.append(step)
    record = {
        "rank": rank, "world": world, "cases": cases,
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(rank),
        "total_bytes": torch.cuda.mem_get_info()[1],
    }
    if rank == 0:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=False)
        topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True,
                              check=False)
        record["driver"] = smi.stdout.strip().splitlines()[0] if smi.stdout.strip() else ""
        record["topology"] = topo.stdout
    with open(os.path.join(os.environ.get("OUT", "."), f"ipc-open-rank{rank}.json"), "w") as f:
        json.dump(record, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
