"""Ranks on several hosts (``--nnodes``): which node each rank sits on, and whether a process
group's ranks share one node, each sit on a node of their own, or span nodes several to a node.

What the engines do (vLLM 0.10.1 and 0.19.0, vllm/distributed/):

- a node is a memory system: ``parallel_state.in_the_same_node_as`` has the group's first rank
  create a POSIX shared-memory segment and each other rank try to open it, so two containers
  (Kubernetes pods, Ray pods) on one machine are two nodes as well;
- ranks are numbered DP-major, TP-minor (``initialize_model_parallel``: ``all_ranks =
  arange(world_size).reshape(-1, dp, pp, tp)``; TP groups are its rows, PP/DP its strided
  columns, EP the DP×TP ranks of one PP stage), and a node holds ``world_size // nnodes``
  consecutive ranks (vllm/engine/arg_utils.py, 0.11.1 on: ``local_world_size = world_size //
  self.nnodes``, refused unless it divides; Ray's placement fills a node's bundles before the
  next). SGLang's ``--nnodes`` splits ``tp × pp`` ranks the same way (its parallel_state is
  vLLM's);
- a group whose ranks span nodes gets no custom all-reduce (custom_all_reduce.py
  ``CustomAllreduce.__init__``: "Custom allreduce is disabled because this process group spans
  across nodes", l.85 at 0.10.1, l.90 at 0.19.0; SGLang logs the same line), and its NCCL
  communicator reaches the ranks of other nodes over NCCL's NET transport (IB or sockets: P2P
  and SHM need one host): ``memprof.core.terms.multinode``;
- the TP group's shared-memory broadcaster (``shm_broadcast.MessageQueue``) serves readers on
  other nodes over a ZeroMQ socket instead of the host's shared memory: host memory either way,
  nothing on the GPU.

memprof models even layouts only: every group of one kind either inside one node or across
nodes alike (``check_nodes`` refuses the rest, naming a node count that works).
"""

from __future__ import annotations

from typing import Literal, Protocol

from memprof.base.errors import BadInput

Spread = Literal["one node", "one rank per node", "several per node"]
MAX_NODES = 1024


class Layout(Protocol):
    """The fields of ``memprof.core.deployment.Deployment`` the node layout reads."""

    @property
    def tp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def dp(self) -> int: ...
    @property
    def nnodes(self) -> int: ...
    @property
    def world_size(self) -> int: ...


def group_ranks(dep: Layout, group: str) -> list[list[int]]:
    """The global ranks of every process group of kind ``group`` (TP, PP, DP, EP), laid out as
    vLLM's ``initialize_model_parallel`` lays them (see the module). An engine whose world is
    TP×PP (SGLang: ``--dp`` splits the TP group for attention) has its DP groups inside each TP
    group, strided by the attention TP size (python/sglang/srt/layers/dp_attention.py:
    ``attn_tp_rank = tp_rank % attn_tp_size``), and its EP group is the TP group."""
    tp, pp = dep.tp, dep.pp
    folded = dep.world_size != tp * pp * dep.dp  # DP inside TP (SGLang)
    dp = 1 if folded else dep.dp

    def rank(d: int, p: int, t: int) -> int:
        return (d * pp + p) * tp + t

    # SGLang's MoE EP / MoE TP groups (0.4.10+) split the TP group: the one of size > 1 is it;
    # SGLang 0.4.3 - 0.4.6's world group (no PP in those releases) is the TP group's ranks
    if group in ("TP", "MoE EP", "MoE TP", "world") or (group == "EP" and folded):
        return [[rank(d, p, t) for t in range(tp)] for d in range(dp) for p in range(pp)]
    if group == "PP":
        return [[rank(d, p, t) for p in range(pp)] for d in range(dp) for t in range(tp)]
    if group == "DP":
        if folded:
            a = max(1, tp // dep.dp)
            return [[rank(0, p, j + k * a) for k in range(dep.dp)]
                    for p in range(pp) for j in range(a)]
        return [[rank(d, p, t) for d in range(dp)] for p in range(pp) for t in range(tp)]
    if group == "EP":
        return [[rank(d, p, t) for d in range(dp) for t in range(tp)] for p in range(pp)]
    raise ValueError(group)


def _spreads(dep: Layout, group: str, nnodes: int | None = None) -> set[Spread]:
    per_node = dep.world_size // (nnodes or dep.nnodes)
    out: set[Spread] = set()
    for ranks in group_ranks(dep, group):
        nodes = [r // per_node for r in ranks]
        distinct = len(set(nodes))
        out.add("one node" if distinct == 1
                else "one rank per node" if distinct == len(nodes) else "several per node")
    return out


def spread(dep: Layout, group: str) -> Spread:
    """How the ranks of ``dep``'s ``group`` groups sit on its nodes: all on one node, each on a
    node of its own, or across nodes several to a node (``check_nodes`` has made every group of
    a kind alike)."""
    if dep.nnodes <= 1:
        return "one node"
    got = _spreads(dep, group)
    return next(iter(got)) if len(got) == 1 else "several per node"


def spans_nodes(dep: Layout, group: str) -> bool:
    """Whether ``dep``'s ``group`` groups span nodes (vLLM's ``in_the_same_node_as`` false)."""
    return dep.nnodes > 1 and spread(dep, group) != "one node"


def check_nodes(dep: Layout, groups: tuple[tuple[str, int], ...]) -> None:
    """Refuse a node count the engine refuses (vLLM: ``world_size`` must be divisible by
    ``nnodes``) or one that puts some groups of a kind inside a node and others across nodes
    (``groups``: the kinds of size > 1), which memprof does not model."""
    n, world = dep.nnodes, dep.world_size
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_NODES:
        raise BadInput(f"--nnodes must be a whole number from 1 to {MAX_NODES}, got {n!r}",
                       hint="the hosts (or pods) the deployment's ranks run on; 1 is one host")
    if n == 1:
        return
    if world % n:
        good = [d for d in range(1, world + 1) if world % d == 0]
        raise BadInput(f"--nnodes {n} does not divide the deployment's {world} ranks",
                       hint="use --nnodes " + "/".join(map(str, good[-6:]))
                       + " (each node runs the same number of ranks)")
    kinds = [(name, size) for name, size in groups if size > 1]
    for name, size in kinds:
        if len(_spreads(dep, name)) > 1:
            good = [d for d in range(1, world + 1) if world % d == 0
                    and all(len(_spreads(dep, k, d)) == 1 for k, _ in kinds)]
            raise BadInput(
                f"--nnodes {n} puts {world // n} ranks on a node: some {name} groups of "
                f"{size} ranks would sit inside one node and others span two",
                hint="use --nnodes " + "/".join(map(str, good[-6:])) + " (memprof models "
                "layouts where every group of a kind is inside a node or across nodes alike)")
