"""Benchmark: the sweep rate, deployments estimated per second in-process (issue 14 asks for
at least 5,000/s), on grids a user writes.

    python benchmarks/bench_sweep.py [--repeat 3]

Each grid runs in a fresh ``Evaluator`` (nothing cached from an earlier grid); the first
pass of each grid is the figure reported (a user runs a sweep once), the best of --repeat
passes is printed beside it.
"""

from __future__ import annotations

import argparse
import time

from memprof.core.deployment import Deployment
from memprof.core.sweep import Evaluator, parse_axis, sweep

GRIDS = [
    ("qwen3-32b", "H200", ["tp=1,2,4,8", "max_model_len=8K,32K,128K", "max_num_seqs=64,256",
                           "kv_cache_dtype=auto,fp8", "gpu_memory_utilization=0.85,0.9,0.95"]),
    ("llama-3.1-8b", "H100", ["tp=1,2", "pp=1,2", "max_model_len=4K,16K,64K,128K",
                              "max_num_seqs=32,128,512", "kv_cache_dtype=auto,fp8",
                              "gpu_memory_utilization=0.8,0.85,0.9,0.95"]),
    ("deepseek-r1", "H200", ["tp=8", "dp=1,2", "max_model_len=8K,32K,128K",
                             "max_num_seqs=128,512,1024", "kv_cache_dtype=auto,fp8",
                             "gpu_memory_utilization=0.9,0.95"]),
]


def rate(model: str, gpu: str, sets: list[str]) -> tuple[int, float]:
    axes = [parse_axis(s) for s in sets]
    t0 = time.perf_counter()
    rows = sweep(model, Deployment(), gpu, None, axes, evaluator=Evaluator())
    return len(rows), len(rows) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    total_n, total_t = 0, 0.0
    for model, gpu, sets in GRIDS:
        runs = [rate(model, gpu, sets) for _ in range(args.repeat)]
        n, first = runs[0]
        best = max(r for _, r in runs)
        total_n += n
        total_t += n / first
        print(f"{model} on {gpu}, {n} deployments ({' '.join('--set ' + s for s in sets)}):")
        print(f"  first pass {first:,.0f} deployments/s, best of {args.repeat} {best:,.0f}/s")
    print(f"all grids: {total_n} deployments, {total_n / total_t:,.0f} deployments/s "
          "(first passes)")


if __name__ == "__main__":
    main()
