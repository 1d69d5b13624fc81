"""SGLang's DP-attention gather (seed 002) over a real process group: one process per GPU under
torchrun, each standing for ``dp / world`` DP ranks, through ``validate_dp_gather`` (per-forward
vs persistent buffer, parity, the buffer's bytes beside the estimate's "SGLang DP-attention
gathered buffer" component, the graph pool each way). Every rank's result is gathered and rank 0
writes one JSON.

    torchrun --nproc-per-node 2 recorders/gpu_dp_gather_ranks.py --dp 2 --tp 2 --out FILE

On CPU (gloo; graph check simulated) add ``--device cpu``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    import torch
    import torch.distributed as dist

    from memprof.validation.dp_gather import validate_dp_gather

    p = argparse.ArgumentParser()
    p.add_argument("--dp", type=int, required=True)
    p.add_argument("--tp", type=int, required=True)
    p.add_argument("--model", default="deepseek-r1")
    p.add_argument("--max-bs", type=int, default=64)
    p.add_argument("--gpu", default="H100")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--graph-steps", type=int, default=None)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if a.device == "cuda":
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev)
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    v = validate_dp_gather(model=a.model, tp=a.tp, dp=a.dp, max_bs=a.max_bs, device=str(dev),
                           gpu_name=a.gpu, graph_steps=a.graph_steps)
    mine = {"rank": rank, "passed": v.passed, "parity_passed": v.parity_passed,
            "memory_passed": v.memory_passed, "graph_passed": v.graph_passed,
            **dataclasses.asdict(v)}
    every: list[object] = [None] * world
    dist.all_gather_object(every, mine)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        doc = {"command": " ".join(sys.argv), "world_size": world,
               "torch": str(torch.__version__),
               "device_name": torch.cuda.get_device_name(dev) if a.device == "cuda" else "cpu",
               "nccl": (".".join(map(str, torch.cuda.nccl.version()))
                        if a.device == "cuda" else None),
               "ranks": every}
        Path(a.out).write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return 0 if v.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
