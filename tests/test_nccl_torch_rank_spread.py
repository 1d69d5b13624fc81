"""The per-rank spread of calibration row 506 (vLLM 0.10.0, TP 8, NCCL_CUMEM_ENABLE=0) against the
legacy-IPC goldens: two cuMem-off communicators on the TP group, PyNccl's and torch's own
(memprof.core.terms.nccl_torch), each costing the first rank 48 MiB and the last 240 MiB less
than the middle ranks."""

from __future__ import annotations

import json
import re
from pathlib import Path

from memprof.base.units import MiB
from memprof.core.gpus import find_gpu
from memprof.core.terms.nccl import NCCL_ROWS
from memprof.core.terms.nccl_nvls import (
    RING_CHANNELS_NVLINK,
    p2p_recv_bytes_per_channel,
    p2p_send_bytes_per_channel,
)
from memprof.core.terms.nccl_torch import GOLDEN, TORCH_COMM_ROWS

ROOT = Path(__file__).resolve().parent.parent
ROW = next(r for r in json.loads((ROOT / "tests/data/published.json").read_text())["rows"]
           if r["id"] == 506)
CONFIG = json.loads((ROOT / "configs/models/qwen3-235b-a22b-fp8.json").read_text())
DOC = json.loads((ROOT / GOLDEN).read_text())
MATRIX = json.loads((ROOT / "reports/gpu/nccl/nccl-matrix-4x-h100.json").read_text())
BLOCK = 16  # tokens a block: the KV line counts whole blocks


def _tokens() -> list[int]:
    # the quote's "GPU KV cache size" lines and its summary of the other ranks' lines
    # ("1,590,736 on six ranks, 1,611,664 on one")
    got = re.findall(r"\b(\d,\d{3},\d{3})\b", ROW["quote"])
    return sorted({int(t.replace(",", "")) for t in got})


def _fp8_bytes_per_token_per_rank() -> int:
    # 4 KV heads over TP 8: one replicated head a rank; K and V of head_dim, fp8 (1 B)
    heads = max(1, CONFIG["num_key_value_heads"] // ROW["tp"])
    return CONFIG["num_hidden_layers"] * heads * CONFIG["head_dim"] * 2 * 1


def _golden_second(rank: int) -> int:
    recs = DOC["w4-cumem0-second"]
    step = next(s for s in recs[rank]["steps"] if s["step"] == "all_gather_into_tensor (first)")
    return int(step["non_torch_growth"])


def test_the_row_prints_three_pools() -> None:
    assert ROW["engine_version"].startswith("0.10.0") and ROW["kv_cache_dtype"] == "fp8"
    assert _tokens() == [1_590_736, 1_594_928, 1_611_664]
    assert _fp8_bytes_per_token_per_rank() == 24_064


def test_the_spread_is_two_legacy_ipc_communicators() -> None:
    middle, first, last = _tokens()
    per = _fp8_bytes_per_token_per_rank()
    # one torch communicator made after another (GOLDEN): first rank 48 MiB, last 240 MiB less
    # than the largest (middle) rank, whose figure memprof charges
    assert _golden_second(1) == _golden_second(2) == TORCH_COMM_ROWS[(True, False, 4)]
    torch_first = TORCH_COMM_ROWS[(True, False, 4)] - _golden_second(0)
    torch_last = TORCH_COMM_ROWS[(True, False, 4)] - _golden_second(3)
    # the same spread for the first (PyNccl-style) communicator's init in the NCCL matrix
    init_4 = _matrix_init()
    assert max(init_4) == NCCL_ROWS[(True, False, 4)][0]
    assert (max(init_4) - init_4[0], max(init_4) - init_4[3]) == (torch_first, torch_last)
    # per channel, a send (ncclSendMem, 2 MiB) and a receive connection (10 MiB) of the tree
    h100 = find_gpu("H100")
    assert torch_first == RING_CHANNELS_NVLINK * p2p_send_bytes_per_channel(h100)
    assert torch_last == RING_CHANNELS_NVLINK * p2p_recv_bytes_per_channel(h100)
    # the log: rank 0 and rank 7 hold twice that more KV than the middle ranks, to a block
    assert abs((first - middle) * per - 2 * torch_first) < BLOCK * per
    assert abs((last - middle) * per - 2 * torch_last) < BLOCK * per
    # one communicator would leave half: the log rules it out
    assert abs((last - middle) * per - torch_last) > 100 * BLOCK * per


def _matrix_init() -> list[int]:
    """ncclCommInitRank per rank of the 4-rank legacy-IPC (cuMem off) matrix run."""
    run = next(r for r in MATRIX["runs"] if r["config"] == "p2p-cumem-off")
    key = "ncclCommInitRank (init_process_group, device_id)"
    return [int(r["non_torch_growth_bytes"][key]) for r in sorted(run["ranks"],
                                                                    key=lambda r: r["rank"])]


def test_what_grows_from_2_to_4_ranks_is_the_trees_own_connections() -> None:
    # cuMem off: NCCL connects rings, then trees, at init, and a tree connection to a peer the
    # ring already connected on that channel is skipped (src/transport.cc
    # ncclTransportP2pConnect, v2.21.5-1 / v2.26.2-1 / v2.28.9-1). At 2 ranks every tree peer
    # is a ring peer; on one node of 4 the tree is a chain 0-1-2-3 beside the ring 0-1-2-3-0,
    # so per channel rank 0 gains a receive connection (from 1), ranks 1 and 2 a receive and a
    # send, rank 3 a send (to 2): 10 MiB and 2 MiB on sm90 (p2p.cc), over the 24 ring channels.
    h100 = find_gpu("H100")
    recv, send = p2p_recv_bytes_per_channel(h100), p2p_send_bytes_per_channel(h100)
    assert (recv, send) == (10 * MiB, 2 * MiB)
    new_edges = [(1, 0), (1, 1), (1, 1), (0, 1)]  # (receive, send) per rank and channel
    want = [RING_CHANNELS_NVLINK * (r * recv + s * send) for r, s in new_edges]
    two = NCCL_ROWS[(True, False, 2)][0]
    assert [i - two for i in _matrix_init()] == want
    # torch's second communicator: the same spread between its ranks
    second = [_golden_second(r) for r in range(4)]
    assert [max(second) - g for g in second] == [max(want) - w for w in want]
