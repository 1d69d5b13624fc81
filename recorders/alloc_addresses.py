"""Where the driver puts the caching allocator's segments: the golden op sequences of
``tests/data/alloc_golden/`` replayed on the GPU again, this time recording addresses.

    PYTHONPATH=. python recorders/alloc_addresses.py --out $OUT

For each config and sequence (a fresh process with ``PYTORCH_CUDA_ALLOC_CONF`` set before torch
is imported): the ``data_ptr`` of every allocation, and after every op that changed the segment
count, the segments (address, size) from ``torch.cuda.memory_snapshot()``. The simulator's tie
between equal-size free blocks is broken by address, so the order of the segments cudaMalloc
returns decides which block a later request gets → ``alloc-addresses.json`` (committed gzipped
as tests/data/alloc_golden/alloc-addresses.json.gz, H200, torch 2.11.0+cu130).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "alloc_golden"
SEQS = ("random", "model_run", "per_layer")


def child(conf_file: str, seq: str, out_path: str) -> None:
    import torch

    doc = json.loads(Path(conf_file).read_text())
    ops = doc["sequences"][seq]["ops"]
    live: dict[int, torch.Tensor] = {}
    ptrs: dict[int, int] = {}
    segs: dict[int, list[list[int]]] = {}
    count = 0
    for n, op in enumerate(ops):
        if op[0] == "a":
            try:
                live[op[1]] = torch.empty(op[2], dtype=torch.uint8, device="cuda")
                ptrs[n] = live[op[1]].data_ptr()  # no other name keeps the tensor alive
            except torch.OutOfMemoryError:
                pass
        elif op[0] == "f":
            live.pop(op[1], None)
        else:
            torch.cuda.empty_cache()
        c = torch.cuda.memory_stats().get("segment.all.current", 0)
        if c != count:
            count = c
            segs[n] = sorted([s["address"], s["total_size"]]
                             for s in torch.cuda.memory_snapshot())
    Path(out_path).write_text(json.dumps({"ptrs": ptrs, "segments": segs}))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--child", nargs=3)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, object] = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                                 "command": "PYTHONPATH=. python recorders/alloc_addresses.py "
                                 "--out $OUT", "runs": {}}
    for f in sorted(GOLDEN.glob("alloc-golden-*.json")):
        conf = json.loads(f.read_text())["conf"]
        for seq in SEQS:
            tmp = out / "tmp.json"
            env = {**os.environ, "PYTORCH_CUDA_ALLOC_CONF": conf, "PYTORCH_ALLOC_CONF": conf}
            p = subprocess.run([sys.executable, __file__, "--child", str(f), seq, str(tmp)],
                               env=env, capture_output=True, text=True, check=False)
            key = f"{f.stem.removeprefix('alloc-golden-')}/{seq}"
            if p.returncode:
                print(key, "FAILED", p.stderr[-1500:], flush=True)
                continue
            result["runs"][key] = json.loads(tmp.read_text())  # type: ignore[index]
            tmp.unlink()
            print(key, "ok", flush=True)
    (out / "alloc-addresses.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
