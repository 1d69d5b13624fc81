"""The torchrun goldens of ``reports/gpu/ranks/`` (every rank of a TP deployment traced on
4× H100 and, ``*-2x-h100.json``, on 2× H100; one gathered JSON per run) against today's
estimate, rank by rank: the issue's acceptance (issue 25). Weights, KV cache and scratch equal
the estimate to the byte; non-torch memory per rank within 5% and the CUDA-graph pool within 10%.

The estimate is recomputed from each run's flags (``runs.json``) plus
``--disable-custom-all-reduce`` (the trace's replica captures NCCL all-reduces: it has no custom
all-reduce kernel), so a change to the estimator's rows is judged against the same measurements.
The KV cache is sized by the budget the estimate gave when the run was made; it is checked
against that figure (the golden's ``estimated_bytes``): rules that moved the budget since (the
stream pool counted once, 73,400,320 B) move today's figure by exactly their bytes."""

from __future__ import annotations

import contextlib
import io
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from memprof.cli import run as cli
from memprof.core.terms.load_rounding import NAME as LOAD_ROUNDING

HERE = Path(__file__).resolve().parents[1] / "reports" / "gpu" / "ranks"
RUNS: dict[str, Any] = json.loads((HERE / "runs.json").read_text())["runs"]
BYTE_EXACT = ("weights", "scratch")


def _golden(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((HERE / name).read_text())
    return doc


@cache
def _estimate(name: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cli(["estimate", *RUNS[name]["args"], "--disable-custom-all-reduce",
                    "-f", "json"]) == 0
    doc: dict[str, Any] = json.loads(out.getvalue())
    return doc


def _est_rank(name: str, rank: int) -> dict[str, Any]:
    return next(r for r in _estimate(name)["ranks"] if rank in r["ranks"])


def _phase(r: dict[str, Any], phase: str) -> dict[str, Any]:
    return next(p for p in r["phases"] if p["name"] == phase)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_rank_is_traced_with_its_own_index(name: str) -> None:
    g = _golden(name)
    n = RUNS[name]["nproc"]
    assert g["schema_version"] == 2 and g["world_size"] == n
    assert [r["rank"] for r in g["ranks"]] == list(range(n))
    assert [r["tp_rank"] for r in g["ranks"]] == list(range(n))
    assert all(r["device_name"].startswith("NVIDIA H100") for r in g["ranks"])


@pytest.mark.parametrize("name", sorted(RUNS))
def test_weights_and_scratch_equal_the_estimate_kv_its_budget_to_the_byte(name: str) -> None:
    """Each tensor group (the allocator's load rounding is no tensor: left out), the KV cache
    and every scratch buffer, per rank."""
    for r in _golden(name)["ranks"]:
        est: dict[str, int] = {}
        for c in _est_rank(name, r["rank"])["components"]:
            if c["category"] in BYTE_EXACT and c["name"] != LOAD_ROUNDING:
                est[c["name"]] = est.get(c["name"], 0) + c["bytes"]
        traced = {c["name"]: c["traced_bytes"] for c in r["components"]
                  if c["category"] in BYTE_EXACT and c["name"] != LOAD_ROUNDING}
        assert traced == est, (name, r["rank"])
        kv = [c for c in r["components"] if c["category"] == "kv_cache"]
        assert kv and all(c["traced_bytes"] == c["estimated_bytes"] for c in kv), name


# Issue 25's acceptance. The two gaps the 4x H100 runs showed are closed by measured rules:
# the profile run adds the cuBLAS step alone on a rank whose NCCL warm-up ran the first fill
# kernel (``non_torch.CUBLAS_AFTER_FIRST_KERNEL_BYTES``), and each NCCL node in a graph pays NCCL's
# graph mixing support (``cudagraph.GRAPH_DRIVER_NCCL_MIXING``; reports/gpu/nccl/README.md,
# "What the TP graph pool's gap is"). The DeepSeek shape's pool stays outside 10% (strict): its
# replica launches no kernel for the fp8 linears, MLA and fused MoE (modelled by their output
# allocations) where the graph model counts vLLM's kernels, and its pool tensors differ with its
# activation model; its NCCL nodes cost what the dense models' do
# (graph-mixing-2x-h100.json, the deepseek-r1 pair).
GRAPH_GAP = pytest.mark.xfail(strict=True, reason="issue 25: the DeepSeek shape's traced graph "
                              "pool is outside 10% of the estimate (replica kernels and pool "
                              "tensors, not the NCCL nodes)")
GRAPH_CASES = [pytest.param(n, marks=GRAPH_GAP) if n.startswith("deepseek") else n
               for n in sorted(RUNS)]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_non_torch_per_rank_within_5_percent(name: str) -> None:
    """Traced: the device's non-torch memory (used − reserved) after the profile run, which
    holds the CUDA context, the TP communicator after its first all_reduce and what the profile
    run added. Estimated: every non-torch row of the rank."""
    for r in _golden(name)["ranks"]:
        traced = _phase(r, "profile_run")["non_torch_bytes"]
        est = sum(c["bytes"] for c in _est_rank(name, r["rank"])["components"]
                  if c["category"] == "non_torch")
        assert abs(traced - est) <= 0.05 * est, (name, r["rank"], traced, est)


@pytest.mark.parametrize("name", GRAPH_CASES)
def test_cudagraph_pool_per_rank_within_10_percent(name: str) -> None:
    """Traced: vLLM's measure of the capture (mem_get_info delta) of every capture size.
    Estimated: the rank's CUDA-graph rows."""
    for r in _golden(name)["ranks"]:
        traced = next(c["traced_bytes"] for c in r["components"]
                      if c["name"] == "CUDA-graph pool (memprof's prediction)")
        est = sum(c["bytes"] for c in _est_rank(name, r["rank"])["components"]
                  if c["category"] == "cudagraph")
        assert abs(traced - est) <= 0.10 * est, (name, r["rank"], traced, est)
