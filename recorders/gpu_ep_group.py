"""What vLLM's expert-parallel (EP) group costs per rank, under torchrun (issue 25 item 4).

vLLM builds a ``GroupCoordinator`` for EP (vllm/distributed/parallel_state.py
``initialize_model_parallel``): a torch ``new_group`` over the EP ranks (its NCCL communicator is
made lazily by ProcessGroupNCCL at the group's first collective) and a ``CudaCommunicator``
whose ``PyNcclCommunicator`` (``ncclCommInitRank`` through ctypes, then a one-element warm-up
all_reduce, vllm/distributed/device_communicators/pynccl.py) exists for EP in 0.8.x and from
0.11.0 on, and not in 0.9.0 - 0.10.x ("ep does not use pynccl",
vllm/distributed/device_communicators/cuda_communicator.py of those releases).

Two cases, one process per GPU, each step's non-torch growth (``mem_get_info`` used −
``memory_reserved``) recorded on every rank:

- ``pynccl``: the world's communicator as ``memprof trace`` makes the TP one
  (``init_process_group("nccl", device_id=…)`` and a first all_reduce), then the EP group's
  PyNccl-style communicator over the same ranks (``ncclCommInitRank``, warm-up all_reduce of a
  ``torch.zeros(1)``), then its first all_gather and a second all_reduce;
- ``group``: ``init_process_group("nccl")`` unbound (vLLM's own call), a PyNccl-style TP
  communicator and its warm-up, then ``new_group`` for EP as vLLM makes it, and that group's
  first ``all_gather_into_tensor`` (vLLM's all_gatherv), ``reduce_scatter_tensor`` and
  ``all_to_all_single``.

``torchrun --nproc-per-node N recorders/gpu_ep_group.py --case pynccl|group --out DIR`` writes
``DIR/ep-group-<case>-w<N>-rank<r>.json``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def nccl_lib() -> Any:
    """The libnccl torch loaded (as PyNccl's ``find_nccl_library``), with the calls used."""
    with open("/proc/self/maps") as f:
        paths = [ln.split()[-1] for ln in f if "libnccl.so" in ln]
    lib = ctypes.CDLL(paths[0] if paths else "libnccl.so.2")
    lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(NcclUniqueId)]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                                     NcclUniqueId, ctypes.c_int]
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.ncclAllGather.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    for fn in (lib.ncclGetUniqueId, lib.ncclCommInitRank, lib.ncclAllReduce, lib.ncclAllGather):
        fn.restype = ctypes.c_int
    return lib


def check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what} returned ncclResult {rc}")


class PyNcclLike:
    """A communicator made as vLLM's ``PyNcclCommunicator`` makes it: rank 0's unique id sent
    to the others over an existing group, ``ncclCommInitRank``, then a one-element
    ``ncclAllReduce`` of a ``torch.zeros`` on the current stream (its warm-up)."""

    FLOAT32, SUM = 7, 0  # ncclFloat32, ncclSum

    def __init__(self, lib: Any, rank: int, world: int, cpu_group: Any) -> None:
        self.lib = lib
        uid = NcclUniqueId()
        if rank == 0:
            check(lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        blob = [bytes(uid.internal)]
        dist.broadcast_object_list(blob, src=0, group=cpu_group)  # vLLM: over the gloo group
        ctypes.memmove(ctypes.addressof(uid.internal), blob[0], 128)
        self.comm = ctypes.c_void_p()
        check(lib.ncclCommInitRank(ctypes.byref(self.comm), world, uid, rank), "ncclCommInitRank")

    def all_reduce(self, x: torch.Tensor) -> None:
        s = torch.cuda.current_stream().cuda_stream
        check(self.lib.ncclAllReduce(x.data_ptr(), x.data_ptr(), x.numel(), self.FLOAT32,
                                     self.SUM, self.comm, ctypes.c_void_p(s)), "ncclAllReduce")

    def all_gather(self, x: torch.Tensor, out: torch.Tensor) -> None:
        s = torch.cuda.current_stream().cuda_stream
        check(self.lib.ncclAllGather(x.data_ptr(), out.data_ptr(), x.numel(), self.FLOAT32,
                                     self.comm, ctypes.c_void_p(s)), "ncclAllGather")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=("pynccl", "group"), required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    steps: list[dict[str, Any]] = []

    def step(name: str) -> None:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        nt = total - free - torch.cuda.memory_reserved()
        prev = steps[-1]["non_torch"] if steps else None
        steps.append({"after": name, "non_torch": nt,
                      "growth": None if prev is None else nt - prev})

    torch.zeros(1, device=dev)  # the context and the first fill kernel
    step("context (torch.zeros)")
    x = torch.zeros(1 << 20, device=dev)  # 4 MiB fp32 for the later collectives
    if a.case == "pynccl":
        dist.init_process_group("nccl", device_id=dev)
        step("init_process_group (bound)")
        dist.all_reduce(torch.zeros(1, device=dev))
        step("world first all_reduce")
        lib, cpu = nccl_lib(), dist.new_group(backend="gloo")
        step("gloo group")
        ep = PyNcclLike(lib, rank, world, cpu)
        step("EP ncclCommInitRank")
        ep.all_reduce(torch.zeros(1, device=dev))
        step("EP warm-up all_reduce")
        out = torch.empty(world * x.numel(), device=dev)
        ep.all_gather(x, out)
        step("EP first all_gather 4 MiB")
        ep.all_reduce(x)
        step("EP all_reduce 4 MiB")
        del out
    else:
        dist.init_process_group("nccl")
        step("init_process_group (unbound)")
        lib, cpu = nccl_lib(), dist.new_group(backend="gloo")
        step("gloo group")
        tp = PyNcclLike(lib, rank, world, cpu)
        step("TP ncclCommInitRank")
        tp.all_reduce(torch.zeros(1, device=dev))
        step("TP warm-up all_reduce")
        g = dist.new_group(list(range(world)), backend="nccl")
        step("EP new_group")
        out = torch.empty(world * x.numel(), device=dev)
        dist.all_gather_into_tensor(out, x, group=g)
        step("EP first all_gather_into_tensor 4 MiB")
        red = torch.empty(x.numel() // world, device=dev)
        dist.reduce_scatter_tensor(red, x, group=g)
        step("EP first reduce_scatter_tensor")
        a2a = torch.empty_like(x)
        dist.all_to_all_single(a2a, x, group=g)
        step("EP first all_to_all_single")
        del out, red, a2a
    info = {"case": a.case, "rank": rank, "world": world, "device": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_NCCL"))},
            "command": " ".join(sys.argv), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                 time.gmtime()),
            "steps": steps}
    Path(a.out).mkdir(parents=True, exist_ok=True)
    Path(a.out, f"ep-group-{a.case}-w{world}-rank{rank}.json").write_text(
        json.dumps(info, indent=1) + "\n")
    dist.barrier(group=cpu)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
