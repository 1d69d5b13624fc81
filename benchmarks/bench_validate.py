"""Benchmark: ``memprof validate --device cpu`` as a user runs it, a fresh process each time.

    PYTHONPATH=. python benchmarks/bench_validate.py [--runs 3] [--baseline-root DIR]

Times the two CPU commands of docs/commands/validate.md, ``memprof validate --device cpu`` and
``memprof validate --kernel all --device cpu --markdown FILE``, as whole processes: wall time,
CPU time (user + system) and peak resident memory of each run, from the kernel's accounting of
the child (``os.wait4``: the numbers ``/usr/bin/time -v`` prints). With ``--baseline-root`` (another
checkout, e.g. ``git worktree add /tmp/base <commit>``) the same commands run from that
checkout too, alternately with this one, so a load that drifts during the runs hits both alike;
the machine's load average is printed before and after, since on a shared machine it moves every
number. Prints the median of each column (and the range) per checkout and command.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "validate --device cpu": ["validate", "--device", "cpu"],
    "validate --kernel all --device cpu --markdown FILE": [
        "validate", "--kernel", "all", "--device", "cpu", "--markdown", "{md}"],
}


def run_once(root: Path, args: list[str], workdir: Path) -> tuple[float, float, int, int]:
    """``(wall s, cpu s, max RSS bytes, exit code)`` of one ``python -m memprof`` process."""
    md = workdir / "validate.md"
    argv = [sys.executable, "-m", "memprof", *[a.format(md=md) for a in args]]
    env = {**os.environ, "PYTHONPATH": str(root)}
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=workdir, env=env, stdout=subprocess.DEVNULL,
                                stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4
        if proc.returncode != 0:
            err.seek(0)
            sys.stderr.write(f"{' '.join(argv)} exited {proc.returncode}:\n"
                             f"{err.read().decode(errors='replace')}\n")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, proc.returncode


def _stat(xs: list[float]) -> str:
    return f"{statistics.median(xs):7.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline-root", type=Path, default=None,
                    help="another checkout to time alternately with this one")
    args = ap.parse_args()
    roots = {"this checkout": ROOT}
    if args.baseline_root is not None:
        roots = {"baseline": args.baseline_root.resolve(), **roots}
    print(f"load average before: {os.getloadavg()}  cpus: {os.cpu_count()}  "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    rows: dict[tuple[str, str], list[tuple[float, float, int, int]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            for cname, cargs in COMMANDS.items():
                for rname, root in roots.items():
                    r = run_once(root, cargs, Path(tmp))
                    rows.setdefault((rname, cname), []).append(r)
                    print(f"  run: {rname}, {cname}: wall {r[0]:.2f} s, cpu {r[1]:.2f} s, "
                          f"max RSS {r[2] / 2**20:.1f} MiB, exit {r[3]}", flush=True)
    print(f"load average after:  {os.getloadavg()}")
    print(f"{'checkout':14} {'command':52} {'wall s':>19} {'cpu s':>19} {'max RSS MiB':>21} "
          f"exit")
    for (rname, cname), rs in rows.items():
        walls, cpus = [r[0] for r in rs], [r[1] for r in rs]
        rss = [r[2] / 2**20 for r in rs]
        codes = sorted({r[3] for r in rs})
        print(f"{rname:14} {cname:52} {_stat(walls):>19} {_stat(cpus):>19} {_stat(rss):>21} "
              f"{codes}")
    if any(r[3] != 0 for rs in rows.values() for r in rs):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
