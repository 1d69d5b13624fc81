"""The multicast granularity NCCL 2.20.x / 2.21.x round their NVLS buffer up to, per rank: the
size a communicator's NVLS buffer really takes on a multicast-capable NVSwitch host.

NCCL 2.20.x and 2.21.x make one NVLS buffer per communicator at ``ncclCommInitRank``
(``src/transport/nvls.cc`` ``ncclNvlsSetup``: ``nvlsTotalSize = nChannels × 2 × (buffSize +
memSize) × nHeads``, sized in ``memprof.core.terms.nccl_nvls.nvls_bytes``) and pass its size
through ``nvlsGetProperties``, which asks the driver for the multicast object's *recommended*
granularity and rounds the size up to it before ``nvlsGroupBindMem`` creates the unicast
memory of that size on every rank (``cuMulticastGetGranularity(&resources->granularity, prop,
CU_MULTICAST_GRANULARITY_RECOMMENDED); ALIGN_SIZE(size, resources->granularity); prop->size =
resources->size = size``, with NCCL's own comment "Could be changed to
CU_MULTICAST_GRANULARITY_MINIMUM when 3418538 resolved").

The recommended granularity on a Hopper NVSwitch host: 512 MiB (the minimum is 2 MiB), as
``cuMulticastGetGranularity`` printed it on an 8x H100 80GB HBM3 HGX node with driver
570.211.01 (https://github.com/gabrieldemarmiesse/torch-mojo-backend/blob/
31de5a4754b4b85c0cc026e955035619305c002d/agents_docs/mojo_collectives_nvls_results.md, §1, a
multicast prototype's probe of both flags on that node). Every multicast-capable GPU row takes it
[assumptions: printed on H100 SXM only, the H200 HGX having the same NVSwitch generation; and
printed for a multicast object of 8 devices, taken for any communicator size].

Not applied from NCCL 2.22 on: its split setup (credits and data buffer,
``ncclNvlsBufferSetup``) is sized in ``nccl_nvls`` as it is, and the granularity its
allocations use there was not read.
"""

from __future__ import annotations

from memprof.base.units import MiB

MC_GRANULARITY_RECOMMENDED_BYTES = 512 * MiB
MC_GRANULARITY_SOURCE = (
    "NCCL 2.20/2.21 src/transport/nvls.cc nvlsGetProperties: ALIGN_SIZE to "
    "CU_MULTICAST_GRANULARITY_RECOMMENDED, 512 MiB on an 8x H100 HGX, driver 570.211.01 "
    "(gabrieldemarmiesse/torch-mojo-backend agents_docs/mojo_collectives_nvls_results.md)")

# NCCL versions whose ncclNvlsSetup rounds the one NVLS buffer to the recommended granularity
ROUNDED_VERSIONS = ("2.20", "2.21")


def mc_rounded(nbytes: int, version: str) -> int:
    """``nbytes`` of one communicator's NVLS buffer as NCCL ``version`` allocates it: rounded
    up to the recommended multicast granularity in 2.20.x / 2.21.x, unchanged otherwise."""
    if not version.startswith(ROUNDED_VERSIONS):
        return nbytes
    unit = MC_GRANULARITY_RECOMMENDED_BYTES
    return -(-nbytes // unit) * unit
