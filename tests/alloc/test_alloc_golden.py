"""The simulator against PyTorch's real allocator: every GPU ground-truth sequence of
tests/data/alloc_golden/ (each file names the GPU, torch, CUDA and driver it was recorded on and the
exact ``recorders/alloc_groundtruth.py`` command) replayed op by op;
allocated, reserved, inactive_split and the segment count must be identical after every op."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memprof.alloc import AllocatorOOM, CachingAllocator
from memprof.alloc.replay import ops_from_json

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "alloc_golden"
FILES = sorted(GOLDEN.glob("alloc-golden-*.json"))
# Every sequence on every config, identical after every op. Ties between equal-size free blocks
# are broken by address, so this holds only with the driver's segment placement modelled
# (memprof.alloc.va); with a bump allocator of addresses the mss128 random mix parted at op 904.


def cases() -> list[Any]:
    out = []
    for f in FILES:
        doc = json.loads(f.read_text())
        for name in doc["sequences"]:
            out.append(pytest.param(f, name, id=f"{f.stem}-{name}"))
    return out


def test_ground_truth_files_are_present() -> None:
    assert {f.name for f in FILES} == {
        "alloc-golden-default.json", "alloc-golden-expandable.json",
        "alloc-golden-mss128-rp4.json",
        # recorded on an H100 (torch 2.11.0+cu130, CUDA 13.0, driver 580.159.04): the list
        # form of roundup_power2_divisions, alone and mixed with max_split_size_mb
        "alloc-golden-rp-256x8-gt2.json", "alloc-golden-rp-64x8-256x4-gt1.json",
        "alloc-golden-rp-gaps-1024.json", "alloc-golden-mss128-rp-256x8-gt2.json",
        "alloc-golden-mss512-nsr64-rp-64x8-256x4-gt1.json"}


@pytest.mark.parametrize(("path", "name"), cases())
def test_identical_after_every_op(path: Path, name: str) -> None:
    doc = json.loads(path.read_text())
    seq = doc["sequences"][name]
    a = CachingAllocator(doc["conf"], seq["total_bytes"])
    if seq["fraction"] is not None:
        a.set_memory_fraction(seq["fraction"])
    ops = ops_from_json({"ops": [op for op in seq["ops"]]}, path)
    handles: dict[int, int] = {}
    ooms = []
    for n, (kind, ident, nbytes, stream) in enumerate(ops):
        try:
            if kind == "a":
                handles[ident] = a.malloc(nbytes, stream)
            elif kind == "f":
                if ident in handles:  # an alloc that ran out of memory has nothing to free
                    a.free(handles.pop(ident))
            else:
                a.empty_cache()
        except AllocatorOOM:
            ooms.append(n)
        s = a.memory_stats()
        got = [s["allocated_bytes.all.current"], s["reserved_bytes.all.current"],
               s["inactive_split_bytes.all.current"], s["segment.all.current"]]
        assert got == seq["states"][n], f"op {n} {ops[n]}: {got} != GPU {seq['states'][n]}"
    assert ooms == seq["ooms"]
    s = a.memory_stats()
    assert s["num_alloc_retries"] == seq["num_alloc_retries"]
    assert s["num_ooms"] == seq["num_ooms"]
