"""The records of the checks every validation makes, and their verdicts: parity against a
reference (:class:`Parity`), achieved bandwidth against a copy (:class:`Bandwidth`), CUDA-graph
cleanliness (:class:`GraphClean`, measured by ``memprof.validation.graph_clean``). Pure data:
no torch, so a recorded run's JSON is rebuilt and rendered without it."""

from __future__ import annotations

from dataclasses import dataclass

from memprof.base.units import fmt_bytes


@dataclass(frozen=True, slots=True)
class Parity:
    name: str  # what was compared ("layer 0 vs reference", ...)
    dtype: str
    max_abs: float
    rel: float  # ‖out − ref‖ / ‖ref‖
    tol: float
    passed: bool


@dataclass(frozen=True, slots=True)
class Bandwidth:
    kernel_bytes: int  # bytes the kernel must move: cache rows read once + q read + out written
    kernel_ms: float  # one layer's decode (split + combine), GPU time: CUDA-graph replay
    eager_ms: float  # the same call launched eagerly from Python, host launch overhead included
    kernel_gbps: float
    copy_gbps: float  # device-to-device copy, bytes read + written
    fraction: float  # kernel_gbps / copy_gbps
    target: float | None  # required fraction, None where no target applies
    passed: bool | None


@dataclass(frozen=True, slots=True)
class GraphClean:
    mode: str  # "cuda graph" | "simulated (no CUDA): step re-run, no graph captured"
    steps: int  # replays with changed inputs
    outputs_equal: bool
    max_abs_diff: float
    pointers_tracked: int
    pointers_changed: tuple[str, ...]  # names whose data_ptr moved (first 8)
    num_pointers_changed: int
    replay_allocations: int  # allocator allocations during the replays
    replay_alloc_bytes: int
    pool_bytes: int  # graph pool reserved (simulated: bytes the step allocated while "captured")
    held_bytes: int  # of it, what the step left allocated at the end of the capture
    pool_limit: int  # most bytes the step may leave allocated in the pool
    clean: bool
    what_changed: tuple[str, ...]  # why not clean, one line each


def graph_verdict(by_policy: dict[str, GraphClean | None], fixed: str,
                  fresh: str) -> bool | None:
    """The graph-clean verdict of a kernel with two policies: the ``fixed`` one (buffers owned
    once) clean and the ``fresh`` one (buffers made per step) shown not clean; None when the
    check did not run."""
    if any(g is None for g in by_policy.values()):
        return None
    ok = True
    if fixed in by_policy:
        g = by_policy[fixed]
        ok = ok and g is not None and g.clean
    if fresh in by_policy:
        g = by_policy[fresh]
        ok = ok and g is not None and not g.clean
    return ok


# the speed criterion of every shared-buffer validation: the policy that owns its buffers once
# is no slower than the one that allocates them per layer / per step / per forward
MAX_SHARED_RATIO = 1.02


def all_hold(required: list[bool], optional: list[bool | None]) -> bool:
    """Every required check and every optional one that ran (None: did not run)."""
    return all(required) and all(c for c in optional if c is not None)


def graph_lines(policy: str, g: GraphClean | None) -> list[str]:
    """The report lines of one policy's graph-clean check (what changed, when it is not)."""
    if g is None:
        return [f"  graph-clean [{policy}]: not run"]
    head = (f"  graph-clean [{policy}] ({g.mode}): {g.steps} replays, outputs "
            f"{'equal' if g.outputs_equal else 'DIFFER'} to eager, "
            f"{g.pointers_tracked - g.num_pointers_changed}/{g.pointers_tracked} pointers "
            f"stable, {g.replay_allocations} allocations in replay, pool "
            f"{fmt_bytes(g.pool_bytes)} ({fmt_bytes(g.held_bytes)} left allocated): "
            f"{'clean' if g.clean else 'NOT clean'}")
    return [head, *(f"    what changes: {w}" for w in g.what_changed)]
