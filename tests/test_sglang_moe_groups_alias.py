"""From 0.5.2 SGLang's MoE EP and MoE TP groups are the TP group where their size is TP's
(``SGLANG_MOE_GROUPS_UNLIKE_TP`` in memprof/core/engines/sglang.py; sglang 0.5.2 - 0.5.9
distributed/parallel_state.py initialize_model_parallel: ``if moe_tp_size ==
tensor_model_parallel_size: _MOE_TP = _TP``, the same for ``_MOE_EP``): with EP off (MoE TP of
tp ranks, MoE EP of one) or EP over every TP rank (MoE EP of tp ranks, MoE TP of one), the
layouts memprof models, neither adds a communicator; 0.4.10 - 0.5.1 made a second one."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms.non_torch import nccl_groups


def _sgl(version: str, **kw: object) -> Deployment:
    return Deployment(engine="sglang", engine_version=version, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("version", ["0.5.2", "0.5.3", "0.5.4", "0.5.9", "main@d315eb7"])
def test_a_moe_group_of_tps_size_is_the_tp_group(version: str) -> None:
    assert nccl_groups(_sgl(version, tp=4)) == [("TP", 4)]
    assert nccl_groups(_sgl(version, tp=8, enable_expert_parallel=True)) == [("TP", 8)]
    assert nccl_groups(_sgl(version, tp=8, dp=8, enable_dp_attention=True)) == [("TP", 8)]
    assert nccl_groups(_sgl(version, tp=2, pp=2)) == [("TP", 2), ("PP", 2)]


def test_0_5_1_still_makes_the_second_communicator() -> None:
    assert nccl_groups(_sgl("0.5.1", tp=4)) == [("TP", 4), ("MoE TP", 4)]


def test_the_kv_budget_gains_the_second_communicators_bytes() -> None:
    # qwen3-32b TP4 on H100 at a given mem_fraction_static: 0.5.1 charges the MoE TP group's
    # second communicator before the load (memprof/core/terms/nccl.py SECOND_COMM_ROWS, 4 ranks,
    # NCCL's cuMem off as SGLang's launcher sets it: 872,415,232 B, the largest rank of
    # reports/gpu/nccl-torch-gather w4-cumem0-second) and 0.5.2 does not; with the same load the
    # budget line (mem_fraction_static x free before load - load) differs by 0.9 x that.
    old = estimate("qwen3-32b", _sgl("0.5.1", tp=4, mem_fraction_static=0.9),
                   gpu_name="H100-80GB")
    new = estimate("qwen3-32b", _sgl("0.5.2", tp=4, mem_fraction_static=0.9),
                   gpu_name="H100-80GB")
    names = {c.name for c in new.ranks[0].components}
    assert "NCCL MoE TP communicator (4 ranks)" not in names
    second = 872_415_232
    gained = new.ranks[0].available_kv_bytes - old.ranks[0].available_kv_bytes
    assert gained == pytest.approx(0.9 * second, abs=2 * 2**20)
