"""The CUDA driver's per-thread stack reservation that a process's first NCCL all_reduce grows:
the part of a first communicator's "first all_reduce" figure that is not NCCL's buffers, by the
card's SM count and the stack NCCL's kernel declares for the card's architecture.

What the golden shows (``GOLDEN``: ``recorders/gpu_nccl_stack.py``, 2× H100 80GB HBM3 NV18, 132
SMs × 2048 threads, driver 580.159.04, torch 2.11.0+cu130, NCCL 2.28.9, each case in fresh
processes, both ranks alike):

- the first all_reduce of one element adds 195,035,136 B (186 MiB) over SHM and over P2P, cuMem
  on and off, and ``cudaLimitStackSize`` reads 1,744 B after it (1,024 B before): the driver grew
  the stack reservation of every resident thread for NCCL's kernel. With the limit raised to
  4,096 B beforehand the all_reduce adds 0 B (SHM, cuMem off); with ``NCCL_SET_STACK_SIZE=1``
  (NCCL raises the limit at init to its largest kernel's stack, 1,984 B) init grows by
  260,046,848 B more and the all_reduce by 195,035,136 B less (SHM: 0 B; P2P cuMem on:
  301,989,888 B, its buffers alone). So 186 MiB of every first all_reduce in
  ``memprof.core.terms.nccl.NCCL_ROWS`` is this reservation, measured on 132 SMs of 2,048
  threads: ``ceil_2MiB(1,744 × 270,336) − 1,024 × 270,336`` = 195,035,136 B exactly, and
  ``ceil_2MiB(1,984 × 270,336) − 1,024 × 270,336`` = 260,046,848 B exactly (the reservation is
  SMs × max threads per SM × the limit, ``reports/gpu/context/context-stack-h100.json``, held in
  2 MiB pages);
- the limit is the launched kernel's STACK rounded up to 16 B: ``cuobjdump
  --dump-resource-usage`` of the NCCL 2.28.9 library gives 1,736 B for
  ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` on sm_90 (read 1,744) and 1,976 B for its largest
  kernel, ``ncclDevKernel_SendRecv`` (read 1,984 under ``NCCL_SET_STACK_SIZE=1``). vLLM's and
  SGLang's PyNccl warm-up is a one-element float32 all_reduce (``torch.zeros(1)``), which NCCL
  runs with the ring LL kernel at 2 ranks (above) and at 4 (``nccl-matrix-4x-h100.json``: the
  same 186 MiB; the tree LL kernel, 1,856 B, would give 216 MiB).

By default NCCL leaves the limit alone at init (``NCCL_PARAM(SetStackSize, "SET_STACK_SIZE",
0)`` in src/init.cc at tags v2.21.5-1, v2.26.2-1 and v2.28.9-1), so on every card the first
all_reduce grows the reservation to that kernel's stack. A card's figure is therefore
``ceil_2MiB(limit × SMs × threads per SM) − ceil_2MiB(1,024 × SMs × threads per SM)``, with
the kernel's stack in the image the card runs (``KERNEL_STACK``): NCCL's libraries carry SASS
for some architectures only (2.21.5's cu12 wheel sm_50/60/61/70/80/90, 2.28.9's cu13 library
sm_75/80/90/100/110/120, ``cuobjdump`` of each), and a card runs the image of its own major
version at or below its minor (an sm_86 or sm_89 card, the sm_80 image). A second communicator
in the same process adds none of it (the limit is already there): the second-communicator rows
(``memprof.core.terms.nccl.SECOND_COMM_ROWS``) were measured after a first and hold none.

The first point-to-point op is the same mechanism one kernel later (``FIRST_P2P_GROWTH``): the
62 MiB that ``memprof.core.terms.nccl.P2P_FIRST_BASE_BYTES`` charges every first send/recv,
gather or all-to-all (``reports/gpu/nccl/nccl-matrix-2x-h100-sendrecv-first.json``: 65,011,712 B
over SHM and sockets, the same at 2 and 4 ranks; over P2P the per-peer buffers on top; the V0
gather to rank 0 in ``reports/gpu/nccl-torch-gather``) is ``ceil_2MiB(1,984 × 270,336) −
ceil_2MiB(1,744 × 270,336)`` = 65,011,712 B exactly: the first all_reduce left the limit at the
ring LL kernel's 1,744 B, and ``ncclDevKernel_SendRecv`` (torch's ``gather``, ``send``/``recv``
and ``all_to_all`` all run it: torch/csrc/cuda/nccl.cpp, ncclSend/ncclRecv in a group) declares
1,976 B on sm_90 (``KERNEL_GOLDEN``), the 1,984 B limit ``NCCL_SET_STACK_SIZE=1`` reads. On
another card it is that card's threads × (the SendRecv kernel's limit − the ring LL kernel's)
in the image the card runs (``SENDRECV_STACK``).

What this does not cover (stated in the note): NCCL releases whose images were not read (2.20.5
takes 2.21.5's, 2.26.2 and 2.27.x take 2.28.9's, an engine whose NCCL memprof does not map
takes 2.28.9's), whether a later kernel of the engine's needs more stack than NCCL's (none of
torch's did on the H100, ``reports/gpu/context``), ROCm (HIP's scratch is not this driver's),
and a card the catalog gives no SM count for. An H100 host cannot emulate another card's SM
count or its SASS image; the rule is the measured mechanism applied to each card's catalog row.
"""

from __future__ import annotations

from typing import NamedTuple

from memprof.base.units import MiB, fmt_bytes
from memprof.core.gpus import GPU, arch_cc
from memprof.core.terms.nccl import NcclRow

GOLDEN = "reports/gpu/nccl-stack/nccl-stack-2x-h100.json"
KERNEL_GOLDEN = "reports/gpu/nccl-stack/kernel-stack.json"

STACK_DEFAULT_BYTES = 1024  # cudaLimitStackSize before any kernel asks for more (GOLDEN)
STACK_ROUND_BYTES = 16  # limit read = STACK rounded up to 16 B (1,736 -> 1,744; 1,976 -> 1,984)
RESERVATION_PAGE_BYTES = 2 * MiB
# GOLDEN: the first all_reduce's growth on the H100 (132 SMs × 2048 threads, limit 1,744 B),
# every case without a preset; NCCL_ROWS' first all_reduce holds it.
MEASURED_GROWTH_BYTES = 195_035_136
MEASURED_THREADS = 132 * 2048
MEASURED_LIMIT_BYTES = 1744

# STACK of ncclDevKernel_AllReduce_Sum_f32_RING_LL per SASS image (KERNEL_GOLDEN: cuobjdump
# --dump-resource-usage of torch 2.11's nvidia-nccl-cu13 2.28.9 libnccl.so.2, and of the sm_80
# and sm_90 images of nvidia-nccl-cu12 2.21.5's libnccl.so.2, the wheel torch 2.5.1 / 2.6.0 pin).
KERNEL_STACK: dict[str, dict[int, int]] = {
    "2.21.5": {80: 1312, 90: 1264},
    "2.28.9": {75: 928, 80: 1328, 90: 1736, 100: 1864, 110: 1864, 120: 1112},
}
# STACK of ncclDevKernel_SendRecv, the kernel of every point-to-point op, per SASS image
# (KERNEL_GOLDEN, the same dumps; 2.21.5's symbol carries its parameter list,
# ncclDevKernel_SendRecvP11ncclDevCommmP8ncclWork).
SENDRECV_STACK: dict[str, dict[int, int]] = {
    "2.21.5": {80: 1568, 90: 1480},
    "2.28.9": {75: 1040, 80: 1504, 90: 1976, 100: 2040, 110: 2040, 120: 1240},
}
# the first send/recv after the first all_reduce on the measured H100 (limit 1,744 -> 1,984 B):
# reports/gpu/nccl/nccl-matrix-2x-h100-sendrecv-first.json shm-cumem-on / net-cumem-on "first
# batch_isend_irecv", every rank; memprof.core.terms.nccl.P2P_FIRST_BASE_BYTES holds it
MEASURED_P2P_GROWTH_BYTES = 65_011_712
# SASS images each library carries (cuobjdump's "arch = sm_XX" of the ELF images; 2.21.5's
# sm_50 - sm_70 images were not dumped per kernel: a card that runs one keeps the measured row)
IMAGES: dict[str, tuple[int, ...]] = {
    "2.21.5": (50, 60, 61, 70, 80, 90),
    "2.28.9": (75, 80, 90, 100, 110, 120),
}


def read_release(nccl: str | None) -> tuple[str, str]:
    """The NCCL release whose kernel images stand for ``nccl`` (the engine release's NCCL,
    ``memprof.core.terms.nccl.nccl_version``) and the note where it is another."""
    if nccl in KERNEL_STACK:
        return str(nccl), ""
    if nccl is not None and nccl.startswith(("2.20", "2.21")):
        return "2.21.5", f"; NCCL {nccl}'s images not read: 2.21.5's"
    if nccl is None:
        return "2.28.9", "; the engine's NCCL release not mapped: 2.28.9's images"
    return "2.28.9", f"; NCCL {nccl}'s images not read: 2.28.9's"


def image_for(arch: str, images: tuple[int, ...]) -> int | None:
    """The SASS image an ``sm<NN>`` card runs: the highest image of its major version at or
    below it (sm89 -> 80, sm103 -> 100, sm121 -> 120); None where the library has none (the
    driver would JIT PTX) or the name is not an sm one."""
    cc = arch_cc(arch)
    if cc is None:
        return None
    same = [i for i in images if i // 10 == cc // 10 and i <= cc]
    return max(same) if same else None


def _reservation(limit: int, threads: int) -> int:
    need = limit * threads
    return -(-need // RESERVATION_PAGE_BYTES) * RESERVATION_PAGE_BYTES


class StackGrowth(NamedTuple):
    """The first all_reduce's stack-reservation growth on a card and how it was reached."""

    bytes: int
    note: str


def first_all_reduce_stack(gpu: GPU, threads_per_sm: int | None,
                           nccl: str | None) -> StackGrowth | None:
    """The reservation the process's first NCCL all_reduce grows on ``gpu`` (``threads_per_sm``:
    its max resident threads per SM), from the ring LL kernel's stack in the image the card runs
    under ``nccl``'s library; None where it is not derived (ROCm, no SM count or thread limit, no
    image read): the measured H100 figure then stands."""
    if gpu.is_rocm or gpu.sm_count is None or threads_per_sm is None:
        return None
    release, how = read_release(nccl)
    image = image_for(gpu.arch, IMAGES[release])
    if image is None or image not in KERNEL_STACK[release]:
        return None
    stack = KERNEL_STACK[release][image]
    limit = -(-stack // STACK_ROUND_BYTES) * STACK_ROUND_BYTES
    threads = gpu.sm_count * threads_per_sm
    grown = _reservation(limit, threads) - _reservation(STACK_DEFAULT_BYTES, threads)
    return StackGrowth(max(0, grown), (
        f"the driver's stack reservation grown by the first all_reduce: {gpu.sm_count} SMs × "
        f"{threads_per_sm} threads × ({limit} − 1,024) B in 2 MiB pages = {fmt_bytes(grown)} "
        f"(NCCL {release} sm_{image} ring LL kernel, STACK {stack} B: {KERNEL_GOLDEN}; "
        f"186 MiB on the measured H100: {GOLDEN}{how})"))


def _limit(stack: int) -> int:
    return -(-stack // STACK_ROUND_BYTES) * STACK_ROUND_BYTES


def first_p2p_stack(gpu: GPU, threads_per_sm: int | None,
                    nccl: str | None) -> StackGrowth | None:
    """The reservation the process's first point-to-point op (``ncclDevKernel_SendRecv``) grows
    on ``gpu`` after the first all_reduce left the limit at the ring LL kernel's; None where it
    is not derived (as ``first_all_reduce_stack``): the measured H100 figure then stands."""
    if gpu.is_rocm or gpu.sm_count is None or threads_per_sm is None:
        return None
    release, how = read_release(nccl)
    image = image_for(gpu.arch, IMAGES[release])
    if image is None or image not in KERNEL_STACK[release] or image not in SENDRECV_STACK[release]:
        return None
    # the limit the first all_reduce left: never below the driver's default (sm_75's ring LL
    # kernel, 928 B under 2.28.9, leaves it at 1,024 B)
    ring = max(STACK_DEFAULT_BYTES, _limit(KERNEL_STACK[release][image]))
    sendrecv = _limit(SENDRECV_STACK[release][image])
    threads = gpu.sm_count * threads_per_sm
    grown = max(0, _reservation(max(ring, sendrecv), threads) - _reservation(ring, threads))
    return StackGrowth(grown, (
        f"the driver's stack reservation grown by the first send/recv: {gpu.sm_count} SMs × "
        f"{threads_per_sm} threads × ({sendrecv} − {ring}) B in 2 MiB pages = "
        f"{fmt_bytes(grown)} (NCCL {release} sm_{image} SendRecv kernel, STACK "
        f"{SENDRECV_STACK[release][image]} B, after the ring LL kernel's limit: {KERNEL_GOLDEN}; "
        f"62 MiB on the measured H100: nccl-matrix-2x-h100-sendrecv-first.json{how})"))


def p2p_stack_delta(gpu: GPU, threads_per_sm: int | None, nccl: str | None) -> tuple[int, str]:
    """(bytes, note) by which the measured first point-to-point op (62 MiB on the H100) moves on
    ``gpu`` (``first_p2p_stack``); (0, "") where none is derived or it is the measured one."""
    got = first_p2p_stack(gpu, threads_per_sm, nccl)
    if got is None or got.bytes == MEASURED_P2P_GROWTH_BYTES:
        return 0, ""
    return got.bytes - MEASURED_P2P_GROWTH_BYTES, "; of its first send/recv, " + got.note


def stack_delta(gpu: GPU, threads_per_sm: int | None, nccl: str | None) -> tuple[int, str]:
    """(bytes, note) by which a first communicator's measured first all_reduce moves on ``gpu``:
    the card's growth less the H100's 195,035,136 B; (0, "") where none is derived or it is
    the measured one."""
    got = first_all_reduce_stack(gpu, threads_per_sm, nccl)
    if got is None or got.bytes == MEASURED_GROWTH_BYTES:
        return 0, ""
    return got.bytes - MEASURED_GROWTH_BYTES, "; of its first all_reduce, " + got.note


def on_card(row: NcclRow, gpu: GPU, threads_per_sm: int | None, nccl: str | None) -> NcclRow:
    """A first communicator's measured ``row`` with its first all_reduce's stack reservation
    moved to ``gpu``'s (``stack_delta``), and its first send/recv's where the group sends point
    to point (``p2p_stack_delta``); unchanged where none is derived."""
    d, note = stack_delta(gpu, threads_per_sm, nccl)
    if d:
        row = row._replace(first_all_reduce=row.first_all_reduce + d, basis=row.basis + note)
    return p2p_on_card(row, gpu, threads_per_sm, nccl)


def p2p_on_card(row: NcclRow, gpu: GPU, threads_per_sm: int | None,
                nccl: str | None) -> NcclRow:
    """``row`` with its first send/recv's stack reservation moved to ``gpu``'s
    (``p2p_stack_delta``) where the group sends point to point; unchanged otherwise. A later
    communicator's too: the process's first SendRecv kernel grows the reservation whichever
    communicator runs it (reports/gpu/nccl-later/later-comm-4x-h100.json: PP's first send/recv
    the same made first or after TP's)."""
    p2p, p2p_note = p2p_stack_delta(gpu, threads_per_sm, nccl) if row.first_p2p else (0, "")
    if p2p:
        row = row._replace(first_p2p=row.first_p2p + p2p, basis=row.basis + p2p_note)
    return row
