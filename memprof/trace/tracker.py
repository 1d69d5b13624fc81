"""Every allocation of a traced forward, seen where torch dispatches it, charged to a component.

``Tracker`` is a ``TorchDispatchMode``: each op's output whose storage is new is an allocation of
``storage.nbytes()`` bytes (the size the caching allocator is asked for), and a finaliser on the
storage is its free (CPython frees at the last reference, as the caching allocator sees it).
This is the mechanism of ``torch.distributed._tools.mem_tracker.MemTracker`` (pytorch/pytorch
torch/distributed/_tools/mem_tracker.py), written for memprof: allocations go to a ``Sink``, and
each is charged to the component named by the innermost ``tracker.charge(name)`` block.

Not seen here: memory an op allocates internally (cuBLAS workspace, sort buffers); on CUDA the
allocator's own statistics (``memprof.trace.device``) see those.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch.utils._python_dispatch import TorchDispatchMode

GEMMS = frozenset({"mm", "addmm", "bmm", "baddbmm", "linear", "matmul"})


class Sink(Protocol):
    """Where allocation events go: a counter, and optionally an allocator simulator."""

    def malloc(self, nbytes: int, component: str) -> int: ...

    def free(self, handle: int) -> None: ...


@dataclass
class Counter:
    """Live and peak bytes, overall and per component (bytes as requested, not rounded)."""

    live: int = 0
    peak: int = 0
    by_component: dict[str, int] = field(default_factory=dict)
    _handles: dict[int, tuple[int, str]] = field(default_factory=dict)
    _next: int = 0
    events: list[tuple[str, int, int]] = field(default_factory=list)  # ("a"|"f", handle, bytes)
    record_events: bool = False

    def malloc(self, nbytes: int, component: str) -> int:
        self._next += 1
        self._handles[self._next] = (nbytes, component)
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        self.by_component[component] = self.by_component.get(component, 0) + nbytes
        if self.record_events:
            self.events.append(("a", self._next, nbytes))
        return self._next

    def free(self, handle: int) -> None:
        nbytes, component = self._handles.pop(handle)
        self.live -= nbytes
        self.by_component[component] -= nbytes
        if self.record_events:
            self.events.append(("f", handle, nbytes))

    def reset_peak(self) -> None:
        self.peak = self.live


class Tracker(TorchDispatchMode):
    """Charges every new storage an op returns to the current component."""

    def __init__(self, sinks: list[Any],
                 on_first_gemm: Callable[[], None] | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.sinks = sinks
        self.on_first_gemm = on_first_gemm
        self._stack: list[str] = ["other"]
        self._seen: set[int] = set()

    @property
    def current(self) -> str:
        """The component allocations are charged to now."""
        return self._stack[-1]

    @contextlib.contextmanager
    def charge(self, component: str) -> Iterator[None]:
        self._stack.append(component)
        try:
            yield
        finally:
            self._stack.pop()

    def _track(self, t: torch.Tensor) -> None:
        st = t.untyped_storage()
        key = st._cdata
        nbytes = st.nbytes()
        if key in self._seen or nbytes == 0:
            return
        self._seen.add(key)
        handles = [s.malloc(nbytes, self._stack[-1]) for s in self.sinks]
        weakref.finalize(st, self._free, key, handles)

    def _free(self, key: int, handles: list[int]) -> None:
        self._seen.discard(key)
        for sink, h in zip(self.sinks, handles, strict=True):
            sink.free(h)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        if self.on_first_gemm is not None and func.__name__.split(".")[0] in GEMMS:
            first, self.on_first_gemm = self.on_first_gemm, None
            first()
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, tuple | list) else (out,)):
            if isinstance(t, torch.Tensor):
                self._track(t)
        return out
