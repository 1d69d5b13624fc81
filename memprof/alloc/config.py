"""``PYTORCH_CUDA_ALLOC_CONF`` / ``PYTORCH_ALLOC_CONF``, parsed as PyTorch parses it.

PyTorch v2.11.0 ``c10/core/AllocatorConfig.cpp`` (``AcceleratorAllocatorConfig::parseArgs``,
``parseRoundUpPower2Divisions``, ``parseMaxSplitSize``, ``parseMaxNonSplitRoundingSize``,
``parseGarbageCollectionThreshold``, ``parseExpandableSegments``) and
``c10/cuda/CUDAAllocatorConfig.cpp`` for the CUDA-only keys. An unknown key, a malformed value
or a value PyTorch refuses is a ``BadInput`` naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memprof.base.errors import BadInput
from memprof.base.units import MiB

ROUNDUP_INTERVALS = 16  # kRoundUpPowerOfTwoIntervals: 1 MiB (2^20) … 64 GiB
ROUNDUP_START_LOG2 = 20  # kRoundUpPowerOfTwoStart = 1 MiB
LARGE_BUFFER = 20 * MiB  # kLargeBuffer: the default max_non_split_rounding_size
SIZE_MAX = (1 << 64) - 1

# Keys PyTorch accepts and memprof reads; the rest of the CUDA keys are accepted and ignored
# (they do not change what the allocator reserves for these ops).
KNOWN = ("max_split_size_mb", "max_non_split_rounding_mb", "roundup_power2_divisions",
         "expandable_segments", "garbage_collection_threshold")
ACCEPTED_IGNORED = ("backend", "release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
                    "pinned_num_register_threads", "pinned_use_background_threads",
                    "graph_capture_record_stream_reuse", "per_process_memory_fraction",
                    "pinned_reserve_segment_size_mb")


@dataclass(frozen=True, slots=True)
class AllocatorConfig:
    """The settings that change what the caching allocator does (bytes)."""

    max_split_size: int = SIZE_MAX
    max_non_split_rounding_size: int = LARGE_BUFFER
    roundup_power2_divisions: tuple[int, ...] = field(
        default_factory=lambda: (0,) * ROUNDUP_INTERVALS)
    expandable_segments: bool = False
    garbage_collection_threshold: float = 0.0

    def divisions(self, size: int) -> int:
        """``CUDAAllocatorConfig::roundup_power2_divisions(size)``: the divisions of the power-of-
        two interval holding ``size`` (intervals start at 1 MiB; smaller sizes use the first)."""
        index = size.bit_length() - 1 - ROUNDUP_START_LOG2
        return self.roundup_power2_divisions[max(0, min(index, ROUNDUP_INTERVALS - 1))]


def _bad(key: str, value: str, why: str, hint: str) -> BadInput:
    return BadInput(f"allocator config {key}:{value[:40]}: {why}", hint=hint)


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _divisions(value: str) -> tuple[int, ...]:
    """``roundup_power2_divisions``: ``4`` (every interval) or ``[64:8,256:4,>:1]`` (sizes in
    MiB, powers of two; each entry fills the intervals from the previous entry up to its own)."""
    hint = "e.g. roundup_power2_divisions:4 or roundup_power2_divisions:[64:8,256:4,>:1]"
    div = [0] * ROUNDUP_INTERVALS
    if value.startswith("["):
        if not value.endswith("]") or len(value) < 3:
            raise _bad("roundup_power2_divisions", value, "unbalanced brackets", hint)
        last = 0
        for item in value[1:-1].split(","):
            k, sep, v = item.partition(":")
            if not sep or not v.strip().isdigit():
                raise _bad("roundup_power2_divisions", value, f"cannot read {item!r}", hint)
            d = int(v)
            if d not in (0, 1) and not _power_of_two(d):
                raise _bad("roundup_power2_divisions", value,
                           "divisions must be powers of two", hint)
            k = k.strip()
            if k == ">":
                div[last:] = [d] * (ROUNDUP_INTERVALS - last)
                continue
            if not k.isdigit() or not _power_of_two(int(k)):
                raise _bad("roundup_power2_divisions", value,
                           "the intervals have to be powers of two (MiB)", hint)
            index = min(int(k).bit_length() - 1, ROUNDUP_INTERVALS - 1)
            div[last:index] = [d] * (index - last)
            last = index
        return tuple(div)
    if not value.isdigit():
        raise _bad("roundup_power2_divisions", value, "not a number", hint)
    d = int(value)
    if d not in (0, 1) and not _power_of_two(d):
        raise _bad("roundup_power2_divisions", value, "divisions must be powers of two", hint)
    return (d,) * ROUNDUP_INTERVALS


def parse_conf(conf: str) -> AllocatorConfig:
    """Parse ``key:value,key:value`` (commas inside ``[...]`` belong to the value)."""
    if len(conf) > 4096:
        raise BadInput("allocator config is longer than 4096 characters",
                       hint="e.g. expandable_segments:True")
    items = [x for x in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", conf) if x.strip()]
    out: dict[str, object] = {}
    for item in items:
        key, sep, value = item.strip().partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise BadInput(f"allocator config entry {item.strip()[:40]!r} has no value",
                           hint="write key:value, e.g. max_split_size_mb:128")
        if key == "max_split_size_mb":
            if not value.isdigit() or int(value) * MiB <= LARGE_BUFFER:
                raise _bad(key, value, "must be a whole number of MiB above 20",
                           "e.g. max_split_size_mb:128")
            out["max_split_size"] = int(value) * MiB
        elif key == "max_non_split_rounding_mb":
            if not value.isdigit():
                raise _bad(key, value, "must be a whole number of MiB",
                           "e.g. max_non_split_rounding_mb:64")
            out["max_non_split_rounding_size"] = int(value) * MiB
        elif key == "roundup_power2_divisions":
            out["roundup_power2_divisions"] = _divisions(value)
        elif key == "expandable_segments":
            if value not in ("True", "False"):
                raise _bad(key, value, "must be True or False", "e.g. expandable_segments:True")
            out["expandable_segments"] = value == "True"
        elif key == "garbage_collection_threshold":
            try:
                t = float(value)
            except ValueError:
                t = -1.0
            if not 0.0 < t < 1.0:
                raise _bad(key, value, "must be a number in (0, 1)",
                           "e.g. garbage_collection_threshold:0.6")
            out["garbage_collection_threshold"] = t
        elif key in ACCEPTED_IGNORED:
            continue
        else:
            raise BadInput(f"unknown allocator config key {key[:40]!r}",
                           hint="known: " + ", ".join(KNOWN))
    return AllocatorConfig(**out)  # type: ignore[arg-type]
