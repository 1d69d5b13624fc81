"""The world-8 runs of ``recorders/gpu_world8.sh`` (issue 27) beside today's estimate, rank by
rank: the runs' flags (``reports/cpu/world8-rehearsal/runs.json``), each run's estimate, and the
per-rank readings the rehearsal and the GPU goldens are checked with (as
``tests/test_ranks_goldens.py`` reads the 2- and 4-GPU goldens)."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from memprof.cli import run as cli
from memprof.core.deployment import Deployment
from memprof.core.terms.load_rounding import NAME as LOAD_ROUNDING
from memprof.core.terms.nccl import TORCH_STREAM_POOL_BYTES
from memprof.core.terms.pynccl_pool import comm_makes_stream_pool
from memprof.trace.run import COMMS_NOTE

ROOT = Path(__file__).resolve().parents[1]
REHEARSAL = ROOT / "reports" / "cpu" / "world8-rehearsal"
RUNS: dict[str, Any] = json.loads((REHEARSAL / "runs.json").read_text())["runs"]
BYTE_EXACT = ("weights", "scratch")


def added(gpu: str, device: str = "cuda") -> list[str]:
    """The flags recorders/gpu_world8.sh adds to every run's (the replica captures NCCL
    all-reduces: it has no custom all-reduce kernel)."""
    return ["--gpu", gpu, "--disable-custom-all-reduce", "--device", device, "-f", "json"]


def read(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


@cache
def estimate(stem: str, gpu: str) -> dict[str, Any]:
    """Today's estimate of run ``stem`` on ``gpu`` (the flags the script traced with)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cli(["estimate", *RUNS[stem]["args"], *added(gpu)[:3], "-f", "json"]) == 0
    doc: dict[str, Any] = json.loads(out.getvalue())
    return doc


def est_rank(stem: str, gpu: str, rank: int) -> dict[str, Any]:
    return next(r for r in estimate(stem, gpu)["ranks"] if rank in r["ranks"])


def coordinates(stem: str, rank: int) -> tuple[int, int, int]:
    """(tp_rank, pp_stage, dp_rank) of a global rank in vLLM's order: TP fastest, then PP, DP
    outermost."""
    lay = RUNS[stem]["layout"]
    return rank % lay["tp"], rank // lay["tp"] % lay["pp"], rank // (lay["tp"] * lay["pp"])


def byte_exact(stem: str, gpu: str, r: dict[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    """(estimated, traced) bytes of each weight group and scratch buffer of traced rank ``r``
    (the allocator's load rounding is no tensor: left out, as in the 4-GPU goldens' test)."""
    est: dict[str, int] = {}
    for c in est_rank(stem, gpu, r["rank"])["components"]:
        if c["category"] in BYTE_EXACT and c["name"] != LOAD_ROUNDING:
            est[c["name"]] = est.get(c["name"], 0) + c["bytes"]
    traced = {RENAMED.get(c["name"], c["name"]): c["traced_bytes"] for c in r["components"]
              if c["category"] in BYTE_EXACT and c["name"] != LOAD_ROUNDING}
    return est, traced


# components the estimate has renamed since a golden was recorded: the traced bytes are the same
# buffer under the label it had then (DeepSeek-V4's topk_indices_buffer became the indexer's,
# keyed by ``index_topk``, when DeepSeek-V3.2's joined it: memprof/core/terms/init_buffers.py)
RENAMED = {"DeepSeek-V4 topk_indices_buffer": "indexer topk_indices_buffer"}


def kv_as_budgeted(r: dict[str, Any]) -> bool:
    """The KV cache traced equals the budget the estimate gave when the run was made."""
    kv = [c for c in r["components"] if c["category"] == "kv_cache"]
    return bool(kv) and all(c["traced_bytes"] == c["estimated_bytes"] > 0 for c in kv)


def pool_outside(stem: str, gpu: str, rank: int, notes: Sequence[str] = ()) -> int:
    """torch's stream pool, which the tracer's GPU-bound init_process_group made, where the
    estimate has no non-torch row of it (see tests/test_ranks_goldens.py ``_pool_outside``);
    0 for a trace whose ``notes`` say its communicators were made as vLLM makes them
    (``memprof.trace.run.COMMS_NOTE``: no communicator makes the pool there)."""
    if COMMS_NOTE in notes:
        return 0
    doc = estimate(stem, gpu)
    comps = est_rank(stem, gpu, rank)["components"]
    return 0 if pool_held(doc["deployment"], comps) else TORCH_STREAM_POOL_BYTES


def pool_held(deployment: dict[str, Any], comps: Sequence[dict[str, Any]]) -> bool:
    """Whether an estimate's rank holds torch's stream pool in a non-torch row: a stream's own
    row (``memprof.core.terms.stream_pool``), or its NCCL communicator's where the release's
    PyNccl warm-up makes the pool (``memprof.core.terms.pynccl_pool``: vLLM from 0.14.0 on
    CUDA), as the tracer's GPU-bound init did."""
    if any(c["name"].startswith("torch stream pool") for c in comps):
        return True
    dep = Deployment(engine=deployment["engine"], engine_version=deployment["engine_version"])
    return comm_makes_stream_pool(dep, rocm=False) and any(
        c["category"] == "non_torch" and c["name"].startswith("NCCL ") for c in comps)


# estimate rows of what vLLM builds and the tracer's replica does not: the TP group's
# symmetric-memory all-reduce buffer (memprof.core.terms.symm_mem; the tracer makes PyNccl-shaped
# communicators only, and vLLM makes the buffer whatever --disable-custom-all-reduce says)
NOT_REPLICATED = ("symmetric-memory all-reduce buffer",)


def non_torch(stem: str, gpu: str, r: dict[str, Any]) -> tuple[int, int]:
    """(estimated, traced) non-torch memory after the profile run of traced rank ``r``."""
    traced = next(p for p in r["phases"] if p["name"] == "profile_run")["non_torch_bytes"]
    est = sum(c["bytes"] for c in est_rank(stem, gpu, r["rank"])["components"]
              if c["category"] == "non_torch" and not c["name"].startswith(NOT_REPLICATED)
              ) + pool_outside(stem, gpu, r["rank"], r["notes"])
    return est, traced


def graph_pool(stem: str, gpu: str, r: dict[str, Any]) -> tuple[int, int]:
    """(estimated, traced) CUDA-graph pool of traced rank ``r``: vLLM's measure of the capture
    against the rank's graph rows less the stream pool the tracer's init made."""
    traced = next(c["traced_bytes"] for c in r["components"]
                  if c["name"] == "CUDA-graph pool (memprof's prediction)")
    est = sum(c["bytes"] for c in est_rank(stem, gpu, r["rank"])["components"]
              if c["category"] == "cudagraph") - pool_outside(stem, gpu, r["rank"], r["notes"])
    return est, traced
