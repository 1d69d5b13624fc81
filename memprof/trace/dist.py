"""The process group of a trace launched by ``torchrun``: one process per rank, collectives for
real (NCCL on GPUs, gloo on CPU). A rank traced alone needs none of this (``Replica.group`` is
None and each collective is a local op with the same output allocation)."""

from __future__ import annotations

import os
from typing import Any

from memprof.base.errors import BadInput
from memprof.core.deployment import Deployment


def default_group(dep: Deployment) -> tuple[Any, int]:
    """The default process group (initialised from torchrun's environment if it is not yet)
    and this process's global rank. The group's size must be 1 (a world of one on one GPU) or
    the deployment's TP size (the ranks of one TP group, one per GPU)."""
    import torch
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world not in (1, dep.tp):
        raise BadInput(f"torchrun started {world} processes for a deployment with TP {dep.tp}",
                       hint="run one process (a world of 1) or one per TP rank "
                       f"(--nproc-per-node {dep.tp})")
    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend)
    return dist.group.WORLD, dist.get_rank()
