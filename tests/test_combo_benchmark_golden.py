"""The H100 golden of a cold Inductor compile of vLLM 0.27.1's first graph piece
(reports/gpu/combo-benchmark/, recorders/gpu_combo_benchmark.py): no allocation of an embedding
table's size, cold or warm, in any case; the cold compile's extra over the warm start is the
benchmarker's L2-sized flush buffer and activation-sized benchmark arguments, under the table
(the copy vLLM makes is compile-time autotuning's, under standalone_compile:
memprof/core/terms/cold_compile.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

GOLDEN = (Path(__file__).resolve().parents[1] / "reports" / "gpu" / "combo-benchmark"
          / "combo-benchmark.json")
DOC: dict[str, Any] = json.loads(GOLDEN.read_text())
MIB = 1 << 20


def test_the_golden_records_its_command_and_versions() -> None:
    assert DOC["command"].startswith("PYTHONPATH=. python recorders/gpu_combo_benchmark.py")
    assert DOC["gpu"].startswith("NVIDIA H100") and DOC["torch"].startswith("2.11")
    assert len(DOC["cases"]) == 9


@pytest.mark.parametrize("case", DOC["cases"], ids=lambda c: c["case"])
def test_no_table_sized_allocation_cold_or_warm(case: dict[str, Any]) -> None:
    for state in ("cold", "warm"):
        run = case[state]
        assert "error" not in run
        largest = max((a["size"] for a in run["allocs_32mib_plus"]), default=0)
        assert largest < run["embed_bytes"] / 2, (state, largest)


@pytest.mark.parametrize("case", DOC["cases"], ids=lambda c: c["case"])
def test_the_cold_extra_is_far_below_the_table(case: dict[str, Any]) -> None:
    cold, warm = case["cold"], case["warm"]
    extra = cold["first_call_peak"] - warm["first_call_peak"]
    assert 0 < extra <= 100 * MIB < cold["embed_bytes"] / 4
    # a warm start benchmarks nothing
    assert warm["combo_groups"] == [] and cold["second_call_peak"] == warm["second_call_peak"]
