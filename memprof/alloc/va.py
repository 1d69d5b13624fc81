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

from dataclasses import dataclass, field

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
    live: int = 0


@dataclass(slots=True)
class DriverVA:
    """The address space ``cudaMalloc`` hands out, per the model above."""

    # the first segment's address (the arena's start); on the H200 it sat 30 MiB above a 32 MiB
    # boundary, so the ceiling (414 MiB below) is chunk-aligned
    base: int = (1 << 44) + 30 * MiB
    chunks: list[Chunk] = field(default_factory=list)  # creation order; chunks[0] = the arena
    owner: dict[int, tuple[Chunk, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.chunks:
            self.chunks.append(Chunk(self.base, ARENA_SPAN,
                                     [[self.base + a, self.base + b] for a, b in ARENA_FREE]))

    @property
    def ceiling(self) -> int:
        return self.base - CEILING_BELOW_ARENA

    def malloc(self, size: int) -> int:
        """The address of a new segment of ``size`` bytes."""
        need = -(-size // GRANULE) * GRANULE
        arena, *taken = self.chunks
        for ch in [*reversed(taken), arena]:
            fits = [(r[1] - r[0], r[0]) for r in ch.free if r[1] - r[0] >= need]
            if fits:
                return self._take(ch, min(fits)[1], need)
        return self._take(self._new_chunk(need), -1, need)

    def free(self, addr: int) -> None:
        """``cudaFree`` of the segment at ``addr``."""
        ch, need = self.owner.pop(addr)
        ranges = sorted([*ch.free, [addr, addr + need]])
        merged: list[list[int]] = []
        for r in ranges:
            if merged and merged[-1][1] == r[0]:
                merged[-1][1] = r[1]
            else:
                merged.append(r)
        ch.free = merged
        ch.live -= 1
        if ch.live == 0 and ch is not self.chunks[0]:
            self.chunks.remove(ch)

    def _new_chunk(self, need: int) -> Chunk:
        size = -(-need // CHUNK) * CHUNK
        top = self.ceiling
        for ch in sorted((c for c in self.chunks[1:]), key=lambda c: -c.start):
            if ch.start + ch.size < top - size:  # a gap must be larger than the chunk
                break
            top = min(top, ch.start)
        start = (top - size) // CHUNK * CHUNK
        ch = Chunk(start, size, [[start, start + size]])
        self.chunks.append(ch)
        return ch

    def _take(self, ch: Chunk, at: int, need: int) -> int:
        if at < 0:
            at = ch.free[0][0]
        for r in ch.free:
            if r[0] == at:
                r[0] += need
                break
        ch.free = [r for r in ch.free if r[1] > r[0]]
        ch.live += 1
        self.owner[at] = (ch, need)
        return at
