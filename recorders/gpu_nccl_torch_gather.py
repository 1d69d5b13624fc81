"""Measure what torch's own NCCL communicator costs when ProcessGroupNCCL makes it lazily, at
the first collective of a device group, as vLLM's profile run does at the logits gather, for the
torch TP communicator rows of ``memprof.core.terms.nccl_torch``.

vLLM calls ``torch.distributed.init_process_group`` with no ``device_id``, so ProcessGroupNCCL
makes no communicator at init; the profile run's ``LogitsProcessor._gather_logits`` then runs
``torch.distributed.all_gather_into_tensor`` (V1) or ``torch.distributed.gather`` (V0) on the TP
device group, and that first collective makes the communicator (``ncclCommInitRank``) and its
connections inside the budget. One rank per GPU, under ``torchrun``::

    torchrun --nproc-per-node 2 recorders/gpu_nccl_torch_gather.py --out $OUT/x --mode first

Steps, each followed on every rank by ``torch.cuda.synchronize``, ``mem_get_info`` and torch's
allocator stats (``memory_reserved``, ``memory_allocated``); NCCL's (non-torch) bytes are the
growth of ``used − reserved`` from the step before:

1. ``context``: ``torch.cuda.set_device`` and a first tensor;
2. ``init_process_group``: backend nccl, no ``device_id`` (lazy, as vLLM calls it), and a gloo
   group for the recorder's own barriers;
3. by ``--mode``: ``first`` nothing (the torch communicator is the process's first);
   ``stream`` a ``torch.cuda.Stream()`` (torch's stream pool made first, as vLLM's model
   runner's ``comm_stream`` makes it); ``second`` another NCCL group (``new_group``, backend
   nccl) warmed by a one-element all_reduce, i.e. a communicator made before, as vLLM's PyNccl
   one is (it also makes the stream pool);
4. ``all_gather_into_tensor``: the first on the default group, of a ``[rows, vocab / world]``
   bf16 tensor (``--rows``, ``--vocab``): makes the communicator (init + the ring's buffers);
5. ``all_gather_into_tensor (again, 4x rows)``: whether a larger gather adds NCCL memory;
6. ``gather``: ``torch.distributed.gather`` of the same shard to rank 0 (vLLM V0's logits
   gather): the send/recv connections;
7. ``stream probe``: a ``torch.cuda.Stream()``, 0 B where the stream pool was made above.

Each rank writes ``rank<N>.json`` under ``--out``. NVLink multicast stays off (the lent
machines' rule): set ``NCCL_NVLS_ENABLE=0`` in the environment that launches it.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist


def _snap(step: str, dev: torch.device, out: list[dict[str, Any]]) -> None:
    torch.cuda.synchronize(dev)
    free, total = torch.cuda.mem_get_info(dev)
    reserved = torch.cuda.memory_reserved(dev)
    allocated = torch.cuda.memory_allocated(dev)
    used = total - free
    row = {"step": step, "free": free, "total": total, "used": used, "reserved": reserved,
           "allocated": allocated, "non_torch": used - reserved}
    if out:
        prev = out[-1]
        row["non_torch_growth"] = row["non_torch"] - prev["non_torch"]
        row["used_growth"] = used - prev["used"]
        row["reserved_growth"] = reserved - prev["reserved"]
    out.append(row)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=("first", "stream", "second"), default="first")
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=151936)
    args = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    steps: list[dict[str, Any]] = []
    torch.zeros(1, device=dev)
    _snap("context", dev, steps)
    dist.init_process_group("nccl")  # no device_id: lazy, as vLLM calls it
    gloo = dist.new_group(backend="gloo")
    _snap("init_process_group (no device_id)", dev, steps)
    if args.mode == "stream":
        torch.cuda.Stream(dev)
        _snap("torch.cuda.Stream() (stream pool first)", dev, steps)
    elif args.mode == "second":
        prior = dist.new_group(backend="nccl")
        t = torch.ones(1, device=dev)
        dist.all_reduce(t, group=prior)
        assert t.item() == world
        _snap("prior NCCL group + one-element all_reduce", dev, steps)
    dist.barrier(group=gloo)
    shard = args.vocab // world
    for label, rows in (("all_gather_into_tensor (first)", args.rows),
                        ("all_gather_into_tensor (again, 4x rows)", 4 * args.rows)):
        x = torch.full((rows, shard), float(rank + 1), dtype=torch.bfloat16, device=dev)
        y = torch.empty((rows * world, shard), dtype=torch.bfloat16, device=dev)
        _snap(f"buffers for {label}", dev, steps)
        dist.all_gather_into_tensor(y, x)
        _snap(label, dev, steps)
        assert float(y[rows * (world - 1)].float().mean()) == float(world)
        del x, y
        dist.barrier(group=gloo)
    x = torch.full((args.rows, shard), float(rank + 1), dtype=torch.bfloat16, device=dev)
    gl = [torch.empty_like(x) for _ in range(world)] if rank == 0 else None
    _snap("buffers for gather", dev, steps)
    dist.gather(x, gl, dst=0)
    _snap("gather to rank 0 (first)", dev, steps)
    if gl is not None:
        assert float(gl[world - 1].float().mean()) == float(world)
    del x, gl
    dist.barrier(group=gloo)
    torch.cuda.Stream(dev)
    _snap("stream probe (torch.cuda.Stream())", dev, steps)
    rec = {"rank": rank, "world": world, "mode": args.mode, "rows": args.rows,
           "vocab": args.vocab, "shard": shard,
           "env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_"))},
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "nccl": ".".join(map(str, torch.cuda.nccl.version())),
           "device": torch.cuda.get_device_name(dev), "steps": steps}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, f"rank{rank}.json").write_text(json.dumps(rec, indent=1))
    dist.barrier(group=gloo)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
