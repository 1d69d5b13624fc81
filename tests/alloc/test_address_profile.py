"""The driver's segment placement is an explicit profile (``memprof.alloc.va.AddressProfile``)
that callers pass or select, and PyTorch's allocator constants have one home
(``memprof.alloc.constants``) that every other module imports."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from memprof.alloc import CachingAllocator, constants
from memprof.alloc.va import DEFAULT_PROFILE, H200_DRIVER_580, PROFILES, DriverVA

MiB = 1 << 20
ROOT = Path(__file__).resolve().parents[2]


def test_the_default_profile_is_the_measured_h200() -> None:
    assert DEFAULT_PROFILE is H200_DRIVER_580 is PROFILES["h200-driver580"]
    p = DEFAULT_PROFILE
    assert (p.gpu, p.driver, p.cuda, p.torch) == ("NVIDIA H200", "580", "13.0", "2.11.0+cu130")
    assert (p.granule, p.chunk, p.ceiling_below_arena) == (2 * MiB, 32 * MiB, 414 * MiB)
    va = DriverVA()
    assert va.profile is p and va.base == p.base
    # the first segment goes into the arena's free range at its start
    assert va.malloc(1 * MiB) == p.base


def test_another_profile_places_segments_by_its_own_values() -> None:
    """A row with another chunk size puts the first chunk elsewhere: the rules read the
    profile, not module constants."""
    wide = replace(DEFAULT_PROFILE, name="test-64mib-chunks", chunk=64 * MiB)
    a, b = DriverVA(), DriverVA(profile=wide)
    big = 30 * MiB  # more than the arena's free ranges hold: a chunk is taken, top-down
    at_a, at_b = a.malloc(big), b.malloc(big)
    assert a.ceiling == b.ceiling and a.ceiling % (64 * MiB) == 0
    assert a.ceiling - at_a == 32 * MiB  # one 32 MiB chunk under the ceiling
    assert b.ceiling - at_b == 64 * MiB  # one 64 MiB chunk


def test_the_allocator_takes_a_profile() -> None:
    wide = replace(DEFAULT_PROFILE, name="test-64mib-chunks", chunk=64 * MiB)
    plain, other = CachingAllocator(), CachingAllocator(address_profile=wide)
    assert plain._va.profile is DEFAULT_PROFILE and other._va.profile is wide
    # the same requests reserve the same bytes whatever the placement
    for alloc in (plain, other):
        for n in (3 * MiB, 30 * MiB, 100 * MiB):
            alloc.malloc(n)
    assert plain.memory_stats()["reserved_bytes.all.current"] == \
        other.memory_stats()["reserved_bytes.all.current"]


def test_constants_are_pytorchs() -> None:
    c = constants
    got = (c.K_MIN_BLOCK_SIZE, c.K_SMALL_SIZE, c.K_SMALL_BUFFER, c.K_LARGE_BUFFER,
           c.K_MIN_LARGE_ALLOC, c.K_ROUND_LARGE)
    assert got == (512, MiB, 2 * MiB, 20 * MiB, 10 * MiB, 2 * MiB)


K_NAMES = ("kMinBlockSize", "kSmallSize", "kSmallBuffer", "kLargeBuffer", "kMinLargeAlloc",
           "kRoundLarge", "kRoundUpPowerOfTwoIntervals", "kRoundUpPowerOfTwoStart")
# a name bound to a number with one of PyTorch's constant names beside it
DEFINITION = re.compile(r"^\s*\w+\s*(:\s*int\s*)?=\s*[\d(].*#\s*(" + "|".join(K_NAMES) + r")\b")


def test_no_module_but_constants_defines_them() -> None:
    defined = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "memprof").rglob("*.py"))
               for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
               if DEFINITION.match(line)]
    assert defined and all(d.startswith("memprof/alloc/constants.py:") for d in defined), defined


def test_the_users_import_the_same_objects() -> None:
    from memprof.alloc import allocator, config, monotone
    from memprof.core.terms import allocator as term

    for mod in (allocator, monotone, term):
        assert mod.K_MIN_BLOCK_SIZE is constants.K_MIN_BLOCK_SIZE
    assert config.LARGE_BUFFER is constants.K_LARGE_BUFFER
    assert config.SIZE_MAX is constants.SIZE_MAX
