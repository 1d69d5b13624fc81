"""NCCL's NVLink SHARP (NVLS) buffers and the second NCCL communicator of vLLM V0's TP group, per
rank on a host whose GPUs share a multicast-capable NVSwitch: derived from NCCL's source at the
version the engine release's torch pins, not measured (the lent hosts keep NVLS off, and none has
8 GPUs).

NVLS (NCCL ``src/transport/nvls.cc``, tags v2.21.5-1, v2.26.2-1, v2.27.3-1):

- ``ncclNvlsInit``: on unless ``NCCL_NVLS_ENABLE=0`` (default 2: the device's
  ``CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED``), and only where the communicator's topology holds
  more than 2 GPUs (``gpuCount <= 2`` returns); ``ncclTopoCompute`` then finds no NVLS graph
  without an NVSwitch node or below compute capability 9.0 (``src/graph/search.cc``: ``NVS``
  count 0 or ``ccMin < 90``), so an A100 HGX, PCIe cards and NVLink bridges get none. NCCL's
  cuMem switch does not gate it: ``nvls.cc`` calls the cuMem/multicast driver API itself.
- One node: the NVLS graph has one head per local GPU (``search.cc``: "Force intra-node NVLS
  algorithm to pull evenly from all GPUs", min = max channels = the GPU count), so
  ``nHeads`` = the communicator's ranks.
- 2.20.x (vLLM 0.6.0 – 0.6.3.post1's torch 2.4.0) as 2.21.x below, but with buffSize =
  ``comm->buffSizes[NCCL_PROTO_SIMPLE]`` (4 MiB, ``DEFAULT_BUFFSIZE``; v2.20.5-1 nvls.cc
  ``ncclNvlsSetup``, init.cc); 2.21 added ``NCCL_NVLS_CHUNKSIZE``.
- 2.21.x allocate at ``ncclCommInitRank`` (``init.cc`` initTransportsRank → ``ncclNvlsSetup``)
  one unicast buffer of ``comm->nChannels × 2 × (buffSize + memSize) × nHeads`` per rank, with
  buffSize = ``NCCL_NVLS_CHUNKSIZE`` 128 KiB × ``NCCL_STEPS`` 8 = 1 MiB and memSize =
  ``NVLS_MEM_ALIGN_SIZE`` 2 MiB, ``comm->nChannels`` = the ring channels raised to
  ``nvlsChannels`` (``NCCL_NVLS_NCHANNELS``, 16) where fewer (``src/graph/connect.cc``
  ncclTopoPostset); rounded up to the driver's recommended multicast granularity
  (``nvlsGetProperties``: 512 MiB on an H100 HGX, ``memprof.core.terms.nvls_granularity``).
- 2.22 on split it: ``ncclNvlsSetup`` maps a credit buffer of ``nChannels × 2 × 64 B × nHeads``
  (one 2 MiB page), and ``ncclNvlsBufferSetup`` the data buffer ``nvlsChannels × 2 × 1 MiB ×
  nHeads`` (16 channels on sm90 in 2.26/2.27; 32 or 24 on sm100). With cuMem on, NCCL connects
  at run time (``init.cc``: ``comm->runtimeConn = comm->cuMemSupport &&
  ncclParamRuntimeConnect()``, ``NCCL_RUNTIME_CONNECT`` default 1) and the data buffer comes at
  the first collective NCCL runs over NVLS (``src/group.cc``), which memprof does not place: not
  charged, and the estimate says so; with ``NCCL_CUMEM_ENABLE=0`` both come at init.

The ring channels: 24 in every NCCL log of the 2- and 4-rank NVLink (NV18) goldens
(reports/gpu/nccl/README.md, ring channels column); taken for 8 ranks, whose rings cross the same
NVSwitch at the same per-GPU bandwidth [derived, not measured at 8 ranks].

vLLM V0's second TP communicator: V0's model runner computes the logits on every rank
(vllm/worker/model_runner.py ``execute_model``: ``self.model.compute_logits`` before
``if not self.is_driver_worker``), whose ``LogitsProcessor._gather_logits`` gathers to the driver
with ``tensor_model_parallel_gather`` → ``GroupCoordinator.gather`` →
``torch.distributed.gather(group=self.device_group)`` (read in vLLM 0.7.1's wheel), so torch's
ProcessGroupNCCL makes the TP group's own NCCL communicator in the profile run, beside vLLM's
PyNccl one (every all-reduce goes through PyNccl or the custom all-reduce there). torch's gather is
ncclSend / ncclRecv to the root, so the driver rank (whose free memory vLLM V0 uses: the engine
takes the smallest block count of its workers) opens a receive connection from each other rank
on every p2p channel: ``src/transport/p2p.cc`` p2pRecvSetup sizes it LL + LL128 + SIMPLE
(SIMPLE goes to the sender only with P2P read, which ``ncclTopoCheckP2p`` enables on NVLink
between sm80 GPUs alone) + ``ncclRecvMem``, aligned to ``CUDA_IPC_MIN`` 2 MiB: 512 KiB +
4.6875 MiB + 4 MiB → 10 MiB on sm90 (6 MiB with P2P read), the send side's ``ncclSendMem``
one 2 MiB page, which makes the measured 12 MiB per (peer, channel) of a send + receive pair
(``memprof.core.terms.nccl.P2P_PER_PEER_CHANNEL_BYTES``).

The GPUs: the catalog's ``nvlink_multicast`` (configs/gpus.json, with its source). The switch:
``NCCL_NVLS_ENABLE`` as a launch sets it (``--nccl-nvls-enable``, a pasted command's environment),
and SGLang's launcher, which sets it to 0 unless ``--enable-nccl-nvls`` (``NVLS_ENV``).

Not modelled: NVLS across nodes (NVLS trees, MNNVL; GB200 and GH200 rows carry no
``nvlink_multicast``), ``NCCL_NVLS_NCHANNELS`` or channel settings other than NCCL's defaults,
NVLS user-buffer registration, SGLang's ``--enable-nccl-nvls``. vLLM V1's torch TP communicator
is ``memprof.core.terms.nccl_torch``'s.
"""

from __future__ import annotations

from memprof.base.errors import BadInput
from memprof.base.units import KiB, MiB, fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.deployment import Deployment
from memprof.core.gpus import GPU
from memprof.core.nodes import spread
from memprof.core.terms.nccl import NCCL_VERSION as NCCL_VERSION
from memprof.core.terms.nccl import (
    P2P_CHANNELS_PER_PEER,
    P2P_FIRST_BASE_BYTES,
    TORCH_STREAM_POOL_BYTES,
    nccl_row,
    second_comm_row,
)
from memprof.core.terms.nccl import (
    nccl_version as nccl_version,
)
from memprof.core.terms.nccl_channels import pcie_channels
from memprof.core.terms.nccl_stack import p2p_stack_delta
from memprof.core.terms.nccl_torch import torch_tp_comm_v1
from memprof.core.terms.non_torch import (
    MAX_THREADS_PER_SM,
    nccl_cumem,
    nccl_groups,
    nccl_placement,
)
from memprof.core.terms.nvls_granularity import (
    MC_GRANULARITY_RECOMMENDED_BYTES,
    MC_GRANULARITY_SOURCE,
    mc_rounded,
)
from memprof.core.versions import Rule, rule_in_force

# Launchers that set NCCL_NVLS_ENABLE themselves (no row: NCCL's default, on where supported).
NVLS_ENV: tuple[Rule, ...] = (
    Rule(name="nccl_nvls_off", changes="NCCL NVLS buffers", since=None, until=None,
         value="NCCL_NVLS_ENABLE=0", applies_to="nccl", engine="sglang",
         introduced_by="sgl-project/sglang#631 'Disable NCCL_NVLS by default'",
         source="python/sglang/srt/entrypoints/engine.py _set_envs_and_config: "
         "os.environ['NCCL_NVLS_ENABLE'] = str(int(server_args.enable_nccl_nvls)), "
         "--enable-nccl-nvls off by default"),
)

# vLLM V0: torch's ProcessGroupNCCL makes the TP group's second communicator at the profile
# run's logits gather (see the module docstring).
TORCH_TP_GATHER: tuple[Rule, ...] = (
    Rule(name="torch_tp_gather_comm", changes="non-torch: torch's TP communicator",
         since=None, until="0.11.0", value=True, applies_to="nccl", generation="v0",
         introduced_by="V0 LogitsProcessor._gather_logits → torch.distributed.gather",
         removed_by="V0 engine removed (0.11.0)",
         source="0.7.1 worker/model_runner.py ModelRunner.execute_model (compute_logits on "
         "every rank), model_executor/layers/logits_processor.py _gather_logits "
         "(tensor_model_parallel_gather unless use_all_gather), distributed/parallel_state.py "
         "GroupCoordinator.gather: torch.distributed.gather(group=self.device_group)"),
)

NCCL_STEPS = 8  # src/include/device.h
NVLS_CHUNK_BYTES = 128 * KiB  # NCCL_NVLS_CHUNKSIZE default (nvls.cc)
NVLS_BUFF_BYTES = NVLS_CHUNK_BYTES * NCCL_STEPS  # buffSize = nvlsStepSize × NCCL_STEPS
NVLS_MEM_ALIGN_BYTES = 2 * MiB  # NVLS_MEM_ALIGN_SIZE (1 << 21), 2.20.x / 2.21.x's memSize
NVLS_CHANNELS_SM90 = 16  # NCCL_NVLS_NCHANNELS default (2.21.5) / NVLS_NCHANNELS_SM90 (2.26+)
NVLS_CHANNELS_SM100 = 32  # NVLS_NCHANNELS_SM100 (2.26.2, 2.27.3)
NVLS_CHANNELS_SM100_NVL = 24  # NVLS_NCHANNELS_SM100_NVL: one node, 2.27.3
RING_CHANNELS_NVLINK = 24  # the 2- and 4-rank NV18 goldens' logged ring channels
UC_GRANULE = 2 * MiB  # cuMem's recommended allocation granularity; CUDA_IPC_MIN (comm.h)
# p2p.cc buffer sizes at NCCL's defaults (init.cc DEFAULT_LL_BUFFSIZE, DEFAULT_LL128_BUFFSIZE,
# DEFAULT_BUFFSIZE): LL 8 lines × 512 threads × 8 steps × 16 B, LL128 120 × 640 × 8 × 8 B, 4 MiB
LL_BUFF_BYTES = 8 * 512 * NCCL_STEPS * 16
LL128_BUFF_BYTES = 120 * 640 * NCCL_STEPS * 8
SIMPLE_BUFF_BYTES = 4 * MiB


def _round_up(n: int, unit: int) -> int:
    return -(-n // unit) * unit


def check_nccl_nvls(dep: Deployment) -> None:
    """``--nccl-nvls-enable``: NCCL reads 0 (off), 1 (on without the device's multicast
    attribute test) and 2 (its default); memprof refuses any other value."""
    if dep.nccl_nvls_enable not in (None, 0, 1, 2):
        raise BadInput(f"--nccl-nvls-enable {dep.nccl_nvls_enable}: NCCL_NVLS_ENABLE is 0, 1 or 2",
                       hint="pass 0 where the launch sets NCCL_NVLS_ENABLE=0, or leave it out "
                       "for NCCL's default")


def nvls_off_by(dep: Deployment) -> str:
    """Why NVLS is off for ``dep`` whatever the GPU ("" where NCCL's default stands): the
    launcher's own ``NCCL_NVLS_ENABLE=0`` (``NVLS_ENV``), else the user's
    ``--nccl-nvls-enable 0``."""
    row = rule_in_force(NVLS_ENV, dep.engine_version, dep.engine)
    if row is not None:
        return f"{row.value} ({row.source})"
    return "--nccl-nvls-enable 0" if dep.nccl_nvls_enable == 0 else ""


def nvls_group(dep: Deployment, gpu: GPU, group: str, size: int) -> bool:
    """Whether NCCL sets NVLS up for a communicator of ``group`` (``size`` ranks): the GPU row's
    ``nvlink_multicast``, more than 2 ranks, all on one node, no ``NCCL_NVLS_ENABLE=0`` from the
    launcher, and an NCCL version memprof maps for the engine release."""
    return (gpu.nvlink_multicast and size > 2 and spread(dep, group) == "one node"
            and not nvls_off_by(dep) and nccl_version(dep) is not None)


def nvls_channels(version: str, gpu: GPU) -> int:
    """``comm->nvlsChannels`` for one node: 16 before 2.22 (``NCCL_NVLS_NCHANNELS``) and on sm90
    after; on sm100 and later 32 in 2.22-2.26 (``NVLS_NCHANNELS_SM100``) and 24 for a single
    node from 2.27 (``NVLS_NCHANNELS_SM100_NVL``), nvls.cc ncclNvlsInit (2.28.x and later keep
    the single-node choice beside their NVLS-tree tuning)."""
    if version.startswith(("2.20", "2.21")) or gpu.arch == "sm90":
        return NVLS_CHANNELS_SM90
    major_minor = tuple(int(x) for x in version.split(".")[:2])
    return NVLS_CHANNELS_SM100_NVL if major_minor >= (2, 27) else NVLS_CHANNELS_SM100


def nvls_bytes(version: str, gpu: GPU, size: int, cumem: bool) -> tuple[int, str]:
    """One communicator's NVLS bytes per rank at init (0 where NCCL connects them at run time)
    for ``size`` ranks on one node, and how they were derived."""
    heads = size
    nvls = nvls_channels(version, gpu)
    if version.startswith(("2.20", "2.21")):
        # 2.20.x: buffSize = comm->buffSizes[NCCL_PROTO_SIMPLE] (DEFAULT_BUFFSIZE, 4 MiB;
        # v2.20.5-1 src/transport/nvls.cc ncclNvlsSetup, src/init.cc); 2.21 reads
        # NCCL_NVLS_CHUNKSIZE × NCCL_STEPS (1 MiB) instead, the setup otherwise the same
        buff = SIMPLE_BUFF_BYTES if version.startswith("2.20") else NVLS_BUFF_BYTES
        channels = max(RING_CHANNELS_NVLINK, nvls)
        asked = channels * 2 * (buff + NVLS_MEM_ALIGN_BYTES) * heads
        got = mc_rounded(asked, version)
        return got, (f"{channels} channels × 2 × ({fmt_bytes(buff)} buffer + 2 MiB "
                     "NVLS_MEM_ALIGN_SIZE) × "
                     f"{heads} heads = {fmt_bytes(asked)}, rounded up to the recommended "
                     f"multicast granularity ({fmt_bytes(MC_GRANULARITY_RECOMMENDED_BYTES)}): "
                     f"{fmt_bytes(got)} (NCCL {version} src/transport/nvls.cc "
                     "ncclNvlsSetup at ncclCommInitRank: comm->nChannels = the 24 ring channels "
                     "of the NVLink goldens; memprof.core.terms.nvls_granularity: "
                     + MC_GRANULARITY_SOURCE + ")")
    data = nvls * 2 * NVLS_BUFF_BYTES * heads
    if cumem:
        return 0, (f"NCCL {version} connects at run time with cuMem on (init.cc runtimeConn): "
                   f"the {fmt_bytes(data)} NVLS buffer ({nvls} channels × 2 × "
                   f"1 MiB × {heads} heads, nvls.cc ncclNvlsBufferSetup) comes at the first "
                   "collective NCCL runs over NVLS, which memprof does not place: not charged")
    got = data + UC_GRANULE
    return got, (f"{nvls} channels × 2 × 1 MiB × {heads} heads + one 2 MiB page "
                 f"of credits = {fmt_bytes(got)} (NCCL {version} src/transport/nvls.cc "
                 "ncclNvlsSetup + ncclNvlsBufferSetup, both at init with NCCL_CUMEM_ENABLE=0)")


def p2p_read(gpu: GPU) -> bool:
    """NCCL's P2P read: on an NVLink path between two sm80 GPUs only (src/graph/paths.cc
    ncclTopoCheckP2p, v2.21.5-1: "Enable P2P Read for Ampere/NVLink only"); the catalog's
    ``fully_connected`` stands for the NVLink path."""
    return gpu.arch == "sm80" and gpu.fully_connected


def p2p_recv_bytes_per_channel(gpu: GPU) -> int:
    """A receive connection's buffers for one (peer, channel) over NVLink P2P at NCCL's default
    sizes: LL + LL128 + SIMPLE + ``ncclRecvMem`` aligned to 2 MiB (10 MiB), without SIMPLE where
    P2P read puts it on the sender (NVLink between sm80 GPUs: 6 MiB)."""
    simple = 0 if p2p_read(gpu) else SIMPLE_BUFF_BYTES
    return _round_up(LL_BUFF_BYTES + LL128_BUFF_BYTES + simple + 1, UC_GRANULE)


def p2p_send_bytes_per_channel(gpu: GPU) -> int:
    """A send connection's buffers for one (peer, channel) over NVLink P2P: ``ncclSendMem``
    aligned to 2 MiB, plus the 4 MiB SIMPLE buffer where P2P read puts it on the sender
    (NVLink between sm80 GPUs)."""
    simple = SIMPLE_BUFF_BYTES if p2p_read(gpu) else 0
    return _round_up(simple + 1, UC_GRANULE)


def torch_tp_gather_comm(ctx: TermContext) -> Component | None:
    """vLLM V0's second TP communicator (``TORCH_TP_GATHER``) on a rank of the last PP stage
    (the others return their hidden states before the logits): a second communicator's init
    by transport, cuMem and world size (``memprof.core.terms.nccl.second_comm_row``: torch's
    lazily made communicator after another, measured with cuMem off over P2P and SHM, 290-294
    MiB below a first one's, whose per-process share and stream pool the PyNccl communicator
    holds; the first communicator's row less the stream pool where none was measured), and the
    gather's connections: on the driver (TP rank 0, the root) a receive connection from
    each of the other ``tp - 1`` ranks per p2p channel, on the others a send connection to the
    root (``ncclSendMem``, one 2 MiB page per channel: SIMPLE stays with the receiver without
    P2P read; with it, 4 MiB more)."""
    dep, gpu, coord = ctx.dep, ctx.gpu, ctx.coord
    if dep.tp < 2 or rule_in_force(TORCH_TP_GATHER, dep.engine_version, dep.engine) is None:
        return None
    if spread(dep, "TP") != "one node" or coord.pp_stage != dep.pp - 1:
        return None
    cumem = nccl_cumem(dep)
    ch = pcie_channels(gpu)
    per_peer = ch.p2p if ch else P2P_CHANNELS_PER_PEER
    second = second_comm_row(gpu.peer_access, cumem, dep.tp, ch)
    if second is not None:
        init = second.init
        made = f"a second communicator's ncclCommInitRank, {second.basis}"
    else:
        row = nccl_row(gpu.peer_access, cumem, dep.tp, 0, ch)
        init = row.init - TORCH_STREAM_POOL_BYTES
        made = ("ncclCommInitRank (the first communicator's row less torch's stream pool: "
                f"{row.basis.split(': ', 1)[-1]})")
    root = coord.tp_rank == 0
    peers = dep.tp - 1 if root else 1
    # the gather's SendRecv kernel grows the stack reservation (memprof.core.terms.nccl_stack)
    d_stack, stack_note = p2p_stack_delta(gpu, MAX_THREADS_PER_SM.get(gpu.arch), nccl_version(dep))
    base = P2P_FIRST_BASE_BYTES + d_stack
    if gpu.peer_access:
        per = p2p_recv_bytes_per_channel(gpu) if root else p2p_send_bytes_per_channel(gpu)
        conns = base + peers * per_peer * per
        how = (f"{fmt_bytes(base)} + {peers} peer{'s' if peers > 1 else ''} × {per_peer} "
               f"channels × {fmt_bytes(per)} "
               + ("receive buffers (p2p.cc p2pRecvSetup)" if root
                  else "send buffers (p2p.cc p2pSendSetup)"))
    else:
        conns, how = base, f"{fmt_bytes(base)} over SHM"
    how += stack_note
    who = "the driver rank's (the root's)" if root else "a non-driver rank's"
    return Component(
        name=f"NCCL TP communicator of torch's ProcessGroupNCCL ({dep.tp} ranks, logits gather)",
        category="non_torch", bytes=init + conns, where="budget", profiled=True,
        formula=f"{fmt_bytes(init)} {made} + {fmt_bytes(conns)} at {who} first gather, {how} "
        f"[the gather's connections derived from NCCL's source, not measured at {dep.tp} ranks]")


def nccl_nvls_terms(ctx: TermContext) -> list[Component]:
    """NVLS buffers per NCCL communicator that sets them up at init (``nvls_group``), and vLLM's
    torch TP communicator with its own (V0: ``torch_tp_gather_comm``; V1:
    ``memprof.core.terms.nccl_torch.torch_tp_comm_v1``). A communicator whose
    NVLS buffers NCCL connects at run time gets a 0-byte "runtime" row that says so; one without
    NVLS (``nvls_group`` false) gets none."""
    dep, gpu = ctx.dep, ctx.gpu
    version = nccl_version(dep)
    comps: list[Component] = []
    where = nccl_placement(dep).nccl
    groups = list(nccl_groups(dep))
    torch_comm = torch_tp_gather_comm(ctx) or torch_tp_comm_v1(ctx)
    if torch_comm is not None:
        comps.append(torch_comm)
        groups.append(("TP (torch)", dep.tp))
    for name, size in groups:
        group = "TP" if name == "TP (torch)" else name
        if version is None or not nvls_group(dep, gpu, group, size):
            continue
        got, how = nvls_bytes(version, gpu, size, nccl_cumem(dep))
        comps.append(Component(
            name=f"NCCL NVLS buffers ({name}, {size} ranks)", category="non_torch", bytes=got,
            where=("budget" if name == "TP (torch)" else where) if got else "runtime",
            profiled=bool(got),
            formula=how + f"; {gpu.name}'s NVSwitch is multicast-capable; NCCL_NVLS_ENABLE=0 "
            "(--nccl-nvls-enable 0) turns NVLS off [derived from NCCL's source, not measured]"))
    return comps
