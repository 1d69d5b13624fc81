"""Is a decode step CUDA-graph clean? Capture it once, replay it with new inputs, compare.

The check (issue 12, seed 003): capture the decode of all layers in one graph at step N, then for
steps N+1…N+k write new ``lens`` / ``indices`` into the same input buffers and replay. Clean
means: every replay's outputs equal an eager run of the same step, every tracked ``data_ptr()``
(scratch buffers, inputs, outputs) is the one seen at capture, the allocator made no allocation
during any replay, and the graph's private pool holds no scratch: at the end of the capture at
most ``pool_limit`` bytes of what the step allocated inside it are still allocated (library
temporaries such as a scan's are freed within the step; the pool's reserved size, which keeps
their segments, is reported beside it).

Two recorders do the capturing: ``CudaGraphRecorder`` (``torch.cuda.CUDAGraph``; pool size from
``memory_reserved`` around the capture, allocations from the allocator's counters) and
``SimulatedRecorder`` for machines without CUDA: it "replays" by running the step again and
counts allocations through the caller's own counter, so the pointer and allocation logic is
tested on a CPU; its report says that no graph was captured. The record and its verdicts
(``GraphClean``, ``graph_verdict``) are pure data in ``memprof.validation.checks``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from memprof.validation.checks import GraphClean

GRAPH_POOL_SLACK = 2 << 20  # one small-pool segment (library temporaries such as a scan's)


class Recorder(Protocol):
    mode: str
    held: int  # after capture: bytes the step left allocated in the pool

    def capture(self, step: Callable[[], None]) -> int: ...  # returns pool bytes

    def replay(self) -> None: ...

    def alloc_counter(self) -> tuple[int, int]: ...  # cumulative (count, bytes)


class CudaGraphRecorder:
    """``torch.cuda.CUDAGraph`` capture of ``step`` (after a warm-up on a side stream)."""

    mode = "cuda graph"

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.held = 0  # bytes the captured step left allocated in the pool
        self.graph: torch.cuda.CUDAGraph | None = None

    def capture(self, step: Callable[[], None]) -> int:
        s = torch.cuda.Stream(self.device)  # type: ignore[no-untyped-call]
        s.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(s):
            step()
            step()
        torch.cuda.current_stream(self.device).wait_stream(s)
        torch.cuda.synchronize(self.device)
        torch.cuda.empty_cache()
        r0 = torch.cuda.memory_reserved(self.device)
        a0 = torch.cuda.memory_allocated(self.device)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        torch.cuda.synchronize(self.device)
        self.graph = g
        self.held = int(torch.cuda.memory_allocated(self.device) - a0)
        return int(torch.cuda.memory_reserved(self.device) - r0)

    def replay(self) -> None:
        assert self.graph is not None
        self.graph.replay()
        torch.cuda.synchronize(self.device)

    def alloc_counter(self) -> tuple[int, int]:
        st = torch.cuda.memory_stats(self.device)
        return (int(st.get("allocation.all.allocated", 0)),
                int(st.get("allocated_bytes.all.allocated", 0)))

    def release(self) -> None:
        self.graph = None


class SimulatedRecorder:
    """No CUDA: ``capture`` and ``replay`` run the step eagerly; allocations are what the
    caller's ``counter`` (cumulative ``(count, bytes)`` of scratch it allocated) reports."""

    mode = "simulated (no CUDA): step re-run, no graph captured"

    def __init__(self, counter: Callable[[], tuple[int, int]]) -> None:
        self._counter = counter
        self._step: Callable[[], None] | None = None
        self.held = 0  # no pool here: what the step allocated while "captured"

    def capture(self, step: Callable[[], None]) -> int:
        self._step = step
        _n0, b0 = self._counter()
        step()
        self.held = self._counter()[1] - b0
        return self.held

    def replay(self) -> None:
        assert self._step is not None
        self._step()

    def alloc_counter(self) -> tuple[int, int]:
        return self._counter()

    def release(self) -> None:
        self._step = None


def check_graph_clean(recorder: Recorder, step: Callable[[], None],
                      set_inputs: Callable[[int], None], outputs: list[torch.Tensor],
                      tracked: Callable[[], dict[str, int]], steps: int,
                      pool_limit: int = GRAPH_POOL_SLACK) -> GraphClean:
    """Capture ``step`` at step 0 and replay it for steps 1…``steps`` (``set_inputs(i)`` writes
    step ``i``'s inputs into the captured buffers); after each replay, the outputs are copied
    aside and the same step runs eagerly for comparison."""
    set_inputs(0)
    pool = recorder.capture(step)
    held = recorder.held
    at_capture = tracked()
    snaps = [torch.empty_like(o) for o in outputs]
    changed: dict[str, None] = {}
    allocs = alloc_bytes = 0
    equal = True
    max_diff = 0.0
    for i in range(1, steps + 1):
        set_inputs(i)
        n0, b0 = recorder.alloc_counter()
        recorder.replay()
        n1, b1 = recorder.alloc_counter()
        allocs += n1 - n0
        alloc_bytes += b1 - b0
        for s, o in zip(snaps, outputs, strict=True):
            s.copy_(o)
        step()  # eager, same inputs
        now = tracked()
        changed.update({k: None for k, p in at_capture.items() if now.get(k) != p})
        for s, o in zip(snaps, outputs, strict=True):
            if not torch.equal(s, o):
                equal = False
                max_diff = max(max_diff, float((s.float() - o.float()).abs().max()))
    why: list[str] = []
    if not equal:
        why.append(f"replayed outputs differ from eager (max abs {max_diff:.3g})")
    if changed:
        why.append(f"{len(changed)} of {len(at_capture)} tracked data_ptr()s moved after "
                   f"capture (e.g. {', '.join(list(changed)[:3])})")
    if allocs:
        why.append(f"{allocs} allocations ({alloc_bytes:,} B) during {steps} replays")
    if held > pool_limit:
        why.append(f"graph pool keeps {held:,} B of the step's own allocations alive "
                   f"(limit {pool_limit:,} B; pool reserved {pool:,} B)")
    return GraphClean(mode=recorder.mode, steps=steps, outputs_equal=equal,
                      max_abs_diff=max_diff, pointers_tracked=len(at_capture),
                      pointers_changed=tuple(list(changed)[:8]),
                      num_pointers_changed=len(changed), replay_allocations=allocs,
                      replay_alloc_bytes=alloc_bytes, pool_bytes=pool, held_bytes=held,
                      pool_limit=pool_limit,
                      clean=not why, what_changed=tuple(why))
