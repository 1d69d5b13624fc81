"""A replica of PyTorch's CUDA caching allocator (pure Python, no torch import).

- ``constants``: PyTorch's allocator constants (``kMinBlockSize`` … ``kRoundLarge``), the one
  place they are written;
- ``config``: ``PYTORCH_CUDA_ALLOC_CONF`` parsed as PyTorch parses it;
- ``allocator``: ``CachingAllocator`` (malloc/free/empty_cache, pools, splitting, OOM path,
  expandable segments, CUDA-graph private pools);
- ``stats``: ``memory_stats()`` under torch's key names;
- ``va``: where the driver places segments, one measured ``AddressProfile`` per GPU/driver;
- ``monotone``: the totals of a replay that frees nothing, from free-block sizes alone;
- ``replay``: op files and ``_dump_snapshot`` pickles replayed through it.

Below the estimator (``memprof.core`` calls it for the allocator term); imports only
``memprof.base``.

The package itself imports only ``memprof.base.lazy``: the names below load their module on
first use, so that ``memprof.alloc.constants`` (all an estimate needs) does not pull in the
simulator and ``sortedcontainers`` on a cold start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memprof.base.lazy import attribute

if TYPE_CHECKING:
    from memprof.alloc.allocator import AllocatorOOM, CachingAllocator
    from memprof.alloc.config import AllocatorConfig, parse_conf

__all__ = ["AllocatorConfig", "AllocatorOOM", "CachingAllocator", "parse_conf"]

_HOME = {
    "AllocatorOOM": "memprof.alloc.allocator",
    "CachingAllocator": "memprof.alloc.allocator",
    "AllocatorConfig": "memprof.alloc.config",
    "parse_conf": "memprof.alloc.config",
}


def __getattr__(name: str) -> Any:
    """The public names, each imported from its module on first use (PEP 562)."""
    return attribute(__name__, _HOME, globals(), name)
