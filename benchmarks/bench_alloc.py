"""Speed of the allocator simulator: ops/s replaying (a) a random mix of 300,000 mallocs and
frees over every size class and (b) the allocations of a real model run (the Qwen3-0.6B trace
of reports/gpu/trace), best of three. ``python benchmarks/bench_alloc.py``."""

from __future__ import annotations

import gzip
import pickle
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memprof.alloc.replay import Op, ops_from_snapshot, replay  # noqa: E402

MiB = 1 << 20


def random_ops(n: int = 300_000, seed: int = 1) -> list[Op]:
    rng = random.Random(seed)
    ops: list[Op] = []
    live: list[int] = []
    ident = 0
    sizes = [100, 4096, 700_000, 3 * MiB, 12 * MiB, 64 * MiB]
    for _ in range(n):
        if live and rng.random() < 0.5:
            ops.append(("f", live.pop(rng.randrange(len(live))), 0, 0))
        else:
            ident += 1
            ops.append(("a", ident, rng.choice(sizes) + rng.randrange(1000), 0))
            live.append(ident)
    return ops


def rate(ops: list[Op]) -> float:
    best = 0.0
    for _ in range(3):
        t = time.perf_counter()
        replay(ops, keep_states=False)
        best = max(best, len(ops) / (time.perf_counter() - t))
    return best


def main() -> int:
    model = ops_from_snapshot(pickle.loads(gzip.decompress(
        (ROOT / "reports/gpu/trace/qwen3-0.6b.pickle.gz").read_bytes())), Path("snapshot"))
    for name, ops in (("random mix", random_ops()), ("model run (Qwen3-0.6B trace)", model)):
        print(f"{name:32s} {len(ops):>9,} ops  {rate(ops):>10,.0f} ops/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
