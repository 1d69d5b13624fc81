"""memprof.core.terms.pynccl_pool: vLLM's PyNccl communicators make no torch stream pool (before
0.14.0 on CUDA, 0.7.3 on ROCm, where vLLM's current_stream() starts making a stream), so the
measured communicator rows (made through ``init_process_group(device_id=…)``, the pool inside
their init) are charged without it, and the pool lands where the process's first torch stream is
made: the model runner's comm_stream, the profile run's logits gather on torch's
ProcessGroupNCCL, or the first CUDA graph's capture stream."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate, rank_context
from memprof.core.gpus import find_gpu
from memprof.core.terms import pynccl_pool
from memprof.core.terms.cudagraph import graph_driver_first
from memprof.core.terms.nccl import NCCL_ROWS, SECOND_COMM_ROWS, TORCH_STREAM_POOL_BYTES
from memprof.core.terms.nccl_image import image_delta
from memprof.core.terms.nccl_stack import stack_delta
from memprof.core.terms.non_torch import MAX_THREADS_PER_SM as THREADS
from memprof.core.terms.pynccl_pool import (
    LOGITS_GATHER_PROCESS_GROUP,
    LOGITS_GATHER_PROCESS_GROUP_ROCM,
    PYNCCL_NO_STREAM_POOL,
    PYNCCL_NO_STREAM_POOL_ROCM,
    comm_makes_stream_pool,
)
from memprof.core.version_diff import all_rules

GOLD = Path(__file__).resolve().parent.parent / "reports" / "gpu" / "nccl"


def _est(gpu: str = "A100-80GB", **kw: object) -> Estimate:
    base: dict[str, object] = dict(engine_version="0.10.1.1", tp=2, max_model_len=16384,
                                   gpu_memory_utilization=0.25, vllm_use_flashinfer_sampler=1)
    return estimate("qwen2.5-7b-instruct", Deployment(**{**base, **kw}),  # type: ignore[arg-type]
                    gpu_name=gpu)


def _comp(e: Estimate, prefix: str) -> int:
    return sum(c.bytes for c in e.ranks[0].components if c.name.startswith(prefix))


def test_the_golden_a_pynccl_communicator_leaves_the_pool_unmade() -> None:
    # the pynccl kind (ncclCommInitRank through ctypes, warmed up on the current stream, as
    # vLLM's PyNcclCommunicator) leaves the first torch.cuda.Stream() to pay the pool; the kind
    # that holds a ProcessGroupNCCL communicator made with device_id pays 0
    doc = json.loads((GOLD / "graph-collectives-2x-h100-stream.json").read_text())
    got = {(r["kind"], k["rank"]): k["side_stream_non_torch_bytes"]
           for r in doc["runs"] for k in r["ranks"]}
    assert got[("pynccl", 0)] == got[("pynccl", 1)] == TORCH_STREAM_POOL_BYTES
    assert got[("local", 0)] == got[("local", 1)] == 0


def test_row_523_by_hand() -> None:
    # 2× A100 without peer access, vLLM 0.10.1.1 (NCCL_CUMEM_ENABLE=0, NCCL in the budget):
    # SHM cuMem-off row 195,035,136 + 195,035,136 B, less the 73,400,320 B pool = 302 MiB
    e = _est(no_gpu_peer_access=True)
    # and the first all_reduce's stack reservation at the A100's 108 SMs × 2048 threads and
    # NCCL 2.26.2 (2.28.9's sm_80 kernel, 1,328 B; memprof.core.terms.nccl_stack): 66 MiB, not
    # the H100's 186
    a100 = find_gpu("A100-80GB")
    stack = stack_delta(a100, THREADS[a100.arch], "2.26.2")[0]
    assert stack == -120 * MiB
    # and init's NCCL device code, 2.26.2's sm_80 image (23 pages) for the measured row's 2.28.9
    # sm_90 image (51; memprof.core.terms.nccl_image)
    image = image_delta(a100, "2.26.2")[0]
    assert image == -56 * MiB
    assert _comp(e, "NCCL TP") == 195_035_136 + 195_035_136 - 73_400_320 + stack + image \
        == 126 * MiB
    # the pool is made by the profile run's logits all-gather on ProcessGroupNCCL instead,
    # inside the same budget; the first graph then pays none
    assert _comp(e, "torch stream pool (profile run's logits gather)") == TORCH_STREAM_POOL_BYTES
    assert not graph_driver_first(rank_context(e, e.ranks[0]))


def test_the_budget_keeps_the_pool_where_the_logits_gather_makes_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # with the rule left out the pool was inside the communicator's row: the same budget
    with_rule = _est(no_gpu_peer_access=True)
    # the rule left out: the communicators make the pool, as measured (the cached reading)
    monkeypatch.setattr(pynccl_pool, "_comm_makes_pool", lambda engine, version, rocm: True)
    without = _est(no_gpu_peer_access=True)
    assert with_rule.ranks[0].available_kv_bytes == without.ranks[0].available_kv_bytes
    assert _comp(without, "NCCL TP") - _comp(with_rule, "NCCL TP") == TORCH_STREAM_POOL_BYTES


# Qwen3-30B-A3B (routed experts, not on V2's list) runs the V1 runner through 0.28.x; Llama-3.1-8B
# runs Model Runner V2 from 0.25.0, whose output_copy_stream makes the pool in its __init__,
# before the profile run (terms.stream_pool.V2_OUTPUT_COPY_STREAM)
MOE = "qwen3-30b-a3b"


@pytest.mark.parametrize(("model", "version", "pp", "where"), [
    ("llama-3.1-8b", "0.10.1.1", 1, "logits gather"),  # V1: base all_gather_into_tensor
    ("llama-3.1-8b", "0.7.2", 1, "logits gather"),      # V0: torch.distributed.gather
    ("llama-3.1-8b", "0.13.0", 1, "comm_stream"),       # the model runner's stream comes first
    ("llama-3.1-8b", "0.10.1.1", 2, "first graph"),     # rank 0 is PP stage 0: no logits there
    # from 0.14.0 PyNccl's warm-up makes it (current_stream() sets a torch.cuda.Stream())
    ("llama-3.1-8b", "0.14.1", 1, "communicator"),
    (MOE, "0.25.0", 1, "communicator"),
    (MOE, "0.26.0", 1, "communicator"),
    ("llama-3.1-8b", "0.33.0", 1, "communicator"),
    ("llama-3.1-8b", "0.33.0", 2, "communicator"),
])
def test_where_the_pool_lands_at_tp2(model: str, version: str, pp: int, where: str) -> None:
    e = estimate(model, Deployment(tp=2, pp=pp, engine_version=version), gpu_name="H100")
    ctx = rank_context(e, e.ranks[0])
    got = {c.name for c in e.ranks[0].components if c.name.startswith("torch stream pool")}
    first = graph_driver_first(ctx) == TORCH_STREAM_POOL_BYTES
    assert {"logits gather": ({"torch stream pool (profile run's logits gather)"}, False),
            "comm_stream": ({"torch stream pool (model runner's comm_stream)"}, False),
            "communicator": (set(), False),
            "first graph": (set(), True)}[where] == (got, first)


def test_rocm_makes_the_pool_in_pynccl_from_0_7_3() -> None:
    # on ROCm current_stream() made a torch.cuda.Stream() from 0.7.3: the communicator's
    # warm-up makes the pool, so neither the logits gather nor V2's stream pays it
    for model, version in ((MOE, "0.28.0"), ("llama-3.1-8b", "0.33.0"), (MOE, "0.8.4")):
        e = estimate(model, Deployment(tp=2, engine_version=version), gpu_name="MI300X")
        assert _comp(e, "torch stream pool") == 0, version
    # 0.7.2: the default stream on every platform, so the TP logits gather pays it
    e = estimate("llama-3.1-8b", Deployment(tp=2, engine_version="0.7.2"), gpu_name="MI300X")
    assert _comp(e, "torch stream pool (profile run's logits gather)") == TORCH_STREAM_POOL_BYTES


def test_the_pool_is_in_the_first_communicator_row_only() -> None:
    # TP2 × PP2 on H100 at 0.33.0 (cuMem on, P2P): TP's a first communicator's row (458 + 474
    # MiB) as measured, the pool in its init (from 0.14.0 its warm-up's current_stream() makes
    # it); PP's, made after it, the second-communicator row, which holds no pool
    # (reports/gpu/nccl-later), + its first send/recv 446 MiB
    e = estimate("llama-3.1-8b", Deployment(tp=2, pp=2), gpu_name="H100")
    init, first, _ = NCCL_ROWS[(True, True, 2)]
    # each init at the release's NCCL 2.30.7 sm_90 image (memprof.core.terms.nccl_image)
    init += image_delta(find_gpu("H100"), "2.30.7")[0]
    assert _comp(e, "NCCL TP") == init + first
    s_init, s_first, _ = SECOND_COMM_ROWS[(True, True, 2)]
    assert _comp(e, "NCCL PP") == s_init + s_first + 446 * MiB
    # PP alone (TP1): the first row, the pool kept
    e = estimate("llama-3.1-8b", Deployment(pp=2), gpu_name="H100")
    assert _comp(e, "NCCL PP") == init + first + 446 * MiB
    # 0.13.0 against 0.14.0 (both NCCL 2.27.5): the first row loses the pool at 0.13.0 only, TP's
    # and PP's alone; the second communicator's row is the same
    for tp, pp, first_group in ((2, 2, "NCCL TP"), (1, 2, "NCCL PP")):
        old, new = (estimate("llama-3.1-8b", Deployment(tp=tp, pp=pp, engine_version=v),
                             gpu_name="H100") for v in ("0.13.0", "0.14.0"))
        assert _comp(new, first_group) - _comp(old, first_group) == TORCH_STREAM_POOL_BYTES
        if tp == 2:
            assert _comp(new, "NCCL PP") == _comp(old, "NCCL PP")


def test_across_nodes_the_net_row_loses_it_too() -> None:
    # row 525's layout: one rank on each of two nodes, NCCL's NET row (cuMem off at 0.10.1.1):
    # 190,840,832 + 195,035,136 B less the pool
    e = _est(gpu="A100-40GB", gpu_memory_utilization=0.5, vllm_use_flashinfer_sampler=None,
             nnodes=2)
    assert _comp(e, "NCCL TP") == 190_840_832 + 195_035_136 - TORCH_STREAM_POOL_BYTES


def test_a_later_net_communicator_leaves_the_pool_to_the_first() -> None:
    # TP2 x PP2 on two nodes at 0.33.0: TP's communicator (one node) is the process's first and
    # its warm-up makes the pool; PP's, one rank a node (NCCL's NET row, measured as a first
    # communicator, the pool in its init), is made after it, so it is charged the same row less
    # the pool. PP alone (TP1) is the process's first communicator and keeps it.
    alone, after = (estimate("llama-3.1-8b", Deployment(tp=tp, pp=2, nnodes=2,
                                                         engine_version="0.33.0"),
                             gpu_name="H100") for tp in (1, 2))
    assert _comp(alone, "NCCL PP") - _comp(after, "NCCL PP") == TORCH_STREAM_POOL_BYTES
    assert "another communicator of the process" in next(
        c.formula for c in after.ranks[0].components if c.name.startswith("NCCL PP"))
    # before 0.14.0 neither holds it: the same figure
    alone, after = (estimate("llama-3.1-8b", Deployment(tp=tp, pp=2, nnodes=2,
                                                         engine_version="0.13.0"),
                             gpu_name="H100") for tp in (1, 2))
    assert _comp(alone, "NCCL PP") == _comp(after, "NCCL PP")


def test_sglang_s_later_net_communicator_leaves_the_pool_too() -> None:
    # the pool is made once a process whatever the engine: SGLang's PP communicator across two
    # nodes, made after its TP one, is the NET row less the pool; alone (TP1) it keeps it
    alone, after = (estimate("llama-3.1-8b", Deployment(engine="sglang", engine_version="0.5.9",
                                                         tp=tp, pp=2, nnodes=2),
                             gpu_name="H100") for tp in (1, 2))
    assert _comp(alone, "NCCL PP") - _comp(after, "NCCL PP") == TORCH_STREAM_POOL_BYTES


def test_the_basis_names_the_platform_release() -> None:
    # the row's basis says where the communicator starts making the pool: 0.7.3 on ROCm, 0.14.0
    # on CUDA (PYNCCL_NO_STREAM_POOL_ROCM, PYNCCL_NO_STREAM_POOL)
    def basis(gpu: str) -> str:
        e = estimate("llama-3.1-8b", Deployment(tp=2, engine_version="0.7.2"), gpu_name=gpu)
        return next(c.formula for c in e.ranks[0].components if c.name.startswith("NCCL TP"))
    assert "before 0.7.3 on ROCm" in basis("MI300X")
    assert "before 0.14.0 on CUDA" in basis("H100")


def test_vllm_only_sglang_keeps_the_measured_rows() -> None:
    assert not comm_makes_stream_pool(Deployment(engine_version="0.7.1"), rocm=False)
    assert not comm_makes_stream_pool(Deployment(engine_version="0.13.0"), rocm=False)
    assert comm_makes_stream_pool(Deployment(engine="sglang", engine_version="0.5.9"), rocm=False)
    assert all(r in all_rules() for r in (*PYNCCL_NO_STREAM_POOL, *PYNCCL_NO_STREAM_POOL_ROCM,
                                          *LOGITS_GATHER_PROCESS_GROUP,
                                          *LOGITS_GATHER_PROCESS_GROUP_ROCM))


def test_current_stream_makes_the_pool_from_0_14_0_on_cuda_and_0_7_3_on_rocm() -> None:
    # vLLM's current_stream(), which PyNccl's warm-up calls, sets a new torch.cuda.Stream() at its
    # first call on CUDA from 0.14.0 (utils/torch_utils.py; 0.13.0 returns the default stream)
    # and on ROCm from 0.7.3 (vllm/utils.py; 0.7.2 returns the default stream everywhere)
    for version, cuda, rocm in (("0.7.2", False, False), ("0.7.3", False, True),
                                ("0.13.0", False, True), ("0.14.0", True, True),
                                ("0.17.1", True, True), ("0.33.0", True, True)):
        dep = Deployment(engine_version=version)
        assert comm_makes_stream_pool(dep, rocm=False) is cuda, version
        assert comm_makes_stream_pool(dep, rocm=True) is rocm, version


def test_from_0_14_0_a_tp_rank_keeps_the_pool_in_its_communicator() -> None:
    # TP2 at 0.17.1: the first communicator's init holds the pool (the measured row as it is), the
    # model runner's comm_stream makes none in the budget; at 0.13.0 the pool is in the budget
    new = _est(engine_version="0.17.1", vllm_use_flashinfer_sampler=None)
    old = _est(engine_version="0.13.0", vllm_use_flashinfer_sampler=None)
    assert not [c for c in new.ranks[0].components if c.name.startswith("torch stream pool")]
    assert [c.bytes for c in old.ranks[0].components if c.name.startswith("torch stream pool")] \
        == [TORCH_STREAM_POOL_BYTES]
    assert _comp(new, "NCCL TP") - _comp(old, "NCCL TP") == TORCH_STREAM_POOL_BYTES
