"""torch's own NCCL communicator of vLLM V1's TP group: ProcessGroupNCCL makes it lazily at the
profile run's logits gather, beside vLLM's PyNccl communicator, inside the budget.

Where it comes from (read in the vLLM wheels named in ``TORCH_TP_COMM_V1``'s source):

- ``init_distributed_environment`` calls ``init_process_group`` with no ``device_id``, so
  ProcessGroupNCCL makes no communicator before a collective runs on a device group; vLLM's own
  collectives go through ``PyNcclCommunicator`` (over the gloo CPU group) or the custom
  all-reduce, and ``GroupCoordinator.barrier`` runs on the CPU group ("don't use
  `device_group` here!", distributed/parallel_state.py in 0.8.4, 0.10.1.1, 0.11.0, 0.19.0,
  0.25.0), as does ``in_the_same_node_as``; nothing earlier runs a torch collective on the TP
  device group;
- V1's ``LogitsProcessor._gather_logits`` all-gathers (``use_all_gather``: ``VLLM_USE_V1`` in
  0.8.4 / 0.10.1.1 ``platforms/interface.py``, ``True`` from 0.19.0) through
  ``tensor_model_parallel_all_gather`` → the device communicator's ``all_gather``, which is the
  base class's ``dist.all_gather_into_tensor(group=self.device_group)`` on CUDA up to 0.25.x and
  on ROCm after (``memprof.core.terms.pynccl_pool.LOGITS_GATHER_PROCESS_GROUP``, whose rules
  this term reads): the profile run's sampler pass gathers the ``[num_reqs, vocab / tp]``
  logits on every TP rank of the last PP stage, and that first collective makes the TP group's
  second communicator (``ncclCommInitRank``) and its ring buffers.

What it costs, measured (``recorders/gpu_nccl_torch_gather.py`` mode ``second``: a torch
communicator made lazily by a first ``all_gather_into_tensor`` of a [1024, 151936 / world] bf16
shard, after another NCCL communicator made and warmed on the same GPUs, as vLLM's PyNccl one is;
4× H100, NCCL 2.28.9, torch 2.11.0+cu130): the step's non-torch growth per rank, over NVLink P2P
(``GOLDEN``, 4× H100 NV18) and over host shared memory (``GOLDEN_SHM``, ``NCCL_P2P_DISABLE=1``,
the transport of GPUs without peer access). A larger gather (4× the rows) and the stream probe
add 0 B, so the figure does not depend on the vocabulary or ``max_num_seqs``. Over P2P with cuMem
on the figure equals, to the byte, the second PyNccl communicator's init + warm-up all_reduce
(``memprof.core.terms.nccl.SECOND_COMM_ROWS``: 509,607,936 B at 2 ranks, 507,510,784 at 4).
Made as the process's first communicator it costs 290-294 MiB more over either transport (mode
``stream``, the pool made first): NCCL's per-process share, which vLLM's PyNccl communicator
already holds. Over SHM that share is nearly all of it: a second communicator costs 8-30 MiB
(NCCL's SHM buffers are host memory), where memprof charged the first communicator's SHM row
less the stream pool (302 MiB) before ``GOLDEN_SHM`` was measured. torch's stream pool is not in
these figures (the earlier communicator made it); where vLLM made none before,
``memprof.core.terms.pynccl_pool`` charges it at the same gather.

Audited for the releases whose calibration rows it moved (issue 24), at each row's release:

- cuMem: vLLM 0.8.3-0.10.1.1 ``vllm/env_override.py`` sets ``NCCL_CUMEM_ENABLE=0`` at ``import
  vllm`` (from 0.9.x unless the variable is set or ``/dev/nvidia-caps-imex-channels`` exists, a
  multi-node NVLink host), before any communicator; NCCL reads it once per process
  (``NCCL_PARAM(CuMemEnable, "CUMEM_ENABLE", -2)`` in src/misc/cudawrap.cc, cached by
  src/include/param.h, v2.21.5-1 and v2.26.2-1), PyNccl loads the ``libnccl.so.2`` torch already
  holds (``find_nccl_library``), and torch 2.7.0 and 2.7.1 neither set nor read it (their
  ``libtorch_cuda.so`` holds no such string), so torch's communicator runs the cuMem-off rows
  too (``memprof.core.terms.non_torch.NCCL_CUMEM``).
- When it is made: 0.8.4, 0.9.2, 0.10.0, 0.10.1.1 and 0.17.1 call ``init_process_group`` with no
  ``device_id`` (no eager init, so ``new_group`` has no parent communicator to split from);
  ``GroupCoordinator.barrier`` and ``in_the_same_node_as`` run on the gloo CPU group, PyNccl's
  unique id goes over the CPU group, the custom all-reduce exchanges handles over the CPU group,
  and ``CudaCommunicator.all_reduce`` falls back to torch only where PyNccl returns nothing
  (``disabled``, set only at world size 1 or without the library: pynccl.py in 0.8.4, 0.9.2,
  0.10.0, 0.10.1.1): the logits gather is the TP device group's first collective. At
  0.9.1-0.10.x the init snapshot precedes ``init_worker_distributed_environment`` (v1/worker/
  gpu_worker.py ``init_device``), and 0.8.x V1 charges all non-torch memory, so wherever it is
  made it lands in the budget (``memprof.core.terms.non_torch.NCCL_PLACEMENT``).
- No sharing: PyNccl's communicator is made through ctypes with its own ``ncclUniqueId``
  (device_communicators/pynccl.py), which ProcessGroupNCCL never sees, and torch 2.7.x's
  ``new_group`` splits (``ncclCommSplit``) only from a default group bound to a device by
  ``init_process_group(device_id=...)`` (distributed_c10d.py ``_new_process_group_helper``:
  "only split when we *know* the default PG has already started communicator
  initialization"), which vLLM never passes: torch's communicator has its own buffers.
- The log of row 506 bears this out: at 0.10.0 (TP 8, cuMem off) the ranks' available KV differs
  by 96 MiB at rank 0 and 481 MiB at rank 7 from the six middle ranks (35.74 / 36.12 against
  35.65 GiB; 4,192 and 20,928 tokens × 24,064 B), which is twice the per-rank spread of one
  legacy-IPC communicator in ``GOLDEN`` and ``reports/gpu/nccl/nccl-matrix-4x-h100.json`` (48 MiB
  at the first rank, 240 MiB at the last): two cuMem-off communicators on the TP group, PyNccl's
  and torch's (one would give 48 and 240; ``tests/test_nccl_torch_rank_spread.py``). Each
  rank's tokens are its own available KV over the same 24,064 B a token, so the spread is the
  ranks' own, not rounding.

What grows from 2 to 4 ranks with cuMem off (546 → 784 / 832 / 832 / 592 MiB here, 722 → 962 /
1,010 / 1,010 / 770 MiB for a first communicator's init): the tree's own connections. NCCL
connects rings, then trees, at init when cuMem is off, and skips a tree connection to a peer
the ring already connected on that channel (src/transport.cc ``ncclTransportP2pConnect``,
src/init.cc / src/transport/generic.cc, the same at v2.21.5-1, v2.26.2-1 and v2.28.9-1). At 2
ranks every tree peer is a ring peer; on one node of 4 the tree is a chain beside the ring, so
per channel the first rank gains a receive connection (10 MiB on sm90: LL + LL128 + SIMPLE +
``ncclRecvMem``, 2 MiB aligned, p2p.cc), the middle ranks a receive and a send (``ncclSendMem``,
2 MiB), the last a send: 24 channels × (10, 12, 12, 2) MiB = 240 / 288 / 288 / 48 MiB
(``tests/test_nccl_torch_rank_spread.py``). With cuMem on NCCL connects at run time only what
the first collective needs, hence no growth. The part exists at 2.21.5 and 2.26.2 (same code,
same buffer sizes), and row 506's spread at 8 ranks on 2.26.2 is exactly two such chains on 24
channels; a longer chain gives its middle ranks no more, so 8 ranks take the 4-rank figure.

Not measured: world sizes past 4 take the 4-rank figure (``memprof.core.terms.nccl.measured_world``;
row 506's per-rank spread at 8 ranks is the 4-rank one); NCCL older than 2.28.9 (the
``memprof.core.terms.nccl`` docstring: the same buffers and connection schedule at cuMem off);
NVLS buffers are ``memprof.core.terms.nccl_nvls``'s; RCCL on ROCm takes these CUDA rows
(stand-in, said so).
"""

from __future__ import annotations

from functools import lru_cache

from memprof.base.units import fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.nodes import spread
from memprof.core.terms.nccl import measured_world
from memprof.core.terms.nccl_channels import Channels, channel_delta, channel_note, pcie_channels
from memprof.core.terms.non_torch import nccl_cumem
from memprof.core.terms.pynccl_pool import LOGITS_GATHER_PROCESS_GROUP, gather_on_process_group
from memprof.core.terms.rocm_platform import stand_in_tag
from memprof.core.versions import Rule, rule_in_force

GOLDEN = "reports/gpu/nccl-torch-gather/torch-gather-4x-h100.json"
GOLDEN_SHM = "reports/gpu/nccl-torch-gather/torch-gather-shm-4x-h100.json"

# torch's lazily made TP communicator + its first all_gather_into_tensor, per rank, keyed
# (peer access, cuMem on, ranks measured): GOLDEN (peer access) or GOLDEN_SHM (none),
# configuration w<ranks>-cumem<1|0>-second, step "all_gather_into_tensor (first)",
# non_torch_growth; the largest rank where ranks differ (legacy IPC at 4 ranks: 822,083,584 /
# 872,415,232 / 872,415,232 / 620,756,992 B; the engine keeps the smallest rank's KV pool).
TORCH_COMM_ROWS: dict[tuple[bool, bool, int], int] = {
    (True, True, 2): 509_607_936,
    (True, True, 4): 507_510_784,
    (True, False, 2): 572_522_496,
    (True, False, 4): 872_415_232,
    (False, True, 2): 31_457_280,
    (False, True, 4): 29_360_128,
    (False, False, 2): 10_485_760,
    (False, False, 4): 8_388_608,
}

TORCH_TP_COMM_V1: tuple[Rule, ...] = (
    Rule(name="torch_tp_comm_v1", changes="non-torch: torch's TP communicator (V1)",
         since="0.8.0", until=None, value=True, applies_to="nccl", generation="v1",
         introduced_by="V1 LogitsProcessor all-gathers over the TP device group",
         source="0.8.4 / 0.10.1.1 / 0.11.0 / 0.19.0 / 0.25.0 model_executor/layers/"
         "logits_processor.py _gather_logits (use_all_gather: platforms/interface.py), "
         "device_communicators/base_device_communicator.py all_gather: "
         "dist.all_gather_into_tensor(group=self.device_group); distributed/parallel_state.py "
         "barrier on the CPU group; PyNccl on CUDA from 0.26.0 "
         "(pynccl_pool.LOGITS_GATHER_PROCESS_GROUP); measured: " + GOLDEN + ", " + GOLDEN_SHM),
)


def torch_comm_bytes(peer_access: bool, cumem: bool, tp: int,
                     channels: Channels | None = None) -> tuple[int, str]:
    """The torch TP communicator's bytes per rank (init + first all_gather) and their basis; at
    a PCIe-only card's ``channels`` (``memprof.core.terms.nccl_channels``) where given."""
    world, note = measured_world(tp)
    got = TORCH_COMM_ROWS[(peer_access, cumem, world)]
    if channels is not None:
        got += sum(channel_delta(peer_access, cumem, world, channels))
        note += channel_note(channels)
    golden = GOLDEN if peer_access else GOLDEN_SHM
    transport = "NVLink P2P" if peer_access else "host shared memory (no peer access)"
    return got, (f"ncclCommInitRank + the first all_gather_into_tensor of a communicator made "
                 f"after another, over {transport}, "
                 f"{'cuMem on' if cumem else 'NCCL_CUMEM_ENABLE=0'} "
                 f"({golden} w{world}-cumem{int(cumem)}-second){note}")


def torch_tp_comm_v1(ctx: TermContext) -> Component | None:
    """vLLM V1's torch TP communicator (``TORCH_TP_COMM_V1``) on a rank of the last PP stage,
    where the release's logits gather runs on torch's process group (CUDA up to 0.25.x, ROCm
    after): ``TORCH_COMM_ROWS`` by transport, cuMem and TP size, in the budget."""
    dep, gpu, coord = ctx.dep, ctx.gpu, ctx.coord
    if dep.tp < 2 or coord.pp_stage != dep.pp - 1 or spread(dep, "TP") != "one node":
        return None
    if not _v1(dep.engine, dep.engine_version):
        return None
    if not gather_on_process_group(dep.engine, dep.engine_version, gpu.is_rocm):
        return None
    got, how = torch_comm_bytes(gpu.peer_access, nccl_cumem(dep), dep.tp, pcie_channels(gpu))
    return Component(
        name=f"torch's NCCL TP communicator (ProcessGroupNCCL, {dep.tp} ranks, logits "
        "all-gather)", category="non_torch", bytes=got, where="budget", profiled=True,
        formula=f"{fmt_bytes(got)}: {how}; made lazily by the profile run's logits all-gather "
        "on the TP device group (" + LOGITS_GATHER_PROCESS_GROUP[0].source.split(";")[0] + ")"
        + stand_in_tag(gpu, "torch's NCCL TP communicator"))


@lru_cache(maxsize=64)
def _v1(engine: str, version: str | None) -> bool:
    return rule_in_force(TORCH_TP_COMM_V1, version, engine) is not None
