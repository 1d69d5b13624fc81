"""SGLang's NCCL communicators (``SGLang.nccl_groups``, ``SGLANG_MOE_GROUPS`` in
memprof/core/engines/sglang.py): TP, then from 0.4.10 to 0.5.1 the MoE EP and MoE TP groups
(distributed/parallel_state.py initialize_model_parallel, a PyNccl communicator each where the
group has more than one rank; from 0.5.2 one of TP's size is the TP group:
tests/test_sglang_moe_groups_alias.py), then PP; no DP communicator (DP attention's
attention-TP group has no PyNccl by default; --dp without it runs whole servers)."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms.non_torch import nccl_groups


def _sgl(version: str, **kw: object) -> Deployment:
    return Deployment(engine="sglang", engine_version=version, **kw)  # type: ignore[arg-type]


# 0.4.3 - 0.4.6 add torch's world communicator: tests/test_sglang_world_communicator.py
@pytest.mark.parametrize("version", ["0.4.7", "0.4.8.post1", "0.4.9", "0.4.9.post5"])
def test_tp_and_pp_only_before_0410(version: str) -> None:
    assert nccl_groups(_sgl(version, tp=4)) == [("TP", 4)]
    assert nccl_groups(_sgl(version, tp=2, pp=2)) == [("TP", 2), ("PP", 2)]


@pytest.mark.parametrize("version", ["0.4.10", "0.5.1"])
def test_moe_groups_from_0410(version: str) -> None:
    # EP off: moe_ep_size 1 (groups of one rank: no communicator), moe_tp_size = tp
    assert nccl_groups(_sgl(version, tp=4)) == [("TP", 4), ("MoE TP", 4)]
    # EP over the 8 TP ranks: MoE EP of 8, MoE TP of 8 // 8 = 1
    assert nccl_groups(_sgl(version, tp=8, enable_expert_parallel=True)) == [
        ("TP", 8), ("MoE EP", 8)]
    assert nccl_groups(_sgl(version, tp=2, pp=2)) == [("TP", 2), ("MoE TP", 2), ("PP", 2)]
    assert nccl_groups(_sgl(version, tp=1)) == []


def test_no_dp_communicator() -> None:
    dep = _sgl("0.5.1", tp=8, dp=8, enable_dp_attention=True)
    assert nccl_groups(dep) == [("TP", 8), ("MoE TP", 8)]
    assert nccl_groups(_sgl("0.4.8", tp=8, dp=8, enable_dp_attention=True)) == [("TP", 8)]


def test_vllm_keeps_its_groups() -> None:
    assert nccl_groups(Deployment(tp=2, dp=2)) == [("TP", 2), ("DP", 2)]


def test_the_moe_tp_communicator_is_a_second_one() -> None:
    # made after TP's on the same GPUs: the second-communicator row (memprof/core/terms/nccl.py
    # SECOND_COMM_ROWS, H100 P2P, 4 ranks) with NCCL's cuMem off, as SGLang's launcher sets it:
    # the largest rank of reports/gpu/nccl-torch-gather w4-cumem0-second
    e = estimate("qwen3-32b", _sgl("0.5.1", tp=4), gpu_name="H100-80GB")
    comms = {c.name: c.bytes for c in e.ranks[0].components if c.name.startswith("NCCL")}
    assert comms["NCCL MoE TP communicator (4 ranks)"] == 872_415_232
    assert set(comms) == {"NCCL TP communicator (4 ranks)", "NCCL MoE TP communicator (4 ranks)"}
