"""Benchmark: what a user waits for, as whole processes (``python -m memprof ...``).

    python benchmarks/bench_output.py [--tree PATH] [--repeat 3]

1. a 10,000-point ``memprof sweep`` (qwen3-32b on H200, 100 ``max_num_seqs`` × 100
   ``gpu_memory_utilization``) to the terminal table (stdout piped: 80 columns) and to CSV;
2. ``memprof estimate --model deepseek-r1 --gpu H200 -tp 8 -dp 100000``: a layout that does not
   fit, so every remedy is estimated (800,000 ranks, 6.4 million with ``-tp 64``).

Each command runs ``--repeat`` times in a fresh process; the best wall time and the largest
max RSS (``ru_maxrss`` of the child) are printed. ``--tree`` runs another checkout's memprof
(e.g. the commit before a change, unpacked with ``git archive``) for a before/after.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

SEQS = ",".join(str(n) for n in range(1, 101))
UTILS = ",".join(f"{0.5 + i * 0.005:.3f}" for i in range(100))
SWEEP = ["sweep", "--model", "qwen3-32b", "--gpu", "H200", "--set", f"max_num_seqs={SEQS}",
         "--set", f"gpu_memory_utilization={UTILS}"]
COMMANDS = {
    "sweep 10,000 points -> table": [*SWEEP],
    "sweep 10,000 points -> csv": [*SWEEP, "-f", "csv"],
    "estimate deepseek-r1 -tp 8 -dp 100000 (remedies)": [
        "estimate", "--model", "deepseek-r1", "--gpu", "H200", "-tp", "8", "-dp", "100000"],
}


def run_measured(tree: Path, args: list[str]) -> tuple[float, int, int, int]:
    """(wall seconds, max RSS in KiB, exit code, stdout lines) of one fresh process: the
    child's own max RSS (``wait4``), not the running maximum over every child."""
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "80"}
    with open(os.devnull, "wb") as null:
        t0 = time.perf_counter()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: stdout to the pipe (not a terminal), stderr discarded
            os.chdir(tree)
            os.dup2(w, 1)
            os.dup2(null.fileno(), 2)
            os.close(r)
            os.execve(sys.executable, [sys.executable, "-m", "memprof", *args], env)
        os.close(w)
        lines = 0
        with os.fdopen(r, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 16), b""):
                lines += chunk.count(b"\n")
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
    return wall, usage.ru_maxrss, os.waitstatus_to_exitcode(status), lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="run only the commands whose name has this")
    args = ap.parse_args()
    print(f"tree {args.tree}, best of {args.repeat} fresh processes")
    for name, cmd in COMMANDS.items():
        if args.only not in name:
            continue
        runs = [run_measured(args.tree, cmd) for _ in range(args.repeat)]
        best = min(r[0] for r in runs)
        rss = max(r[1] for r in runs)
        print(f"{name}: {best:.2f} s, max RSS {rss / 1024:,.0f} MiB, exit {runs[0][2]}, "
              f"{runs[0][3]:,} lines of stdout")


if __name__ == "__main__":
    main()
