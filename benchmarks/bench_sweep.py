"""Benchmark: the sweep rate, deployments estimated per second in-process (issue 14 asks for
at least 5,000/s), on grids a user writes.

    python benchmarks/bench_sweep.py [--repeat 3]

Each grid runs in a fresh ``Evaluator``, and no two grids share a model, so nothing computed
for one grid serves another (the evaluator owns the sweep's caches; the estimator keeps only a
few bounded caches keyed by values: a PP stage's layer kinds, a rank's weights in order, its
model-load replay, the settings an engine has no flag for, ``memprof.core``); the first
pass of each grid is the figure reported (a user runs a sweep once), the best of --repeat
passes is printed beside it. Before the grids, one point of another model is estimated so
that the modules an estimate imports on first use are loaded (their time is the cold start's,
``bench_estimate.py``; ``--no-warmup`` counts it in the first grid). Rates are per second of
wall time and, in brackets, per CPU second of this process. A shared machine's speed drifts
(one tree measured 3,427-5,290/s over 10 processes run one after another on the development
machine):
``--processes N`` runs the whole benchmark in N fresh processes, one after another, and prints
the min / median / max of the first-pass rates.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from memprof.batch.sweep import Evaluator, parse_axis, points, sweep
from memprof.core.deployment import Deployment

GRIDS = [
    ("qwen3-32b", "H200", ["tp=1,2,4,8", "max_model_len=8K,16K,32K", "max_num_seqs=64,256",
                           "kv_cache_dtype=auto,fp8", "gpu_memory_utilization=0.85,0.9,0.95"]),
    ("llama-3.1-8b", "H100", ["tp=1,2", "pp=1,2", "max_model_len=4K,16K,64K,128K",
                              "max_num_seqs=32,128,512", "kv_cache_dtype=auto,fp8",
                              "gpu_memory_utilization=0.8,0.85,0.9,0.95"]),
    ("deepseek-r1", "H200", ["tp=8", "dp=1,2", "max_model_len=8K,32K,128K",
                             "max_num_seqs=128,512,1024", "kv_cache_dtype=auto,fp8",
                             "gpu_memory_utilization=0.9,0.95"]),
]


# A larger grid of one model, where each layout's shared work (weights, model-load replay,
# budget terms) is spread over more points: reported on its own line, not in "all grids".
LARGE = ("llama-3.1-70b", "H100", ["tp=1,2,4,8", "pp=1,2",
                                   "max_model_len=4K,8K,16K,32K,64K,128K",
                                   "max_num_seqs=16,32,64,128,256,512", "kv_cache_dtype=auto,fp8",
                                   "gpu_memory_utilization=0.8,0.85,0.9,0.95"])


def rate(model: str, gpu: str, sets: list[str]) -> tuple[int, float, float]:
    """(points, per wall second, per CPU second) of one sweep in a fresh evaluator."""
    axes = [parse_axis(s) for s in sets]
    t0, c0 = time.perf_counter(), time.process_time()
    rows = sweep(model, Deployment(), gpu, None, axes, evaluator=Evaluator())
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return len(rows), len(rows) / wall, len(rows) / max(cpu, 1e-9)


def one_process(repeat: int, warmup: bool, quiet: bool = False) -> tuple[float, float]:
    """Every grid in this process; (all grids' first-pass rate, the large grid's)."""
    if warmup:
        sweep("qwen3-0.6b", Deployment(), "H100-80GB", None, [parse_axis("tp=1")],
              evaluator=Evaluator())
    total_n, total_t, total_c = 0, 0.0, 0.0
    for model, gpu, sets in GRIDS:
        runs = [rate(model, gpu, sets) for _ in range(repeat)]
        n, first, first_cpu = runs[0]
        best = max(r for _, r, _c in runs)
        total_n += n
        total_t += n / first
        total_c += n / first_cpu
        if not quiet:
            print(f"{model} on {gpu}, {n} deployments ({' '.join('--set ' + s for s in sets)}):")
            print(f"  first pass {first:,.0f} deployments/s ({first_cpu:,.0f} per CPU second), "
                  f"best of {repeat} {best:,.0f}/s")
    if not quiet:
        print(f"all grids: {total_n} deployments, {total_n / total_t:,.0f} deployments/s "
              f"({total_n / total_c:,.0f} per CPU second; first passes)")
    model, gpu, sets = LARGE
    n, first, first_cpu = rate(model, gpu, sets)
    if not quiet:
        print(f"large grid: {model} on {gpu}, {n} deployments "
              f"({' '.join('--set ' + s for s in sets)}): first pass {first:,.0f} deployments/s "
              f"({first_cpu:,.0f} per CPU second)")
    return total_n / total_t, first


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-warmup", action="store_true",
                    help="count the first estimate's module imports in the first grid")
    ap.add_argument("--processes", type=int, default=0,
                    help="run the benchmark in N fresh processes one after the other and print "
                    "the min / median / max of each rate (a shared machine's speed varies)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        small, large = one_process(1, not args.no_warmup, quiet=True)
        print(json.dumps({"small": small, "large": large}))
        return
    if not args.processes:
        one_process(args.repeat, not args.no_warmup)
        return
    cmd = [sys.executable, __file__, "--child"] + (["--no-warmup"] if args.no_warmup else [])
    results = [json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                         text=True).stdout) for _ in range(args.processes)]
    for key, what in (("small", f"all grids ({sum(len(points_of(g)) for g in GRIDS)} "
                                "deployments, 3 models)"),
                      ("large", f"large grid ({len(points_of(LARGE))} deployments)")):
        rates = sorted(r[key] for r in results)
        print(f"{what}, first pass, {args.processes} processes: min {rates[0]:,.0f} / median "
              f"{statistics.median(rates):,.0f} / max {rates[-1]:,.0f} deployments/s")


def points_of(grid: tuple[str, str, list[str]]) -> list[dict[str, object]]:
    return list(points([parse_axis(s) for s in grid[2]]))


if __name__ == "__main__":
    main()
