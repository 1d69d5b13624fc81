"""NCCL's device code, loaded onto the GPU by a process's first ``ncclCommInitRank``: the part of a
first communicator's init figure that is neither NCCL's buffers nor torch's, by the NCCL release
the engine runs and the SASS image the card takes from it.

What the golden shows (``GOLDEN``: ``recorders/gpu_nccl_image.sh``, 2× H100 80GB HBM3 NV18,
driver 580.159.04, torch 2.11.0+cu130, NCCL 2.28.9, a PyNccl-style communicator through ctypes
``ncclCommInitRank`` made after the CUDA context, the first fill kernel and torch's stream pool,
``NCCL_CUMEM_ENABLE=0``, ``NCCL_DEBUG_SUBSYS=INIT,ALLOC``; both ranks alike in every case):

- init adds 117,440,512 B over SHM at 2 channels (``NCCL_MIN/MAX_NCHANNELS=2``, the count NCCL
  builds over SHM on a PCIe Gen4 host, ``memprof.core.terms.nccl_channels``), 121,634,816 B at
  SHM's 4 and 197,132,288 B over P2P at 4 channels. NCCL's log names every device allocation it
  makes (``Cuda Alloc Size``): the channel tables (``channel.cc``, ``init.cc``: one 2 MiB page),
  the proxy's shared point-to-point buffer (``transport/net.cc``: p2p channels × 16 steps × the
  P2P chunk, 2 MiB a channel over SHM, 8 over P2P), and over P2P each channel's receive buffer
  (10 MiB) and send buffer (2 MiB) (``transport/p2p.cc``). The rest is 111,149,056 B in all three
  cases, whatever the transport and channels;
- that rest is the library's device code: NCCL links its own CUDA runtime statically
  (src/Makefile ``CUDARTLIB ?= cudart_static``, tags v2.21.5-1 to v2.28.9-1), so its fatbin is
  loaded by NCCL's own calls, and init touches every kernel it has (``ncclInitKernelsForDevice``
  from src/init.cc: ``cudaFuncGetAttributes`` and ``cudaFuncSetAttribute`` over
  ``ncclDevKernelList``, the "kernels" phase of the log's "Init timings", 0.31-0.53 s). That is
  why ``CUDA_MODULE_LOADING=EAGER`` left it in init (``reports/gpu/nccl-stack``) and why a second
  communicator of the same process shows none of it (``memprof.core.terms.nccl.SECOND_COMM_ROWS``,
  8-30 MiB over SHM).

So every first communicator's measured row (``memprof.core.terms.nccl.NCCL_ROWS``, measured with
NCCL 2.28.9 on sm_90) holds 111,149,056 B of 2.28.9's sm_90 image, and on another release or
architecture it holds that release's image for the card: ``IMAGE_BYTES``, the decompressed size of
each ELF image in the ``.nv_fatbin`` section of the ``nvidia-nccl-cu12`` wheel torch pins
(``IMAGES_GOLDEN``, ``recorders/nccl_image_sizes.py``; no GPU needed). A card runs the image of its
own major version at or below its minor (``memprof.core.terms.nccl_stack.image_for``: sm_86 and
sm_89 run sm_80's). The measured NCCL's own wheel (nvidia-nccl-cu13 2.28.9, the one torch
2.11.0+cu130 pins) carries a 105,979,416 B sm_90 image: 51 pages of 2 MiB, 2 pages
(``LOAD_BEYOND_IMAGE_BYTES``) under the measured 53. So the load is taken as the image's
decompressed ELF size in 2 MiB pages plus those 2 pages, on every release and card [assumption:
the 2 pages beyond the image were measured on one card and release]. A first communicator's
init then moves by the difference of the two images' pages alone. The sm_80 image, the one every
Ampere and Ada card runs, is 47-51 MB in every release read, under half of sm_90's.

Not moved (the measured row stands): an engine whose NCCL memprof does not map
(``memprof.core.terms.nccl.nccl_version`` None) or a release whose wheel was not read, a card
whose image the release's wheel does not carry (the driver would JIT PTX), non-NVIDIA cards, and
communicators across nodes (``memprof.core.terms.multinode`` rows, measured over sockets, not
moved by card either).
"""

from __future__ import annotations

from memprof.base.units import MiB, fmt_bytes
from memprof.core.gpus import GPU
from memprof.core.terms.nccl import NcclRow
from memprof.core.terms.nccl_stack import image_for

GOLDEN = "reports/gpu/nccl-image/nccl-image-2x-h100.json"
IMAGES_GOLDEN = "reports/gpu/nccl-image/images.json"

PAGE_BYTES = 2 * MiB
# GOLDEN: init less NCCL's logged device allocations, the same in the cases shm-c2, shm-def and
# p2p-c4 (117,440,512 − 6,291,456; 121,634,816 − 10,485,760; 197,132,288 − 85,983,232)
MEASURED_LOAD_BYTES = 111_149_056
MEASURED_RELEASE, MEASURED_IMAGE = "2.28.9", 90
# the measured load beyond 2.28.9's sm_90 image in whole pages (IMAGE_BYTES["2.28.9"][90]:
# 51 pages): 111,149,056 - 51 x 2 MiB
LOAD_BEYOND_IMAGE_BYTES = 4_194_304

# Decompressed bytes of each ELF image in libnccl.so.2 (IMAGES_GOLDEN), by the release
# ``memprof.core.terms.nccl.nccl_version`` names: nvidia-nccl-cu12 2.20.5 (torch 2.4.0), 2.21.5
# (torch 2.5.1 / 2.6.0), 2.26.2 (torch 2.7.0 / 2.7.1), 2.27.3 (torch 2.8.0), 2.27.5 (torch
# 2.9.x / 2.10.0; the same sm_50 - sm_100 images as 2.27.3, sm_120 121,102,376 against
# 121,147,944 B) and nvidia-nccl-cu13 2.28.9 (torch 2.11.0, the measured one),
# 2.29.7 (torch 2.12.0 / 2.13.0) and 2.30.7 (torch 2.14.0 / 2.14.1).
IMAGE_BYTES: dict[str, dict[int, int]] = {
    "2.20.5": {50: 35_628_176, 60: 35_339_376, 61: 35_610_320, 70: 48_651_536, 80: 48_137_872,
               90: 70_847_504},
    "2.21.5": {50: 37_348_000, 60: 37_058_592, 61: 37_330_400, 70: 50_769_088, 80: 50_031_552,
               90: 88_514_016},
    "2.26.2": {50: 35_930_032, 60: 36_648_080, 61: 36_948_112, 70: 48_215_792, 80: 47_252_464,
               90: 103_105_200},
    "2.27.3": {50: 36_974_504, 60: 37_698_088, 61: 37_997_320, 70: 49_753_992,
               80: 49_087_496, 90: 105_827_080, 100: 134_876_536, 120: 121_147_944},
    "2.27.5": {50: 36_974_504, 60: 37_698_088, 61: 37_997_320, 70: 49_753_992,
               80: 49_087_496, 90: 105_827_080, 100: 134_876_536, 120: 121_102_376},
    "2.28.9": {75: 50_846_984, 80: 50_658_184, 90: 105_979_416, 100: 134_715_312,
               110: 135_075_016, 120: 119_206_352},
    "2.29.7": {75: 50_201_272, 80: 50_002_488, 90: 105_442_648, 100: 136_876_592,
               110: 137_100_152, 120: 121_658_344},
    "2.30.7": {75: 51_681_552, 80: 51_430_800, 90: 108_666_336, 100: 146_917_712,
               110: 146_017_032, 120: 130_559_296},
}


def image_load(nccl: str | None, gpu: GPU) -> tuple[int, str] | None:
    """(bytes, note) of NCCL's device code that a first ``ncclCommInitRank`` loads on ``gpu``
    under the release ``nccl``: the card's image in 2 MiB pages; None where it is not derived
    (see the module docstring)."""
    if gpu.vendor != "nvidia" or nccl is None:
        return None
    sizes = IMAGE_BYTES.get(nccl)
    if sizes is None:
        return None
    img = image_for(gpu.arch, tuple(sizes))
    if img is None:
        return None
    pages = -(-sizes[img] // PAGE_BYTES)
    return pages * PAGE_BYTES + LOAD_BEYOND_IMAGE_BYTES, (
        f"NCCL {nccl}'s sm_{img} image, {sizes[img]:,} B decompressed ({IMAGES_GOLDEN}), "
        f"loaded by ncclInitKernelsForDevice at init in {pages} pages of 2 MiB and the 2 pages "
        "the measured load holds beyond 2.28.9's sm_90 image [assumed: the same on every card "
        "and release]")


def image_delta(gpu: GPU, nccl: str | None) -> tuple[int, str]:
    """(bytes, note) by which a first communicator's measured init moves on ``gpu`` under the
    release ``nccl``: the card's image load less the 111,149,056 B of 2.28.9's sm_90 image
    measured in it (``GOLDEN``); (0, "") where none is derived or the card runs the measured
    image."""
    got = image_load(nccl, gpu)
    if got is None or got[0] == MEASURED_LOAD_BYTES:
        return 0, ""
    load, note = got
    return load - MEASURED_LOAD_BYTES, (
        f"; of its init, NCCL's device code: {fmt_bytes(load)} ({note}) for the "
        f"{fmt_bytes(MEASURED_LOAD_BYTES)} of NCCL {MEASURED_RELEASE}'s sm_{MEASURED_IMAGE} image "
        f"in the measured row ({GOLDEN})")


def on_image(row: NcclRow, gpu: GPU, nccl: str | None) -> NcclRow:
    """A first communicator's measured ``row`` with its init's NCCL device code moved to the
    image ``gpu`` runs under the release ``nccl`` (``image_delta``); unchanged where none is
    derived."""
    d, note = image_delta(gpu, nccl)
    if not d:
        return row
    return row._replace(init=row.init + d, basis=row.basis + note)
