"""Benchmark: wall time of the CLI's main job, as a user runs it (a fresh process each time).

    python benchmarks/bench_estimate.py [--runs 20]

Prints the median and the worst of N runs of
``memprof estimate --model deepseek-r1 --gpu H200 -tp 8 --format json`` and confirms torch was
not imported. The in-process estimate alone is measured by tests/test_bench.py with
pytest-benchmark (``pytest tests/test_bench.py --benchmark-enable``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CMD = [sys.executable, "-m", "memprof", "estimate", "--model", "deepseek-r1", "--gpu", "H200",
       "-tp", "8", "--format", "json"]
PROBE = ("import sys, runpy; sys.argv = ['memprof'] + sys.argv[1:];"
         "from memprof.cli import run; code = run(sys.argv[1:]);"
         "sys.stderr.write('torch imported: %s\\n' % ('torch' in sys.modules))")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        subprocess.run(CMD, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    probe = subprocess.run([sys.executable, "-c", PROBE, *CMD[3:]], capture_output=True,
                           text=True, check=True)
    print(f"memprof estimate deepseek-r1 H200 TP8 --format json, {args.runs} fresh processes:")
    print(f"  median {statistics.median(times) * 1000:.0f} ms, worst {max(times) * 1000:.0f} ms")
    print(f"  {probe.stderr.strip()}")


if __name__ == "__main__":
    main()
