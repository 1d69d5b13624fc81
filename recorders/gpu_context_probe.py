"""Where the device memory goes before the first tensor, and whether the first CUDA graph's fixed
driver cost comes back when a process captures again after freeing its graphs (vLLM captures
for its estimate, frees those graphs, then captures for real).

Run on the GPU machine from the repository root (torch with CUDA, nvidia-ml-py)::

    PYTHONPATH=. python recorders/gpu_context_probe.py --out $OUT

Writes ``context-probe.json``: NVML's used bytes before this process touches the GPU (memory held
by the driver and by other processes, which ``mem_get_info``'s used = total − free also counts),
then ``mem_get_info`` used and ``memory_reserved`` after the CUDA context, after the first
tensor, after the first GEMM; and the ``mem_get_info`` deltas of capturing one graph, freeing
it (graph, pool, ``empty_cache``) and capturing one again.
"""

from __future__ import annotations

import argparse
import gc
import json
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    nvml_before = int(pynvml.nvmlDeviceGetMemoryInfo(h).used)
    procs_before = len(pynvml.nvmlDeviceGetComputeRunningProcesses(h))
    import torch

    steps: list[dict[str, object]] = []

    def step(name: str) -> None:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        steps.append({"after": name, "used_bytes": int(total - free),
                      "reserved_bytes": int(torch.cuda.memory_reserved()),
                      "nvml_used_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(h).used)})

    torch.cuda.init()
    step("torch.cuda.init")
    x = torch.empty(1, device="cuda")
    step("first tensor")
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    c = a @ a
    step("first bf16 GEMM")

    def capture_one() -> tuple[int, torch.cuda.CUDAGraph, object]:
        torch.cuda.synchronize()
        free0 = torch.cuda.mem_get_info()[0]
        pool = torch.cuda.graph_pool_handle()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            x.add_(1.0)
        torch.cuda.synchronize()
        return free0 - torch.cuda.mem_get_info()[0], g, pool

    first, g, pool = capture_one()
    free0 = torch.cuda.mem_get_info()[0]
    del g, pool
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    freed = torch.cuda.mem_get_info()[0] - free0
    again, g2, pool2 = capture_one()
    out = {
        "command": "PYTHONPATH=. python recorders/gpu_context_probe.py --out $OUT",
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(),
        "driver": pynvml.nvmlSystemGetDriverVersion(),
        "nvml_used_before_torch_bytes": nvml_before,
        "compute_processes_before_torch": procs_before,
        "steps": steps,
        "first_graph_capture_bytes": int(first),
        "freed_by_deleting_it_bytes": int(freed),
        "second_first_graph_capture_bytes": int(again),
    }
    del c, g2, pool2
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "context-probe.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
