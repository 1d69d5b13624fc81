"""vLLM V1's torch TP communicator (memprof.core.terms.nccl_torch) against its golden,
reports/gpu/nccl-torch-gather/torch-gather-4x-h100.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate
from memprof.core.gpus import find_gpu
from memprof.core.terms import nccl_nvls
from memprof.core.terms.nccl import (
    P2P_CHANNELS_PER_PEER,
    P2P_FIRST_BASE_BYTES,
    SECOND_COMM_ROWS,
    TORCH_STREAM_POOL_BYTES,
)
from memprof.core.terms.nccl_nvls import p2p_recv_bytes_per_channel, p2p_send_bytes_per_channel
from memprof.core.terms.nccl_torch import GOLDEN, TORCH_COMM_ROWS

ROOT = Path(__file__).resolve().parent.parent
DOC = json.loads((ROOT / GOLDEN).read_text())
NAME = "torch's NCCL TP communicator"


def _growth(config: str, step: str) -> list[int]:
    out = []
    for rank in DOC[config]:
        got = [s for s in rank["steps"] if s["step"] == step]
        assert len(got) == 1, (config, step)
        out.append(got[0]["non_torch_growth"])
    return out


def test_golden_machine() -> None:
    assert {r["nccl"] for v in DOC.values() for r in v} == {"2.28.9"}
    assert {r["torch"] for v in DOC.values() for r in v} == {"2.11.0+cu130"}
    assert {len(v) for k, v in DOC.items() if k.startswith("w2")} == {2}
    assert {len(v) for k, v in DOC.items() if k.startswith("w4")} == {4}
    assert all(r["env"]["NCCL_NVLS_ENABLE"] == "0" for v in DOC.values() for r in v)


@pytest.mark.parametrize(("cumem", "world"), [(True, 2), (True, 4), (False, 2), (False, 4)])
def test_rows_are_the_golden(cumem: bool, world: int) -> None:
    got = _growth(f"w{world}-cumem{int(cumem)}-second", "all_gather_into_tensor (first)")
    assert TORCH_COMM_ROWS[(True, cumem, world)] == max(got)
    # lazy: init_process_group without device_id makes nothing on any rank
    assert all(g < MiB for g in _growth(f"w{world}-cumem{int(cumem)}-second",
                                        "init_process_group (no device_id)"))


@pytest.mark.parametrize("config", sorted(DOC))
def test_a_larger_gather_and_the_stream_probe_add_nothing(config: str) -> None:
    assert set(_growth(config, "all_gather_into_tensor (again, 4x rows)")) == {0}
    assert set(_growth(config, "stream probe (torch.cuda.Stream())")) == {0}


@pytest.mark.parametrize("world", [2, 4])
def test_cumem_on_equals_the_second_pynccl_communicator(world: int) -> None:
    init, first, _ = SECOND_COMM_ROWS[(True, True, world)]
    assert TORCH_COMM_ROWS[(True, True, world)] == init + first


@pytest.mark.parametrize("world", [2, 4])
def test_the_cumem_off_second_communicator_rows_are_the_golden(world: int) -> None:
    init, first, src = SECOND_COMM_ROWS[(True, False, world)]
    assert (init, first) == (TORCH_COMM_ROWS[(True, False, world)], 0)
    assert f"w{world}-cumem0-second" in src


@pytest.mark.parametrize("config", ["w2-cumem1", "w2-cumem0", "w4-cumem1", "w4-cumem0"])
def test_as_a_first_communicator_it_costs_the_per_process_share_more(config: str) -> None:
    # mode "stream" (the pool made first, no other communicator) against "second": the same
    # 290-294 MiB on every rank and setting (2 MiB pages); "first" holds the stream pool on top
    stream = _growth(f"{config}-stream", "all_gather_into_tensor (first)")
    second = _growth(f"{config}-second", "all_gather_into_tensor (first)")
    first = _growth(f"{config}-first", "all_gather_into_tensor (first)")
    assert {a - b for a, b in zip(stream, second, strict=True)} <= {290 * MiB, 292 * MiB, 294 * MiB}
    assert {a - b for a, b in zip(first, stream, strict=True)} == {TORCH_STREAM_POOL_BYTES}


@pytest.mark.parametrize("config", sorted(DOC))
def test_the_v0_gather_connections_derived_from_nccls_source(config: str) -> None:
    # torch.distributed.gather to rank 0 (V0's logits gather): the root's receive connections
    # and the others' send connections, as nccl_nvls derives them from p2p.cc
    h100 = find_gpu("H100")
    got = _growth(config, "gather to rank 0 (first)")
    peers = len(got) - 1
    assert got[0] == P2P_FIRST_BASE_BYTES + peers * P2P_CHANNELS_PER_PEER * \
        p2p_recv_bytes_per_channel(h100)
    assert set(got[1:]) == {P2P_FIRST_BASE_BYTES + P2P_CHANNELS_PER_PEER *
                            p2p_send_bytes_per_channel(h100)}


def _est(version: str, gpu: str = "H100", **kw: object) -> Estimate:
    dep = Deployment(**{"tp": 2, "engine_version": version, **kw})  # type: ignore[arg-type]
    return estimate("llama-3.1-8b", dep, gpu_name=gpu)


def _torch_comm(e: Estimate, rank: int = 0) -> list[tuple[int, str]]:
    return [(c.bytes, c.where) for c in e.ranks[rank].components if c.name.startswith(NAME)]


@pytest.mark.parametrize(("version", "tp", "want"), [
    ("0.8.5", 2, 572_522_496),      # NCCL_CUMEM_ENABLE=0 (env_override.py up to 0.10.1.1)
    ("0.10.1.1", 4, 872_415_232),
    ("0.10.2", 2, 509_607_936),     # cuMem on from 0.10.2
    ("0.20.0", 4, 507_510_784),
    ("0.25.0", 8, 507_510_784),     # 8 ranks: the 4-rank row
    ("0.26.0", 2, None),            # CudaCommunicator.all_gather through PyNccl
    ("0.33.0", 2, None),
    ("0.8.5+v0", 2, None),          # V0: nccl_nvls's torch_tp_gather_comm instead
])
def test_by_release(version: str, tp: int, want: int | None) -> None:
    got = _torch_comm(_est(version, tp=tp))
    assert got == ([] if want is None else [(want, "budget")])


def test_tp1_and_a_first_pp_stage_have_none() -> None:
    assert _torch_comm(_est("0.20.0", tp=1)) == []
    e = _est("0.20.0", tp=2, pp=2)
    assert _torch_comm(e, 0) == []  # rank 0: PP stage 0 computes no logits


def test_rocm_keeps_it_after_0_26() -> None:
    got = _torch_comm(_est("0.33.0", gpu="MI300X"))
    assert len(got) == 1 and got[0][0] > 0


def test_without_peer_access_the_shm_golden_row_stands() -> None:
    # reports/gpu/nccl-torch-gather/torch-gather-shm-4x-h100.json w2-cumem1-second (cuMem on
    # from 0.10.2): 30 MiB, not the first communicator's SHM row less the pool (320 MiB)
    e = _est("0.20.0", no_gpu_peer_access=True)
    comp = [c for c in e.ranks[0].components if c.name.startswith(NAME)]
    assert comp[0].bytes == 31_457_280
    assert "torch-gather-shm-4x-h100.json w2-cumem1-second" in comp[0].formula


def test_the_budget_pays_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # the profile run sees it: without the term the KV the budget leaves grows by its bytes
    with_term = _est("0.25.0").ranks[0].available_kv_bytes
    monkeypatch.setattr(nccl_nvls, "torch_tp_comm_v1", lambda ctx: None)
    without = _est("0.25.0").ranks[0].available_kv_bytes
    assert without - with_term == 509_607_936
