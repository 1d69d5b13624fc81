"""``memprof validate`` part 2 on an H200 (reports/gpu/validate-part2, made by
``PYTHONPATH=. python recorders/gpu_validate_dsv4.py --out $OUT``; commands, exit codes and
versions in validate-part2-runs.json): the DeepSeek-V4 sparse decode grid, the graph-clean check
on a real CUDA graph, and the scratch each policy held against the estimate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

GOLD = Path(__file__).resolve().parents[2] / "reports" / "gpu" / "validate-part2"


def load(name: str) -> dict[str, Any]:
    return json.loads((GOLD / name).read_text())  # type: ignore[no-any-return]


def test_every_cli_run_exited_zero_on_the_gpu() -> None:
    runs = load("validate-part2-runs.json")
    assert runs["device"].startswith("NVIDIA")
    assert {n: r["exit_code"] for n, r in runs["runs"].items()} == {
        "dsv4-flash": 0, "dsv4-pro": 0, "dp-gather": 0, "all": 0}


def test_sparse_decode_grid_passed_for_flash_and_pro() -> None:
    rows = load("dsv4-grid.json")["rows"]
    assert all(r["passed"] for r in rows)
    assert {r["model"] for r in rows} == {"deepseek-v4-flash", "deepseek-v4-pro"}
    assert {r["B"] for r in rows} == {1, 32, 128}
    assert {r["layout"] for r in rows} == {"fp8_ds_mla", "bf16"}
    assert max(r["rel"] for r in rows) < 1e-2


@pytest.mark.parametrize("name", ["validate-dsv4-flash.json", "validate-dsv4-pro.json"])
def test_graph_clean_shared_and_not_per_step(name: str) -> None:
    doc = load(name)
    (k,) = [k for k in doc["kernels"] if k["kernel"] == "dsv4"]
    assert k["device"] == "cuda" and k["triton"] and k["passed"]
    runs = {r["policy"]: r for r in k["runs"]}
    shared, per_step = runs["shared"]["graph"], runs["per-step"]["graph"]
    assert shared["mode"] == "cuda graph" and shared["steps"] >= 100
    assert shared["clean"] and shared["outputs_equal"] and shared["replay_allocations"] == 0
    assert shared["num_pointers_changed"] == 0
    assert not per_step["clean"] and per_step["num_pointers_changed"] > 0
    for r in runs.values():  # scratch measured = the estimate's AITER DSv4 components
        assert r["measured_bytes"] == r["estimate_bytes"] and r["estimate_match"]
    # and today's estimate of the same deployment still gives those bytes and that pool
    from memprof.core.deployment import Deployment
    from memprof.kernels.dsv4_decode import CATALOG_POLICY
    from memprof.validation.dsv4 import CATALOG_KEYS, KV_BYTES, VALIDATION, _estimates

    dep = Deployment(tp=VALIDATION.tp, max_num_seqs=k["batch"],
                     max_model_len=k["context_len"], kv_cache_dtype="fp8",
                     kv_cache_memory_bytes=KV_BYTES["cuda"])
    blocks, est = _estimates(k["model"], dep, VALIDATION.gpu, [])
    assert blocks == k["num_blocks"]
    for pol, r in runs.items():
        cat = est[CATALOG_POLICY[pol]]
        assert sum(cat[key] for key in CATALOG_KEYS) == r["measured_bytes"], pol


def test_dp_gather_bytes_equal_the_estimate() -> None:
    doc = load("validate-dp-gather.json")
    (k,) = doc["kernels"]
    assert k["passed"] and all(r["estimate_match"] for r in k["runs"])
