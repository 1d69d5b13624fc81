"""The H100 golden of vLLM's profile window around a cold and a warm compile of Qwen3 shapes
(reports/gpu/cold-compile-window/, recorders/gpu_compile_peak.py ``--set c``), compiled with
``torch.compile`` (Inductor's compile-time autotuning off): a cold compile adds the
benchmarker's L2-sized flush buffer to the torch peak and nothing the non-torch or free-memory
terms see; nothing of the embedding table's size, which vLLM's ``standalone_compile`` path
copies for its compile-time autotuning (memprof/core/terms/cold_compile.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

GOLDEN = (Path(__file__).resolve().parents[1] / "reports" / "gpu" / "cold-compile-window"
          / "compile-peak-c-h100.json")
DOC: dict[str, Any] = json.loads(GOLDEN.read_text())
CASES: dict[str, dict[str, Any]] = DOC["cases"]
MIB = 1 << 20
GIB = 1 << 30
# vocabulary x hidden x 2 B: the bf16 embedding table of each shape
TABLE = {"qwen3-8b": 151936 * 4096 * 2, "qwen3-1.7b": 151936 * 2048 * 2}
PAIRS = ("qwen3-8b-L2-aot", "qwen3-1.7b-L2-aot", "qwen3-8b-L36-pieces")


def test_the_golden_records_its_card_and_versions() -> None:
    assert DOC["gpu"].startswith("NVIDIA H100") and DOC["torch"].startswith("2.11")
    assert DOC["l2_bytes"] == 50 * MIB
    assert sorted(CASES) == sorted(f"{p}-{s}" for p in PAIRS for s in ("cold", "warm"))
    assert all("error" not in c for c in CASES.values())


@pytest.mark.parametrize("pair", PAIRS)
def test_the_cold_extra_is_the_l2_flush_buffer_not_the_table(pair: str) -> None:
    cold, warm = CASES[f"{pair}-cold"], CASES[f"{pair}-warm"]
    shape = cold["spec"]["shape"]
    extra = (cold["first_call_window"]["torch_peak_increase_gib"]
             - cold["second_call_window"]["torch_peak_increase_gib"]) * GIB
    assert extra == DOC["l2_bytes"]
    over_warm = (cold["first_call_window"]["torch_peak_increase_gib"]
                 - warm["first_call_window"]["torch_peak_increase_gib"]) * GIB
    assert 0 < over_warm <= DOC["l2_bytes"] < TABLE[shape] / 10
    # the warm process compiles nothing: its forward's peak is the cold process's forward's
    assert (warm["second_call_window"]["torch_peak_increase_gib"]
            == cold["second_call_window"]["torch_peak_increase_gib"])


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_window_keeps_non_torch_or_free_memory(case: str) -> None:
    for call in ("first_call_window", "second_call_window"):
        w = CASES[case][call]
        assert w["non_torch_increase_gib"] == 0.0, (call, w)
        assert w["total_consumed_gib"] == 0.0 and w["reserved_increase_gib"] == 0.0, (call, w)
        assert w["transient_peak_headroom_gib"] == w["torch_peak_increase_gib"]
