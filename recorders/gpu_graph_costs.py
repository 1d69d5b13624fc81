"""What a captured CUDA graph costs on this GPU: driver memory per graph executable, per kernel
node, and the cuBLAS workspace a capture stream adds to the graph pool.

Run on the GPU machine from the repository root (torch with CUDA)::

    PYTHONPATH=. python recorders/gpu_graph_costs.py --out $OUT

Each case runs in a fresh process (one case's graphs never show in the next) and measures, around
the capture of ``graphs`` graphs of ``nodes`` kernels each into one private pool, the device's
``mem_get_info`` delta (what vLLM reports as the graphs' memory) and the ``memory_reserved``
delta (the pool's tensors); the difference is the driver's memory for the graph executables.
The kernels allocate nothing (in-place adds on one preallocated tensor, or GEMMs into
preallocated outputs), so the pool's tensors are only what the libraries allocate. Writes
``graph-costs.json`` with the torch version, the GPU and this command.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CASES: list[dict[str, object]] = [
    {"kind": "add", "nodes": n, "graphs": g}
    for n in (1, 4, 16, 64) for g in (250, 1000)
] + [
    {"kind": "mm", "nodes": n, "graphs": g} for n in (1, 4, 16) for g in (250, 1000)
] + [{"kind": "add", "nodes": 1, "graphs": 1}, {"kind": "mm", "nodes": 1, "graphs": 1}]


def one(kind: str, nodes: int, graphs: int) -> dict[str, object]:
    import torch

    dev = torch.device("cuda")
    x = torch.zeros(1024, device=dev)
    a = torch.randn(256, 256, device=dev, dtype=torch.bfloat16)
    c = torch.empty(256, 256, device=dev, dtype=torch.bfloat16)
    torch.mm(a, a, out=c)  # the default stream's cuBLAS handle and workspace, outside the pool
    torch.cuda.synchronize()
    free0 = torch.cuda.mem_get_info()[0]
    res0 = torch.cuda.memory_reserved()
    pool = torch.cuda.graph_pool_handle()
    stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    keep = []
    with torch.cuda.stream(stream):
        for _ in range(graphs):
            g = torch.cuda.CUDAGraph()
            g.capture_begin(pool=pool)
            for _ in range(nodes):
                if kind == "add":
                    x.add_(1.0)
                else:
                    torch.mm(a, a, out=c)
            g.capture_end()
            keep.append(g)
    torch.cuda.synchronize()
    total = free0 - torch.cuda.mem_get_info()[0]
    tensors = torch.cuda.memory_reserved() - res0
    for g in keep[:3]:
        g.replay()
    torch.cuda.synchronize()
    return {"kind": kind, "nodes": nodes, "graphs": graphs, "total_bytes": int(total),
            "tensors_bytes": int(tensors), "driver_bytes": int(total - tensors),
            "driver_mib_per_graph": (total - tensors) / graphs / 2**20}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        kind, nodes, graphs = args.case.split(":")
        print(json.dumps(one(kind, int(nodes), int(graphs))))
        return 0
    import torch

    rows = []
    for c in CASES:
        spec = f"{c['kind']}:{c['nodes']}:{c['graphs']}"
        p = subprocess.run([sys.executable, __file__, "--case", spec], capture_output=True,
                           text=True, check=True, timeout=300)
        row = json.loads(p.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{spec:>12}: total {row['total_bytes'] / 2**20:8.1f} MiB, tensors "
              f"{row['tensors_bytes'] / 2**20:6.1f} MiB, driver/graph "
              f"{row['driver_mib_per_graph']:.4f} MiB", flush=True)
    out = Path(args.out or ".")
    out.mkdir(parents=True, exist_ok=True)
    (out / "graph-costs.json").write_text(json.dumps({
        "command": "PYTHONPATH=. python recorders/gpu_graph_costs.py --out $OUT",
        "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
        "cuda": torch.version.cuda, "cases": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
