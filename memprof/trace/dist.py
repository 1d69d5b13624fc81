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
    of the deployment) and the layouts whose ranks are not traced under torchrun yet. vLLM's
    data parallelism is traced: each DP rank is an engine of its own, the same replica on every
    rank, and its communicators are made over their real members (``communicators``)."""
    n = dep.world_size
    if world.size not in (1, n):
        raise BadInput(f"torchrun started {world.size} processes for a deployment of "
                       f"{n} ranks (TP {dep.tp} × PP {dep.pp}"
                       f"{f' × DP {dep.dp}' if n == dep.tp * dep.pp * dep.dp else ''})",
                       hint=f"run one process (a world of 1) or one per rank "
                       f"(--nproc-per-node {n})")
    if world.size > 1 and dep.enable_dp_attention:
        raise BadInput("SGLang's --enable-dp-attention under torchrun is not traced yet (each "
                       "DP rank's attention group is not built)",
                       hint="trace one rank alone (no torchrun; --rank N picks it), or run "
                       "recorders/gpu_dp_gather_ranks.py for the DP-attention gather")
    if not 0 <= world.rank < world.size:
        raise BadInput(f"RANK {world.rank} is outside a world of {world.size}",
                       hint="launch with torchrun, which sets RANK")


def tp_members(dep: Deployment, rank: int) -> list[int]:
    """The global ranks of ``rank``'s TP group (TP fastest in the global order)."""
    first = rank - rank % dep.tp
    return list(range(first, first + dep.tp))


# the world's gloo group (vLLM's world GroupCoordinator's cpu_group): carries the gather of every
# rank's result and the closing barrier, so that no NCCL communicator is made for them
_CPU_WORLD: list[Any] = []


def init_world(world: World, cuda: bool, bound: bool = False) -> None:
    """Start the default process group from torchrun's environment as vLLM's
    ``init_distributed_environment`` does (vllm/distributed/parallel_state.py, 0.11.0 and 0.33.0):
    ``init_process_group("nccl")`` with no ``device_id``, so ProcessGroupNCCL stays lazy and
    makes no communicator until a collective runs on it (0.33.0 binds a device only on its
    ``VLLM_DISTRIBUTED_USE_SPLIT_GROUP`` path, off by default), then the world group's device
    and gloo groups (``init_world_group``: ``use_device_communicator=False``, no communicator);
    gloo on CPU. ``bound``: the process group bound to the GPU instead
    (``device_id``: ProcessGroupNCCL's communicator and torch's stream pool made at once), as
    the trace made it for a world of one rank and, under torchrun, before its communicators
    were vLLM's."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if cuda:
        dev = torch.device("cuda", world.local_rank)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev if bound else None)
    else:
        dist.init_process_group("gloo")
    ranks = list(range(world.size))
    dist.new_group(ranks)
    _CPU_WORLD[:] = [dist.new_group(ranks, backend="gloo")]


class TorchGroup:
    """A torch process group's all-reduce in the replica's shape (out of place): gloo on CPU,
    or the default group of a world of one rank."""

    def __init__(self, group: Any) -> None:
        self.group = group

    def all_reduce(self, x: Any) -> Any:
        import torch.distributed as dist

        y = x.clone()
        dist.all_reduce(y, group=self.group)
        return y


def group_partition(dep: Deployment, name: str) -> list[list[int]] | None:
    """Every group of kind ``name`` ("TP", "PP", "DP" or "EP") as lists of global ranks, in
    vLLM's global order (DP outermost, then PP, TP fastest: vllm/distributed/parallel_state.py
    ``initialize_model_parallel``, 0.11.0: TP groups are consecutive ranks, PP groups take one
    rank of each stage, DP groups one rank of each DP replica, and the EP group every DP × TP
    rank of a stage); None for a group the engine makes that is not one of these."""
    tp, pp, dp = dep.tp, dep.pp, dep.dp
    if name == "TP":
        return [list(range(f, f + tp)) for f in range(0, tp * pp * dp, tp)]
    if name == "PP":
        return [[d * tp * pp + s * tp + t for s in range(pp)]
                for d in range(dp) for t in range(tp)]
    if name == "DP":
        return [[d * tp * pp + local for d in range(dp)] for local in range(tp * pp)]
    if name == "EP":
        return [[d * tp * pp + s * tp + t for d in range(dp) for t in range(tp)]
                for s in range(pp)]
    return None


def coordinator(partition: list[list[int]], world: World, cuda: bool) -> Any:
    """vLLM's ``GroupCoordinator`` for one kind of group (vllm/distributed/parallel_state.py,
    0.11.0 and 0.33.0): for every rank list of the partition, in order, a device group
    (``new_group(ranks)``: NCCL, lazy) and a CPU group (``new_group(ranks, "gloo")``), every
    process creating every group as ``new_group`` requires; then this rank's device
    communicator where its group has more than one rank (``CudaCommunicator``: a
    ``PyNcclCommunicator`` over the CPU group, ``memprof.trace.pynccl``; on CPU the gloo group
    itself). None where the group is this rank alone."""
    import torch.distributed as dist

    mine: list[int] = []
    cpu = dev = None
    for members in partition:
        d = dist.new_group(members)
        c = dist.new_group(members, backend="gloo")
        if world.rank in members:
            mine, dev, cpu = members, d, c
    if len(mine) < 2:
        return None
    if cuda:
        from memprof.trace.pynccl import PyNccl

        return PyNccl(mine, world.rank, cpu)
    return TorchGroup(dev)


@dataclass(frozen=True, slots=True)
class Communicators:
    """The NCCL communicators a rank of the deployment makes, in the order vLLM makes them
    (``memprof.core.terms.non_torch.nccl_groups``: a group of more than one rank each): the
    first (made by ``communicators``), the later ones' partitions (each made by ``make``, in a
    trace phase of its own), the groups the trace cannot build (not a TP/PP/DP/EP group), and
    the communicator the replica's TP all-reduces run over (None where TP is 1: vLLM issues
    none)."""

    world: World
    cuda: bool
    first: tuple[str, Any] | None
    later: tuple[tuple[str, list[list[int]]], ...]
    unbuilt: tuple[str, ...]
    replica: Any

    def make(self, partition: list[list[int]]) -> Any:
        """A later communicator (``coordinator``)."""
        return coordinator(partition, self.world, self.cuda)


def communicators(dep: Deployment, world: World, cuda: bool) -> Communicators:
    """Make this rank's first communicator (TP's, else PP's, DP's or EP's, as vLLM orders
    them) and list the later ones; call after ``init_world``."""
    from memprof.core.terms.non_torch import nccl_groups

    named = [(name, group_partition(dep, name)) for name, _ in nccl_groups(dep)]
    built = [(name, part) for name, part in named if part is not None]
    unbuilt = tuple(name for name, part in named if part is None)
    first = None
    if built:
        first = (built[0][0], coordinator(built[0][1], world, cuda))
    replica = first[1] if first is not None and first[0] == "TP" else None
    return Communicators(world=world, cuda=cuda, first=first, later=tuple(built[1:]),
                         unbuilt=unbuilt, replica=replica)


def default_group(dep: Deployment) -> tuple[Any, int]:
    """The default process group of a world of one rank (initialised from torchrun's
    environment if it is not yet, bound to the GPU), as the replica's communicator, and this
    process's global rank, for a caller that builds the group before tracing."""
    import torch
    import torch.distributed as dist

    world = env_world() or World(size=1, rank=0, local_rank=0)
    check_layout(dep, world)
    if world.size != 1:
        raise BadInput("default_group is for a world of one rank",
                       hint="under torchrun with more processes use communicators()")
    init_world(world, torch.cuda.is_available(), bound=True)
    return TorchGroup(dist.group.WORLD), world.rank


def all_gather(obj: Any) -> list[Any]:
    """Every rank's ``obj``, in rank order, on every rank (``all_gather_object``)."""
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj, group=_CPU_WORLD[0] if _CPU_WORLD else None)
    return out


def finish() -> None:
    """Tear the process group down (NCCL warns at exit otherwise)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier(group=_CPU_WORLD[0] if _CPU_WORLD else None)
        dist.destroy_process_group()
    _CPU_WORLD.clear()
