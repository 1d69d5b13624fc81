"""The caching allocator's statistics for allocations that are never freed, without the
simulator's bookkeeping.

A rank's start-up allocates its weights, scratch and KV-cache tensors and frees none of them, and
``memprof.batch.replay`` needs only the totals afterwards (reserved and requested bytes,
segments, the largest free block). With nothing freed, no blocks merge and no segment is
released, so the allocator's state that decides later allocations is just the sizes of its free
blocks per pool: a request takes the smallest free block that holds it (``get_free_block``'s
best fit; which of equal-size blocks it takes changes no size) or a new segment
(``get_allocation_size``), and the rest of the block stays free when ``should_split`` says so.

It holds for ``memprof.alloc.CachingAllocator`` with the default configuration (no power-of-two
rounding, no expandable segments, no memory limit) on one stream, and with a ``max_split_size``
(``max_split_size_mb``, which vLLM sets to 20 around its model load from 0.21.0:
``memprof.core.terms.load_rounding``): a block of that size or more is "oversize", handed to a
smaller request never and to a larger one only when less than ``max_non_split_rounding_size``
(20 MiB) larger, and a request of that size or more is never split off a block
(``get_free_block`` and ``should_split``, PyTorch v2.11.0 c10/cuda/CUDACachingAllocator.cpp);
``tests/alloc/test_monotone.py`` checks it against that simulator after every allocation of
random sequences and of every bundled model's start-up.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from memprof.alloc.allocator import CachingAllocator, get_allocation_size
from memprof.alloc.constants import (
    K_LARGE_BUFFER,
    K_MIN_BLOCK_SIZE,
    K_MIN_LARGE_ALLOC,
    K_ROUND_LARGE,
    K_SMALL_BUFFER,
    K_SMALL_SIZE,
    SIZE_MAX,
)


class MonotoneReplay:
    """Free block sizes of the small and large pools, and the running totals."""

    __slots__ = ("allocated", "created", "large", "max_split_size", "requested", "reserved",
                 "segments", "small")

    def __init__(self, small: list[int] | None = None, large: list[int] | None = None,
                 max_split_size: int = SIZE_MAX) -> None:
        """``small`` / ``large``: free blocks the pools start with (whole segments reserved
        earlier, not counted in ``reserved``); ``max_split_size``: the allocator's
        ``max_split_size_mb`` in bytes (``SIZE_MAX``: none, PyTorch's default)."""
        self.max_split_size = max_split_size
        self.small: list[int] = sorted(small or ())  # free block sizes, 2 MiB small segments
        self.large: list[int] = sorted(large or ())  # free block sizes, large segments
        self.reserved = 0  # bytes of the segments created here (cudaMalloc'd)
        self.requested = 0  # bytes the callers asked for
        self.allocated = 0  # bytes of the blocks handed out (memory_allocated counts these)
        self.segments = 0
        self.created: list[int] = []  # sizes of those segments, in order

    def copy(self) -> MonotoneReplay:
        out = MonotoneReplay(max_split_size=self.max_split_size)
        out.small, out.large = self.small.copy(), self.large.copy()
        out.reserved, out.requested, out.segments = self.reserved, self.requested, self.segments
        out.allocated = self.allocated
        out.created = self.created.copy()
        return out

    def malloc(self, nbytes: int) -> None:
        """One allocation of ``nbytes`` (``malloc``: 512-B rounding, pool, best fit or a new
        segment, split)."""
        size = (K_MIN_BLOCK_SIZE if nbytes < K_MIN_BLOCK_SIZE
                else -(-nbytes // K_MIN_BLOCK_SIZE) * K_MIN_BLOCK_SIZE)
        small = size <= K_SMALL_SIZE
        free = self.small if small else self.large
        mss = self.max_split_size
        i = bisect_left(free, size)
        if i < len(free) and (small or not (  # get_free_block's oversize rules
                (size < mss <= free[i]) or (size >= mss and free[i] >= size + K_LARGE_BUFFER))):
            block = free.pop(i)
        else:
            block = get_allocation_size(size)
            self.reserved += block
            self.segments += 1
            self.created.append(block)
        rest = block - size
        if rest >= K_MIN_BLOCK_SIZE if small else (rest > K_SMALL_SIZE and size < mss):
            insort(free, rest)
            self.allocated += size
        else:
            self.allocated += block
        self.requested += nbytes

    def extend(self, sizes: tuple[int, ...] | list[int]) -> MonotoneReplay:
        """``malloc`` of each size in turn (the same steps, inlined per pool with
        ``get_allocation_size`` and the constants bound locally: a sweep replays a few hundred
        thousand of them, the model load's under a ``max_split_size``)."""
        small_free, large_free = self.small, self.large
        mss = self.max_split_size
        reserved = requested = allocated = 0
        created = self.created
        new_segment = created.append
        find, put = bisect_left, insort
        min_block, small_size = K_MIN_BLOCK_SIZE, K_SMALL_SIZE
        small_buffer, large_buffer = K_SMALL_BUFFER, K_LARGE_BUFFER
        min_large, round_large = K_MIN_LARGE_ALLOC, K_ROUND_LARGE
        for nbytes in sizes:
            size = min_block if nbytes < min_block else -(-nbytes // min_block) * min_block
            if size <= small_size:
                i = find(small_free, size)
                if i < len(small_free):
                    block = small_free.pop(i)
                else:  # get_allocation_size of a small request
                    block = small_buffer
                    reserved += block
                    new_segment(block)
                rest = block - size
                if rest >= min_block:  # should_split (small pool)
                    put(small_free, rest)
                    allocated += size
                else:
                    allocated += block
            else:
                i = find(large_free, size)
                if i < len(large_free) and not (  # get_free_block's oversize rules
                        (size < mss <= large_free[i])
                        or (size >= mss and large_free[i] >= size + large_buffer)):
                    block = large_free.pop(i)
                else:  # get_allocation_size of a large request
                    block = (large_buffer if size < min_large
                             else round_large * -(-size // round_large))
                    reserved += block
                    new_segment(block)
                rest = block - size
                if rest > small_size and size < mss:  # should_split (large pool)
                    put(large_free, rest)
                    allocated += size
                else:
                    allocated += block
            requested += nbytes
        self.reserved += reserved
        self.requested += requested
        self.allocated += allocated
        self.segments = len(created)
        return self

    def largest_free_block(self) -> int:
        return max(self.small[-1] if self.small else 0, self.large[-1] if self.large else 0)


def continue_from(sim: CachingAllocator) -> MonotoneReplay:
    """A replay that goes on from ``sim``'s free blocks (default pools, one stream; its
    ``max_split_size``) for allocations that free nothing: totals of what it adds, not of what
    ``sim`` holds."""
    return MonotoneReplay([k[1] for k in sim.small.blocks], [k[1] for k in sim.large.blocks],
                          max_split_size=sim.conf.max_split_size)


def pool_reserved_by_stages(stages: tuple[tuple[int, ...], ...]) -> int:
    """Bytes a pool reserves for ``stages`` whose tensors are all allocated, then all freed,
    stage after stage (a CUDA graph's private pool during capture: nothing is returned to the
    driver). Freeing a whole stage merges every segment back into one free block, so each stage
    starts from the segments reserved so far, whole, and adds those it creates."""
    small: list[int] = []
    large: list[int] = []
    for sizes in stages:
        stage = MonotoneReplay(small, large).extend(sizes)
        for seg in stage.created:  # small segments are 2 MiB, large ones at least 10 MiB
            (small if seg <= K_SMALL_BUFFER else large).append(seg)
    return sum(small) + sum(large)


__all__ = ["MonotoneReplay", "continue_from", "pool_reserved_by_stages"]
