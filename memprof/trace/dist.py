"""The process group of a trace launched by ``torchrun``: one process per rank of the deployment,
each tracing its own rank with real collectives (NCCL on GPUs, gloo on CPU), and the gather of
every rank's result onto rank 0. A rank traced alone needs none of this (``Replica.group`` is
None and each collective is a local op with the same output allocation).

Global rank order is vLLM's (``RankCoord``): DP outermost, then PP, TP fastest, so the TP group
of global rank ``g`` is the ``tp`` consecutive ranks from ``g - g % tp``
(vllm/distributed/parallel_state.py ``initialize_model_parallel``, vLLM 0.11)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from memprof.base.errors import BadInput
from memprof.core.deployment import Deployment


@dataclass(frozen=True, slots=True)
class World:
    """torchrun's world as this process sees it: its size, this process's global rank and its
    local rank (the GPU it takes)."""

    size: int
    rank: int
    local_rank: int


def env_world() -> World | None:
    """The world torchrun described in the environment, or None outside torchrun."""
    if not os.environ.get("WORLD_SIZE"):
        return None
    try:
        size = int(os.environ["WORLD_SIZE"])
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError:
        raise BadInput("WORLD_SIZE, RANK and LOCAL_RANK must be integers",
                       hint="launch with torchrun, which sets them") from None
    return World(size=size, rank=rank, local_rank=local)


def check_layout(dep: Deployment, world: World) -> None:
    """Refuse, before any work, a world that is not the deployment's (1 process, or one per rank
    of the deployment) and the layouts whose ranks are not traced under torchrun yet."""
    n = dep.world_size
    if world.size not in (1, n):
        raise BadInput(f"torchrun started {world.size} processes for a deployment of "
                       f"{n} ranks (TP {dep.tp} × PP {dep.pp}"
                       f"{f' × DP {dep.dp}' if n == dep.tp * dep.pp * dep.dp else ''})",
                       hint=f"run one process (a world of 1) or one per rank "
                       f"(--nproc-per-node {n})")
    if world.size > 1 and dep.dp > 1:
        what = ("SGLang's --enable-dp-attention" if dep.enable_dp_attention
                else "data parallelism (--dp)")
        raise BadInput(f"{what} under torchrun is not traced yet (each DP rank's attention "
                       "group is not built)",
                       hint="trace one rank alone (no torchrun; --rank N picks it) or drop --dp")
    if not 0 <= world.rank < world.size:
        raise BadInput(f"RANK {world.rank} is outside a world of {world.size}",
                       hint="launch with torchrun, which sets RANK")


def tp_members(dep: Deployment, rank: int) -> list[int]:
    """The global ranks of ``rank``'s TP group (TP fastest in the global order)."""
    first = rank - rank % dep.tp
    return list(range(first, first + dep.tp))


def init_world(world: World, cuda: bool) -> None:
    """Start the default process group from torchrun's environment (NCCL bound to this
    process's GPU, so the communicator is created here, eagerly, as vLLM's PyNccl does; gloo
    on CPU)."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if cuda:
        dev = torch.device("cuda", world.local_rank)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev)
    else:
        dist.init_process_group("gloo")


def tp_group(dep: Deployment, world: World) -> Any:
    """This rank's TP group: the world itself when the world is one TP group, else a new group
    (every process creates every group, as ``new_group`` requires)."""
    import torch.distributed as dist

    if world.size == 1 or world.size == dep.tp:
        return dist.group.WORLD
    mine = None
    for first in range(0, world.size, dep.tp):
        g = dist.new_group(list(range(first, first + dep.tp)))
        if world.rank in range(first, first + dep.tp):
            mine = g
    return mine


def default_group(dep: Deployment) -> tuple[Any, int]:
    """The default process group (initialised from torchrun's environment if it is not yet)
    and this process's global rank, for a caller that builds the group before tracing."""
    import torch

    world = env_world() or World(size=1, rank=0, local_rank=0)
    check_layout(dep, world)
    init_world(world, torch.cuda.is_available())
    return tp_group(dep, world), world.rank


def all_gather(obj: Any) -> list[Any]:
    """Every rank's ``obj``, in rank order, on every rank (``all_gather_object``)."""
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def finish() -> None:
    """Tear the process group down (NCCL warns at exit otherwise)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
