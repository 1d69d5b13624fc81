"""Model Runner V2's capture after the KV allocation, read against its capture while profiling
(vLLM 0.29.0+; docs/model-runner-v2.md, "The capture after the KV allocation, below the
estimate"). Rows 1601 (0.29.0) and 2455 (0.31.0) of tests/data/published.json print the three
graph figures of such a start:

- P, the capture while profiling: "Graph capturing finished … took X GiB" before "Available KV
  cache memory" (every PIECEWISE size and the two largest FULL sizes,
  v1/worker/gpu/cudagraph_utils.py ``profile_cudagraph_memory``);
- E, vLLM's estimate from it, ``P − s₁ − s₂ + s₁ + (n_FULL − 1) × max(s₂, 1 MiB)``
  (``_extrapolate_full_graph_memory``), printed in the pool line and, as E / total to four
  decimals, in the "equivalent to --gpu-memory-utilization" line (v1/worker/gpu_worker.py);
- R, the capture after the KV allocation: the pool line's "(actual)", and the figure the
  distribution test compares memprof's graph figure with.

What these tests pin, from the logs' own figures and memprof's parts: R is below P although it
captures n_FULL − 2 FULL graphs more (so part of what the profiling capture took is not taken
again); the second FULL sample is neither 0 nor 2 MiB (not on the driver's 2 MiB granule); and R
lies between memprof's capture as the process's first (W) and what is left where the driver
reuses every byte of the destroyed profiling graphs' memory (W less the executables of the
profiling capture's graphs): memprof's graph figure for these rows, as measured on an H100
(reports/gpu/graph-reuse; ``memprof.core.terms.runner_v2_capture``). Both logs keep more than
that (their stacks, an A100 and an RTX 5060 Ti under WSL2, were not measured).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

from memprof.base.units import GiB, MiB
from memprof.core.estimate import rank_context
from memprof.core.graph_log import logged_graph
from memprof.core.terms.cudagraph import cudagraph_model, graph_driver_bytes
from memprof.core.terms.graph_window import logged_graph_of_context
from tests.test_published_distribution import ROWS as PUBLISHED
from tests.test_published_distribution import row_estimate

ROWS = {r["id"]: r for r in PUBLISHED}
# the largest FULL sizes V2 captures while profiling (cudagraph_utils.py
# _FULL_GRAPH_PROFILING_SAMPLES, 0.29.0 - 0.33.0)
SAMPLES = 2
TOOK = re.compile(r"Graph capturing finished in \d+ secs, took ([\d.]+) GiB")
POOL = re.compile(r"CUDA graph pool memory: ([\d.]+) GiB \(actual\), ([\d.]+) GiB \(estimated\), "
                  r"difference: [\d.]+ GiB \(([\d.]+)%\)")
EQUIV = re.compile(r"--gpu-memory-utilization=([\d.]+) is equivalent to "
                   r"--gpu-memory-utilization=([\d.]+) without")


@dataclass(frozen=True)
class Figures:
    """The three figures of one log, each as (low, high) in GiB from its printed rounding."""

    p: tuple[float, float]
    e: tuple[float, float]
    r: tuple[float, float]


def _figures(row: dict[str, Any], total_gib: float) -> Figures:
    quote = row["quote"]
    budget = quote.index("Available KV cache memory")
    took = [(m.start(), float(m.group(1))) for m in TOOK.finditer(quote)]
    p = next(v for at, v in took if at < budget)
    pool, equivalent = POOL.search(quote), EQUIV.search(quote)
    assert pool is not None and equivalent is not None
    actual, estimated, pct = (float(x) for x in pool.groups())
    util, equiv = (float(x) for x in equivalent.groups())
    delta = util - equiv  # E / total, each utilisation rounded to four decimals
    e = (max(estimated - 0.005, (delta - 0.00005) * total_gib),
         min(estimated + 0.005, (delta + 0.00005) * total_gib))
    r = (max(actual - 0.005, e[0] / (1 + (pct + 0.05) / 100)),
         min(actual + 0.005, e[1] / (1 + (pct - 0.05) / 100)))
    return Figures(p=(p - 0.005, p + 0.005), e=e, r=r)


def _row(rid: int) -> tuple[Figures, float, float, int]:
    """The log's figures, memprof's capture as the process's first (W) and with the profiling
    capture's executables taken off (every byte reused), in GiB, and the FULL sizes; the latter
    is memprof's graph figure for the row."""
    e, _in_use = row_estimate(ROWS[rid])
    rank = e.ranks[0]
    ctx = rank_context(e, rank)
    w = logged_graph_of_context(ctx)
    logged = logged_graph(e, rank)
    assert w is not None and logged is not None
    modes = cudagraph_model(ctx).modes
    n_full = len(modes["FULL"])
    profiled = (graph_driver_bytes(ctx, "PIECEWISE", len(modes["PIECEWISE"]))
                + graph_driver_bytes(ctx, "FULL", SAMPLES))
    assert logged.total == w.total - profiled  # memprof's figure: every byte reused
    return (_figures(ROWS[rid], e.gpu.total_bytes / GiB), w.total / GiB,
            (w.total - profiled) / GiB, n_full)


@pytest.mark.parametrize("rid", [1601, 2455])
def test_capture_after_the_kv_allocation_is_below_the_profiling_one(rid: int) -> None:
    f, _w, _reused, n_full = _row(rid)
    assert n_full == 35  # both logs: 51 PIECEWISE and 35 FULL sizes at max_num_seqs 256
    assert f.r[1] < f.p[0]  # 33 FULL graphs more, and still below


@pytest.mark.parametrize("rid, low_mib, high_mib", [(1601, 1.34, 1.71), (2455, 1.50, 1.86)])
def test_second_full_sample_is_off_the_2_mib_granule(rid: int, low_mib: float,
                                                     high_mib: float) -> None:
    f, _w, _reused, n_full = _row(rid)
    # E − P = (n_FULL − 2) × s₂ where s₂ >= 1 MiB; s₂ = 0 would give (n_FULL − 1) MiB
    s2 = ((f.e[0] - f.p[1]) * GiB / (n_full - 2), (f.e[1] - f.p[0]) * GiB / (n_full - 2))
    assert MiB < s2[0] and s2[1] < 2 * MiB
    assert s2[0] / MiB == pytest.approx(low_mib, abs=0.01)
    assert s2[1] / MiB == pytest.approx(high_mib, abs=0.01)


@pytest.mark.parametrize("rid", [1601, 2455])
def test_logged_capture_lies_between_no_reuse_and_full_reuse(rid: int) -> None:
    f, w, reused, _n = _row(rid)
    assert reused < f.r[0] and f.r[1] < w
