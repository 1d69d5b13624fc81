"""A process's later NCCL communicators (vLLM's PP, DP and EP after TP's) against the golden
that measured them (reports/gpu/nccl-later/later-comm-4x-h100.json), and the rule that charges
them the second-communicator row (memprof/core/terms/non_torch.py ``made_after_another``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate
from memprof.core.gpus import find_gpu
from memprof.core.terms.nccl import (
    LATER_COMM_GOLDEN,
    NCCL_ROWS,
    P2P_FIRST_BASE_BYTES,
    SECOND_COMM_ROWS,
    TORCH_STREAM_POOL_BYTES,
    first_p2p_bytes,
)
from memprof.core.terms.nccl_image import MEASURED_LOAD_BYTES
from memprof.core.terms.nccl_stack import MEASURED_GROWTH_BYTES, p2p_stack_delta
from memprof.core.terms.non_torch import MAX_THREADS_PER_SM, made_after_another

ROOT = Path(__file__).resolve().parents[1]
PAGE = 2 * MiB


def _runs() -> dict[tuple[str, int], dict[str, int]]:
    """(case, rank) -> {step: growth}."""
    data: dict[str, Any] = json.loads((ROOT / LATER_COMM_GOLDEN).read_text())
    assert data["torch"] == "2.11.0+cu130" and data["nccl"] == "2.28.9"
    return {(r["case"], r["rank"]): {s["after"]: s["growth"] for s in r["steps"]}
            for r in data["runs"]}


def _all(case: str, step: str) -> set[int]:
    runs = _runs()
    return {runs[(case, rank)][step] for rank in range(4)}


def test_the_golden_holds_every_case_and_rank() -> None:
    cases = {c for c, _ in _runs()}
    assert cases == {"pp", "ppfirst", "dp", "pp-cumem0", "ppfirst-cumem0", "dp-cumem0",
                     "pp-shm", "ppfirst-shm"}
    assert {r for _, r in _runs()} == {0, 1, 2, 3}


def test_a_later_communicator_is_the_first_less_the_image_and_the_stack() -> None:
    # per process once: NCCL's device code at the first init, the stack at the first all_reduce
    for case, later, image in (("pp", "PP", MEASURED_LOAD_BYTES),
                               ("pp-shm", "PP", MEASURED_LOAD_BYTES),
                               ("pp-cumem0", "PP", MEASURED_LOAD_BYTES + PAGE),
                               ("dp", "DP", MEASURED_LOAD_BYTES)):
        (first_init,), (later_init,) = _all(case, "TP init"), _all(case, f"{later} init")
        (first_ar,), (later_ar,) = _all(case, "TP warm-up"), _all(case, f"{later} warm-up")
        assert first_init - later_init == image, case
        assert first_ar - later_ar == MEASURED_GROWTH_BYTES, case


def test_the_order_does_not_matter() -> None:
    # PP first, then TP: PP takes the first figures and TP the later ones, byte for byte
    for suffix in ("", "-cumem0", "-shm"):
        for step in ("init", "warm-up"):
            assert _all(f"ppfirst{suffix}", f"PP {step}") == _all(f"pp{suffix}", f"TP {step}")
            assert _all(f"ppfirst{suffix}", f"TP {step}") == _all(f"pp{suffix}", f"PP {step}")


def test_the_first_figures_are_the_first_rows_less_the_pool() -> None:
    # the golden's communicators are made as vLLM's PyNccl made them before 0.14.0, with no
    # torch stream (memprof.core.terms.pynccl_pool); its first came after the first fill
    # kernel, as the matrix rows did
    for case, key in (("pp-cumem0", (True, False, 2)), ("pp-shm", (False, True, 2))):
        init, first, _ = NCCL_ROWS[key]
        assert _all(case, "TP init") == {init - TORCH_STREAM_POOL_BYTES}
        assert _all(case, "TP warm-up") == {first}
    # P2P cuMem on: the 2× H100 matrix's 390,070,272 + 497,025,024 (the row keeps H200's init)
    assert _all("pp", "TP init") == {390_070_272 - TORCH_STREAM_POOL_BYTES}
    assert _all("pp", "TP warm-up") == {497_025_024}


def test_the_later_figures_are_the_second_communicator_rows_within_a_page() -> None:
    for case, step, key in (("pp", "PP", (True, True, 2)), ("dp", "EP", (True, True, 4)),
                            ("pp-cumem0", "PP", (True, False, 2)),
                            ("pp-shm", "PP", (False, True, 2))):
        init, first, _ = SECOND_COMM_ROWS[key]
        got_init = max(_all(case, f"{step} init"))  # the largest rank, as the rows keep
        (got_first,) = _all(case, f"{step} warm-up")
        assert abs(got_init - init) <= PAGE and got_first == first, case
    # cuMem off at 4 ranks (the third communicator): the largest rank, ranks 1 and 2
    runs = _runs()
    ep = [runs[("dp-cumem0", r)]["EP init"] for r in range(4)]
    assert ep[1] == ep[2] == max(ep)
    assert abs(max(ep) - SECOND_COMM_ROWS[(True, False, 4)][0]) <= PAGE


def test_a_later_pp_communicator_pays_its_first_send_recv_in_full() -> None:
    runs = _runs()
    for case in ("pp", "ppfirst", "pp-cumem0", "ppfirst-cumem0"):
        for rank in range(4):
            steps = runs[(case, rank)]
            both = steps["PP p2p from 0"] + steps["PP p2p from 1"]
            assert both == first_p2p_bytes(True, 1), (case, rank)
        # a sender alone: 62 MiB + 32 × 2 MiB; a receiver alone: 62 MiB + 32 × 10 MiB
        assert [runs[(case, r)]["PP p2p from 0"] for r in range(4)] == \
            [P2P_FIRST_BASE_BYTES + 32 * 2 * MiB] * 2 + [P2P_FIRST_BASE_BYTES + 32 * 10 * MiB] * 2
    for case in ("pp-shm", "ppfirst-shm"):
        assert _all(case, "PP p2p from 0") == {first_p2p_bytes(False, 1)}
        assert _all(case, "PP p2p from 1") == {0}


def _comp(e: Estimate, prefix: str) -> int:
    (c,) = [c for c in e.ranks[0].components if c.name.startswith(prefix)]
    return c.bytes


def test_vllm_charges_groups_after_the_first_the_second_row() -> None:
    s_init, s_first, _ = SECOND_COMM_ROWS[(True, True, 2)]
    e = estimate("llama-3.1-8b", Deployment(tp=2, dp=2), gpu_name="H100")
    assert _comp(e, "NCCL DP") == s_init + s_first
    tp_alone = _comp(estimate("llama-3.1-8b", Deployment(tp=2), gpu_name="H100"), "NCCL TP")
    assert _comp(e, "NCCL TP") == tp_alone
    # TP1 × PP2 × DP2: PP's is the first, DP's the later one
    e = estimate("llama-3.1-8b", Deployment(pp=2, dp=2), gpu_name="H100")
    assert _comp(e, "NCCL DP") == s_init + s_first
    assert _comp(e, "NCCL PP") == tp_alone + first_p2p_bytes(True, 1)


def test_which_groups_come_after_another() -> None:
    dep = Deployment(tp=2, pp=2, dp=2)
    assert [made_after_another(dep, g) for g in ("TP", "PP", "DP")] == [False, True, True]
    dep = Deployment(pp=2, dp=2)
    assert [made_after_another(dep, g) for g in ("PP", "DP")] == [False, True]
    # SGLang makes PP's after TP's in the same process too (srt/distributed/parallel_state.py)
    sg = Deployment(tp=2, pp=2, engine="sglang")
    assert made_after_another(sg, "PP") and not made_after_another(sg, "TP")
    assert not made_after_another(Deployment(pp=2, engine="sglang"), "PP")


def test_a_later_pp_communicators_send_recv_stack_moves_with_the_card() -> None:
    # the SendRecv kernel's stack growth is the process's first wherever it runs: on an A100
    # (108 SMs, the default release's NCCL 2.30.7, read at 2.28.9's sm_80 kernel) PP's later row
    # moves by the card's growth, as a first row's does (memprof.core.terms.nccl_stack)
    gpu = find_gpu("A100-80GB")
    delta, _ = p2p_stack_delta(gpu, MAX_THREADS_PER_SM[gpu.arch], "2.30.7")
    assert delta != 0
    s_init, s_first, _ = SECOND_COMM_ROWS[(True, True, 2)]
    e = estimate("llama-3.1-8b", Deployment(tp=2, pp=2), gpu_name="A100-80GB")
    assert _comp(e, "NCCL PP") == s_init + s_first + first_p2p_bytes(True, 1) + delta


def test_the_recorder_is_the_script_that_ran() -> None:
    """recorders/gpu_nccl_later_comm.py is the as-run script laid out one statement a line: the
    same Python AST; the as-run copy is the one whose sha256 the golden names."""
    import ast
    import hashlib

    root = Path(__file__).resolve().parents[1]
    as_run = root / "reports/gpu/nccl-later/gpu_nccl_later_comm.as-run.py"
    laid_out = root / "recorders/gpu_nccl_later_comm.py"
    assert ast.dump(ast.parse(as_run.read_text())) == ast.dump(ast.parse(laid_out.read_text()))
    recorder = json.loads((root / LATER_COMM_GOLDEN).read_text())["recorder"]
    assert hashlib.sha256(as_run.read_bytes()).hexdigest() in recorder
