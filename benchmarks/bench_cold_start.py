"""Benchmark: cold start of the commands a user waits on, whole processes, optionally against
another checkout in turn (before/after on a shared machine).

    python benchmarks/bench_cold_start.py [--runs 10] [--base PATH_TO_OTHER_CHECKOUT]

Byte-compiles each tree first (``python -m compileall -q memprof``: a tree run with
``PYTHONDONTWRITEBYTECODE`` set would otherwise recompile every module on every run), then runs
each command line N times as a fresh ``python -m memprof`` process, alternating between the
trees run by run when ``--base`` is given, and prints min/median/max of the CPU seconds (user +
sys of the child, from ``wait4``) and of the wall seconds. ``benchmarks/bench_estimate.py`` is
the older cold-start benchmark (a private bytecode cache, one tree, median and worst).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_estimate  # noqa: E402  (the one cold_run)

QWEN = ["estimate", "--model", "qwen3-32b", "--gpu", "H200"]
CMDS = {
    "estimate (table)": QWEN,
    "estimate -f json": [*QWEN, "-f", "json"],
    "estimate -f markdown": [*QWEN, "-f", "markdown"],
    "--help": ["--help"],
}


def compile_tree(root: Path) -> None:
    """Byte-compile ``root/memprof`` so that runs read bytecode, as an installed copy does."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "memprof")],
                   check=True, cwd=root)


def cold_run(root: Path, argv: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one fresh ``python -m memprof ARGV`` in ``root``."""
    return bench_estimate.cold_run(argv, dict(os.environ, PYTHONPATH=str(root)), root)


def _stats(xs: list[float]) -> str:
    return f"{min(xs):.3f} / {statistics.median(xs):.3f} / {max(xs):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--base", type=Path, help="another checkout to run in turn (before)")
    args = ap.parse_args()
    trees = {"after": ROOT} if args.base is None else {"before": args.base.resolve(),
                                                       "after": ROOT}
    for root in trees.values():
        compile_tree(root)
    print(f"{args.runs} fresh processes per command and tree; seconds min / median / max")
    for name, argv in CMDS.items():
        for root in trees.values():
            cold_run(root, argv)  # warm the OS file cache
        runs: dict[str, list[tuple[float, float]]] = {t: [] for t in trees}
        for _ in range(args.runs):
            for tree, root in trees.items():
                runs[tree].append(cold_run(root, argv))
        for tree, rs in runs.items():
            print(f"{name:<22} {tree:<7} CPU {_stats([c for c, _ in rs])}   "
                  f"wall {_stats([w for _, w in rs])}")


if __name__ == "__main__":
    main()
