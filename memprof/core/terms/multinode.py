"""NCCL's device memory per rank for a process group that spans nodes (``--nnodes``, the layout
in ``memprof.core.nodes``): the NET-transport rows, read off the goldens of reports/gpu/nccl.

A rank reaches a rank on another node only over NCCL's NET transport (InfiniBand/RoCE through the IB
plugin, else TCP sockets): P2P needs both peers on one host and SHM one host with a common /dev/shm
(NCCL src/transport/p2p.cc ``p2pCanConnect``: "Rule out different nodes", the peers' ``hostHash``;
src/transport/shm.cc ``shmCanConnect``: ``hostHash`` and ``shmDev``). The goldens measured NET over
loopback sockets on one host with the other transports switched off (``NCCL_P2P_DISABLE=1
NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo``, configurations ``net-cumem-on`` and
``net-cumem-off`` of nccl-matrix-2x-h100.json and nccl-matrix-4x-h100.json; rank 0's
``non_torch_growth_bytes``, every rank equal), NCCL 2.28.9: InfiniBand was not measured, and the
output says so.

A group with one rank on each node takes these rows. A group across nodes with several ranks on
a node connects those over P2P/SHM and only its node-crossing links over NET; that mix was not
measured, so it keeps the one-host row (the larger) and says so [assumption, stated].
"""

from __future__ import annotations

from memprof.base.units import fmt_bytes
from memprof.core.terms.nccl import NcclRow, measured_world

# (init incl. torch's stream pool, first all_reduce, first point-to-point op) per rank, by
# (cuMem on, ranks measured): exact bytes of the steps "ncclCommInitRank (init_process_group,
# device_id)", "warm-up all_reduce of 1 fp32" and "first all_to_all_single, 1 MiB".
NET_ROWS: dict[tuple[bool, int], tuple[int, int, int, str]] = {
    (True, 2): (201_326_592, 195_035_136, 65_011_712, "nccl-matrix-2x-h100.json net-cumem-on"),
    (False, 2): (190_840_832, 195_035_136, 65_011_712,
                 "nccl-matrix-2x-h100.json net-cumem-off"),
    (True, 4): (201_326_592, 224_395_264, 35_651_584, "nccl-matrix-4x-h100.json net-cumem-on"),
    (False, 4): (190_840_832, 224_395_264, 35_651_584,
                 "nccl-matrix-4x-h100.json net-cumem-off"),
}
NET_BASIS = "[measured over loopback sockets; IB not measured]"
MIXED_NOTE = ("; the group spans nodes with several ranks on a node: the one-host row "
              "[assumption: its NET links across nodes not measured]")


def net_row(cumem: bool, size: int, p2p: bool) -> NcclRow:
    """A communicator of ``size`` ranks, each on a node of its own, over NCCL's NET transport,
    with NCCL's cuMem allocator on or off; ``p2p`` when the group sends point to point (PP).
    Sizes other than 2 and 4 take ``measured_world``'s row and note (the first all_reduce grew
    from 186 to 214 MiB between 2 and 4 ranks over NET, so past 4 ranks the row is a floor)."""
    world, note = measured_world(size)
    if size > 4:
        note += "; over NET the first all_reduce grew from 2 to 4 ranks: a floor"
    init, first, first_p2p, src = NET_ROWS[(cumem, world)]
    p2p_bytes = first_p2p if p2p else 0
    basis = (f"{fmt_bytes(init)} ncclCommInitRank (torch's stream pool included) + "
             f"{fmt_bytes(first)} at its first all_reduce: NET across nodes, one rank a node "
             f"{NET_BASIS}" + (", cuMem on" if cumem else ", NCCL_CUMEM_ENABLE=0")
             + f" ({src}){note}")
    if p2p_bytes:
        basis += f" + {fmt_bytes(p2p_bytes)} at its first send/recv ({src})"
    return NcclRow(init, first, p2p_bytes, basis)
