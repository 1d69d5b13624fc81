"""An NCCL communicator made as vLLM's ``PyNcclCommunicator`` makes one, for the trace under
torchrun (vllm/distributed/device_communicators/pynccl.py and pynccl_wrapper.py, 0.11.0 and
0.33.0): rank 0 of the group calls ``ncclGetUniqueId``, the id goes to the others over the
group's gloo (CPU) group, each rank calls ``ncclCommInitRank`` through ctypes on the libnccl
the process loaded (torch's), and collectives are ``ncclAllReduce`` calls on torch's current
stream (``current_stream()``: the capture stream under graph capture). No torch stream is made
and no ProcessGroupNCCL communicator, as in vLLM (``memprof.core.terms.pynccl_pool``)."""

from __future__ import annotations

import ctypes
from typing import Any

from memprof.base.errors import EnvironmentProblem

# ncclDataType_t (nccl.h): the dtypes the replica reduces
NCCL_DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "int64": 4, "float16": 6, "float32": 7,
               "float64": 8, "bfloat16": 9}
NCCL_SUM = 0


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]  # ncclUniqueId: NCCL_UNIQUE_ID_BYTES


def _library() -> Any:
    """The libnccl torch loaded (its path read off /proc/self/maps), else ``libnccl.so.2``."""
    with open("/proc/self/maps") as maps:
        path = next((line.split()[-1] for line in maps if "libnccl.so" in line), "libnccl.so.2")
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot load NCCL ({path}): {exc}",
                                 hint="install a CUDA build of torch (it ships libnccl)") from None
    p = ctypes.c_void_p
    lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(_UniqueId)]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(p), ctypes.c_int, _UniqueId, ctypes.c_int]
    lib.ncclAllReduce.argtypes = [p, p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, p, p]
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    return lib


class PyNccl:
    """One rank's communicator over ``ranks`` (global ranks), made at construction
    (``ncclCommInitRank``); ``cpu_group``: the group's gloo group, which carries the id."""

    def __init__(self, ranks: list[int], rank: int, cpu_group: Any) -> None:
        import torch.distributed as dist

        self.lib = _library()
        uid = _UniqueId()
        if rank == ranks[0]:
            self._check(self.lib.ncclGetUniqueId(ctypes.byref(uid)))
        box = [bytes(uid.internal)]
        dist.broadcast_object_list(box, src=ranks[0], group=cpu_group)
        ctypes.memmove(ctypes.byref(uid), box[0], ctypes.sizeof(uid))
        self.comm = ctypes.c_void_p()
        self._check(self.lib.ncclCommInitRank(ctypes.byref(self.comm), len(ranks), uid,
                                              ranks.index(rank)))

    def all_reduce(self, x: Any) -> Any:
        """vLLM's out-of-place all-reduce: the sum into a new tensor (``torch.empty_like``), on
        the current stream."""
        import torch

        out = torch.empty_like(x)
        self._check(self.lib.ncclAllReduce(
            x.data_ptr(), out.data_ptr(), x.numel(), NCCL_DTYPES[str(x.dtype).split(".")[-1]],
            NCCL_SUM, self.comm, torch.cuda.current_stream().cuda_stream))
        return out

    def _check(self, result: int) -> None:
        if result != 0:
            err = self.lib.ncclGetErrorString(result).decode()
            raise EnvironmentProblem(f"NCCL call failed: {err} ({result})",
                                     hint="run with NCCL_DEBUG=INFO to see NCCL's reason")
