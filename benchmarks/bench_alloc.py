"""Speed of the allocator simulator: ops/s replaying (a) a random mix of 300,000 mallocs and
frees over every size class, (b) the allocations of a real model run (the Qwen3-0.6B trace of
reports/gpu/trace), and (c) a random mix with an ``empty_cache`` every 50 ops at 10k, 100k
and 1M ops, in which the live set grows (45% frees, so ~0.1 live block more per op: 100,000 live
blocks at 1M, as a long run's weights and caches pile up), and (d) the same with a steady live
set (at most 1,000 live blocks: a serving process whose requests' tensors come and go, so
only the length changes between the three), whose ops/s must not fall with the length (replay
is O(n log n); the goal: at 1M within 1.5x of 10k). Rates are ops per second of this
process's CPU time (``time.process_time``: the machine is shared), best of three (one run at
1M). ``python benchmarks/bench_alloc.py [--scaling-only] [--max-ops N]``."""

from __future__ import annotations

import argparse
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


def random_ops(n: int = 300_000, seed: int = 1, empty_every: int = 0,
               p_free: float = 0.5, max_live: int = 0) -> list[Op]:
    rng = random.Random(seed)
    ops: list[Op] = []
    live: list[int] = []
    ident = 0
    sizes = [100, 4096, 700_000, 3 * MiB, 12 * MiB, 64 * MiB]
    for k in range(n):
        if empty_every and k % empty_every == empty_every - 1:
            ops.append(("e", 0, 0, 0))
        elif live and (rng.random() < p_free or (max_live and len(live) >= max_live)):
            ops.append(("f", live.pop(rng.randrange(len(live))), 0, 0))
        else:
            ident += 1
            ops.append(("a", ident, rng.choice(sizes) + rng.randrange(1000), 0))
            live.append(ident)
    return ops


def rate(ops: list[Op], runs: int = 3) -> float:
    best = 0.0
    for _ in range(runs):
        t = time.process_time()
        replay(ops, keep_states=False)
        best = max(best, len(ops) / (time.process_time() - t))
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scaling-only", action="store_true")
    ap.add_argument("--max-ops", type=int, default=1_000_000)
    args = ap.parse_args()
    if not args.scaling_only:
        model = ops_from_snapshot(pickle.loads(gzip.decompress(
            (ROOT / "reports/gpu/trace/qwen3-0.6b.pickle.gz").read_bytes())), Path("snapshot"))
        for name, ops in (("random mix", random_ops()), ("model run (Qwen3-0.6B trace)", model)):
            print(f"{name:32s} {len(ops):>9,} ops  {rate(ops):>10,.0f} ops/s", flush=True)
    for label, max_live in (("growing live set", 0), ("steady live set (<= 1,000)", 1000)):
        rates = {}
        for n in (10_000, 100_000, 1_000_000):
            if n > args.max_ops:
                break
            ops = random_ops(n, empty_every=50, p_free=0.45, max_live=max_live)
            rates[n] = rate(ops, 3 if n < 1_000_000 else 1)
            print(f"empty_cache every 50, {label:27s} {n:>9,} ops  {rates[n]:>10,.0f} ops/s",
                  flush=True)
        if 1_000_000 in rates:
            ratio = rates[10_000] / rates[1_000_000]
            print(f"{label}: 10k / 1M ops/s: {ratio:.2f}x (goal: at most 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
