"""Benchmark: ``memprof trace`` of DeepSeek-R1 TP8 rank 0 on the fake device (no GPU: fake
tensors through the allocator simulator), as a user runs it — wall time and peak RSS of a fresh
process each time. Issue 10's goal: < 60 s and < 4 GiB RSS on a 2-core, 24 GiB machine.

    python benchmarks/bench_trace_fake.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

CMD = [sys.executable, "-m", "memprof", "trace", "-m", "deepseek-r1", "--gpu", "H200", "-tp",
       "8", "--rank", "0", "--device", "fake", "-f", "json"]
MAX_SECONDS, MAX_RSS_GIB = 60.0, 4.0


def one_run() -> tuple[float, float, dict[str, object]]:
    """Seconds, peak RSS (GiB: the largest of the children reaped so far, ``ru_maxrss`` in KiB
    on Linux) and the trace's JSON."""
    t0 = time.perf_counter()
    proc = subprocess.run(CMD, capture_output=True, check=False)
    dt = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"trace failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    return dt, rss, json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    times, rss = [], []
    doc: dict[str, object] = {}
    for _ in range(args.runs):
        t, r, doc = one_run()
        times.append(t)
        rss.append(r)
    phases = doc.get("phases", [])
    print(f"memprof trace deepseek-r1 TP8 rank 0 --device fake, {args.runs} fresh processes:")
    print(f"  wall median {statistics.median(times):.1f} s, worst {max(times):.1f} s "
          f"(goal < {MAX_SECONDS:.0f} s)")
    print(f"  peak RSS worst {max(rss):.2f} GiB (goal < {MAX_RSS_GIB:.0f} GiB; the largest "
          "child's, so an upper bound when runs differ)")
    print(f"  phases traced: {len(phases) if isinstance(phases, list) else 0}")
    ok = max(times) < MAX_SECONDS and max(rss) < MAX_RSS_GIB
    print("  goal met" if ok else "  GOAL MISSED")


if __name__ == "__main__":
    main()
