"""Where ``cudaMalloc`` puts a segment: a model of the driver's address placement, its measured
values an explicit profile (``AddressProfile``) per GPU and driver it was read on. One profile
so far, ``H200_DRIVER_580``: what an H200 did (driver 580, CUDA 13.0, torch 2.11.0+cu130).
Another GPU's or driver's placement is a new row of ``PROFILES``, not an edit of the rules.

The caching allocator breaks ties between equal-size free blocks by address
(``BlockComparatorSize``: stream, size, then pointer), so two segments' order in memory decides
which one a later request splits. The driver does not document its placement; this model is what
``recorders/alloc_addresses.py`` recorded (tests/data/alloc_golden/alloc-addresses.json.gz, every
segment of the golden sequences with its address), not a reading of the driver:

- requests are granule-sized (2 MiB); address space is taken in *chunks* of the request rounded
  up to the chunk size (32 MiB), chunk-aligned, placed top-down below a ceiling (414 MiB below
  the arena's start on that machine: what the CUDA context itself holds there): at the top of
  the highest gap between chunks that is *larger* than the chunk (a gap of exactly its size is
  passed over);
- a request first looks for room inside the chunks already taken, newest chunk first, choosing
  within a chunk the smallest free range that holds it (lowest address on a tie); a chunk whose
  segments are all freed is given back;
- a small arena above the ceiling (on the H200 96 MiB, free at offsets 0-2 and 74-96 MiB) is
  searched after every chunk.

Cost: a request, a chunk taken and a chunk given back each cost O(log) in the chunks and gaps
(``_MaxTree``: the newest chunk with room for a request, the highest gap larger than a chunk),
plus the free ranges of the one chunk touched; nothing walks every chunk or gap.

With these rules every one of the 930 segments of the six recorded non-expandable sequences lands
where the driver put it (tests/alloc/test_va.py). The rules were read off those same sequences,
so they are a fit, not the driver's specification; another driver or GPU may place differently.
Addresses are in bytes.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

MiB = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class AddressProfile:
    """The measured values of one GPU and driver's segment placement (the rules above read
    nothing else), with what they were read on."""

    name: str
    gpu: str
    driver: str
    cuda: str
    torch: str
    recorded_by: str  # the script and the recording the values were fitted to
    granule: int  # cudaMalloc's segment granularity
    chunk: int  # address space is taken in chunks of this alignment
    ceiling_below_arena: int  # the first chunk ends this far below the first segment
    arena_span: int  # the first arena's size
    arena_free: tuple[tuple[int, int], ...]  # its free [start, end) offsets
    base: int  # the first segment's address (the arena's start)


H200_DRIVER_580 = AddressProfile(
    name="h200-driver580", gpu="NVIDIA H200", driver="580", cuda="13.0",
    torch="2.11.0+cu130",
    recorded_by="recorders/alloc_addresses.py → tests/data/alloc_golden/alloc-addresses.json.gz",
    granule=2 * MiB, chunk=32 * MiB, ceiling_below_arena=414 * MiB, arena_span=96 * MiB,
    arena_free=((0, 2 * MiB), (74 * MiB, 96 * MiB)),
    # 30 MiB above a 32 MiB boundary, so the ceiling (414 MiB below) is chunk-aligned
    base=(1 << 44) + 30 * MiB)
PROFILES: dict[str, AddressProfile] = {p.name: p for p in (H200_DRIVER_580,)}
"""Every measured placement, by name."""
DEFAULT_PROFILE = H200_DRIVER_580


class _MaxTree:
    """A sparse array of positive ints indexed from 0 (absent = 0) with the largest index whose
    value exceeds a threshold, both in O(log of the largest index): a binary tree of maxima, one
    dict per level, only the nodes above set entries stored; it grows a level when an index
    needs it."""

    __slots__ = ("bits", "levels")

    def __init__(self) -> None:
        self.bits = 0
        self.levels: list[dict[int, int]] = [{}]

    def set(self, i: int, value: int) -> None:
        levels = self.levels
        while i >> self.bits:  # a new root above the old one (its left child)
            root = levels[-1].get(0, 0)
            levels.append({0: root} if root else {})
            self.bits += 1
        if value > 0:
            levels[0][i] = value
        else:
            levels[0].pop(i, None)
        here = levels[0]
        for up in levels[1:]:
            m = max(here.get(i, 0), here.get(i ^ 1, 0))
            i >>= 1
            if up.get(i, 0) == m:
                return  # nothing above changes
            if m:
                up[i] = m
            else:
                del up[i]
            here = up

    def rightmost_above(self, threshold: int) -> int | None:
        """The largest index whose value is > ``threshold``, or None."""
        levels = self.levels
        if levels[-1].get(0, 0) <= threshold:
            return None
        i = 0
        for lvl in range(self.bits - 1, -1, -1):
            i = 2 * i + 1 if levels[lvl].get(2 * i + 1, 0) > threshold else 2 * i
        return i


@dataclass(slots=True)
class Chunk:
    start: int
    size: int
    free: list[list[int]]  # [start, end) ranges, address order
    seq: int = 0  # creation order
    live: int = 0


@dataclass(slots=True)
class DriverVA:
    """The address space ``cudaMalloc`` hands out, per the model above.

    Kept for speed (a model's weights are thousands of segments): the chunks that still have room
    (``room``, by creation number, with a ``_MaxTree`` of their largest free range) and the gaps
    between chunks below the ceiling (``gaps``: start -> end, with a ``_MaxTree`` of their
    lengths by start)."""

    # the first segment's address (the arena's start); None: the profile's
    base: int | None = None
    profile: AddressProfile = DEFAULT_PROFILE
    owner: dict[int, tuple[Chunk, int]] = field(default_factory=dict)
    room: dict[int, Chunk] = field(default_factory=dict)  # seq -> chunk with a free range
    fits: _MaxTree = field(default_factory=_MaxTree)  # seq -> its largest free range
    gaps: dict[int, int] = field(default_factory=dict)  # [start, end) below the ceiling
    gap_starts: list[int] = field(default_factory=list)  # the keys of ``gaps``, sorted
    # start // chunk -> length: a gap starts at 0 or at a chunk's end, a multiple of the chunk
    gap_tree: _MaxTree = field(default_factory=_MaxTree)
    arena: Chunk = field(init=False)
    _seq: int = 0

    def __post_init__(self) -> None:
        if self.base is None:
            self.base = self.profile.base
        base, p = self.base, self.profile
        self.arena = Chunk(base, p.arena_span, [[base + a, base + b] for a, b in p.arena_free])
        if self.ceiling > 0:
            self._add_gap(0, self.ceiling)

    @property
    def ceiling(self) -> int:
        assert self.base is not None
        return self.base - self.profile.ceiling_below_arena

    @property
    def chunks(self) -> list[Chunk]:
        """The arena, then every chunk taken (address order), for inspection."""
        taken = {id(ch): ch for ch, _ in self.owner.values() if ch is not self.arena}
        taken.update({id(ch): ch for ch in self.room.values()})
        return [self.arena, *sorted(taken.values(), key=lambda c: c.start)]

    def malloc(self, size: int) -> int:
        """The address of a new segment of ``size`` bytes."""
        granule = self.profile.granule
        need = -(-size // granule) * granule
        seq = self.fits.rightmost_above(need - 1)  # the newest chunk with a range >= need
        for ch in ((self.room[seq],) if seq is not None else ()) + (self.arena,):
            best = -1
            best_len = 0
            for lo, hi in ch.free:  # the smallest range that holds it, lowest on a tie
                if hi - lo >= need and (best < 0 or hi - lo < best_len):
                    best, best_len = lo, hi - lo
            if best >= 0:
                return self._take(ch, best, need)
        ch = self._new_chunk(need)
        return self._take(ch, ch.start, need)

    def free(self, addr: int) -> None:
        """``cudaFree`` of the segment at ``addr``."""
        ch, need = self.owner.pop(addr)
        _insert_range(ch.free, addr, addr + need)
        ch.live -= 1
        if ch is self.arena:
            return
        if ch.live == 0:  # every segment freed: the chunk's space goes back
            self.room.pop(ch.seq, None)
            self._give_back(ch.start, ch.start + ch.size)
        else:
            self.room[ch.seq] = ch
        self._refit(ch)

    def _new_chunk(self, need: int) -> Chunk:
        """A chunk at the top of the highest gap larger than it (an exact fit is passed over)."""
        chunk = self.profile.chunk
        size = -(-need // chunk) * chunk
        at = self.gap_tree.rightmost_above(size)
        if at is None:  # a request near the size of the whole address space
            raise MemoryError("no address space left below the ceiling")
        lo = at * chunk
        hi = self._drop_gap(lo)
        start = (hi - size) // chunk * chunk
        if start > lo:
            self._add_gap(lo, start)
        if hi > start + size:
            self._add_gap(start + size, hi)
        self._seq += 1
        return Chunk(start, size, [[start, start + size]], seq=self._seq)

    def _add_gap(self, lo: int, hi: int) -> None:
        self.gaps[lo] = hi
        bisect.insort(self.gap_starts, lo)
        self.gap_tree.set(lo // self.profile.chunk, hi - lo)

    def _drop_gap(self, lo: int) -> int:
        hi = self.gaps.pop(lo)
        del self.gap_starts[bisect.bisect_left(self.gap_starts, lo)]
        self.gap_tree.set(lo // self.profile.chunk, 0)
        return hi

    def _give_back(self, lo: int, hi: int) -> None:
        """A chunk's range becomes a gap again, joined to the gaps it touches."""
        i = bisect.bisect_left(self.gap_starts, lo)
        if i > 0 and self.gaps[self.gap_starts[i - 1]] == lo:
            lo = self.gap_starts[i - 1]
            self._drop_gap(lo)
        if hi in self.gaps:
            hi = self._drop_gap(hi)
        self._add_gap(lo, hi)

    def _take(self, ch: Chunk, at: int, need: int) -> int:
        for k, r in enumerate(ch.free):
            if r[0] == at:
                r[0] += need
                if r[0] == r[1]:
                    del ch.free[k]
                break
        ch.live += 1
        self.owner[at] = (ch, need)
        if ch is not self.arena:
            if ch.free:
                self.room[ch.seq] = ch
            else:
                self.room.pop(ch.seq, None)
            self._refit(ch)
        return at

    def _refit(self, ch: Chunk) -> None:
        """Keep ``fits`` in step with ``room`` after ``ch`` changed."""
        if self.room.get(ch.seq) is ch:
            self.fits.set(ch.seq, max(hi - lo for lo, hi in ch.free))
        else:
            self.fits.set(ch.seq, 0)


def _insert_range(ranges: list[list[int]], lo: int, hi: int) -> None:
    """Put ``[lo, hi)`` into the sorted, disjoint ``ranges``, joined to the ranges it touches."""
    i = bisect.bisect_left(ranges, [lo, hi])
    if i < len(ranges) and ranges[i][0] == hi:  # joins the next range
        hi = ranges[i][1]
        del ranges[i]
    if i > 0 and ranges[i - 1][1] == lo:  # joins the previous one
        ranges[i - 1][1] = hi
    else:
        ranges.insert(i, [lo, hi])
