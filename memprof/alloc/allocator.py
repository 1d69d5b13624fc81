"""A replica of PyTorch's CUDA caching allocator, op for op, without a GPU.

Source: PyTorch v2.11.0 ``c10/cuda/CUDACachingAllocator.cpp`` (``DeviceCachingAllocator``:
``malloc``, ``get_free_block``, ``alloc_block``, ``should_split``, ``alloc_found_block``,
``free``/``free_block``/``try_merge_blocks``, ``release_available_cached_blocks``,
``release_cached_blocks``/``release_blocks``/``release_block``, ``garbage_collect_cached_blocks``,
``try_allocate_expandable_block``/``map_block``/``unmap_block``, private pools for graph capture)
and the constants of ``c10/cuda/CUDACachingAllocator.h``. Names follow the source so the two read
side by side.

Blocks of a pool are kept in a ``sortedcontainers.SortedList`` of ``(stream, size, address,
id)`` tuples: the same order as ``BlockComparatorSize``, ``bisect_left`` is ``lower_bound``, and
insert/remove are O(log n) in a well-kept pure-Python library (no C extension to build), which
keeps a whole model's trace replay well above 200,000 ops/s.

Segment addresses come from ``memprof.alloc.va`` (the driver's placement, modelled from an H200:
ties between equal-size blocks depend on it); ``total_bytes`` bounds what ``cudaMalloc`` may
return, ``set_memory_fraction`` bounds ``total_allocated_memory`` as
``set_per_process_memory_fraction`` does.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from sortedcontainers import SortedList

from memprof.alloc.config import AllocatorConfig, parse_conf
from memprof.alloc.constants import (
    K_LARGE_BUFFER,
    K_MIN_BLOCK_SIZE,
    K_MIN_LARGE_ALLOC,
    K_ROUND_LARGE,
    K_SMALL_BUFFER,
    K_SMALL_SIZE,
    SIZE_MAX,
)
from memprof.alloc.stats import Stats
from memprof.alloc.va import DEFAULT_PROFILE, AddressProfile, DriverVA
from memprof.base.errors import MemprofError
from memprof.base.units import fmt_bytes

__all__ = ["K_LARGE_BUFFER", "K_MIN_BLOCK_SIZE", "K_MIN_LARGE_ALLOC", "K_ROUND_LARGE",
           "K_SMALL_BUFFER", "K_SMALL_SIZE", "AllocatorOOM", "CachingAllocator",
           "get_allocation_size", "round_size"]


class AllocatorOOM(MemprofError):
    """``torch.OutOfMemoryError``: what torch's message reports, in bytes."""

    exit_code = 1

    def __init__(self, *, requested: int, capacity: int | None, free: int | None,
                 allocated: int, reserved: int, fraction_limit: int | None) -> None:
        cap = "unlimited" if capacity is None else fmt_bytes(capacity)
        msg = (f"CUDA out of memory. Tried to allocate {fmt_bytes(requested)}. GPU has a total "
               f"capacity of {cap} of which "
               f"{'?' if free is None else fmt_bytes(free)} is free. Of the allocated memory "
               f"{fmt_bytes(allocated)} is allocated by PyTorch, and "
               f"{fmt_bytes(reserved - allocated)} is reserved by PyTorch but unallocated.")
        super().__init__(msg, hint="see the allocator's memory_stats()")
        self.requested, self.capacity, self.free = requested, capacity, free
        self.allocated, self.reserved, self.fraction_limit = allocated, reserved, fraction_limit


_BLOCK_IDS = itertools.count(1)


class Block:
    """A piece of a segment (``Block`` in the source)."""

    __slots__ = ("addr", "allocated", "expandable", "gc_base", "id", "mapped", "next", "pool",
                 "prev", "requested", "size", "stream")
    def __init__(self, stream: int, size: int, pool: BlockPool, addr: int) -> None:
        self.id = next(_BLOCK_IDS)
        self.stream, self.size, self.pool, self.addr = stream, size, pool, addr
        self.prev: Block | None = None
        self.next: Block | None = None
        self.allocated = False
        self.requested = 0
        self.gc_base = 0
        self.expandable: ExpandableSegment | None = None
        self.mapped = True

    @property
    def key(self) -> tuple[int, int, int, int]:
        return (self.stream, self.size, self.addr, self.id)

    def is_split(self) -> bool:
        return self.prev is not None or self.next is not None


class BlockPool:
    """Free blocks of one pool (small or large), possibly owned by a private graph pool."""

    __slots__ = ("blocks", "by_id", "gc_calls", "is_small", "owner", "unmappable", "unmapped",
                 "whole")

    def __init__(self, is_small: bool, owner: PrivatePool | None = None) -> None:
        self.blocks: SortedList = SortedList()
        self.unmapped: SortedList = SortedList()
        self.by_id: dict[int, Block] = {}
        # What ``release_blocks`` (empty_cache) can act on, kept as blocks come and go so that it
        # need not walk every cached block: free blocks that are a whole segment, and free
        # expandable blocks holding at least one whole page (the rest it would leave alone).
        # A block's links, address and size do not change while it sits in ``blocks``.
        self.whole: dict[int, Block] = {}
        self.unmappable: dict[int, Block] = {}
        self.is_small = is_small
        self.owner = owner
        self.gc_calls = 0  # get_free_blocks_call_count

    def insert(self, b: Block) -> None:  # insert_into_blocks
        b.gc_base = self.gc_calls
        self.blocks.add(b.key)
        self.by_id[b.id] = b
        seg = b.expandable
        if seg is None:
            if b.prev is None and b.next is None:
                self.whole[b.id] = b
        elif -(-(b.addr - seg.start) // seg.page) < (b.addr + b.size - seg.start) // seg.page:
            self.unmappable[b.id] = b

    def erase(self, b: Block) -> None:
        self.blocks.remove(b.key)
        del self.by_id[b.id]
        self.whole.pop(b.id, None)
        self.unmappable.pop(b.id, None)

    # unmapped blocks are ordered by address (``BlockComparatorAddress``), not by size
    def insert_unmapped(self, b: Block) -> None:
        self.unmapped.add((b.stream, b.addr, b.size, b.id))
        self.by_id[b.id] = b

    def erase_unmapped(self, b: Block) -> None:
        self.unmapped.remove((b.stream, b.addr, b.size, b.id))
        del self.by_id[b.id]


@dataclass
class PrivatePool:
    """A CUDA-graph pool: blocks allocated during capture stay here while its graphs live."""

    pool_id: int
    small: BlockPool
    large: BlockPool
    use_count: int = 1
    cuda_malloc_count: int = 0


class ExpandableSegment:
    """One growable virtual range per (stream, pool): pages of 2 MiB (small) or 20 MiB (large)
    mapped as needed (``ExpandableSegment`` in the source)."""

    def __init__(self, start: int, page: int, max_pages: int) -> None:
        self.start, self.page, self.max_pages = start, page, max_pages
        self.mapped: set[int] = set()

    @property
    def size(self) -> int:
        return self.page * self.max_pages

    def map(self, ptr: int, size: int) -> tuple[int, int]:
        """Map the pages covering ``[ptr, ptr + size)``; returns the mapped (ptr, size)."""
        begin = (ptr - self.start) // self.page
        end = -(-(ptr + size - self.start) // self.page)
        for i in range(begin, end):
            self.mapped.add(i)
        return self.start + begin * self.page, (end - begin) * self.page

    def unmap(self, ptr: int, size: int) -> tuple[int, int]:
        """Unmap the whole pages inside ``[ptr, ptr + size)``; returns the unmapped range."""
        begin = -(-(ptr - self.start) // self.page)
        end = (ptr + size - self.start) // self.page
        if begin >= end:
            return ptr, 0
        for i in range(begin, end):
            self.mapped.discard(i)
        return self.start + begin * self.page, (end - begin) * self.page


def round_size(size: int, conf: AllocatorConfig) -> int:
    """``round_size``: at least 512, then power-of-two divisions or a multiple of 512.

    ``kMinBlockSize * divisions`` is a ``size_t`` product there: for divisions of 2^55 or more
    it wraps (to 0), and every size of that interval is rounded up to the next power of two."""
    if size < K_MIN_BLOCK_SIZE:
        return K_MIN_BLOCK_SIZE
    divisions = conf.divisions(size)
    if divisions > 1 and size > (K_MIN_BLOCK_SIZE * divisions) & SIZE_MAX:
        return roundup_power2_next_division(size, divisions)
    return K_MIN_BLOCK_SIZE * -(-size // K_MIN_BLOCK_SIZE)


def roundup_power2_next_division(size: int, divisions: int) -> int:
    if size & (size - 1) == 0:
        return size
    floor = 1 << (size.bit_length() - 1)
    step = floor >> (divisions.bit_length() - 1)
    if step == 0:
        return floor << 1
    rounded = size & ~(step - 1)
    return size if rounded == size else rounded + step


def get_allocation_size(size: int) -> int:
    """``get_allocation_size``: the segment ``cudaMalloc`` gets for a request of ``size``."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return K_ROUND_LARGE * -(-size // K_ROUND_LARGE)


class CachingAllocator:
    """One device's caching allocator. ``malloc`` returns a handle, ``free`` takes it back."""

    def __init__(self, conf: str = "", total_bytes: int | None = None,
                 address_profile: AddressProfile = DEFAULT_PROFILE) -> None:
        """``conf``: ``PYTORCH_CUDA_ALLOC_CONF``; ``total_bytes``: what ``cudaMalloc`` may
        return in all; ``address_profile``: where the driver places segments
        (``memprof.alloc.va.PROFILES``; only ties between equal-size blocks read it)."""
        self.conf = parse_conf(conf)
        self._plain_rounding = not any(d > 1 for d in self.conf.roundup_power2_divisions)
        self.total_bytes = total_bytes
        self.stats = Stats()
        self.small = BlockPool(True)
        self.large = BlockPool(False)
        self.active: dict[int, Block] = {}
        self.total_allocated_memory = 0  # reserved bytes (cudaMalloc'd or mapped)
        self.allowed_memory_maximum: int | None = None  # set_per_process_memory_fraction
        self._next_addr = 1 << 40
        # where cudaMalloc puts segments (below 1 << 44; expandable segments' reservations grow
        # up from 1 << 40... and never meet them on a real GPU size)
        self._va = DriverVA(profile=address_profile)
        self._next_handle = 0
        self.expandable: dict[tuple[int, bool], ExpandableSegment] = {}
        self.private: dict[int, PrivatePool] = {}
        self.freeable: list[PrivatePool] = []
        self.capturing: PrivatePool | None = None
        self.capture_stream: int | None = None

    # --- public API ----------------------------------------------------------------------------
    def set_memory_fraction(self, fraction: float) -> None:
        """``torch.cuda.set_per_process_memory_fraction``: needs ``total_bytes``."""
        if self.total_bytes is None or not 0.0 <= fraction <= 1.0:
            raise ValueError("set_memory_fraction needs total_bytes and a fraction in [0, 1]")
        self.allowed_memory_maximum = int(fraction * self.total_bytes)

    def malloc(self, nbytes: int, stream: int = 0) -> int:
        """Allocate ``nbytes`` on ``stream``; returns a handle for ``free``."""
        if nbytes < 0:
            raise ValueError("negative size")
        block = self._malloc(nbytes, stream)
        self._next_handle += 1
        self.active[self._next_handle] = block
        return self._next_handle

    def free(self, handle: int) -> None:
        block = self.active.pop(handle)
        self._free(block)

    def empty_cache(self) -> None:
        """``torch.cuda.empty_cache`` → ``release_cached_blocks``."""
        self._release_cached_blocks()

    def memory_stats(self) -> dict[str, int]:
        return self.stats.as_dict(self.conf.max_split_size)

    def reset_peak_stats(self) -> None:
        self.stats.reset_peak()

    def begin_capture(self, pool_id: int, stream: int = 0) -> None:
        """Start a CUDA-graph capture on ``stream`` into private pool ``pool_id`` (a pool id
        used before is shared, as ``torch.cuda.graph(pool=...)`` shares it)."""
        pool = self.private.get(pool_id)
        if pool is None:
            pool = PrivatePool(pool_id, BlockPool(True), BlockPool(False))
            pool.small.owner = pool
            pool.large.owner = pool
            self.private[pool_id] = pool
        else:
            pool.use_count += 1
        self.capturing, self.capture_stream = pool, stream

    def end_capture(self) -> None:
        self.capturing, self.capture_stream = None, None

    def release_pool(self, pool_id: int) -> None:
        """The graphs using ``pool_id`` are gone: its memory is freed at the next empty_cache."""
        pool = self.private[pool_id]
        pool.use_count -= 1
        if pool.use_count == 0:
            self.freeable.append(pool)

    def snapshot(self) -> list[dict[str, object]]:
        """Segments with their blocks, shaped like ``torch.cuda.memory_snapshot()``."""
        seen: set[int] = set()
        out: list[dict[str, object]] = []
        for b in self._all_blocks():
            head = b
            while head.prev is not None:
                head = head.prev
            if head.id in seen:
                continue
            seen.add(head.id)
            blocks: list[dict[str, object]] = []
            cur: Block | None = head
            total = alloc = active = requested = 0
            while cur is not None:
                state = "active_allocated" if cur.allocated else "inactive"
                if cur.mapped:
                    blocks.append({"size": cur.size, "requested_size": cur.requested,
                                   "address": cur.addr, "state": state})
                    total += cur.size
                    if cur.allocated:
                        alloc += cur.size
                        active += cur.size
                        requested += cur.requested
                cur = cur.next
            out.append({"address": head.addr, "total_size": total, "stream": head.stream,
                        "segment_type": "small" if head.pool.is_small else "large",
                        "segment_pool_id": (0, head.pool.owner.pool_id if head.pool.owner
                                            else 0),
                        "allocated_size": alloc, "active_size": active,
                        "requested_size": requested, "expandable": head.expandable is not None,
                        "blocks": blocks})
        return sorted(out, key=lambda s: int(s["address"]))  # type: ignore[call-overload]

    def largest_free_block(self) -> int:
        sizes = [k[1] for p in self._pools() for k in p.blocks]
        return max(sizes, default=0)

    # --- malloc --------------------------------------------------------------------------------
    def _pools(self) -> list[BlockPool]:
        out = [self.small, self.large]
        for p in self.private.values():
            out += [p.small, p.large]
        return out

    def _all_blocks(self) -> list[Block]:
        blocks = list(self.active.values())
        for p in self._pools():
            blocks += list(p.by_id.values())
        return blocks

    def _get_pool(self, size: int, stream: int) -> BlockPool:
        if self.capturing is not None and stream == self.capture_stream:
            return self.capturing.small if size <= K_SMALL_SIZE else self.capturing.large
        return self.small if size <= K_SMALL_SIZE else self.large

    def _malloc(self, orig: int, stream: int) -> Block:
        if self._plain_rounding:
            size = (K_MIN_BLOCK_SIZE if orig < K_MIN_BLOCK_SIZE
                    else -(-orig // K_MIN_BLOCK_SIZE) * K_MIN_BLOCK_SIZE)
        else:
            size = round_size(orig, self.conf)
        pool = self._get_pool(size, stream)
        alloc_size = get_allocation_size(size)
        block = self._get_free_block(pool, stream, size)
        if block is None:
            if self.allowed_memory_maximum is not None and \
                    self.conf.garbage_collection_threshold > 0.0:
                self._garbage_collect()
            block = self._alloc_block(pool, stream, size, alloc_size, False)
            if block is None and self._release_available_cached_blocks(pool, stream, size):
                block = self._alloc_block(pool, stream, size, alloc_size, False)
            if block is None and self.capturing is None:
                self._release_cached_blocks()
                block = self._alloc_block(pool, stream, size, alloc_size, True)
        if block is None:
            self.stats.counters["num_ooms"] += 1
            free = None if self.total_bytes is None else \
                self.total_bytes - self.total_allocated_memory
            raise AllocatorOOM(requested=size, capacity=self.total_bytes, free=free,
                               allocated=self.stats.current("allocated_bytes"),
                               reserved=self.stats.current("reserved_bytes"),
                               fraction_limit=self.allowed_memory_maximum)
        return self._alloc_found_block(block, size, orig, self._should_split(block, size))

    def _get_free_block(self, pool: BlockPool, stream: int, size: int) -> Block | None:
        if self.allowed_memory_maximum is not None and \
                self.conf.garbage_collection_threshold > 0.0:
            pool.gc_calls += 1
        # lower_bound by iteration, not by position: a SortedList's positional index costs a
        # walk of its index tree per lookup, which grows with the pool
        after = pool.blocks.irange(minimum=(stream, size, -1, -1))
        key = next(after, None)
        if key is None or key[0] != stream:
            return None
        b = pool.by_id[key[3]]
        if b.expandable is not None and self.conf.expandable_segments:
            # best fit counts what an expandable block can grow into (the unmapped space after)
            def grow(x: Block) -> int:
                return x.size + (x.next.size if x.next is not None and not x.next.mapped
                                 else 0)
            for nk in after:
                nb = pool.by_id[nk[3]]
                if b.expandable is None or nk[0] != stream or grow(nb) >= grow(b):
                    break
                b = nb
        mss = self.conf.max_split_size
        if size < mss and b.size >= mss:
            return None  # no oversize block for a small request
        if size >= mss and b.size >= size + self.conf.max_non_split_rounding_size:
            return None  # no much larger oversize block for a large request
        pool.erase(b)
        return b

    def _alloc_block(self, pool: BlockPool, stream: int, size: int, alloc_size: int,
                     is_retry: bool) -> Block | None:
        if is_retry:
            self.stats.counters["num_alloc_retries"] += 1
        limit = self.allowed_memory_maximum
        if limit is not None and self.total_allocated_memory + alloc_size > limit:
            return None
        if self.conf.expandable_segments and pool.owner is None:
            return self._try_allocate_expandable_block(pool, stream, size)
        if self.total_bytes is not None and \
                self.total_allocated_memory + alloc_size > self.total_bytes:
            return None  # cudaMalloc fails
        addr = self._device_malloc(alloc_size)
        if addr is None:
            return None  # cudaMalloc fails: no address space for it
        self.total_allocated_memory += alloc_size
        if pool.owner is not None:
            pool.owner.cuda_malloc_count += 1
        b = Block(stream, alloc_size, pool, addr)
        self.stats.add("segment", pool.is_small, 1)
        self.stats.add("reserved_bytes", pool.is_small, alloc_size)
        self.stats.counters["num_device_alloc"] += 1
        if alloc_size >= self.conf.max_split_size:
            self.stats.oversize("segments", 1)
        return b

    def _should_split(self, block: Block, size: int) -> bool:
        remaining = block.size - size
        if block.pool.is_small or self.conf.expandable_segments:
            return remaining >= K_MIN_BLOCK_SIZE
        return size < self.conf.max_split_size and remaining > K_SMALL_SIZE

    def _alloc_found_block(self, block: Block, size: int, orig: int, split: bool) -> Block:
        pool, small = block.pool, block.pool.is_small
        already_split = block.is_split()
        if split:
            remaining = block
            block = Block(remaining.stream, size, pool, remaining.addr)
            block.expandable = remaining.expandable
            block.prev = remaining.prev
            if block.prev is not None:
                block.prev.next = block
            block.next = remaining
            remaining.prev = block
            remaining.addr += size
            remaining.size -= size
            pool.insert(remaining)
            if already_split and block.expandable is None:
                self.stats.add("inactive_split_bytes", small, -block.size)
            elif block.expandable is None:
                self.stats.add("inactive_split_bytes", small, remaining.size)
                self.stats.add("inactive_split", small, 1)
        elif already_split and block.expandable is None:
            self.stats.add("inactive_split_bytes", small, -block.size)
            self.stats.add("inactive_split", small, -1)
        block.allocated = True
        block.requested = orig
        self.stats.on_alloc(small, block.size, orig)
        if block.size >= self.conf.max_split_size:
            self.stats.oversize("allocations", 1)
        return block

    # --- free ----------------------------------------------------------------------------------
    def _free(self, block: Block) -> None:
        block.allocated = False
        self.stats.on_free(block.pool.is_small, block.size, block.requested)
        if block.size >= self.conf.max_split_size:
            self.stats.oversize("allocations", -1)
        self._free_block(block)

    def _free_block(self, block: Block) -> None:
        size0 = block.size
        pool = block.pool
        n_blocks = n_bytes = 0
        for cand in (block.prev, block.next):
            subsumed = self._try_merge(block, cand, pool)
            if subsumed:
                n_blocks -= 1
                n_bytes -= subsumed
        pool.insert(block)
        if block.is_split():
            n_blocks += 1
            n_bytes += block.size
        small = pool.is_small
        if block.expandable is None and n_blocks:
            self.stats.add("inactive_split", small, n_blocks)
        if block.expandable is None and n_bytes:
            self.stats.add("inactive_split_bytes", small, n_bytes)
        del size0  # active / active_bytes went down in on_free

    def _try_merge(self, dst: Block, src: Block | None, pool: BlockPool) -> int:
        if src is None or src.allocated or dst.mapped != src.mapped:
            return 0
        if dst.prev is src:
            dst.addr = src.addr
            dst.prev = src.prev
            if dst.prev is not None:
                dst.prev.next = dst
        else:
            dst.next = src.next
            if dst.next is not None:
                dst.next.prev = dst
        if src.mapped:
            pool.erase(src)
        else:
            pool.erase_unmapped(src)
        dst.size += src.size
        return src.size

    # --- releasing cached memory ---------------------------------------------------------------
    def _device_malloc(self, size: int) -> int | None:
        """``cudaMalloc``'s address (``memprof.alloc.va``: the driver's placement as measured),
        or None where the modelled address space (16 TiB below the arena) has no room: that
        cudaMalloc fails, as it would on any GPU for such a size."""
        try:
            return self._va.malloc(size)
        except MemoryError:
            return None

    def _device_free(self, addr: int, size: int) -> None:
        """``cudaFree``: the segment's address space goes back to the driver."""
        del size
        self._va.free(addr)

    def _release_block(self, b: Block) -> None:
        self._device_free(b.addr, b.size)
        self.total_allocated_memory -= b.size
        if b.pool.owner is not None:
            b.pool.owner.cuda_malloc_count -= 1
        self.stats.add("segment", b.pool.is_small, -1)
        self.stats.add("reserved_bytes", b.pool.is_small, -b.size)
        self.stats.counters["num_device_free"] += 1
        if b.size >= self.conf.max_split_size:
            self.stats.oversize("segments", -1)
        b.pool.erase(b)

    def _release_blocks(self, pool: BlockPool) -> None:
        """``release_blocks``: every free whole segment is freed, every free expandable block
        unmaps its whole pages; in the pool's order (``BlockComparatorSize``), as torch walks
        it. Only those blocks are visited (``BlockPool.whole`` / ``unmappable``): the others
        torch's walk passes over unchanged, so an ``empty_cache`` costs what it releases."""
        to_unmap = sorted(pool.unmappable.values(), key=lambda b: b.key)
        for b in sorted(pool.whole.values(), key=lambda b: b.key):
            self._release_block(b)
        for b in to_unmap:
            self._unmap_block(b)

    def _release_cached_blocks(self) -> None:
        self._release_blocks(self.large)
        self._release_blocks(self.small)
        for pp in list(self.freeable):
            self._release_blocks(pp.small)
            self._release_blocks(pp.large)
            if pp.cuda_malloc_count == 0:
                self.freeable.remove(pp)
                del self.private[pp.pool_id]

    def _release_available_cached_blocks(self, pool: BlockPool, stream: int, size: int) -> bool:
        mss = self.conf.max_split_size
        if mss >= (1 << 63):
            return False
        key_size = max(size, mss)
        i = pool.blocks.bisect_left((stream, key_size, -1, -1))
        if i == len(pool.blocks) or pool.blocks[i][0] != stream or \
                pool.by_id[pool.blocks[i][3]].expandable is not None:
            if i == 0:
                return False
            released = 0
            i -= 1  # the largest block of the stream
            while released < key_size:
                key = pool.blocks[i]
                b = pool.by_id[key[3]]
                if b.size < mss or b.stream != stream:
                    break
                first = i == 0
                if b.expandable is None:
                    released += b.size
                    self._release_block(b)
                if first:
                    break
                i -= 1
            return released >= key_size
        self._release_block(pool.by_id[pool.blocks[i][3]])
        return True

    def _garbage_collect(self) -> None:
        assert self.allowed_memory_maximum is not None
        threshold = int(self.conf.garbage_collection_threshold * self.allowed_memory_maximum)
        if self.total_allocated_memory <= threshold:
            return
        target = self.total_allocated_memory - threshold
        pool = self.large

        def age(b: Block) -> int:
            return pool.gc_calls - b.gc_base

        free = [pool.by_id[k[3]] for k in pool.blocks]
        free = [b for b in free if not b.is_split()]
        total_age = sum(age(b) for b in free)
        count = len(free)
        if count == 0:
            return
        reclaimed, freed = 0, True
        while reclaimed < target and freed and count > 0:
            threshold_age = total_age / count
            freed = False
            for key in list(pool.blocks):
                b = pool.by_id.get(key[3])
                if b is None or b.is_split() or b.expandable is not None:
                    continue
                if age(b) >= threshold_age:
                    freed = True
                    reclaimed += b.size
                    total_age -= age(b)
                    count -= 1
                    self._release_block(b)

    # --- expandable segments -------------------------------------------------------------------
    def _try_allocate_expandable_block(self, pool: BlockPool, stream: int,
                                       size: int) -> Block | None:
        cand = self._find_expandable_block(pool, stream, size)
        room, b = 0, cand  # type: int, Block | None
        while b is not None and not b.allocated and room < size:
            room, b = room + b.size, b.next
        if room < size:
            return None  # larger than the segment can grow (the device's memory): OOM
        if not cand.mapped and not self._map_block(cand, min(cand.size, size)):
            return None
        while cand.size < size:
            nxt = cand.next
            assert nxt is not None and not nxt.allocated  # the room was counted above
            if not self._map_block(nxt, min(size - cand.size, nxt.size)):
                return None
            cand = nxt
        pool.erase(cand)
        return cand

    def _find_expandable_block(self, pool: BlockPool, stream: int, size: int) -> Block:
        def allocatable(b: Block | None) -> bool:
            return b is not None and not b.allocated

        def room(b: Block | None) -> bool:
            total = 0
            while total < size and allocatable(b):
                assert b is not None
                total += b.size
                b = b.next
            return total >= size

        i = pool.unmapped.bisect_left((stream, 0, -1, -1))
        while i < len(pool.unmapped) and pool.unmapped[i][0] == stream:
            c = pool.by_id[pool.unmapped[i][3]]
            if allocatable(c.prev):
                assert c.prev is not None
                c = c.prev
            if room(c):
                return c
            i += 1
        page = K_SMALL_BUFFER if pool.is_small else K_LARGE_BUFFER
        cap = self.total_bytes if self.total_bytes is not None else 1 << 44
        pages = max(1, (cap * 9 // 8) // page)
        seg = ExpandableSegment(self._next_addr, page, pages)
        granule = self._va.profile.granule  # cudaMalloc's granularity
        self._next_addr += -(-seg.size // granule) * granule
        c = Block(stream, seg.size, pool, seg.start)
        c.mapped = False
        c.expandable = seg
        pool.insert_unmapped(c)
        return c

    def _map_block(self, b: Block, size: int) -> bool:
        seg = b.expandable
        assert seg is not None and not b.mapped
        ptr, mapped = seg.map(b.addr, size)
        limit = self.total_bytes
        if limit is not None and self.total_allocated_memory + mapped > limit:
            seg.unmap(ptr, mapped)
            return False
        pool = b.pool
        pool.erase_unmapped(b)
        b.mapped = True
        if mapped < b.size:
            rest = Block(b.stream, b.size - mapped, pool, b.addr + mapped)
            rest.mapped = False
            rest.expandable = seg
            rest.prev, rest.next = b, b.next
            if b.next is not None:
                b.next.prev = rest
            b.next = rest
            pool.insert_unmapped(rest)
            b.size = mapped
        self._try_merge(b, b.prev, pool)
        self._try_merge(b, b.next, pool)
        pool.insert(b)
        self.total_allocated_memory += mapped
        self.stats.add("reserved_bytes", pool.is_small, mapped)
        self.stats.counters["num_device_alloc"] += 1
        return True

    def _unmap_block(self, b: Block) -> None:
        seg = b.expandable
        assert seg is not None
        ptr, size = seg.unmap(b.addr, b.size)
        if size == 0:
            return
        pool = b.pool
        pool.erase(b)
        before = ptr - b.addr
        if before > 0:
            bf = Block(b.stream, before, pool, b.addr)
            bf.expandable = seg
            bf.prev, bf.next = b.prev, b
            if b.prev is not None:
                b.prev.next = bf
            b.prev = bf
            pool.insert(bf)
        after = b.size - (before + size)
        if after > 0:
            af = Block(b.stream, after, pool, ptr + size)
            af.expandable = seg
            af.prev, af.next = b, b.next
            if b.next is not None:
                b.next.prev = af
            b.next = af
            pool.insert(af)
        b.addr, b.size, b.mapped = ptr, size, False
        self._try_merge(b, b.prev, pool)
        self._try_merge(b, b.next, pool)
        pool.insert_unmapped(b)
        self.total_allocated_memory -= size
        self.stats.add("reserved_bytes", pool.is_small, -size)
        self.stats.counters["num_device_free"] += 1
