"""Benchmark: the CLI's cold start, as a user runs it (a fresh process each time).

    python benchmarks/bench_estimate.py [--runs 20]

For each command line (``memprof --help``, ``memprof estimate --model qwen3-32b --gpu H200``
as a table and as JSON, DeepSeek-R1 TP8 as JSON, and an estimate from a pasted ``vllm serve``
command) prints the median and the worst CPU time (user + sys of the process, from
``wait4``) and the median wall time of N fresh processes. Bytecode is cached as on an installed
copy: the runs write and read it under a private ``PYTHONPYCACHEPREFIX`` (even where
``PYTHONDONTWRITEBYTECODE`` is set), after two warm-up runs that fill it. Then it confirms the
estimate imported none of torch, pandas, pynvml, amdsmi, yaml or pydantic, and only its own
command module. The in-process estimate alone is measured by tests/test_bench.py with
pytest-benchmark (``pytest tests/test_bench.py --benchmark-enable``).
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
MEMPROF = [sys.executable, "-m", "memprof"]
QWEN = ["estimate", "--model", "qwen3-32b", "--gpu", "H200"]
R1 = ["estimate", "--model", "deepseek-r1", "--gpu", "H200", "-tp", "8", "--format", "json"]
CMDS = {
    "memprof --help": ["--help"],
    "memprof estimate --model qwen3-32b --gpu H200": QWEN,
    "memprof estimate --model qwen3-32b --gpu H200 --format json": [*QWEN, "--format", "json"],
    "memprof estimate deepseek-r1 H200 TP8 --format json": R1,
    "memprof estimate --gpu H200 -f json -- vllm serve Qwen/Qwen3-32B -tp 2": [
        "estimate", "--gpu", "H200", "-f", "json", "--", "vllm", "serve", "Qwen/Qwen3-32B",
        "-tp", "2", "--max-model-len", "32768"],
}
HEAVY = ("torch", "pandas", "pynvml", "amdsmi", "yaml", "pydantic")
PROBE = ("import sys; from memprof.cli import run; code = run(sys.argv[1:]);"
         "sys.stderr.write('heavy modules imported: %s; command modules: %s\\n' % ("
         "sorted(m for m in sys.modules if m.split('.')[0] in " + repr(HEAVY) + "), "
         "sorted(m for m in sys.modules if m.startswith('memprof.commands.'))))")


def cold_run(argv: list[str], env: dict[str, str], root: Path = ROOT) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one fresh ``python -m memprof ARGV`` run in ``root``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([*MEMPROF, *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, cwd=root)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"memprof {' '.join(argv)} failed in {root}")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="memprof-pycache-") as cache:
        env = dict(os.environ, PYTHONPYCACHEPREFIX=cache,
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                            os.environ.get("PYTHONPATH")])))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for name, argv in CMDS.items():
            for _ in range(2):
                cold_run(argv, env)  # fill the bytecode cache
            runs = [cold_run(argv, env) for _ in range(args.runs)]
            cpu = [c for c, _ in runs]
            print(f"{name}, {args.runs} fresh processes: CPU median "
                  f"{statistics.median(cpu) * 1000:.0f} ms (worst {max(cpu) * 1000:.0f} ms), "
                  f"wall median {statistics.median(w for _, w in runs) * 1000:.0f} ms")
        probe = subprocess.run([sys.executable, "-c", PROBE, *R1], capture_output=True,
                               text=True, check=True, env=env, cwd=ROOT)
    print(f"  {probe.stderr.strip()}")


if __name__ == "__main__":
    main()
