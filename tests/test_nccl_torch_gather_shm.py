"""torch's TP communicator over host shared memory (GPUs without peer access) against its golden,
reports/gpu/nccl-torch-gather/torch-gather-shm-4x-h100.json (memprof.core.terms.nccl_torch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate
from memprof.core.terms import nccl_nvls
from memprof.core.terms.nccl import NCCL_ROWS, TORCH_STREAM_POOL_BYTES, second_comm_row
from memprof.core.terms.nccl_torch import GOLDEN, GOLDEN_SHM, TORCH_COMM_ROWS

ROOT = Path(__file__).resolve().parent.parent
SHM = json.loads((ROOT / GOLDEN_SHM).read_text())
P2P = json.loads((ROOT / GOLDEN).read_text())
INFO = (ROOT / GOLDEN_SHM).with_name("nccl-info-shm-4x-h100.txt").read_text()
NAME = "torch's NCCL TP communicator"
FIRST = "all_gather_into_tensor (first)"


def _growth(doc: dict[str, list[dict[str, object]]], config: str, step: str) -> list[int]:
    out = []
    for rank in doc[config]:
        steps = rank["steps"]
        assert isinstance(steps, list)
        got = [s["step"] for s in steps].count(step)
        assert got == 1, (config, step)
        out.extend(s["non_torch_growth"] for s in steps if s["step"] == step)
    return out


def test_golden_machine_and_transport() -> None:
    recs = [r for v in SHM.values() for r in v]
    assert {r["nccl"] for r in recs} == {"2.28.9"}
    assert {r["torch"] for r in recs} == {"2.11.0+cu130"}
    assert all(r["env"]["NCCL_P2P_DISABLE"] == "1" for r in recs)
    assert all(r["env"]["NCCL_NVLS_ENABLE"] == "0" for r in recs)
    assert {len(v) for k, v in SHM.items() if k.startswith("w2")} == {2}
    assert {len(v) for k, v in SHM.items() if k.startswith("w4")} == {4}
    # NCCL logged SHM on every channel and never P2P
    assert "via SHM/direct/direct" in INFO and "via P2P" not in INFO


@pytest.mark.parametrize(("cumem", "world"), [(False, 2), (False, 4), (True, 2), (True, 4)])
def test_rows_are_the_golden(cumem: bool, world: int) -> None:
    got = _growth(SHM, f"w{world}-cumem{int(cumem)}-second", FIRST)
    assert len(set(got)) == 1  # every rank alike over SHM
    assert TORCH_COMM_ROWS[(False, cumem, world)] == got[0]
    # a second communicator over SHM is small: 8-30 MiB, against the 302-320 MiB the first
    # communicator's row less the stream pool charged before
    assert 8 * MiB <= got[0] <= 30 * MiB


@pytest.mark.parametrize("cumem", [False, True])
def test_the_first_communicator_is_the_matrix_shm_row(cumem: bool) -> None:
    # mode "first": init + first collective = reports/gpu/nccl/nccl-matrix-2x-h100.json's SHM
    # row (init incl. the stream pool + first all_reduce)
    init, first_ar, _ = NCCL_ROWS[(False, cumem, 2)]
    assert set(_growth(SHM, f"w2-cumem{int(cumem)}-first", FIRST)) == {init + first_ar}
    stream = _growth(SHM, f"w2-cumem{int(cumem)}-stream", FIRST)
    assert set(stream) == {init + first_ar - TORCH_STREAM_POOL_BYTES}


@pytest.mark.parametrize("cumem", [0, 1])
def test_the_per_process_share_is_the_p2p_one(cumem: int) -> None:
    # stream − second: what a first communicator costs beyond a second, over SHM and over
    # NVLink P2P at 2 ranks: the same 290-294 MiB, paid once per process
    shm = {a - b for a, b in zip(_growth(SHM, f"w2-cumem{cumem}-stream", FIRST),
                                 _growth(SHM, f"w2-cumem{cumem}-second", FIRST), strict=True)}
    p2p = {a - b for a, b in zip(_growth(P2P, f"w2-cumem{cumem}-stream", FIRST),
                                 _growth(P2P, f"w2-cumem{cumem}-second", FIRST), strict=True)}
    assert shm <= {290 * MiB, 292 * MiB} and p2p <= {290 * MiB, 292 * MiB, 294 * MiB}
    assert abs(max(shm) - max(p2p)) <= 2 * MiB


def _est(version: str, tp: int = 2, gpu: str = "H100") -> Estimate:
    dep = Deployment(tp=tp, engine_version=version, no_gpu_peer_access=True)
    return estimate("llama-3.1-8b", dep, gpu_name=gpu)


def _torch_comm(e: Estimate) -> list[int]:
    return [c.bytes for c in e.ranks[0].components if c.name.startswith(NAME)]


@pytest.mark.parametrize(("version", "tp", "want"), [
    ("0.8.4", 2, 10_485_760),       # rows 312 / 313: NCCL_CUMEM_ENABLE=0, V1
    ("0.10.1.1", 2, 10_485_760),    # row 523
    ("0.10.1.1", 4, 8_388_608),
    ("0.10.2", 2, 31_457_280),      # cuMem on from 0.10.2
    ("0.25.0", 8, 29_360_128),      # 8 ranks: the 4-rank row
])
def test_by_release_without_peer_access(version: str, tp: int, want: int) -> None:
    assert _torch_comm(_est(version, tp)) == [want]


def test_the_budget_pays_the_golden_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    # hand count: without the term the KV the budget leaves grows by exactly the golden's
    # w2-cumem0-second figure, 10 MiB (0.8.4 V1 charges every non-torch byte)
    with_term = _est("0.8.4").ranks[0].available_kv_bytes
    monkeypatch.setattr(nccl_nvls, "torch_tp_comm_v1", lambda ctx: None)
    without = _est("0.8.4").ranks[0].available_kv_bytes
    assert without - with_term == 10 * MiB


@pytest.mark.parametrize(("cumem", "world"), [(False, 2), (False, 4), (True, 2), (True, 4)])
def test_the_ep_groups_second_communicator_takes_the_shm_golden(cumem: bool, world: int) -> None:
    # the EP group's PyNccl communicator is a rank's second too (nccl.SECOND_COMM_ROWS)
    row = second_comm_row(False, cumem, world)
    assert row is not None
    assert (row.init, row.first_all_reduce) == (TORCH_COMM_ROWS[(False, cumem, world)], 0)
    assert "over host shared memory" in row.basis
    assert f"torch-gather-shm-4x-h100.json w{world}-cumem{int(cumem)}-second" in row.basis
