"""Replay a sequence of allocations through the simulator: an op file or a ``_dump_snapshot``
pickle in, the state after every op and a summary out.

Op files are JSON ``{"ops": [["a", id, nbytes], ["a", id, nbytes, stream], ["f", id], ["e"]]}``
(``"e"`` = ``empty_cache``). A snapshot's ``device_traces`` are read as ops: ``alloc`` → malloc
of its ``size`` (the requested bytes), ``free_completed`` → free (the moment the caching
allocator takes the block back; ``free_requested`` is only the client's request), and
``segment_free`` / ``segment_unmap`` events that no op of ours caused → ``empty_cache``. The
pickle is read with an unpickler that only builds plain containers (a snapshot is dicts, lists,
strings and numbers), never arbitrary objects.

The file is read with ``memprof.base.files.read_capped``: only a regular file (a FIFO or
``/dev/zero`` is refused before a byte is read), at most ``MAX_FILE_BYTES`` (2 GiB: a
``_dump_snapshot`` of a long run with the default trace ring of 100,000 entries is tens of MiB;
an op file of ``MAX_OPS`` ops fits). Every field is checked before the replay starts: an alloc
needs an integer size in [0, 2^50] bytes (``MAX_ALLOC``) and an integer stream, a snapshot event
an integer address; anything else is a ``BadInput`` naming the op or event, never a crash. A
request the simulated device cannot hold (larger than its address space, or than ``--total``)
is an out-of-memory at that op, as on a GPU.
"""

from __future__ import annotations

import io
import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from memprof.alloc.allocator import AllocatorOOM, CachingAllocator
from memprof.base.errors import BadInput
from memprof.base.files import read_capped
from memprof.base.units import GiB

Op = tuple[str, int, int, int]  # (kind "a"|"f"|"e", id, nbytes, stream)
MAX_OPS = 50_000_000
MAX_ALLOC = 1 << 50  # bytes; one request above this is refused as input (no device is near it)
MAX_FILE_BYTES = 2 * GiB
HINT = ('an op file is {"ops": [["a", id, nbytes], ["f", id], ["e"]]}, or a '
        "torch.cuda.memory._dump_snapshot pickle")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    """The state after every op (bytes: allocated, reserved, inactive_split; and the segment
    count) and the summary: peaks, final state, fragmentation, largest free block."""

    states: tuple[tuple[int, int, int, int], ...]
    ops: int
    allocated_peak: int
    reserved_peak: int
    allocated: int
    reserved: int
    inactive_split: int
    segments: int
    largest_free_block: int
    num_alloc_retries: int
    num_ooms: int
    oom_at: int | None  # index of the op that ran out of memory (the replay stops there)

    @property
    def fragmentation(self) -> int:
        """Reserved − allocated at the end: cached memory not in use."""
        return self.reserved - self.allocated


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _bad_file(path: Path, why: str) -> BadInput:
    return BadInput(f"{path}: {why}", hint=HINT)


def _is_int(x: object) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def load_ops(path: Path) -> list[Op]:
    """Ops from an op file (JSON) or a snapshot pickle; ``BadInput`` for anything else."""
    raw = read_capped(path, what="the op file", cap=MAX_FILE_BYTES, hint=HINT)
    if raw[:1] == b"\x80":
        try:
            data = _SafeUnpickler(io.BytesIO(raw)).load()
        except Exception as exc:  # any unpickling failure is a bad file
            raise _bad_file(path, f"is not a snapshot pickle ({type(exc).__name__})") from None
        return ops_from_snapshot(data, path)
    try:
        doc = json.loads(raw.decode("utf-8-sig"))  # a byte-order mark is no part of the JSON
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _bad_file(path, "is neither JSON nor a pickle") from None
    return ops_from_json(doc, path)


def ops_from_json(doc: object, path: Path) -> list[Op]:
    if not isinstance(doc, dict) or not isinstance(doc.get("ops"), list):
        raise _bad_file(path, 'has no "ops" list')
    out: list[Op] = []
    live: set[int] = set()
    if len(doc["ops"]) > MAX_OPS:
        raise _bad_file(path, f"has more than {MAX_OPS:,} ops")
    for n, op in enumerate(doc["ops"]):
        if not isinstance(op, list) or not op or op[0] not in ("a", "f", "e") or not all(
                _is_int(x) for x in op[1:]):
            raise _bad_file(path, f"op {n} is not [\"a\", id, nbytes(, stream)], [\"f\", id] "
                            "or [\"e\"]")
        if op[0] == "a":
            if len(op) not in (3, 4) or op[2] < 0 or op[2] > MAX_ALLOC:
                raise _bad_file(path, f"op {n}: an alloc needs an id and a size in "
                                "[0, 2^50] bytes")
            if op[1] in live:
                raise _bad_file(path, f"op {n}: id {op[1]} is already allocated")
            live.add(op[1])
            out.append(("a", op[1], op[2], op[3] if len(op) == 4 else 0))
        elif op[0] == "f":
            if len(op) != 2 or op[1] not in live:
                raise _bad_file(path, f"op {n}: free of an id that is not allocated")
            live.discard(op[1])
            out.append(("f", op[1], 0, 0))
        else:
            if len(op) != 1:
                raise _bad_file(path, f'op {n}: an empty_cache is ["e"]')
            out.append(("e", 0, 0, 0))
    return out


def ops_from_snapshot(data: object, path: Path) -> list[Op]:
    """Ops from the first device's trace of a ``torch.cuda.memory._snapshot()``."""
    if not isinstance(data, dict) or not isinstance(data.get("device_traces"), list):
        raise _bad_file(path, "is not a memory snapshot (no device_traces)")
    traces = [t for t in data["device_traces"] if isinstance(t, list) and t]
    if not traces:
        raise _bad_file(path, "has an empty trace (record it with "
                        "torch.cuda.memory._record_memory_history)")
    if len(traces[0]) > MAX_OPS:
        raise _bad_file(path, f"has more than {MAX_OPS:,} trace events")
    out: list[Op] = []
    by_addr: dict[int, int] = {}
    next_id = 0
    for n, ev in enumerate(traces[0]):
        if not isinstance(ev, dict):
            continue
        action = ev.get("action")
        if action not in ("alloc", "free_completed", "segment_free", "segment_unmap"):
            continue  # free_requested, segment_alloc, snapshot, oom: nothing to replay
        addr = ev.get("addr")
        if action == "alloc":
            size, stream = ev.get("size"), ev.get("stream", 0)
            stream = 0 if stream is None else stream
            if not _is_int(addr) or not _is_int(size) or not _is_int(stream):
                raise _bad_file(path, f"trace event {n}: an alloc needs integer addr, size "
                                "and stream")
            if not 0 <= size <= MAX_ALLOC:
                raise _bad_file(path, f"trace event {n}: alloc of {size} bytes is outside "
                                "[0, 2^50]")
            if addr in by_addr:
                raise _bad_file(path, f"trace event {n}: alloc at {addr:#x}, which is "
                                "allocated and not freed")
            next_id += 1
            by_addr[addr] = next_id
            out.append(("a", next_id, size, stream))
        elif action == "free_completed":
            # an address never allocated in the trace was allocated before recording began
            if _is_int(addr) and addr in by_addr:
                out.append(("f", by_addr.pop(addr), 0, 0))
        elif out and out[-1][0] != "e":
            out.append(("e", 0, 0, 0))
    return out


def replay(ops: list[Op], conf: str = "", total_bytes: int | None = None,
           keep_states: bool = True) -> ReplayResult:
    """Run ``ops`` through a fresh ``CachingAllocator``; an OOM stops the replay there."""
    a = CachingAllocator(conf, total_bytes)
    handles: dict[int, int] = {}
    states: list[tuple[int, int, int, int]] = []
    table = a.stats.table
    oom_at: int | None = None
    for n, (kind, ident, nbytes, stream) in enumerate(ops):
        try:
            if kind == "a":
                handles[ident] = a.malloc(nbytes, stream)
            elif kind == "f":
                a.free(handles.pop(ident))
            else:
                a.empty_cache()
        except AllocatorOOM:
            oom_at = n
            break
        if keep_states:
            states.append((table["allocated_bytes"][0][0], table["reserved_bytes"][0][0],
                           table["inactive_split_bytes"][0][0], table["segment"][0][0]))
    s = a.memory_stats()
    return ReplayResult(
        states=tuple(states), ops=len(ops), allocated_peak=s["allocated_bytes.all.peak"],
        reserved_peak=s["reserved_bytes.all.peak"], allocated=s["allocated_bytes.all.current"],
        reserved=s["reserved_bytes.all.current"],
        inactive_split=s["inactive_split_bytes.all.current"],
        segments=s["segment.all.current"], largest_free_block=a.largest_free_block(),
        num_alloc_retries=s["num_alloc_retries"], num_ooms=s["num_ooms"], oom_at=oom_at)
