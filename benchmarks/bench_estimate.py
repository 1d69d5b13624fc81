"""Benchmark: cold-start wall time of the CLI, as a user runs it (a fresh process each time).

    python benchmarks/bench_estimate.py [--runs 20]

Prints the median and the worst of N runs of ``memprof --help``,
``memprof estimate --model deepseek-r1 --gpu H200 -tp 8 --format json`` and the same kind of
estimate from a pasted ``vllm serve`` command, and confirms the estimate imported none of torch,
pandas, pynvml, amdsmi, yaml or pydantic. The in-process estimate alone is measured by
tests/test_bench.py with pytest-benchmark (``pytest tests/test_bench.py --benchmark-enable``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CMD = [sys.executable, "-m", "memprof", "estimate", "--model", "deepseek-r1", "--gpu", "H200",
       "-tp", "8", "--format", "json"]
CMDS = {
    "memprof --help": [sys.executable, "-m", "memprof", "--help"],
    "memprof estimate deepseek-r1 H200 TP8 --format json": CMD,
    "memprof estimate --gpu H200 -f json -- vllm serve Qwen/Qwen3-32B -tp 2": [
        sys.executable, "-m", "memprof", "estimate", "--gpu", "H200", "-f", "json", "--",
        "vllm", "serve", "Qwen/Qwen3-32B", "-tp", "2", "--max-model-len", "32768"],
}
HEAVY = ("torch", "pandas", "pynvml", "amdsmi", "yaml", "pydantic")
PROBE = ("import sys; from memprof.cli import run; code = run(sys.argv[1:]);"
         "sys.stderr.write('heavy modules imported: %s\\n' % sorted(m for m in sys.modules "
         "if m.split('.')[0] in " + repr(HEAVY) + "))")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    for name, cmd in CMDS.items():
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
        print(f"{name}, {args.runs} fresh processes:")
        print(f"  median {statistics.median(times) * 1000:.0f} ms, worst "
              f"{max(times) * 1000:.0f} ms")
    probe = subprocess.run([sys.executable, "-c", PROBE, *CMD[3:]], capture_output=True,
                           text=True, check=True)
    print(f"  {probe.stderr.strip()}")


if __name__ == "__main__":
    main()
