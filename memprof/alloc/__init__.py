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
"""

from memprof.alloc.allocator import AllocatorOOM, CachingAllocator
from memprof.alloc.config import AllocatorConfig, parse_conf

__all__ = ["AllocatorConfig", "AllocatorOOM", "CachingAllocator", "parse_conf"]
