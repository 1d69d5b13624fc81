"""Where ``cudaMalloc`` puts a segment: a model of the driver's address placement, fitted to
what an H200 did (driver 580, CUDA 13.0, torch 2.11.0+cu130).

The caching allocator breaks ties between equal-size free blocks by address
(``BlockComparatorSize``: stream, size, then pointer), so two segments' order in memory decides
which one a later request splits. The driver does not document its placement; this model is what
``benchmarks/alloc_addresses.py`` recorded (tests/data/alloc_golden/alloc-addresses.json.gz, every
segment of the golden sequences with its address), not a reading of the driver:

- requests are 2 MiB-granular; address space is taken in *chunks* of the request rounded up to
  32 MiB, 32 MiB-aligned, placed top-down below a ceiling (414 MiB below the arena's start on that
  machine: what the CUDA context itself holds there): at the top of the highest gap between
  chunks that is *larger* than the chunk (a gap of exactly its size is passed over);
- a request first looks for room inside the chunks already taken, newest chunk first, choosing
  within a chunk the smallest free range that holds it (lowest address on a tie); a chunk whose
  segments are all freed is given back;
- a small arena above the ceiling (free at offsets 0-2 and 74-96 MiB) is searched after every
  chunk.

With these rules every one of the 930 segments of the six recorded non-expandable sequences lands
where the driver put it (tests/alloc/test_va.py). The rules were read off those same sequences,
so they are a fit, not the driver's specification; another driver or GPU may place differently.
Addresses are in bytes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

from sortedcontainers import SortedDict, SortedList

MiB = 1 << 20
GRANULE = 2 * MiB  # cudaMalloc's segment granularity
CHUNK = 32 * MiB  # address space is taken in 32 MiB-aligned chunks
CEILING_BELOW_ARENA = 414 * MiB  # measured: first chunk ends this far below the first segment
ARENA_FREE = ((0, 2 * MiB), (74 * MiB, 96 * MiB))  # measured free ranges of the first arena
ARENA_SPAN = 96 * MiB


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
    in creation order (a ``SortedDict``), and the gaps between chunks below the ceiling."""

    # the first segment's address (the arena's start); on the H200 it sat 30 MiB above a 32 MiB
    # boundary, so the ceiling (414 MiB below) is chunk-aligned
    base: int = (1 << 44) + 30 * MiB
    owner: dict[int, tuple[Chunk, int]] = field(default_factory=dict)
    room: SortedDict = field(default_factory=SortedDict)  # seq -> chunk with a free range
    gaps: list[list[int]] = field(default_factory=list)  # [start, end) below the ceiling
    # the largest free range of each chunk in ``room`` (by seq), and those sizes sorted: a
    # request larger than every one skips the scan of the chunks (it would find no room)
    fit_of: dict[int, int] = field(default_factory=dict)
    fits: SortedList = field(default_factory=SortedList)
    arena: Chunk = field(init=False)
    _seq: int = 0

    def __post_init__(self) -> None:
        self.arena = Chunk(self.base, ARENA_SPAN,
                           [[self.base + a, self.base + b] for a, b in ARENA_FREE])
        self.gaps = [[0, self.ceiling]]

    @property
    def ceiling(self) -> int:
        return self.base - CEILING_BELOW_ARENA

    @property
    def chunks(self) -> list[Chunk]:
        """The arena, then every chunk taken (address order), for inspection."""
        taken = {id(ch): ch for ch, _ in self.owner.values() if ch is not self.arena}
        taken.update({id(ch): ch for ch in self.room.values()})
        return [self.arena, *sorted(taken.values(), key=lambda c: c.start)]

    def malloc(self, size: int) -> int:
        """The address of a new segment of ``size`` bytes."""
        need = -(-size // GRANULE) * GRANULE
        room = self.room
        fits = self.fits
        chunks: Iterator[Chunk] = iter(())
        if fits and fits[-1][0] >= need:  # some chunk has room: the newest such is used
            fit_of = self.fit_of
            chunks = (room[k] for k in reversed(room) if fit_of[k] >= need)
        for ch in itertools.chain(chunks, (self.arena,)):
            # the newest chunk first (keys in reverse, each looked up in the plain dict)
            best = -1
            best_len = 0
            for lo, hi in ch.free:
                if hi - lo >= need and (best < 0 or hi - lo < best_len):
                    best, best_len = lo, hi - lo
            if best >= 0:
                return self._take(ch, best, need)
        ch = self._new_chunk(need)
        return self._take(ch, ch.start, need)

    def free(self, addr: int) -> None:
        """``cudaFree`` of the segment at ``addr``."""
        ch, need = self.owner.pop(addr)
        ch.free = _merged([*ch.free, [addr, addr + need]])
        ch.live -= 1
        if ch is self.arena:
            return
        if ch.live == 0:  # every segment freed: the chunk's space goes back
            self.room.pop(ch.seq, None)
            self.gaps = _merged([*self.gaps, [ch.start, ch.start + ch.size]])
        else:
            self.room[ch.seq] = ch
        self._refit(ch)

    def _new_chunk(self, need: int) -> Chunk:
        """A chunk at the top of the highest gap larger than it (an exact fit is passed over)."""
        size = -(-need // CHUNK) * CHUNK
        for i in range(len(self.gaps) - 1, -1, -1):
            lo, hi = self.gaps[i]
            if hi - lo > size:
                start = (hi - size) // CHUNK * CHUNK
                rest = [g for g in ([lo, start], [start + size, hi]) if g[1] > g[0]]
                self.gaps[i:i + 1] = rest
                break
        else:  # pragma: no cover - the bottom gap is as large as the address space
            raise MemoryError("no address space left below the ceiling")
        self._seq += 1
        return Chunk(start, size, [[start, start + size]], seq=self._seq)

    def _take(self, ch: Chunk, at: int, need: int) -> int:
        for r in ch.free:
            if r[0] == at:
                r[0] += need
                break
        ch.free = [r for r in ch.free if r[1] > r[0]]
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
        """Keep ``fit_of`` / ``fits`` in step with ``room`` after ``ch`` changed."""
        old = self.fit_of.pop(ch.seq, None)
        if old is not None:
            self.fits.remove((old, ch.seq))
        if self.room.get(ch.seq) is ch:
            largest = max(hi - lo for lo, hi in ch.free)
            self.fit_of[ch.seq] = largest
            self.fits.add((largest, ch.seq))


def _merged(ranges: list[list[int]]) -> list[list[int]]:
    """``ranges`` sorted, touching ones joined."""
    out: list[list[int]] = []
    for r in sorted(ranges):
        if out and out[-1][1] == r[0]:
            out[-1][1] = r[1]
        else:
            out.append(list(r))
    return out
