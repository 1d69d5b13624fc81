"""The DP-attention gather (seed 002) over real NCCL, dp = 2 and 4 on 4× H100
(``reports/gpu/ranks/dp-gather-dp*.json``, ``recorders/gpu_dp_gather_ranks.py`` under torchrun):
on every rank the gathered buffer's bytes equal today's estimate of the "SGLang DP-attention
gathered buffer" component, per forward and persistent; the persistent buffer is graph-clean
and the per-forward one is not (issue 25 item 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate

HERE = Path(__file__).resolve().parents[1] / "reports" / "gpu" / "ranks"
COMPONENT = "SGLang DP-attention gathered buffer"


def _golden(dp: int) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((HERE / f"dp-gather-dp{dp}.json").read_text())
    return doc


@pytest.mark.parametrize("dp", [2, 4])
def test_every_rank_gathered_over_nccl(dp: int) -> None:
    g = _golden(dp)
    assert g["world_size"] == dp and g["device_name"].startswith("NVIDIA H100")
    assert [r["rank"] for r in g["ranks"]] == list(range(dp))
    for r in g["ranks"]:
        assert r["backend"] == "nccl" and r["world_size"] == dp and r["dp"] == dp
        assert r["parity_passed"] is True


@pytest.mark.parametrize("dp", [2, 4])
def test_buffer_bytes_equal_the_estimate(dp: int) -> None:
    for r in _golden(dp)["ranks"]:
        for run in r["runs"]:
            dep = Deployment(engine="sglang", tp=r["dp"], dp=r["dp"], enable_dp_attention=True,
                             cuda_graph_max_bs=r["max_bs"], scratch=run["catalog_policy"])
            e = estimate(r["model"], dep, gpu_name="H100")
            est = sum(c.bytes for c in e.ranks[0].components if c.name.startswith(COMPONENT))
            assert est > 0 and run["buffer_bytes"] == est, (dp, r["rank"], run["policy"])


@pytest.mark.parametrize("dp", [2, 4])
def test_persistent_is_graph_clean_and_per_forward_is_not(dp: int) -> None:
    for r in _golden(dp)["ranks"]:
        runs = {x["policy"]: x for x in r["runs"]}
        per, keep = runs["per-forward"], runs["persistent"]
        assert keep["held_bytes"] == keep["buffer_bytes"]
        assert keep["allocated_per_forward_bytes"] == 0
        assert per["held_bytes"] == 0 and per["allocated_per_forward_bytes"] == per["buffer_bytes"]
        assert keep["graph"]["clean"] is True and per["graph"]["clean"] is False
        assert per["graph"]["pool_bytes"] > keep["graph"]["pool_bytes"]
