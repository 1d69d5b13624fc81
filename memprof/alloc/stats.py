"""The allocator's statistics, under the names ``torch.cuda.memory_stats()`` uses.

PyTorch v2.11.0 ``c10/core/CachingDeviceAllocator.h`` (``Stat``: current, peak, allocated,
freed; ``DeviceStats``) and ``torch/cuda/memory.py`` ``memory_stats`` (flattened as
``{stat}.{all|small_pool|large_pool}.{current|peak|allocated|freed}``).
"""

from __future__ import annotations

STATS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes",
         "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes")
POOLS = ("all", "small_pool", "large_pool")
COUNTERS = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
            "num_device_free")


class Stats:
    """Every statistic as ``[current, peak, allocated, freed]`` per pool type."""

    __slots__ = ("_hot", "counters", "over_alloc", "over_seg", "rows", "table")

    def __init__(self) -> None:
        self.table: dict[str, list[list[int]]] = {
            s: [[0, 0, 0, 0] for _ in POOLS] for s in STATS}
        # (stat, small) -> the two rows an event updates: "all" and its pool's
        self.rows: dict[tuple[str, bool], tuple[list[int], list[int]]] = {
            (s, small): (rows[0], rows[1] if small else rows[2])
            for s, rows in self.table.items() for small in (True, False)}
        self._hot = {small: (*self.rows[("allocation", small)],
                             *self.rows[("allocated_bytes", small)],
                             *self.rows[("requested_bytes", small)]) for small in (True, False)}
        self.over_alloc = [0, 0, 0, 0]  # oversize_allocations
        self.over_seg = [0, 0, 0, 0]  # oversize_segments
        self.counters = dict.fromkeys(COUNTERS, 0)

    def add(self, stat: str, small: bool, amount: int) -> None:
        """``Stat::increase`` (amount > 0) or ``Stat::decrease`` (amount < 0) on "all" and the
        pool's own type."""
        a, p = self.rows[(stat, small)]
        if amount > 0:
            a[0] += amount
            a[2] += amount
            if a[0] > a[1]:
                a[1] = a[0]
            p[0] += amount
            p[2] += amount
            if p[0] > p[1]:
                p[1] = p[0]
        elif amount < 0:
            a[0] += amount
            a[3] -= amount
            p[0] += amount
            p[3] -= amount

    def on_alloc(self, small: bool, size: int, requested: int) -> None:
        """A block handed out: allocation, allocated_bytes, active, active_bytes, requested."""
        # active / active_bytes equal allocation / allocated_bytes here (no stream events leave
        # a freed block awaiting its free), so as_dict mirrors them
        a1, a2, b1, b2, r1, r2 = self._hot[small]
        a1[0] += 1
        a1[2] += 1
        if a1[0] > a1[1]:
            a1[1] = a1[0]
        a2[0] += 1
        a2[2] += 1
        if a2[0] > a2[1]:
            a2[1] = a2[0]
        b1[0] += size
        b1[2] += size
        if b1[0] > b1[1]:
            b1[1] = b1[0]
        b2[0] += size
        b2[2] += size
        if b2[0] > b2[1]:
            b2[1] = b2[0]
        r1[0] += requested
        r1[2] += requested
        if r1[0] > r1[1]:
            r1[1] = r1[0]
        r2[0] += requested
        r2[2] += requested
        if r2[0] > r2[1]:
            r2[1] = r2[0]

    def on_free(self, small: bool, size: int, requested: int) -> None:
        """A block given back: allocation, allocated_bytes, requested, active, active_bytes."""
        for row, amount in zip(self._hot[small], (1, 1, size, size, requested, requested),
                               strict=True):
            row[0] -= amount
            row[3] += amount

    def oversize(self, which: str, amount: int) -> None:
        _apply(self.over_alloc if which == "allocations" else self.over_seg, amount)

    def reset_peak(self) -> None:
        for rows in self.table.values():
            for row in rows:
                row[1] = row[0]
        self.over_alloc[1] = self.over_alloc[0]
        self.over_seg[1] = self.over_seg[0]

    def current(self, stat: str) -> int:
        return self.table[stat][0][0]

    def as_dict(self, max_split_size: int) -> dict[str, int]:
        out: dict[str, int] = {}
        self.table["active"] = [list(r) for r in self.table["allocation"]]
        self.table["active_bytes"] = [list(r) for r in self.table["allocated_bytes"]]
        for stat in STATS:
            for pool, row in zip(POOLS, self.table[stat], strict=True):
                for metric, v in zip(("current", "peak", "allocated", "freed"), row,
                                     strict=True):
                    out[f"{stat}.{pool}.{metric}"] = v
        for name, row in (("oversize_allocations", self.over_alloc),
                          ("oversize_segments", self.over_seg)):
            for metric, v in zip(("current", "peak", "allocated", "freed"), row, strict=True):
                out[f"{name}.{metric}"] = v
        out.update(self.counters)
        out["max_split_size"] = -1 if max_split_size >= (1 << 63) else max_split_size
        return out


def _apply(row: list[int], amount: int) -> None:
    if amount > 0:
        row[0] += amount
        row[2] += amount
        if row[0] > row[1]:
            row[1] = row[0]
    else:
        row[0] += amount
        row[3] -= amount
