"""The device a trace runs on, and every ``torch.cuda`` memory call of memprof in one place.

- ``cuda``: a real GPU; statistics from ``torch.cuda.memory_stats`` and ``mem_get_info``
  (non-torch = device used − reserved), snapshots from ``torch.cuda.memory._record_memory_history``;
- ``fake``: no GPU; tensors are ``FakeTensor``s on a pretend ``cuda`` device, and every
  allocation the tracker sees is replayed through ``memprof.alloc``'s caching-allocator
  simulator, which gives allocated and reserved as torch would (the default when no GPU is
  visible).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import torch

from memprof.base.errors import EnvironmentProblem

DeviceKind = Literal["cuda", "fake"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryState:
    """The allocator's state at one moment (bytes). ``used``/``non_torch``: the device's, on a
    real GPU only (``None`` on the fake device)."""

    allocated: int
    reserved: int
    allocated_peak: int
    reserved_peak: int
    requested: int
    segments: int
    used: int | None = None
    non_torch: int | None = None


class SimSink:
    """Replays allocation events through ``memprof.alloc.CachingAllocator``."""

    def __init__(self, conf: str = "", total_bytes: int | None = None) -> None:
        from memprof.alloc import CachingAllocator  # type: ignore[import-untyped,import-not-found,unused-ignore]

        self.alloc = CachingAllocator(conf, total_bytes)
        self.trace: list[dict[str, object]] = []  # device_traces entries, as torch records them

    def malloc(self, nbytes: int, component: str) -> int:
        del component
        h = int(self.alloc.malloc(nbytes))
        self.trace.append({"action": "alloc", "addr": self.alloc.active[h].addr,
                           "size": nbytes, "stream": 0, "frames": []})
        return h

    def free(self, handle: int) -> None:
        addr = self.alloc.active[handle].addr
        size = self.alloc.active[handle].requested
        self.alloc.free(handle)
        self.trace.append({"action": "free_completed", "addr": addr, "size": size,
                           "stream": 0, "frames": []})

    def stats(self) -> dict[str, int]:
        return dict(self.alloc.memory_stats())


def cuda_available() -> bool:
    return bool(torch.cuda.is_available())


def require_cuda() -> None:
    if not cuda_available():
        raise EnvironmentProblem(
            "--device cuda: no CUDA GPU is visible (torch.cuda.is_available() is False)",
            hint="run on a machine with an NVIDIA GPU and a CUDA build of torch, or use "
            "--device fake")


class Device:
    """One trace's device: where tensors live and how the allocator's state is read."""

    def __init__(self, kind: DeviceKind, *, sim: SimSink | None = None) -> None:
        self.kind = kind
        self.sim = sim
        self.torch_device = torch.device("cuda")

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Inside: tensors are created on this device (fake: as FakeTensors)."""
        if self.kind == "fake":
            from torch._subclasses.fake_tensor import FakeTensorMode

            with FakeTensorMode(allow_non_fake_inputs=False):
                yield
        else:
            yield

    def state(self) -> MemoryState:
        if self.kind == "cuda":
            s = torch.cuda.memory_stats()
            free, total = torch.cuda.mem_get_info()
            used = total - free
            reserved = int(s.get("reserved_bytes.all.current", 0))
            return MemoryState(
                allocated=int(s.get("allocated_bytes.all.current", 0)), reserved=reserved,
                allocated_peak=int(s.get("allocated_bytes.all.peak", 0)),
                reserved_peak=int(s.get("reserved_bytes.all.peak", 0)),
                requested=int(s.get("requested_bytes.all.current", 0)),
                segments=int(s.get("segment.all.current", 0)), used=used,
                non_torch=used - reserved)
        assert self.sim is not None
        s = self.sim.stats()
        return MemoryState(
            allocated=s.get("allocated_bytes.all.current", 0),
            reserved=s.get("reserved_bytes.all.current", 0),
            allocated_peak=s.get("allocated_bytes.all.peak", 0),
            reserved_peak=s.get("reserved_bytes.all.peak", 0),
            requested=s.get("requested_bytes.all.current", 0),
            segments=s.get("segment.all.current", 0))

    def reset_peak(self) -> None:
        if self.kind == "cuda":
            torch.cuda.reset_peak_memory_stats()
        elif self.sim is not None and hasattr(self.sim.alloc, "reset_peak_stats"):
            self.sim.alloc.reset_peak_stats()

    def empty_cache(self) -> None:
        if self.kind == "cuda":
            torch.cuda.empty_cache()
        elif self.sim is not None:
            self.sim.alloc.empty_cache()

    def synchronize(self) -> None:
        if self.kind == "cuda":
            torch.cuda.synchronize()

    def start_history(self) -> None:
        if self.kind == "cuda":
            torch.cuda.memory._record_memory_history(context=None, max_entries=300_000)

    def dump_snapshot(self, path: str) -> None:
        """A ``_dump_snapshot`` pickle (memory_viz, ``memprof alloc replay``), written whole or
        not at all (``write_atomic``). On CUDA the same bytes as
        ``torch.cuda.memory._dump_snapshot`` (torch 2.x ``cuda/memory.py``: ``pickle.dump`` of
        ``_snapshot()``), without its ``open(path, "wb")``."""
        import pickle

        from memprof.base.files import write_atomic

        snap: Any
        if self.kind == "cuda":
            snap = torch.cuda.memory._snapshot()
        else:
            assert self.sim is not None
            snap = {"segments": self.sim.alloc.snapshot(), "device_traces": [self.sim.trace]}
        write_atomic(path, pickle.dumps(snap))

    def summary(self) -> str:
        if self.kind == "cuda":
            return str(torch.cuda.memory_summary(abbreviated=True))
        return ""
