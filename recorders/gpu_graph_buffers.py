"""Graph driver bytes of captured c10d all-reduces: one buffer for every graph ("same") vs a fresh
buffer per graph ("fresh"), against the same graphs of two elementwise ops on fresh buffers
("local-fresh"); two ops per graph, G graphs per mode, one private pool, every graph kept alive.

Run under torchrun, e.g. ``CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc-per-node 2
recorders/gpu_graph_buffers.py 200`` (output: reports/gpu/nccl/graph-buffers-2x-h100.txt; each
rank prints one JSON line).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def main() -> None:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    warm = torch.ones(1, device="cuda")
    dist.all_reduce(warm)
    torch.cuda.synchronize()
    graphs_per_mode = int(sys.argv[1])
    shape = (64, 1024)
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    alive: list[Any] = []  # every graph and buffer stays alive to the end
    out: dict[str, Any] = {"rank": rank,
                           "env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}}
    for mode in ("same", "fresh", "local-fresh"):
        same = torch.ones(shape, device="cuda", dtype=torch.bfloat16)
        dist.all_reduce(same)
        torch.cuda.synchronize()
        pool = torch.cuda.graph_pool_handle()
        free0, reserved0 = torch.cuda.mem_get_info()[0], torch.cuda.memory_reserved()
        graphs = []
        for _ in range(graphs_per_mode):
            x = same if mode == "same" else torch.ones(shape, device="cuda", dtype=torch.bfloat16)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool, stream=stream):
                if mode == "local-fresh":
                    x.add_(1.0)
                    x.mul_(2.0)
                else:
                    dist.all_reduce(x)
                    dist.all_reduce(x)
            graphs.append(graph)
            alive.append(x)
        torch.cuda.synchronize()
        free1, reserved1 = torch.cuda.mem_get_info()[0], torch.cuda.memory_reserved()
        out[mode] = {"graphs": graphs_per_mode,
                     "driver_bytes": (free0 - free1) - (reserved1 - reserved0),
                     "reserved_delta": reserved1 - reserved0}
        for graph in graphs:
            graph.replay()
        torch.cuda.synchronize()
        alive.extend(graphs)
    print(json.dumps(out))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
