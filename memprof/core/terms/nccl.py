"""NCCL's device memory per rank, by transport, world size and cuMem setting: what a communicator
costs at ``ncclCommInitRank``, at its first all_reduce, and at its first point-to-point operation,
each figure read off a golden of ``reports/gpu/nccl`` (2× and 4× H100 NV18, NCCL 2.28.9, torch
2.11.0+cu130, ``recorders/gpu_nccl.py``; rank 0's ``non_torch_growth_bytes`` per step, exact
bytes), and how world sizes that were not measured are predicted (stated, never silent).

These rows are NCCL's own channel count on NVLink H100s (24 collective, 32 point-to-point
channels; 4 and 4 with P2P disabled). On a card whose GPUs meet over PCIe alone NCCL builds
fewer (2 or 4, by the PCIe link and the transport), and ``nccl_row``, ``second_comm_row`` and
``first_p2p_bytes`` take that card's channels and move the rows by the bytes per channel
measured in ``reports/gpu/nccl/nccl-channels-4x-h100.json`` (``memprof.core.terms.nccl_channels``).

What the goldens show (``reports/gpu/nccl/README.md``):

- init and the first all_reduce do not grow from 2 to 4 ranks over P2P with cuMem on, nor over SHM
  (``nccl-matrix-4x-h100.json`` against ``nccl-matrix-2x-h100.json``, configurations
  ``p2p-cumem-on``, ``shm-cumem-on``, ``shm-cumem-off``); legacy IPC (cuMem off) init grows and
  differs by position at 4 ranks (962 / 1,010 / 1,010 / 770 MiB: the tree's connections to
  peers that are not ring peers, ``memprof.core.terms.nccl_torch``'s docstring): memprof
  reports the largest rank;
- the first point-to-point op over NVLink P2P is 62 MiB + peers × p2p channels × 12 MiB, which
  holds for every P2P configuration at the default buffer size in both matrices (446 / 1,214 MiB
  at 32 channels, 158 / 350 MiB at ``NCCL_MAX_P2P_NCHANNELS=8``, 86 / 134 MiB at
  ``NCCL_MAX_NCHANNELS=2``, 1 / 3 peers); over SHM it is 62 MiB at 2 and 4 ranks. The 62 MiB is
  the CUDA driver's stack reservation grown for NCCL's SendRecv kernel, not buffers
  (``memprof.core.terms.nccl_stack.first_p2p_stack``), and moves with the card and NCCL release;
- 73,400,320 B of every init figure is torch's CUDA stream pool, which ``init_process_group``
  makes (``nccl-matrix-2x-h100-stream-first.json``: init minus exactly that with a stream made
  first); the graph model does not charge it a second time (``memprof.core.terms.cudagraph``).

Older NCCL: no per-version rule, because NCCL's source shows no difference in device memory for
the settings the older releases run (issues 24/26). Every vLLM release that pins an NCCL older
than the measured 2.28.9 (2.21.5 for 0.7.1-0.8.5.post1, 2.26.2 for 0.9.0-0.10.1.1:
``memprof.core.terms.nccl_nvls.NCCL_VERSION``) sets ``NCCL_CUMEM_ENABLE=0``
(``memprof.core.terms.non_torch.NCCL_CUMEM``; SGLang's launcher does too), so they run the
cuMem-off rows above. Compared at tags v2.21.5-1, v2.26.2-1 and v2.28.9-1 of
github.com/NVIDIA/nccl:

- when connections are made: 2.21.5 has no runtime connect and connects every ring, then every
  tree, in ``initTransportsRank`` (src/init.cc); 2.26.2 and 2.28.9 defer this to the first
  collective only when ``comm->runtimeConn = comm->cuMemSupport && ncclParamRuntimeConnect()``,
  and ``cuMemSupport`` is ``ncclCuMemEnable()`` of every rank, 0 under
  ``NCCL_CUMEM_ENABLE=0``: then they also connect rings and trees at init (src/init.cc). The
  measured cuMem-off rows (init large, first all_reduce 186 MiB at every transport) have the
  2.21.5 schedule;
- buffer sizes: ``DEFAULT_BUFFSIZE`` 4 MiB (SIMPLE), ``DEFAULT_LL_BUFFSIZE`` 8 × 512 × 8 × 16 B
  = 512 KiB and ``DEFAULT_LL128_BUFFSIZE`` 120 × 640 × 8 × 8 B = 4,800 KiB per connection
  (src/init.cc, src/include/device.h), the same at the three tags;
- P2P (src/transport/p2p.cc): the sender holds ``ncclSendMem`` + SIMPLE when it reads, the
  receiver ``ncclRecvMem`` + every other protocol's buffer; with cuMem off both come from
  ``ncclCudaCalloc`` in ``ncclP2pAllocateShareableBuffer`` at the three tags;
- SHM (src/transport/shm.cc): every protocol's buffer is host memory at the three tags, on the
  receiver's side by default (``NCCL_SHM_LOCALITY`` 2): 2.21.5 ``ncclShmOpen`` (a /dev/shm
  file, mmap, ``cudaHostRegister``: src/misc/shmutils.cc); 2.26.2 and 2.28.9
  ``ncclShmAllocateShareableBuffer``, whose cuMem host branch needs ``ncclCuMemEnable()`` and
  otherwise calls the same ``ncclShmOpen``. The transport's only device allocation is the
  ``devFifo`` (``ncclCudaCalloc``, one SIMPLE buffer) of ``NCCL_SHM_USE_CUDA_MEMCPY=1``, off by
  default at the three tags. So NCCL's SHM buffers are not in device memory at any of them, and
  the SHM rows' figures are not buffers either: the first all_reduce's 186 MiB is the same over
  SHM, sockets and legacy-IPC P2P, and with ``NCCL_BUFFSIZE`` at 1 MiB (``reports/gpu/nccl``);
- the work FIFO is host memory unless GDR-mapped (``ncclCudaHostCalloc``: 2.21.5
  ``workFifoHeap``, 2.26.2 / 2.28.9 ``workFifoBuf``, src/init.cc);
- point-to-point channels: ``ncclTopoComputeP2pChannels`` (src/graph/paths.cc) takes
  min(ring channels, ``NCCL_MAX_P2P_NCHANNELS``) rounded up to a power of two at the three
  tags; ``MAXCHANNELS`` went from 32 (2.21.5) to 64 (2.26.2), which changes nothing at 24 ring
  channels (32 either way).

- NCCL's other device allocations at init are per-channel tables of a few KB at the three tags
  (``ncclCudaCallocAsync`` of ``devCommAndChans`` in src/init.cc, ``devPeers`` and
  ``devRingUserRanks`` in src/channel.cc); 2.28.9 adds GPU-initiated networking (src/gin/),
  which a one-node communicator does not set up.

So where a published log over SHM (or without peer access) shows less than these rows, the
difference is not in NCCL's buffers: of the SHM rows' 121,634,816 B at init (195,035,136 less
torch's stream pool) NCCL allocates 10 MiB (its channel tables and the proxy's shared
point-to-point buffer, ``reports/gpu/nccl-image``), and the 186 MiB at the first all_reduce are not
allocations NCCL's source makes. The first all_reduce's 186 MiB is the CUDA driver's per-thread
stack reservation, grown for NCCL's ring LL kernel (1,744 B a thread on the H100's 132 SMs × 2048
threads), which depends on the card's SM count and on the stack NCCL's kernel declares in the image
the card runs, and so on the NCCL release (``memprof.core.terms.nccl_stack``, measured in
``reports/gpu/nccl-stack``; ``memprof.core.terms.non_torch.nccl_comm`` moves a first communicator's
row by it). Init's 116 MiB over SHM is NCCL's own device code, not buffers: NCCL's allocation log
shows 6-10 MiB of device buffers over SHM, and the other 111,149,056 B, the same over SHM and P2P
at 2 and 4 channels, is the library's sm_90 image that init loads by touching every kernel (its
51 pages of 2 MiB, and 2 pages beyond it: ``nccl_image.LOAD_BEYOND_IMAGE_BYTES``)
(``ncclInitKernelsForDevice``; NCCL links its CUDA runtime statically, which is why eager module
loading left it in init): ``reports/gpu/nccl-image``. It moves with the release's image for the
card (``memprof.core.terms.nccl_image``, applied by ``memprof.core.terms.non_torch.nccl_comm`` to a
first communicator's row).
"""

from __future__ import annotations

from typing import NamedTuple

from memprof.base.units import MiB, fmt_bytes
from memprof.core.deployment import Deployment
from memprof.core.terms.nccl_channels import Channels, channel_delta, channel_note
from memprof.core.versions import Rule, value_at

# torch's CUDA stream pool: nccl-matrix-2x-h100-stream-first.json, every configuration, step
# "torch.cuda.Stream() before init" = 73,400,320 B, and init smaller by exactly that
# (p2p-cumem-on 390,070,272 → 316,669,952 B); graph-collectives-2x-h100-stream.json
# ``side_stream_non_torch_bytes``: 73,400,320 B in the kinds with no ProcessGroupNCCL (alone,
# pynccl), 0 B in the one that had it (local).
TORCH_STREAM_POOL_BYTES = 73_400_320

# The first point-to-point op over SHM or with no peer channel: 65,011,712 B (62 MiB: the stack
# reservation from the ring LL kernel's 1,744 B limit to the SendRecv kernel's 1,984 B on the
# measured H100, moved to other cards by memprof.core.terms.nccl_stack.on_card), and each
# (peer, p2p channel) pair over NVLink P2P adds 12 MiB at NCCL's default 4 MiB buffer:
# nccl-matrix-2x-h100.json p2p-cumem-on "first all_to_all_single, 1 MiB" = 467,664,896 B
# = 65,011,712 + 1 × 32 × 12,582,912; nccl-matrix-4x-h100.json p2p-cumem-on = 1,272,971,264 B
# = 65,011,712 + 3 × 32 × 12,582,912. 32 is the p2p channels per peer NCCL logged on these hosts
# ("Channel xx/1" lines; NCCL_MAX_P2P_NCHANNELS defaults to NCCL's 32 channels).
P2P_FIRST_BASE_BYTES = 65_011_712
P2P_PER_PEER_CHANNEL_BYTES = 12 * MiB
P2P_CHANNELS_PER_PEER = 32

# (init incl. torch's stream pool, first all_reduce) per rank, by (peer access, cuMem on, ranks
# measured), each from ``non_torch_growth_bytes`` of rank 0 (of the largest rank where ranks
# differ) in the file and configuration named:
NCCL_ROWS: dict[tuple[bool, bool, int], tuple[int, int, str]] = {
    # P2P, cuMem on (NCCL's default): the 2-rank figure is the 2× H200 measurement (458 + 474
    # MiB); the 2× H100 golden gives 390,070,272 + 497,025,024 B (nccl-matrix-2x-h100.json
    # p2p-cumem-on): the first all_reduce agrees, init is 86 MiB smaller on H100. memprof keeps
    # H200's init for every GPU with peer access; the 4-rank row is H200's too, because the H100
    # goldens show no growth from 2 to 4 ranks (nccl-matrix-4x-h100.json p2p-cumem-on: the same
    # 390,070,272 + 497,025,024 B).
    (True, True, 2): (458 * MiB, 474 * MiB, "2× H200 measurement (2× H100: "
                      "nccl-matrix-2x-h100.json p2p-cumem-on 390,070,272 + 497,025,024 B)"),
    (True, True, 4): (458 * MiB, 474 * MiB, "the 2-rank H200 figure: nccl-matrix-4x-h100.json "
                      "p2p-cumem-on equals its 2-rank H100 figures"),
    # P2P, NCCL_CUMEM_ENABLE=0 (legacy IPC): 2 ranks nccl-matrix-2x-h100.json p2p-cumem-off;
    # 4 ranks nccl-matrix-4x-h100.json p2p-cumem-off, the largest rank (ranks 1 and 2:
    # 1,059,061,760 B; rank 0 1,008,730,112, rank 3 807,403,520).
    (True, False, 2): (757_071_872, 195_035_136, "nccl-matrix-2x-h100.json p2p-cumem-off"),
    (True, False, 4): (1_059_061_760, 195_035_136, "nccl-matrix-4x-h100.json p2p-cumem-off, "
                       "the largest rank (1 and 2; rank 0: 1,008,730,112 B)"),
    # SHM (NCCL_P2P_DISABLE=1), cuMem on and off: the same at 2 and 4 ranks.
    (False, True, 2): (213_909_504, 195_035_136, "nccl-matrix-2x-h100.json shm-cumem-on"),
    (False, True, 4): (213_909_504, 195_035_136, "nccl-matrix-4x-h100.json shm-cumem-on"),
    (False, False, 2): (195_035_136, 195_035_136, "nccl-matrix-2x-h100.json shm-cumem-off"),
    (False, False, 4): (195_035_136, 195_035_136, "nccl-matrix-4x-h100.json shm-cumem-off"),
}
MEASURED_WORLD_SIZES = (2, 4)
# Rows whose figures hold the process's first fill kernel (the 90-92 MiB step that
# ``memprof.core.terms.non_torch`` otherwise charges to the profile run), keyed (peer access,
# cuMem on): the (P2P, cuMem on) row, 458 + 474 MiB, matches the traced init + first all_reduce
# of every reports/gpu/ranks run (983,564,288 B, +0.6%), and the trace's context step made no
# kernel, so its init holds the step: 486,539,264 B = nccl-matrix-2x-h100.json p2p-cumem-on's
# 390,070,272 + the 96,468,992 B that the matrix's context step (a torch.zeros) took
# (reports/gpu/nccl/first-kernel-2x-h100.json). The other rows come from the matrix alone, whose
# context step ran that kernel first: they leave it out.
FIRST_KERNEL_IN_ROW = frozenset({(True, True)})
# Not modelled: sockets (GPUs on different hosts: the first all_reduce is 186 MiB at 2 ranks and
# 214 MiB at 4, the first p2p op 62 / 34 MiB, nccl-matrix-{2,4}x-h100.json net-cumem-on), since a
# deployment here names no second host; buffer sizes and channel counts other than NCCL's
# defaults. NVLink multicast (NVLS) buffers: memprof/core/terms/nccl_nvls.py, from NCCL's source.


# The EP group's PyNccl communicator (vLLM ``CudaCommunicator``,
# vllm/distributed/device_communicators/cuda_communicator.py): built for every group of more
# than one rank in 0.8.x and from 0.11.0 on (0.8.0 / 0.8.5: ``use_pynccl = True``; 0.11.0,
# 0.33.0: ``if self.world_size > 1: self.pynccl_comm = PyNcclCommunicator(...)``), not for EP in
# 0.9.0 - 0.10.x (0.9.0, 0.9.2, 0.10.0, 0.10.1: "ep does not use pynccl", ``use_pynccl = "ep"
# not in unique_name``). There the EP group is a torch ``new_group`` whose NCCL communicator
# ProcessGroupNCCL makes at its first collective: ``new_group`` adds 0 B
# (reports/gpu/ranks/ep-group-2x-h100.json, case "group", every rank), and vLLM's all-to-all
# managers of those releases gather over the DP group, so the EP group's never gets one.
EP_PYNCCL: tuple[Rule, ...] = (
    Rule(name="ep_pynccl", changes="NCCL EP communicator", since="0.9.0", until="0.11.0",
         value=False, introduced_by="'ep does not use pynccl' (first released in 0.9.0)",
         removed_by="PyNccl for every group of > 1 rank (first released in 0.11.0)",
         source="0.9.0 / 0.9.2 / 0.10.0 / 0.10.1 distributed/device_communicators/"
         "cuda_communicator.py CudaCommunicator.__init__: use_pynccl = 'ep' not in unique_name; "
         "0.8.5 use_pynccl = True; 0.11.0 / 0.33.0 PyNcclCommunicator when world_size > 1",
         applies_to="nccl"),
)

# The EP communicator is a rank's second one over the same GPUs (vLLM makes TP's, and DP's where
# dp > 1, first, ``initialize_model_parallel``): over NVLink P2P with cuMem on, a PyNccl-style
# communicator made after the TP one costs less than a first (no torch stream pool, and NCCL's
# per-process resources are the first's): reports/gpu/ranks/ep-group-2x-h100.json case
# "pynccl", every rank: ncclCommInitRank 207,618,048 B + warm-up all_reduce 301,989,888 B at 2
# ranks; 205,520,896 + 301,989,888 at 4 (rank 0, reports/gpu/ranks/kernels-log.txt), where the
# first (bound init_process_group + first all_reduce) cost 390,070,272 + 497,025,024. With
# NCCL_CUMEM_ENABLE=0 a second communicator was measured as torch's ProcessGroupNCCL makes it
# lazily at its first all_gather (reports/gpu/nccl-torch-gather/torch-gather-4x-h100.json, mode
# "second"; init and first collective in one step, so the figure stands as init; with cuMem on
# that file's figures equal the rows above to the byte): 2 ranks, and the largest of 4 ranks.
# Over host shared memory (no peer access) the same recorder with NCCL_P2P_DISABLE=1
# (reports/gpu/nccl-torch-gather/torch-gather-shm-4x-h100.json, mode "second", every rank
# alike): 8-30 MiB, NCCL's SHM buffers being host memory. Sockets (across nodes): not measured,
# the first communicator's row stands.
# The same rule holds for any communicator a process makes after its first, whatever the group
# and the order: reports/gpu/nccl-later/later-comm-4x-h100.json (4× H100, PyNccl-shaped
# communicators after an unbound init_process_group, as vLLM makes them) measured TP's then PP's,
# PP's then TP's, and TP's, DP's and a 4-rank EP's on every rank: each later one is the first's
# figures less NCCL's device code (111,149,056 B, 113,246,208 B with cuMem off) and the first
# all_reduce's stack growth (195,035,136 B), i.e. these rows within one 2 MiB page (P2P cuMem
# on 205,520,896 + 301,989,888 at 2 ranks, 207,618,048 + 301,989,888 at 4; cuMem off
# 570,425,344 and the largest of 4 ranks 874,512,384; SHM 29,360,128). A later communicator's
# first send/recv costs what a first one's does (``first_p2p_bytes``: 467,664,896 B over P2P
# once a rank has sent and received, 62 MiB over SHM), the SendRecv kernel's stack growth
# included: TP's warm-up all_reduce does not run that kernel.
LATER_COMM_GOLDEN = "reports/gpu/nccl-later/later-comm-4x-h100.json"
SECOND_COMM_ROWS: dict[tuple[bool, bool, int], tuple[int, int, str]] = {
    (True, True, 2): (207_618_048, 301_989_888, "ranks/ep-group-2x-h100.json pynccl, 2 ranks"),
    (True, True, 4): (205_520_896, 301_989_888,
                      "ranks/kernels-log.txt ep-group-pynccl-w4 rank 0"),
    (True, False, 2): (572_522_496, 0, "nccl-torch-gather/torch-gather-4x-h100.json "
                       "w2-cumem0-second"),
    (True, False, 4): (872_415_232, 0, "nccl-torch-gather/torch-gather-4x-h100.json "
                       "w4-cumem0-second, the largest rank (1 and 2; rank 3: 620,756,992 B)"),
    (False, True, 2): (31_457_280, 0, "nccl-torch-gather/torch-gather-shm-4x-h100.json "
                       "w2-cumem1-second"),
    (False, True, 4): (29_360_128, 0, "nccl-torch-gather/torch-gather-shm-4x-h100.json "
                       "w4-cumem1-second"),
    (False, False, 2): (10_485_760, 0, "nccl-torch-gather/torch-gather-shm-4x-h100.json "
                        "w2-cumem0-second"),
    (False, False, 4): (8_388_608, 0, "nccl-torch-gather/torch-gather-shm-4x-h100.json "
                        "w4-cumem0-second"),
}


# Engines whose NCCL warm-up runs the process's first kernel before their free-memory baseline,
# where it is charged when the communicator's row leaves it out
# (``memprof.core.terms.nccl_warmup``). vLLM V1 from 0.18.0: Worker.init_device no longer runs a
# fill kernel in set_device (``non_torch.FIRST_KERNEL_AT_SET_DEVICE`` ends there), and calls
# init_worker_distributed_environment before its MemorySnapshot; with a group of more than one
# rank that builds PyNcclCommunicator, whose constructor warms up with torch.zeros(1) and an
# all_reduce: the process's first kernel, before the snapshot.
FIRST_KERNEL_AT_WARM_UP: tuple[Rule, ...] = (
    Rule(name="first_kernel_at_nccl_warm_up", changes="non-torch: the first kernel's modules "
         "before the baseline", since="0.18.0", until=None, value=True, applies_to="nccl",
         generation="v1",
         introduced_by="Worker.init_device calls torch.accelerator.set_device_index, which runs "
         "no kernel (first read in 0.18.0): PyNccl's warm-up is then the first kernel",
         source="0.18.1 / 0.19.0 v1/worker/gpu_worker.py Worker.init_device "
         "(set_device_index, init_worker_distributed_environment, then init_snapshot = "
         "MemorySnapshot(); the same order in 0.33.0); distributed/device_communicators/"
         "pynccl.py PyNcclCommunicator.__init__ ('A small all_reduce for warmup': "
         "torch.zeros(1, device=device))"),
    Rule(name="first_kernel_at_nccl_warm_up", changes="non-torch: the first kernel's modules "
         "before the baseline", since=None, until=None, value=True, applies_to="nccl",
         engine="sglang",
         introduced_by="PyNcclCommunicator's warm-up all_reduce before load_model (every "
         "release read)",
         source="sglang 0.4.3 - 0.5.9 srt/distributed/parallel_state.py GroupCoordinator "
         "(PyNcclCommunicator when world_size > 1), device_communicators/pynccl.py 'A small "
         "all_reduce for warmup' (torch.zeros(1)); model_executor/model_runner.py: "
         "init_torch_distributed before load_model, the pool from the free memory before it"),
)


def ep_pynccl(version: str | None, engine: str) -> bool:
    """Whether the engine's ``version`` builds an NCCL communicator for the EP group
    (``EP_PYNCCL``, vLLM's rows; True where no row holds)."""
    return bool(value_at(EP_PYNCCL, version, True, engine))


def second_comm_row(peer_access: bool, cumem: bool, size: int,
                    channels: Channels | None = None, p2p_peers: int = 0) -> NcclRow | None:
    """A communicator made after another in the same process (``SECOND_COMM_ROWS``,
    ``LATER_COMM_GOLDEN``), None where that was not measured; at a PCIe-only card's
    ``channels`` (``memprof.core.terms.nccl_channels``) where given; ``p2p_peers`` > 0 when
    the group sends point to point: its first send/recv as a first communicator's
    (``first_p2p_bytes``, measured the same after another communicator)."""
    world, note = measured_world(size)
    got = SECOND_COMM_ROWS.get((peer_access, cumem, world))
    if got is None:
        return None
    init, first, src = got
    per_peer = P2P_CHANNELS_PER_PEER
    if channels is not None:
        d_init, d_first = channel_delta(peer_access, cumem, world, channels)
        init, first, note = init + d_init, first + d_first, note + channel_note(channels)
        per_peer = channels.p2p
    how = (f"{fmt_bytes(init)} ncclCommInitRank + {fmt_bytes(first)} at its warm-up all_reduce"
           if first else f"{fmt_bytes(init)} ncclCommInitRank with its first collective")
    transport = "peer-to-peer" if peer_access else "over host shared memory"
    basis = (f"{how}: a second communicator, made after another in the same process, {transport}, "
             f"{'cuMem on' if cumem else 'NCCL_CUMEM_ENABLE=0'} (reports/gpu/{src}; "
             f"{LATER_COMM_GOLDEN}){note}")
    p2p = first_p2p_bytes(peer_access, p2p_peers, per_peer) if p2p_peers else 0
    if p2p:
        basis += (f" + {fmt_bytes(p2p)} at its first send/recv ("
                  + (f"62 MiB + {p2p_peers} peer × {per_peer} channels × 12 MiB"
                     if peer_access else "62 MiB over SHM")
                  + f", as a first communicator's: {LATER_COMM_GOLDEN})")
    return NcclRow(init, first, p2p, basis)


class NcclRow(NamedTuple):
    """One communicator's bytes per rank: ``init`` (ncclCommInitRank, torch's stream pool
    included), ``first_all_reduce``, ``first_p2p`` (0 where the group never sends point to
    point) and how each was obtained."""

    init: int
    first_all_reduce: int
    first_p2p: int
    basis: str
    # whether the figures hold the process's first fill kernel (``FIRST_KERNEL_IN_ROW``)
    first_kernel: bool = False


def measured_world(size: int) -> tuple[int, str]:
    """The measured world size whose init/all_reduce row stands for a group of ``size`` ranks,
    and the note the output carries: 2 or 4 as measured; 3 takes the 4-rank row and > 4 the
    4-rank row, derived from NCCL's source: on one node a rank's ring peers (prev, next) and
    intra-node tree peers (a chain: up, down) per channel are the same at any world size past 3
    (src/graph/connect.cc ncclTopoPreset, tags v2.21.5-1 to v2.28.9-1), so the 4-rank row, whose
    legacy-IPC figure is its largest rank (1 and 2, the middle of the chain), holds at 8 ranks;
    over P2P with cuMem on and over SHM nothing grew from 2 to 4 ranks. Sockets and NVLS are
    not these rows (``memprof.core.terms.multinode``, ``memprof.core.terms.nccl_nvls``)."""
    if size in MEASURED_WORLD_SIZES:
        return size, ""
    if size < 4:
        return 4, f"; {size} ranks not measured: the 4-rank row"
    return 4, (f"; {size} ranks extrapolated from 4 (init and first all_reduce equal at 2 and 4 "
               "ranks, nccl-matrix-4x-h100.json; past 4 a rank's ring and intra-node tree-chain "
               "peers per channel do not grow, NCCL src/graph/connect.cc ncclTopoPreset: derived "
               f"from NCCL's source, not measured at {size} ranks)")


def first_p2p_bytes(peer_access: bool, peers: int, per_peer: int = P2P_CHANNELS_PER_PEER) -> int:
    """The communicator's first point-to-point op per rank with ``peers`` distinct peers:
    62 MiB + peers × ``per_peer`` (32 over NVLink; a PCIe card's P2P channels,
    ``memprof.core.terms.nccl_channels``) × 12 MiB over P2P, 62 MiB over SHM (see the
    constants)."""
    if not peer_access:
        return P2P_FIRST_BASE_BYTES
    return P2P_FIRST_BASE_BYTES + peers * per_peer * P2P_PER_PEER_CHANNEL_BYTES


def nccl_row(peer_access: bool, cumem: bool, size: int, p2p_peers: int,
             channels: Channels | None = None) -> NcclRow:
    """A communicator of ``size`` ranks over the transport ``peer_access`` selects (P2P or SHM),
    with NCCL's cuMem allocator on or off; ``p2p_peers`` > 0 when the group sends point to point
    (to that many distinct peers); ``channels``: a PCIe-only card's NCCL channels
    (``memprof.core.terms.nccl_channels.pcie_channels``), which move the measured row by its
    bytes per channel; None keeps the row as measured over NVLink."""
    world, note = measured_world(size)
    init, first, src = NCCL_ROWS[(peer_access, cumem, world)]
    per_peer = P2P_CHANNELS_PER_PEER
    if channels is not None:
        d_init, d_first = channel_delta(peer_access, cumem, world, channels)
        init, first, note = init + d_init, first + d_first, note + channel_note(channels)
        per_peer = channels.p2p
    p2p = first_p2p_bytes(peer_access, p2p_peers, per_peer) if p2p_peers else 0
    how = (("peer-to-peer over PCIe" if channels else "peer-to-peer [measured over NVLink]")
           if peer_access
           else "host shared memory (no peer access)") \
        + (", cuMem on" if cumem else ", NCCL_CUMEM_ENABLE=0")
    basis = (f"{fmt_bytes(init)} ncclCommInitRank (torch's stream pool included) + "
             f"{fmt_bytes(first)} at its first all_reduce: {how} ({src}){note}")
    if p2p:
        basis += (f" + {fmt_bytes(p2p)} at its first send/recv ("
                  + (f"62 MiB + {p2p_peers} peer × {per_peer} channels × 12 MiB"
                     if peer_access else "62 MiB over SHM")
                  + ", nccl-matrix-{2,4}x-h100.json)")
    return NcclRow(init, first, p2p, basis, (peer_access, cumem) in FIRST_KERNEL_IN_ROW)


# The NCCL each release runs: the torch its wheel pins (METADATA Requires-Dist torch==X) and the
# nvidia-nccl-cu12 that torch's Linux x86_64 wheel pins (Requires-Dist nvidia-nccl-cu12==Y).
NCCL_VERSION: tuple[Rule, ...] = (
    Rule(name="nccl_version", changes="NCCL NVLS buffers", since=None, until="0.6.4",
         value="2.20.5", applies_to="nccl", introduced_by="torch 2.4.0",
         removed_by="torch 2.5.1 (0.6.4)",
         source="vllm 0.6.0 – 0.6.3.post1 METADATA torch==2.4.0; torch 2.4.0 METADATA "
         "nvidia-nccl-cu12==2.20.5"),
    Rule(name="nccl_version", changes="NCCL NVLS buffers", since="0.6.4", until="0.9.0",
         value="2.21.5", applies_to="nccl", introduced_by="torch 2.5.1 / 2.6.0",
         removed_by="torch 2.7.0 (0.9.0)",
         source="vllm 0.6.4 – 0.6.6.post1 and 0.7.1 METADATA torch==2.5.1, 0.8.0 / 0.8.5 "
         "torch==2.6.0; torch 2.5.1 and 2.6.0 METADATA nvidia-nccl-cu12==2.21.5"),
    Rule(name="nccl_version", changes="NCCL NVLS buffers", since="0.9.0", until="0.10.2",
         value="2.26.2", applies_to="nccl", introduced_by="torch 2.7.0 / 2.7.1",
         removed_by="torch 2.8.0 (0.10.2)",
         source="vllm 0.9.0 METADATA torch==2.7.0, 0.10.1.1 torch==2.7.1; torch 2.7.0 and "
         "2.7.1 METADATA nvidia-nccl-cu12==2.26.2"),
    Rule(name="nccl_version", changes="NCCL NVLS buffers", since="0.10.2", until="0.11.1",
         value="2.27.3", applies_to="nccl", introduced_by="torch 2.8.0",
         removed_by="torch 2.9.0 (0.11.1)",
         source="vllm 0.10.2 - 0.11.0 METADATA torch==2.8.0; torch 2.8.0 METADATA "
         "nvidia-nccl-cu12==2.27.3"),
    Rule(name="nccl_version", changes="NCCL graph-mixing record", since="0.11.1",
         until="0.20.0", value="2.27.5", applies_to="nccl", introduced_by="torch 2.9.0",
         removed_by="torch 2.11.0 (0.20.0)",
         source="vllm 0.11.1 - 0.16.0 METADATA torch==2.9.x, 0.17.0 - 0.19.1 torch==2.10.0; "
         "torch 2.9.x and 2.10.0 METADATA nvidia-nccl-cu12==2.27.5"),
    Rule(name="nccl_version", changes="NCCL device code and stack", since="0.20.0",
         until="0.27.0", value="2.28.9", applies_to="nccl", introduced_by="torch 2.11.0",
         removed_by="torch 2.13.0 (0.27.0)",
         source="vllm 0.20.0 - 0.26.0 METADATA torch==2.11.0; torch 2.11.0 METADATA "
         "nvidia-nccl-cu13==2.28.9 (the NCCL of reports/gpu/nccl*)"),
    Rule(name="nccl_version", changes="NCCL device code", since="0.27.0", until="0.33.0",
         value="2.29.7", applies_to="nccl", introduced_by="torch 2.13.0",
         removed_by="torch 2.14.0 (0.33.0)",
         source="vllm 0.27.0 - 0.32.0 METADATA torch==2.13.0; torch 2.13.0 METADATA "
         "nvidia-nccl-cu13==2.29.7"),
    Rule(name="nccl_version", changes="NCCL device code", since="0.33.0", until=None,
         value="2.30.7", applies_to="nccl", introduced_by="torch 2.14.0",
         source="vllm 0.33.0 METADATA torch==2.14.0; torch 2.14.0 METADATA "
         "nvidia-nccl-cu13==2.30.7"),
    # SGLang, by the torch its wheel pins (Requires-Dist torch==, extra 'srt' until 0.5.2,
    # unconditional from 0.5.3) and the NCCL that torch pins. Its NVLS is off in every release
    # (NCCL_NVLS_ENABLE=0, memprof.core.terms.nccl_nvls.NVLS_ENV), so the rows move the first
    # all_reduce's stack reservation (memprof.core.terms.nccl_stack: 2.21.5's kernel images,
    # 2.28.9's for the others) and the device code an init loads
    # (memprof.core.terms.nccl_image).
    Rule(name="nccl_version", changes="NCCL first all_reduce stack", since=None, until="0.4.7",
         value="2.21.5", applies_to="nccl", engine="sglang", introduced_by="torch 2.5.1",
         removed_by="torch 2.7.1 (0.4.7)",
         source="sglang 0.4.3.post4 / 0.4.4 METADATA torch==2.5.1, 0.4.6 torch==2.6.0, 0.4.7 "
         "torch==2.7.1 (Requires-Dist, extra 'srt'); torch 2.5.1 and 2.6.0 METADATA "
         "nvidia-nccl-cu12==2.21.5; an SGLang 0.4.3.post4 log prints 'sglang is using "
         "nccl==2.21.5' (tests/data/logs/sglang-qwq-32b-tp4-l4-0.4.3.post4.log)"),
    Rule(name="nccl_version", changes="NCCL device code at init", since="0.4.7",
         until="0.5.1", value="2.26.2", applies_to="nccl", engine="sglang",
         introduced_by="torch 2.7.1 (0.4.7)", removed_by="torch 2.8.0 (0.5.1)",
         source="sglang 0.4.7 - 0.4.10.post2 METADATA torch==2.7.1 (extra 'srt'); torch 2.7.1 "
         "METADATA nvidia-nccl-cu12==2.26.2"),
    Rule(name="nccl_version", changes="NCCL device code at init", since="0.5.1",
         until="0.5.6", value="2.27.3", applies_to="nccl", engine="sglang",
         introduced_by="torch 2.8.0 (0.5.1)", removed_by="torch 2.9.1 (0.5.6)",
         source="sglang 0.5.1 - 0.5.5 METADATA torch==2.8.0; torch 2.8.0 METADATA "
         "nvidia-nccl-cu12==2.27.3"),
    Rule(name="nccl_version", changes="NCCL device code at init", since="0.5.6",
         until="0.5.11", value="2.27.5", applies_to="nccl", engine="sglang",
         introduced_by="torch 2.9.1 (0.5.6)", removed_by="torch 2.11.0 (0.5.11)",
         source="sglang 0.5.6 - 0.5.10 METADATA torch==2.9.1; torch 2.9.x METADATA "
         "nvidia-nccl-cu12==2.27.5"),
    Rule(name="nccl_version", changes="NCCL device code at init", since="0.5.11",
         until="0.5.18", value="2.28.9", applies_to="nccl", engine="sglang",
         introduced_by="torch 2.11.0 (0.5.11)", removed_by="torch 2.13.0 (0.5.18)",
         source="sglang 0.5.11 - 0.5.17 METADATA torch==2.11.0; torch 2.11.0 METADATA "
         "nvidia-nccl-cu13==2.28.9"),
    Rule(name="nccl_version", changes="NCCL device code at init", since="0.5.18",
         until="0.5.22", value="2.29.7", applies_to="nccl", engine="sglang",
         introduced_by="torch 2.13.0 (0.5.18)", removed_by="torch 2.14.1 (0.5.22)",
         source="sglang 0.5.18 - 0.5.21 METADATA torch==2.13.0; torch 2.13.0 METADATA "
         "nvidia-nccl-cu13==2.29.7"),
    Rule(name="nccl_version", changes="NCCL device code at init", since="0.5.22", until=None,
         value="2.30.7", applies_to="nccl", engine="sglang", introduced_by="torch 2.14.1",
         source="sglang 0.5.22 / 0.5.23 METADATA torch==2.14.1; torch 2.14.1 METADATA "
         "nvidia-nccl-cu13==2.30.7"),
)


def nccl_version(dep: Deployment) -> str | None:
    """The NCCL the deployment's engine release runs (``NCCL_VERSION``; None where no row holds:
    another engine, whose NCCL memprof does not map)."""
    got = value_at(NCCL_VERSION, dep.engine_version, None, dep.engine)
    return got if isinstance(got, str) else None
