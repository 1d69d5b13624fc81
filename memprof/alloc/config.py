"""``PYTORCH_CUDA_ALLOC_CONF`` / ``PYTORCH_ALLOC_CONF``, parsed as PyTorch parses it.

Source: PyTorch v2.11.0 ``c10/core/AllocatorConfig.h`` (``ConfigTokenizer``) and
``c10/core/AllocatorConfig.cpp`` (``AcceleratorAllocatorConfig::parseArgs``,
``parseRoundUpPower2Divisions``, ``parseMaxSplitSize``, ``parseMaxNonSplitRoundingSize``,
``parseGarbageCollectionThreshold``, ``parseExpandableSegments``,
``roundup_power2_divisions(size)``); ``c10/cuda/CUDAAllocatorConfig.cpp`` accepts the CUDA-only
keys and reads the common ones from there. v2.13.0 parses these keys the same way (its
``libc10.so`` gives the same divisions for every conf of
``tests/data/alloc_golden/roundup-table-*.json``; 2.13's header also has a
``large_segment_size_mb`` key, which memprof refuses as unknown rather than ignore).

The conf is split into tokens at ``, : [ ]`` with every space dropped, as ``ConfigTokenizer``
does. ``roundup_power2_divisions`` keeps one divisions count for each of 16 power-of-two size
intervals, interval ``i`` holding sizes in ``[2^(20+i), 2^(21+i))`` (1 MiB … 32 GiB; smaller sizes
use interval 0, larger ones interval 15), all 0 (no rounding) by default:

- ``roundup_power2_divisions:N`` sets every interval to ``N`` (a power of two; 0 is refused);
- ``[K:N, …, >:N]``: a key ``K`` (MiB, a power of two) names interval ``log2(K)`` (clamped to
  0..15), i.e. the sizes from ``K`` MiB up to ``2K`` MiB: ``[256:8]`` rounds 256-512 MiB in
  eighths. The *first* key also fills every interval below its own; later keys set only their
  own interval, so an interval between two keys keeps 0 (``[64:8,256:4]`` leaves 128-256 MiB
  unrounded). ``>:N`` fills every interval *above* the last key read so far (all but interval 0
  when it comes first). ``N`` may be 0 here (no rounding). A second ``roundup_power2_divisions``
  entry writes over the first one's intervals without resetting them.

Numbers must be plain decimal digits: torch reads them with ``std::stoull``, which would take
``8x`` as 8 and ``0x8`` as 0, so memprof refuses such text with the number to write instead. An
unknown key, a malformed value or a value PyTorch refuses is a ``BadInput`` naming it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from memprof.alloc.constants import (
    K_LARGE_BUFFER,
    ROUNDUP_INTERVALS,
    ROUNDUP_START_LOG2,
    SIZE_MAX,
)
from memprof.base.errors import BadInput
from memprof.base.units import MiB

LARGE_BUFFER = K_LARGE_BUFFER  # the default max_non_split_rounding_size
MIN_SPLIT_MB = LARGE_BUFFER // MiB  # max_split_size_mb / max_non_split_rounding_mb must be >= 20
MAX_SPLIT_MB = SIZE_MAX // MiB  # larger values are clamped to this (parseMaxSplitSize)

# Keys PyTorch accepts and memprof reads; the rest of the CUDA keys are accepted and ignored
# (they do not change what the allocator reserves for these ops).
KNOWN = ("max_split_size_mb", "max_non_split_rounding_mb", "roundup_power2_divisions",
         "expandable_segments", "garbage_collection_threshold")
ACCEPTED_IGNORED = ("backend", "release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
                    "pinned_num_register_threads", "pinned_use_background_threads",
                    "graph_capture_record_stream_reuse", "per_process_memory_fraction",
                    "pinned_reserve_segment_size_mb")
ROUNDUP_HINT = ("e.g. roundup_power2_divisions:4 or roundup_power2_divisions:[64:8,256:4,>:1] "
                "(keys: MiB, powers of two; divisions: powers of two, or 0 in a list)")


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
        """``roundup_power2_divisions(size)``: the divisions of the power-of-two interval holding
        ``size`` (interval ``i`` is ``[2^(20+i), 2^(21+i))``; smaller sizes use the first,
        larger the last)."""
        index = size.bit_length() - 1 - ROUNDUP_START_LOG2
        return self.roundup_power2_divisions[max(0, min(index, ROUNDUP_INTERVALS - 1))]


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def tokenize(conf: str) -> list[str]:
    """``ConfigTokenizer``: ``, : [ ]`` are tokens of their own, spaces are dropped."""
    out: list[str] = []
    buf: list[str] = []
    for ch in conf:
        if ch in ",:[]":
            if buf:
                out.append("".join(buf))
                buf.clear()
            out.append(ch)
        elif not ch.isspace():
            buf.append(ch)
    if buf:
        out.append("".join(buf))
    return out


class _Parser:
    def __init__(self, conf: str) -> None:
        self.conf = conf
        self.tok = tokenize(conf)
        # parseArgs resets these at its start; a repeated key writes over them
        self.divisions = [0] * ROUNDUP_INTERVALS
        self.out: dict[str, object] = {}

    def bad(self, key: str, why: str, hint: str) -> BadInput:
        return BadInput(f"allocator config {key}: {why}", hint=hint)

    def at(self, i: int, key: str, hint: str) -> str:
        if i >= len(self.tok):
            raise self.bad(key, "ends before its value", hint)
        return self.tok[i]

    def expect(self, i: int, token: str, key: str, hint: str) -> None:
        got = self.at(i, key, hint)
        if got != token:
            raise self.bad(key, f"expected {token!r}, found {got[:40]!r}", hint)

    def number(self, i: int, key: str, hint: str) -> int:
        """``ConfigTokenizer::toSizeT`` (``std::stoull``), digits only."""
        text = self.at(i, key, hint)
        if not text.isascii() or not text.isdigit():
            raise self.bad(key, f"{text[:40]!r} is not a whole number", hint)
        if len(text) > 20 or int(text) > SIZE_MAX:
            raise self.bad(key, f"{text[:40]} does not fit in 64 bits (torch: stoull out of "
                           "range)", hint)
        return int(text)

    def parse(self) -> AllocatorConfig:
        tok, i = self.tok, 0
        while i < len(tok):
            key = tok[i]
            if key == ",":  # torch tolerates empty entries (",," or a trailing comma)
                i += 1
                continue
            if key in ":[]":
                raise BadInput(f"allocator config: unexpected {key!r} where a key belongs",
                               hint="write key:value, e.g. max_split_size_mb:128")
            i = self.entry(key, i)
            i += 1
            if i < len(tok):
                self.expect(i, ",", key, "separate entries with commas, e.g. "
                            "max_split_size_mb:128,expandable_segments:True")
                i += 1
        self.out["roundup_power2_divisions"] = tuple(self.divisions)
        return AllocatorConfig(**self.out)  # type: ignore[arg-type]

    def entry(self, key: str, i: int) -> int:
        """Parse ``key:value`` starting at token ``i``; returns the index of its last token."""
        hint = "write key:value, e.g. max_split_size_mb:128"
        if key not in KNOWN and key not in ACCEPTED_IGNORED:
            raise BadInput(f"unknown allocator config key {key[:40]!r}",
                           hint="known: " + ", ".join(KNOWN))
        if i + 1 >= len(self.tok) or self.tok[i + 1] != ":" or i + 2 >= len(self.tok):
            raise BadInput(f"allocator config entry {key[:40]!r} has no value", hint=hint)
        i += 2
        if key in ("max_split_size_mb", "max_non_split_rounding_mb"):
            h = f"e.g. {key}:128 (a whole number of MiB, at least {MIN_SPLIT_MB})"
            mb = self.number(i, key, h)
            if mb < MIN_SPLIT_MB:
                raise self.bad(key, f"{mb} is too small, must be >= {MIN_SPLIT_MB}", h)
            name = "max_split_size" if key == "max_split_size_mb" else \
                "max_non_split_rounding_size"
            self.out[name] = min(mb, MAX_SPLIT_MB) * MiB
        elif key == "roundup_power2_divisions":
            i = self.roundup(i)
        elif key == "expandable_segments":
            value = self.tok[i]
            if value not in ("True", "False"):
                raise self.bad(key, f"{value[:40]!r} must be True or False",
                               "e.g. expandable_segments:True")
            self.out["expandable_segments"] = value == "True"
        elif key == "garbage_collection_threshold":
            value = self.tok[i]
            try:
                t = float(value)
            except ValueError:
                t = math.nan
            if not 0.0 < t < 1.0:
                raise self.bad(key, f"{value[:40]!r} must be a number in (0, 1)",
                               "e.g. garbage_collection_threshold:0.6")
            self.out["garbage_collection_threshold"] = t
        elif self.tok[i] == "[":  # an ignored key with a list value (ConfigTokenizer::skipKey)
            while i < len(self.tok) and self.tok[i] != "]":
                i += 1
            if i == len(self.tok):
                raise self.bad(key, "the '[' is never closed", hint)
        return i

    def roundup(self, i: int) -> int:
        """``parseRoundUpPower2Divisions``; ``i`` is the value's first token."""
        key, hint, div = "roundup_power2_divisions", ROUNDUP_HINT, self.divisions
        if self.tok[i] != "[":  # the plain form: every interval
            d = self.number(i, key, hint)
            if not _power_of_two(d):
                raise self.bad(key, f"{d} divisions: divisions must be powers of two", hint)
            div[:] = [d] * ROUNDUP_INTERVALS
            return i
        first, last_index = True, 0
        i += 1
        while self.at(i, key, "close the list with ']'") != "]":
            boundary = self.tok[i]
            self.expect(i + 1, ":", key, hint)
            d = self.number(i + 2, key, hint)
            if d != 0 and not _power_of_two(d):
                raise self.bad(key, f"{d} divisions: divisions must be powers of two "
                               "(or 0 in a list)", hint)
            i += 2
            if boundary == ">":  # every interval above the last key
                div[last_index + 1:] = [d] * (ROUNDUP_INTERVALS - last_index - 1)
            else:
                mb = self.number(i - 2, key, hint)
                if not _power_of_two(mb):
                    raise self.bad(key, f"interval {mb} MiB: the intervals have to be "
                                   "powers of two (MiB)", hint)
                index = min(mb.bit_length() - 1, ROUNDUP_INTERVALS - 1)
                if first:  # the first key also covers every interval below its own
                    div[:index] = [d] * index
                    first = False
                div[index] = d
                last_index = index
            if self.at(i + 1, key, "close the list with ']'") != "]":
                self.expect(i + 1, ",", key, hint)
                i += 1
            i += 1
        return i


@lru_cache(maxsize=64)
def parse_conf(conf: str) -> AllocatorConfig:
    """Parse ``key:value,key:value`` as torch does (a list value is ``[k:v,...]``). Kept per
    string (the result is immutable): a sweep's terms ask for the same few confs per point."""
    if len(conf) > 4096:
        raise BadInput("allocator config is longer than 4096 characters",
                       hint="e.g. expandable_segments:True")
    return _Parser(conf).parse()
