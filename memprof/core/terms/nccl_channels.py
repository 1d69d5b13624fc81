"""How many channels NCCL builds between GPUs joined by PCIe alone, and what a communicator's rows
of ``memprof.core.terms.nccl`` / ``memprof.core.terms.nccl_torch`` become at that count.

The communicator rows were measured on H100s joined by NVLink, where NCCL builds 24 collective
channels and 32 point-to-point channels (P2P), or, with ``NCCL_P2P_DISABLE=1`` (SHM), 4 and 4.
A communicator's buffers grow with its channels, so on a PCIe-only card (a catalog row whose
``interconnect`` starts "PCIe Gen<g>" and names no NVLink bridge as fitted) the rows are moved to
that card's channel count by the measured per-channel bytes.

The channel count, from NCCL's source (tags v2.21.5-1 and v2.28.9-1 of github.com/NVIDIA/nccl;
the same lines at both):

- a PCIe link's bandwidth is ``width * speed / 80`` GB/s with ``speed`` 60 / 120 / 240 for
  8 / 16 / 32 GT/s (src/graph/topo.cc ``kvDictPciGen``): 12 GB/s for Gen3 x16 (= ``PCI_BW``,
  src/graph/topo.h) and Gen4 x8, 24 for Gen4 x16, 48 for Gen5 x16; a GPU's ``totalBw`` is that
  link (src/graph/search.cc ``getTotalBw``: no NVLink);
- ``ncclTopoCompute`` (src/graph/search.cc) searches the ring from the first speed of its array
  at or under the link (``speedArrayIntra`` = 40, 30, 20, 18, 15, 12, 10, 9, 7, ... below
  compute capability 9.0; ``sm90SpeedArrayIntra`` = 60, 50, 40, 30, 24, 20, 15, ... from 9.0),
  each channel charging its speed on every PCIe link of the path, times 6/5 where the path
  crosses an Intel CPU root complex (``followPath``, ``INTEL_P2P_OVERHEAD``); it then lowers the
  speed while the next one is above 0.49 of the best found, keeping a solution only where
  channels × speed is larger, and stops once that reaches ``totalBw``;
- a solution at 25 GB/s or more is duplicated (search.cc ``if (graph->bwIntra < 25.0) return``
  ... ``dupChannels = nChannels*2``), and ``ncclTopoPostset`` doubles the channels again
  (src/graph/connect.cc ``nChannels = comm->nChannels = std::min(MAXCHANNELS,nChannels*2)``);
- point-to-point channels are the collective ones, rounded to a power of two
  (src/graph/paths.cc ``ncclTopoComputeP2pChannels``).

Which path, by transport: NCCL's P2P level (src/graph/paths.cc ``ncclTopoCheckP2p``) is
PATH_PXB on an Intel (or Zhaoxin) x86 or ARM host and PATH_SYS on others up to v2.22.3-1; from
v2.23.4-1 on (2.26.2 and 2.27.x among them) it is PATH_PXB on every host ("By default don't use
P2P across CPU Host Bridges and further apart") except an AMD x86 host with at most two GPUs in
its topology, which keeps PATH_SYS. So two GPUs use P2P only below a common PCIe switch, or
through an AMD root complex (with NCCL 2.23.4 and later, only where the host has at most two
GPUs), paths on which ``followPath`` charges no Intel overhead; GPUs that talk over SHM cross the
CPU. So over P2P:
Gen3 x16 or Gen4 x8, one channel at 12 GB/s, 2 collective channels; Gen4 x16, two at 12 (= 24),
4 channels; Gen5 x16 (sm90 array), two at 24, 4 channels. Over SHM through an Intel root complex
(assumed, said in the output: the catalog does not name the host): Gen3 x16 or Gen4 x8, one at
10, 2 channels; Gen4 x16, one at 20 (two at 10 carry no more), 2 channels; Gen5 x16, one at 40,
duplicated, 4 channels. Published ``NCCL INFO`` logs: 8x RTX 4090 over SHM, "Ring 00" and
"Ring 01", "Trees [0] ... [1]" (github.com/NVIDIA/nccl-tests/issues/307): 2, as derived; 4x
A100 PCIe with some pairs over "P2P/IPC/read" and others over "SHM/direct/direct", "2 coll
channels, 0 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer"
(github.com/vllm-project/vllm/issues/6407): the SHM legs through the root complex set the
count there; memprof models one transport per group and does not model such mixed hosts.
This project's H100s with P2P disabled also end at 4 (``DEFAULT_CHANNELS``), but their
search line reads "Pattern 1, ... nChannels 2, bw 40.000000/40.000000, type PHB/PIX"
(``reports/gpu/nccl/nccl-matrix-2x-h100.json`` shm rows), two ring channels at 40 GB/s
before the doubling, which a Gen5 x16 link (one at 40, duplicated to two at 20) does not give:
the virtual machine's PCIe link as NCCL reads it is not known, so that host is no check of the
Gen5 count.

The bytes per channel, measured (``GOLDEN``: ``recorders/gpu_nccl.py --channels``,
``NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS`` = 1 ... 32, world 2 and 4, P2P and SHM, cuMem on
and off, each in its own processes; 4x H100 NV18, NCCL 2.28.9, torch 2.11.0+cu130, rank 0's
non-torch growth, the largest rank where ranks differ), exactly linear in the channels at every
point measured (MiB):

- P2P, cuMem off: init 178 + 20 n (2 ranks), 178 + 32 n (4 ranks, ranks 1 and 2; rank 0
  178 + 30 n, rank 3 178 + 22 n); first all_reduce 186 at every n;
- P2P, cuMem on: init 180 + 6 n, first all_reduce 186 + 12 n (2 and 4 ranks; 4 ranks measured
  up to n = 8);
- SHM: init 178 + 2 n (cuMem off), 180 + 6 n (cuMem on); first all_reduce 186.

At NCCL's defaults on the NVLink H100s (24 collective, 32 P2P channels: ``DEFAULT_CHANNELS``)
the same lines split by kind: cuMem on, init 6 MiB per P2P channel (180 + 6 x 32 = 372 MiB,
``nccl-matrix-2x-h100.json`` p2p-cumem-on's 390,070,272 B) and first all_reduce 12 MiB per
collective channel (186 + 12 x 24 = 474 MiB, its 497,025,024 B); cuMem off, init
178 + 12 x 24 + 8 x 32 = 722 MiB at 2 ranks (p2p-cumem-off's 757,071,872 B) and
178 + 24 x 24 + 8 x 32 = 1,010 MiB at 4 (the largest rank's 1,059,061,760 B): the split of
the sweep's 20 and 32 MiB per channel that solves for those two rows (derived, two equations in
two unknowns each), which NCCL's allocation log confirms at 2 ranks and 4 channels
(``reports/gpu/nccl-image``: per collective channel a 10 MiB receive and a 2 MiB send buffer,
``transport/p2p.cc``; per P2P channel 8 MiB of the proxy's shared point-to-point buffer,
``transport/net.cc``; over SHM that buffer's 2 MiB a channel is the whole slope).
``PER_CHANNEL`` holds these splits; a row moves by them from the default channels to the card's.
Over SHM the default is 4 and 4, and the sweep's slope is taken for both kinds together.

A communicator made after another (``SECOND_COMM_ROWS``, torch's ``TORCH_COMM_ROWS``) is
assumed to take the same bytes per channel as a first one (NCCL's buffers per connection do not
depend on what came before; its fixed part does): derived, not measured on a PCIe card.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from memprof.base.units import MiB
from memprof.core.gpus import GPU

GOLDEN = "reports/gpu/nccl/nccl-channels-4x-h100.json"

# NCCL's channels where the rows of memprof.core.terms.nccl were measured, (collective, P2P):
# 2x / 4x H100 NV18 over NVLink P2P (24 collective channels: the matrix's first all_reduce
# 186 + 12 x 24 MiB; 32 P2P: "Channel xx/1" lines, reports/gpu/nccl/README.md) and with
# NCCL_P2P_DISABLE=1 (GOLDEN at n = 4 logs "4 coll channels, ... 4 p2p channels" and equals
# the matrix's shm rows to the byte).
DEFAULT_CHANNELS: dict[bool, tuple[int, int]] = {True: (24, 32), False: (4, 4)}


class PerChannel(NamedTuple):
    """Bytes per channel of a communicator's init and first all_reduce, by channel kind."""

    init_coll: int
    init_p2p: int
    all_reduce_coll: int


# (peer access, cuMem on, ranks measured) -> bytes per channel (see the docstring and GOLDEN)
PER_CHANNEL: dict[tuple[bool, bool, int], PerChannel] = {
    (True, False, 2): PerChannel(12 * MiB, 8 * MiB, 0),
    (True, False, 4): PerChannel(24 * MiB, 8 * MiB, 0),
    (True, True, 2): PerChannel(0, 6 * MiB, 12 * MiB),
    (True, True, 4): PerChannel(0, 6 * MiB, 12 * MiB),
    (False, False, 2): PerChannel(2 * MiB, 0, 0),
    (False, False, 4): PerChannel(2 * MiB, 0, 0),
    (False, True, 2): PerChannel(6 * MiB, 0, 0),
    (False, True, 4): PerChannel(6 * MiB, 0, 0),
}

# src/graph/search.cc (v2.21.5-1, v2.28.9-1)
SPEEDS_BELOW_SM90 = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
SPEEDS_SM90 = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
# src/graph/topo.cc kvDictPciGen: per lane, in 100 Mb/s
PCI_GEN_SPEED = {3: 60, 4: 120, 5: 240}
INTEL_P2P_OVERHEAD = 6 / 5  # src/graph/topo.h INTEL_P2P_OVERHEAD(bw) (bw*6/5)
DUP_MIN_BW = 25.0  # search.cc: a solution at this speed or more is duplicated

_PCIE = re.compile(r"^PCIe Gen(\d)(?: x(\d+))?")


def pcie_link(gpu: GPU) -> tuple[int, int] | None:
    """(PCIe generation, lanes) where the catalog row's GPUs meet over PCIe alone: an NVIDIA row
    whose ``interconnect`` starts "PCIe Gen<g>" (x16 unless it says "x<n>") and has no NVLink
    bridge fitted ("+ NVLink"; an optional bridge is taken as absent); None otherwise."""
    if gpu.vendor != "nvidia" or "+ NVLink" in gpu.interconnect:
        return None
    m = _PCIE.match(gpu.interconnect)
    if m is None or int(m.group(1)) not in PCI_GEN_SPEED:
        return None
    return int(m.group(1)), int(m.group(2) or 16)


def _sm90_speeds(gpu: GPU) -> bool:
    cc = gpu.compute_capability
    if cc:
        return float(cc) >= 9.0
    m = re.match(r"sm(\d+)", gpu.arch)
    return m is not None and int(m.group(1)) >= 90


def search_channels(link_bw: float, speeds: tuple[float, ...], overhead: float) -> int:
    """The ring channels ``ncclTopoCompute`` settles on for two GPUs each on one PCIe link of
    ``link_bw`` GB/s, before the duplication of fast solutions and the postset doubling: the
    first speed whose channels fit, then lower speeds while above 0.49 of the best, a solution
    kept only where channels × speed is larger, stopping at ``link_bw`` (``totalBw``)."""
    i = next((k for k, s in enumerate(speeds) if s <= link_bw), len(speeds) - 1)
    best_n, best_bw = 0, 0.0
    while i < len(speeds):
        s = speeds[i]
        n = int(link_bw / (s * overhead) + 1e-9)
        if n and n * s > best_n * best_bw:
            best_n, best_bw = n, s
        if best_n * best_bw >= link_bw:
            break
        if i + 1 < len(speeds) and (best_n == 0 or speeds[i + 1] / best_bw > 0.49):
            i += 1
            continue
        break
    if best_n and best_bw >= DUP_MIN_BW:
        best_n *= 2
    return best_n


class Channels(NamedTuple):
    """NCCL's channels on a PCIe-only card: ``coll`` (collective), ``p2p``, and how."""

    coll: int
    p2p: int
    basis: str


def pcie_channels(gpu: GPU) -> Channels | None:
    """NCCL's channels between two of these cards where they meet over PCIe alone (``pcie_link``);
    None for NVLink, xGMI and other rows, whose measured rows stand. Over P2P (``peer_access``)
    the path crosses no Intel root complex (NCCL's P2P level is PATH_PXB on Intel x86 hosts,
    src/graph/paths.cc ``ncclTopoCheckP2p``: such GPUs use P2P only below a common PCIe switch,
    or through another root complex), so no Intel P2P overhead is charged; over host shared
    memory the path crosses the CPU, taken as Intel's (assumed: the catalog does not name the
    host; an AMD root complex charges none)."""
    link = pcie_link(gpu)
    if link is None:
        return None
    gen, lanes = link
    bw = lanes * PCI_GEN_SPEED[gen] / 80.0
    speeds = SPEEDS_SM90 if _sm90_speeds(gpu) else SPEEDS_BELOW_SM90
    overhead = 1.0 if gpu.peer_access else INTEL_P2P_OVERHEAD
    found = search_channels(bw, speeds, overhead)
    coll = max(1, 2 * found)  # ncclTopoPostset doubles the rings
    p2p = 1 << (coll - 1).bit_length()  # ncclTopoComputeP2pChannels: a power of two
    path = ("P2P below a PCIe switch or a non-Intel root complex (NCCL's P2P level on Intel "
            "hosts is PATH_PXB, src/graph/paths.cc), no Intel P2P overhead" if gpu.peer_access
            else "SHM through an Intel CPU root complex [assumed host], its 6/5 P2P overhead")
    return Channels(coll, p2p, (
        f"{coll} collective / {p2p} P2P channels: PCIe Gen{gen} x{lanes} = {bw:g} GB/s "
        f"(NCCL src/graph/topo.cc), {found} ring channel{'s' if found > 1 else ''} found by "
        f"ncclTopoCompute over {path}, doubled by ncclTopoPostset (src/graph/search.cc, "
        "connect.cc, v2.20.5-v2.28.9)"))


def channel_delta(peer_access: bool, cumem: bool, world: int, ch: Channels) -> tuple[int, int]:
    """(init, first all_reduce) bytes a communicator's measured row changes by at ``ch``
    channels instead of ``DEFAULT_CHANNELS`` (negative: fewer channels), per ``PER_CHANNEL``."""
    per = PER_CHANNEL[(peer_access, cumem, world)]
    d_coll, d_p2p = (c - d for c, d in zip((ch.coll, ch.p2p), DEFAULT_CHANNELS[peer_access],
                                           strict=True))
    if not peer_access:  # SHM: one slope for both kinds (the sweep moved them together)
        d_p2p, d_coll = 0, ch.coll - DEFAULT_CHANNELS[False][0]
    return (per.init_coll * d_coll + per.init_p2p * d_p2p, per.all_reduce_coll * d_coll)


def channel_note(ch: Channels) -> str:
    """The note a row moved to a PCIe card's channels carries."""
    return (f"; at {ch.basis}, each channel at its bytes measured with NCCL_MIN/MAX_NCHANNELS "
            f"({GOLDEN})")
