"""Where vLLM's budget puts the NCCL communicators and the CUDA context, release by release, and
how big memprof takes a communicator to be (``memprof.core.terms.non_torch``: ``NCCL_PLACEMENT``,
``NCCL_CUMEM``, ``NCCL_MEASURED``). Each test's hand calculation cites the lines it follows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu
from memprof.core.terms import non_torch
from memprof.core.terms.nccl_image import image_delta
from memprof.core.terms.nccl_stack import p2p_stack_delta, stack_delta
from memprof.core.version_diff import version_diff

REPO = Path(__file__).resolve().parents[1]
LIBS = 158 * MiB  # cuBLAS 68 MiB + first Triton kernel 90 MiB, the profile run's own increase
# cuBLAS alone where the (P2P, cuMem on) row holds the process's first kernel, which PyNccl's
# warm-up ran (non_torch.profile_run_increase, nccl.FIRST_KERNEL_IN_ROW)
LIBS_AFTER_WARM_UP = 69_206_016
CONTEXT = 552_402_944
# V1 0.10.0-0.17.x: Worker.init_device's current_platform.set_device runs torch.zeros(1) before
# the snapshot (platforms/cuda.py; non_torch.FIRST_KERNEL_AT_SET_DEVICE): the process's first
# kernel's modules lie in the baseline, the profile run keeps the cuBLAS step alone, and the
# (P2P, cuMem on) row, measured with that kernel in it, is charged without it
FIRST_KERNEL = 96_468_992
# the measured rows (init + first all_reduce) less torch's stream pool: vLLM's PyNccl
# communicators make none (memprof.core.terms.pynccl_pool); SGLang keeps the rows as measured
POOL = 73_400_320
# NCCL 2.21.5 (vLLM 0.6.4 - 0.8.5): its sm_90 ring LL kernel needs 1,264 B of stack, not 2.28.9's
# 1,736, so the first all_reduce's stack reservation is 62 MiB, not the measured 186
# (memprof.core.terms.nccl_stack, reports/gpu/nccl-stack/kernel-stack.json)
STACK_2215 = stack_delta(find_gpu("H100"), 2048, "2.21.5")[0]
assert -124 * MiB == STACK_2215
P2P_CUMEM_OFF = 757_071_872 + 195_035_136 - POOL  # 2× H100, NCCL_CUMEM_ENABLE=0
P2P_CUMEM_ON = (458 + 474) * MiB - POOL  # 2× H200, NCCL's default
SHM_CUMEM_OFF = 195_035_136 + 195_035_136 - POOL  # 2× H100, NCCL_P2P_DISABLE=1
# a first communicator's init holds NCCL 2.28.9's sm_90 image (51 pages); each release's NCCL
# loads its own (memprof.core.terms.nccl_image): 2.21.5 (0.7.x - 0.8.x) 43 pages, 2.26.2 (0.9.0 -
# 0.10.1.1) 50, 2.27 (0.10.2 - 0.19.x) 51, 2.30.7 (0.33.0) 52
IMAGE_2215, IMAGE_2262, IMAGE_227, IMAGE_2307 = (image_delta(find_gpu("H100"), v)[0]
                                                 for v in ("2.21.5", "2.26.2", "2.27.5", "2.30.7"))
assert [IMAGE_2215 // MiB, IMAGE_2262 // MiB, IMAGE_227 // MiB, IMAGE_2307 // MiB] \
    == [-16, -2, 0, 2]
# the TP group's custom all-reduce buffers, made with the communicator where the GPUs have peer
# access (memprof.core.terms.custom_allreduce: meta 10 + IPC buffer 8 + rank_data 8 MiB)
CUSTOM_AR = 26 * MiB
# where the budget is memory_profiling's from a snapshot before the distributed init (V0 0.7.1 -
# 0.10.x, V1 0.9.1 - 0.10.x), rank_data (torch.empty(8 MiB)) is neither non-torch nor in the
# profile's torch peak increase: the budget holds the meta and IPC buffers alone
# (memprof.core.terms.custom_allreduce.RANK_DATA_UNBUDGETED)
CUSTOM_AR_BUDGETED = CUSTOM_AR - 8 * MiB
# from 0.11.0 the TP group's symmetric-memory all-reduce buffer, made with the communicators
# (memprof.core.terms.symm_mem: 64 MiB at TP2 on 9.0 + the 2 MiB signal pad, reports/gpu/symm-mem)
SYMM_MEM = 66 * MiB
# V0's second TP communicator, torch's, made by the profile run's logits gather on the driver
# rank (memprof.core.terms.nccl_nvls.TORCH_TP_GATHER): a second communicator's measured cuMem-off
# init at 2 ranks (reports/gpu/nccl-torch-gather w2-cumem0-second, 572,522,496 B) + 62 MiB + 1
# peer × 32 channels × 10 MiB receive buffers; of the 62 MiB (the stack reservation the measured
# H100's SendRecv kernel grows, 1,744 -> 1,984 B), NCCL 2.21.5's sm_90 SendRecv kernel (1,480 B
# after the ring LL kernel's 1,264) grows 58 MiB (memprof.core.terms.nccl_stack)
STACK_P2P_2215 = p2p_stack_delta(find_gpu("H100"), 2048, "2.21.5")[0]
assert -4 * MiB == STACK_P2P_2215
TORCH_GATHER_TP2 = 572_522_496 + 62 * MiB + STACK_P2P_2215 + 32 * 10 * MiB
# V1's torch TP communicator, made by the logits all-gather up to 0.25.x on CUDA, in the budget
# (memprof.core.terms.nccl_torch: reports/gpu/nccl-torch-gather, 2 ranks, after another
# communicator; over SHM the first row less the stream pool)
TORCH_COMM_OFF = 572_522_496
TORCH_COMM_ON = 509_607_936


def _budget_non_torch(version: str, gpu: str = "H100", tp: int = 2) -> tuple[int, int]:
    """(non-torch inside the budget, non-torch before the baseline) of rank 0."""
    e = estimate("llama-3.1-8b", Deployment(tp=tp, engine_version=version), gpu_name=gpu)
    comps = [c for c in e.ranks[0].components if c.category == "non_torch"]
    return (sum(c.bytes for c in comps if c.where == "budget"),
            sum(c.bytes for c in comps if c.where == "baseline"))


@pytest.mark.parametrize(("version", "budget", "baseline"), [
    # 0.7.2 worker/worker.py Worker.init_device: baseline_snapshot (l.161) before
    # init_worker_distributed_environment (l.166); vllm/__init__.py l.30 NCCL_CUMEM_ENABLE=0
    # (+ POOL everywhere up to 0.10.2: the profile run's logits gather on torch's
    # ProcessGroupNCCL makes the stream pool inside the budget, terms.pynccl_pool)
    ("0.7.2", LIBS + P2P_CUMEM_OFF + STACK_2215 + IMAGE_2215 + CUSTOM_AR_BUDGETED
     + TORCH_GATHER_TP2 + POOL, CONTEXT),
    # 0.8.0 v1/worker/gpu_worker.py determine_available_memory: peak_memory +=
    # non_torch_allocations (device used − torch allocated): the context is charged too
    ("0.8.0", LIBS + CONTEXT + P2P_CUMEM_OFF + STACK_2215 + IMAGE_2215 + CUSTOM_AR + POOL
     + TORCH_COMM_OFF, 0),
    ("0.9.0", LIBS + CONTEXT + P2P_CUMEM_OFF + IMAGE_2262 + CUSTOM_AR + POOL + TORCH_COMM_OFF,
     0),
    # 0.9.1 v1/worker/gpu_worker.py init_device: init_snapshot (l.135) before
    # init_worker_distributed_environment (l.153); memory_profiling: non_torch_increase since it
    ("0.9.1", LIBS + P2P_CUMEM_OFF + IMAGE_2262 + CUSTOM_AR_BUDGETED + POOL + TORCH_COMM_OFF,
     CONTEXT),
    ("0.10.1.1", LIBS_AFTER_WARM_UP + P2P_CUMEM_OFF + IMAGE_2262 + CUSTOM_AR_BUDGETED + POOL
     + TORCH_COMM_OFF, CONTEXT + FIRST_KERNEL),
    # 0.10.2 env_override.py no longer sets NCCL_CUMEM_ENABLE: NCCL's cuMem default
    ("0.10.2", LIBS_AFTER_WARM_UP + P2P_CUMEM_ON + IMAGE_227 - FIRST_KERNEL + CUSTOM_AR_BUDGETED
     + POOL + TORCH_COMM_ON, CONTEXT + FIRST_KERNEL),
    # 0.11.0 (#25359) init_device: distributed init (l.169) before init_snapshot (l.182); the
    # model runner's comm_stream makes torch's stream pool after it (terms.stream_pool)
    ("0.11.0", LIBS_AFTER_WARM_UP + POOL + TORCH_COMM_ON, CONTEXT + P2P_CUMEM_ON + IMAGE_227
     + CUSTOM_AR + SYMM_MEM),
    # from 0.14.0 PyNccl's warm-up makes the stream pool before init_snapshot (its
    # current_stream() sets a torch.cuda.Stream(): terms.pynccl_pool), so 0.33.0's Model Runner
    # V2 output_copy_stream finds it made: the communicator's row keeps it, in the baseline
    ("0.33.0", LIBS_AFTER_WARM_UP, CONTEXT + P2P_CUMEM_ON + POOL + IMAGE_2307 + CUSTOM_AR
     + SYMM_MEM),
])
def test_placement_and_size_by_release(version: str, budget: int, baseline: int) -> None:
    assert _budget_non_torch(version) == (budget, baseline)


def test_available_kv_moves_by_the_communicator() -> None:
    # the same deployment at 0.10.2 (NCCL inside the budget) and at 0.11.0 (before the
    # baseline): the available KV differs by exactly one communicator (cuMem on in both); the
    # stream pool is in both budgets (0.10.2: the logits gather's ProcessGroupNCCL; 0.11.0: the
    # model runner's comm_stream); in both set_device ran the process's first kernel before
    # the snapshot, so the communicator is charged without it; 0.10.2's budget held the custom
    # all-reduce's buffers but not its rank_data tensor, which 0.11.0's baseline holds too
    def avail(v: str) -> int:
        e = estimate("llama-3.1-8b", Deployment(tp=2, engine_version=v), gpu_name="H100")
        return e.ranks[0].available_kv_bytes

    assert avail("0.11.0") - avail("0.10.2") == \
        P2P_CUMEM_ON + IMAGE_227 - FIRST_KERNEL + CUSTOM_AR_BUDGETED


def test_no_communicator_no_change() -> None:
    # TP1: no process group of size > 1, so only the context can move (0.8.x charges it)
    assert _budget_non_torch("0.9.2", tp=1) == (LIBS, CONTEXT)
    assert _budget_non_torch("0.8.5", tp=1) == (LIBS + CONTEXT, 0)


def test_gpus_without_peer_access_use_the_shared_memory_figure() -> None:
    assert find_gpu("RTX-4090").peer_access is False
    assert find_gpu("H100").peer_access and find_gpu("L40S").peer_access
    # the RTX 4090's context is its own (its stack reservation, non_torch.cuda_context)
    context_4090 = non_torch.cuda_context(find_gpu("RTX-4090"))[0]
    # and so is its cuBLAS pool (sm89: cuBLAS's 4 MiB row, non_torch.cublas_small_pool)
    # and its first kernel's step (128 SMs × 1536 threads: memprof.core.terms.first_kernel)
    kernel = non_torch.card_first_kernel(find_gpu("RTX-4090"), after_gemm=True)[0]
    libs_4090 = (LIBS - non_torch.TRITON_NON_TORCH_BYTES + kernel
                 - non_torch.CUBLAS_SMALL_POOL_SAVING_BYTES)
    # (+ torch's TP communicator of the logits all-gather: over SHM a second communicator, 10 MiB
    # with cuMem off, reports/gpu/nccl-torch-gather/torch-gather-shm-4x-h100.json); both at the
    # 2 channels NCCL builds over SHM on the 4090's PCIe Gen4 x16 link, not the H100 rows' 4:
    # 2 MiB less a channel for each (memprof.core.terms.nccl_channels, reports/gpu/nccl/
    # nccl-channels-4x-h100.json: SHM cuMem off, 178 + 2n MiB)
    # and the first all_reduce's stack reservation at the 4090's 128 SMs × 1536 threads and the
    # sm_80 kernel (0.9.2's NCCL 2.26.2 reads 2.28.9's images: 1,328 B): 136 MiB, not 186
    # (memprof.core.terms.nccl_stack)
    g = find_gpu("RTX-4090")
    stack = stack_delta(g, non_torch.MAX_THREADS_PER_SM[g.arch], "2.26.2")[0]
    assert stack == -128 * MiB
    # and init's NCCL device code, 2.26.2's sm_80 image (23 pages) for the measured 2.28.9 sm_90
    # image's 51 (memprof.core.terms.nccl_image)
    image = image_delta(g, "2.26.2")[0]
    assert image == -56 * MiB
    assert _budget_non_torch("0.9.2", gpu="RTX-4090") == (
        libs_4090 + SHM_CUMEM_OFF - 4 * MiB + stack + image + POOL + 6 * MiB, context_4090)


def test_sglang_keeps_nccl_before_its_baseline() -> None:
    # no placement row is for SGLang: its communicators stay before its baseline
    e = estimate("llama-3.1-8b", Deployment(engine="sglang", tp=2), gpu_name="H100")
    nccl = [c for c in e.ranks[0].components if c.name.startswith("NCCL")]
    assert nccl and all(c.where == "baseline" for c in nccl)
    # TP's is a first communicator (the MoE TP group's, made after it from SGLang 0.4.10, is a
    # second one: tests/test_sglang_nccl_groups.py), sized with NCCL's cuMem off, which SGLang's
    # launcher sets (entrypoints/engine.py _set_envs_and_config, 0.4.3 - 0.5.9): the cuMem-off
    # row holds the stream pool (SGLang's rows keep it) but not the process's first kernel,
    # which PyNccl's warm-up runs before the load: it lands before the baseline too; init loads
    # the newest release's NCCL, 2.30.7 (torch 2.14.1): its sm_90 image is a page above 2.28.9's
    assert [c.bytes for c in nccl if c.name.startswith("NCCL TP ")] == [
        P2P_CUMEM_OFF + POOL + IMAGE_2307]
    first = [c for c in e.ranks[0].components if c.name.startswith("first kernel's modules")]
    assert [(c.bytes, c.where) for c in first] == [(96_468_992, "baseline")]


def test_measured_figures_are_the_golden_file() -> None:
    # reports/gpu/nccl/nccl-2x-h100.json, from `PYTHONPATH=. python recorders/gpu_nccl.py
    # --out $OUT` on 2× H100 (torch 2.11.0+cu130, NCCL 2.28.9): rank 0's non-torch growth
    doc = json.loads((REPO / "reports/gpu/nccl/nccl-2x-h100.json").read_text())
    runs = {r["config"]: r for r in doc["runs"]}
    for (peer, cumem), name in {(True, False): "p2p-cumem-off", (False, True): "shm-cumem-on",
                                (False, False): "shm-cumem-off"}.items():
        run = runs[name]
        assert run["nccl"] == "2.28.9" and run["exit_code"] == 0
        # NCCL's own log names the transport each configuration got
        via = {ln.split(" via ")[1].split("/")[0] for ln in run["nccl_log"] if " via " in ln}
        assert via == ({"P2P"} if peer else {"SHM"})
        for rank in run["ranks"]:
            growth = list(rank["non_torch_growth_bytes"].values())
            assert tuple(growth[:2]) == non_torch.NCCL_MEASURED[(peer, cumem)]
            assert growth[2:] == [0, 0]  # no growth at 128 MiB all_reduce and all_gather


def test_memprof_versions_names_the_rules() -> None:
    d = version_diff("llama-3.1-8b", Deployment(tp=2), "0.10.1.1", "0.11.0", gpu_name="H100")
    names = {c.name: c for c in d.rules}
    b = names["nccl_in_budget"].b
    assert b is not None and b.value == ("baseline", "baseline")
    assert str(b.value) == "CUDA context: baseline, NCCL: baseline"
    assert names["nccl_cumem_off"].applies and names["nccl_cumem_off"].b is None
    tp1 = version_diff("llama-3.1-8b", Deployment(), "0.10.1.1", "0.11.0", gpu_name="H100")
    assert not {c.name: c for c in tp1.rules}["nccl_cumem_off"].applies


def test_releases_on_older_nccl_run_with_cumem_off() -> None:
    """memprof has no per-NCCL-version rule for the communicator (memprof.core.terms.nccl's
    docstring) because every vLLM release whose torch pins an NCCL older than the measured
    2.28.9 (2.21.5, 2.26.2) sets NCCL_CUMEM_ENABLE=0, which turns NCCL 2.26.2's runtime connect
    off (src/init.cc, v2.26.2-1: runtimeConn = cuMemSupport && ...) and puts the legacy-IPC and
    SHM buffers where 2.21.5 puts them. A release on an old NCCL with cuMem on would break that."""
    from memprof.core.terms.nccl_nvls import NCCL_VERSION
    from memprof.core.versions import VLLM_RELEASES, rule_in_force, value_at

    # 2.20.5 (vLLM 0.6.0 – 0.6.3.post1): p2p.cc / shm.cc buffers as 2.21.5 (v2.20.5-1 against
    # v2.21.5-1: only stepSize bookkeeping and the MNNVL switch changed)
    old = [v for v in VLLM_RELEASES
           if value_at(NCCL_VERSION, v) in ("2.20.5", "2.21.5", "2.26.2")]
    assert old[0] == "0.6.0" and old[-1] == "0.10.1.1"
    assert [v for v in old if rule_in_force(non_torch.NCCL_CUMEM, v) is None] == []
    # and the releases on 2.27+ run NCCL's default (cuMem on), the measured 2.28.9 rows
    new = [v for v in VLLM_RELEASES if str(value_at(NCCL_VERSION, v)) >= "2.27"]
    assert new and all(rule_in_force(non_torch.NCCL_CUMEM, v) is None for v in new)
