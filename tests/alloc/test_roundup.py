"""``roundup_power2_divisions`` as PyTorch parses and applies it (``memprof.alloc.config``).

Three kinds of evidence: (1) the two cases a review measured on an H100 (torch 2.11), (2) a table
of sizes rounded by hand from torch's code (``c10/core/AllocatorConfig.cpp``
``parseRoundUpPower2Divisions`` / ``roundup_power2_divisions(size)`` and
``c10/cuda/CUDACachingAllocator.cpp`` ``round_size`` / ``roundup_power2_next_division``), and
(3) the divisions torch's own parser kept for each conf of ``ROUNDUP_TABLE_CONFS``, recorded from
the ``libc10.so`` of torch 2.11.0+cu130 (on the GPU machine) and 2.13.0+cpu (here) by
``recorders/alloc_groundtruth.py --roundup-table``. The GPU goldens of the list form replay in
``tests/alloc/test_alloc_golden.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.alloc import CachingAllocator, parse_conf
from memprof.alloc.allocator import round_size
from memprof.base.errors import BadInput

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
GOLDEN = Path(__file__).resolve().parents[1] / "data" / "alloc_golden"
TABLES = sorted(GOLDEN.glob("roundup-table-torch*.json"))
RP = "roundup_power2_divisions:"


def test_the_two_reported_cases() -> None:
    # measured: torch 2.11 on an H100 rounds these to 352 and 320 MiB
    assert round_size(int(343.7 * MiB), parse_conf(RP + "[256:8,>:2]")) == 352 * MiB
    assert round_size(int(275.1 * MiB), parse_conf(RP + "[64:8,256:4,>:1]")) == 320 * MiB
    a = CachingAllocator(RP + "[256:8,>:2]")
    a.malloc(int(343.7 * MiB))
    assert a.memory_stats()["allocated_bytes.all.current"] == 352 * MiB


# (conf, request, rounded), each worked out from torch's code: interval i = [2^(20+i), 2^(21+i));
# a list key K names interval log2(K); the first key fills below it; '>' fills above the last
# key; other intervals keep 0; rounding applies when divisions > 1 and size > 512 * divisions
HAND = [
    ("4", MiB + 1, MiB + MiB // 4),  # floor 1 MiB, step 256 KiB
    ("4", 256 * MiB, 256 * MiB),  # a power of two is kept
    ("[256:8,>:2]", 200 * MiB, 208 * MiB),  # interval 7 (first key fills below): 8, step 16
    ("[256:8,>:2]", 600 * MiB, 768 * MiB),  # interval 9 ('>' from 9): 2, step 256 MiB
    ("[64:8,256:4,>:1]", 100 * MiB + 1, 104 * MiB),  # interval 6: 8, step 8 MiB
    ("[64:8,256:4,>:1]", 150 * MiB + 1, 150 * MiB + 512),  # interval 7 between keys: 0
    ("[64:8,256:4,>:1]", 2 * GiB + 1, 2 * GiB + 512),  # '>': 1 = no rounding
    ("[>:2]", MiB + MiB // 2 + 1, MiB + MiB // 2 + 512),  # '>' first fills from interval 1
    ("[>:2]", 3 * MiB + 1, 4 * MiB),  # interval 1: 2, step 1 MiB
    ("[64:8]", 4097, 4608),  # below 1 MiB: interval 0 (8), 4097 > 4096, step 512
    ("[64:8]", 3000, 3072),  # 3000 <= 512 * 8: a multiple of 512
    ("[1:16]", 6000, 6144),  # 6000 <= 512 * 16
    ("[1024:4]", 3 * GiB // 2 + 1, 7 * GiB // 4),  # key 1024 names 1-2 GiB: step 256 MiB
    ("[1024:4]", 3 * GiB + 1, 3 * GiB + 512),  # interval 11 is above the only key: 0
    ("[1024:4,32768:2]", 100 * GiB, 128 * GiB),  # above 64 GiB: the last interval (2)
    ("[65536:2]", 40 * GiB + 1, 48 * GiB),  # key 65536 clamped to interval 15: step 16 GiB
    ("[2:4,32:2,1024:8,4096:2]", 40 * MiB + 1, 48 * MiB),  # interval 5: 2, step 16 MiB
    ("[2:4,32:2,1024:8,4096:2]", 80 * MiB + 1, 80 * MiB + 512),  # interval 6: 0
    # 512 * 2^55 wraps to 0 in size_t: any size of interval 0 goes to the next power of two
    ("[1:36028797018963968]", MiB + 1, 2 * MiB),
]


@pytest.mark.parametrize(("conf", "request_bytes", "rounded"), HAND)
def test_rounding_by_hand(conf: str, request_bytes: int, rounded: int) -> None:
    assert round_size(request_bytes, parse_conf(RP + conf)) == rounded


def test_torch_parser_tables_are_present() -> None:
    assert [t.name for t in TABLES] == ["roundup-table-torch2.11.0.json",
                                        "roundup-table-torch2.13.0.json"]


@pytest.mark.parametrize("table", TABLES, ids=[t.stem for t in TABLES])
def test_parse_matches_torch(table: Path) -> None:
    rows = json.loads(table.read_text())["divisions"]
    assert len(rows) >= 30
    for conf, want in rows.items():
        if want == "error":
            with pytest.raises(BadInput):
                parse_conf(conf)
        else:
            assert list(parse_conf(conf).roundup_power2_divisions) == want, conf


@pytest.mark.parametrize(("conf", "needle"), [
    ("0", "powers of two"), ("3", "powers of two"), ("[4:3]", "powers of two"),
    ("[100:4]", "intervals have to be powers of two"), ("[0:2]", "intervals"),
    ("8x", "not a whole number"), ("[4:0x8]", "not a whole number"), ("[1:2", "ends before"),
    ("[256:8>:2]", "not a whole number"), ("[18446744073709551616:2]", "64 bits"),
    ("[256:8:4]", "expected ','"), ("[:2]", "expected ':'")])
def test_refused(conf: str, needle: str) -> None:
    with pytest.raises(BadInput, match=needle) as info:
        parse_conf(RP + conf)
    assert info.value.hint


def test_repeated_key_and_mixes() -> None:
    # parseArgs resets the divisions once; a second entry writes over the first one's intervals
    c = parse_conf(RP + "2," + RP + "[4:4]")
    assert c.roundup_power2_divisions == (4, 4, 4) + (2,) * 13
    c = parse_conf(" max_split_size_mb : 128 , " + RP + "[ 256 : 8 , > : 2 , ] ")
    assert c.max_split_size == 128 * MiB and c.divisions(343 * MiB) == 8
    assert parse_conf("max_split_size_mb:20").max_split_size == 20 * MiB  # torch: >= 20
    with pytest.raises(BadInput, match="too small"):
        parse_conf("max_non_split_rounding_mb:19")
