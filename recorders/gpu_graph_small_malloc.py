"""What one small ``cudaMalloc`` costs in device memory, as ``mem_get_info`` sees it: the question
behind NCCL 2.21's per-captured-collective work buffer. NCCL 2.21.5 (the release torch 2.5.1 and
2.6.0 pin, so vLLM 0.7.x-0.8.x) uploads a captured ("persistent") collective's work structs to a
buffer of its own, ``ncclCudaMalloc(&plan->workHead, nWork)`` in src/enqueue.cc ``uploadWork``:
nWork structs of 512 B (``NCCL_WORK_SIZE``, src/include/device.h), by ``cudaMalloc`` where
cuMem is off (src/include/alloc.h ``ncclCudaMallocDebug``; vLLM's env_override.py sets
NCCL_CUMEM_ENABLE=0), freed only when the graph is destroyed. NCCL 2.26.2 and 2.28.9 place the
work in the kernel's arguments where it fits (src/enqueue.cc ``finishPlan``).

Each case runs in a fresh process: torch makes the primary context current, then the driver's
``cuMemAlloc_v2`` (what ``cudaMalloc`` calls) is called ``count`` times for ``size`` bytes, with
``cuMemGetInfo_v2`` read before and after (and after freeing them all). Run on the GPU machine
from the repository root::

    PYTHONPATH=. python recorders/gpu_graph_small_malloc.py --out $OUT

Writes ``graph-small-malloc.json`` with the torch version, the GPU, the driver and this command.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CASES = [(size, count) for size in (512, 1024, 2048, 4096, 8192, 16384)
         for count in (1, 100, 4000)]


def one(size: int, count: int) -> dict[str, object]:
    import ctypes

    import torch

    torch.zeros(1, device="cuda")  # the primary context, current on this thread
    torch.cuda.synchronize()
    cuda = ctypes.CDLL("libcuda.so.1")
    free, total = ctypes.c_size_t(), ctypes.c_size_t()

    def free_now() -> int:
        assert cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
        return int(free.value)

    before = free_now()
    ptrs: list[int] = []
    for _ in range(count):
        dptr = ctypes.c_uint64()
        assert cuda.cuMemAlloc_v2(ctypes.byref(dptr), ctypes.c_size_t(size)) == 0
        ptrs.append(int(dptr.value))
    after = free_now()
    for addr in ptrs:
        assert cuda.cuMemFree_v2(ctypes.c_uint64(addr)) == 0
    freed = free_now()
    spread = max(ptrs) - min(ptrs) if ptrs else 0
    return {"size": size, "count": count, "delta_bytes": before - after,
            "per_alloc_bytes": (before - after) / count, "after_free_delta_bytes": before - freed,
            "address_span_bytes": spread}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--case", nargs=2, type=int)
    a = ap.parse_args()
    if a.case:
        print(json.dumps(one(*a.case)))
        return
    import torch

    runs = []
    for size, count in CASES:
        r = subprocess.run([sys.executable, __file__, "--case", str(size), str(count)],
                           capture_output=True, text=True, timeout=120)
        row = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {
            "size": size, "count": count, "error": r.stderr[-2000:]}
        print(row, flush=True)
        runs.append(row)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    doc = {"command": "PYTHONPATH=. python recorders/gpu_graph_small_malloc.py --out $OUT",
           "torch": torch.__version__, "cuda": torch.version.cuda, "gpu_and_driver": smi,
           "runs": runs}
    assert a.out is not None
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "graph-small-malloc.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
