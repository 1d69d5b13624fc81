"""PyTorch's CUDA caching-allocator constants, in one place: every other module imports them
from here (the replica ``memprof.alloc.allocator``, its fast path ``memprof.alloc.monotone``,
``PYTORCH_CUDA_ALLOC_CONF`` parsing in ``memprof.alloc.config``, and the estimator's allocator
terms).

Source: PyTorch v2.11.0 ``c10/cuda/CUDACachingAllocator.h`` / ``CUDACachingAllocator.cpp``
(``kMinBlockSize`` … ``kRoundLarge``, used by ``round_size``, ``get_allocation_size`` and
``should_split``) and ``c10/cuda/CUDAAllocatorConfig.h`` (``kRoundUpPowerOfTwoIntervals``,
``kRoundUpPowerOfTwoStart``). Unchanged from torch 2.4 to 2.11.
"""

from __future__ import annotations

K_MIN_BLOCK_SIZE = 512  # kMinBlockSize: all sizes are rounded to at least 512 bytes
K_SMALL_SIZE = 1 << 20  # kSmallSize: largest "small" allocation is 1 MiB
K_SMALL_BUFFER = 2 << 20  # kSmallBuffer: "small" allocations are packed in 2 MiB segments
K_LARGE_BUFFER = 20 << 20  # kLargeBuffer: allocations between 1 and 10 MiB use 20 MiB segments
K_MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc: larger allocations are rounded up to 2 MiB
K_ROUND_LARGE = 2 << 20  # kRoundLarge: the rounding of allocations of kMinLargeAlloc and more
ROUNDUP_INTERVALS = 16  # kRoundUpPowerOfTwoIntervals: 1 MiB (2^20) … 64 GiB
ROUNDUP_START_LOG2 = 20  # kRoundUpPowerOfTwoStart = 1 MiB
SIZE_MAX = (1 << 64) - 1  # size_t: what sizes wrap at and max_split_size is clamped to
