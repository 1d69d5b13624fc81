"""The EP group's NCCL row against the EP golden (reports/gpu/ranks/ep-group-2x-h100.json and
kernels-log.txt, issue 25): vLLM builds a PyNccl communicator for EP in 0.8.x and from 0.11.0
(none in 0.9.0 - 0.10.x); where it does, it is the rank's second communicator, which costs what
the golden measured, not a first one's row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms import nccl

HERE = Path(__file__).resolve().parents[1] / "reports" / "gpu" / "ranks"


def _growth(case: str, world: int) -> list[list[dict[str, Any]]]:
    """Each rank's steps of one case (every rank is in the file)."""
    doc = json.loads((HERE / "ep-group-2x-h100.json").read_text())
    runs = sorted((r for r in doc["runs"] if r["case"] == case and r["world"] == world),
                  key=lambda r: r["rank"])
    assert [r["rank"] for r in runs] == list(range(world))
    return [r["steps"] for r in runs]


def _step(ranks: list[list[dict[str, Any]]], name: str) -> int:
    """A step's non-torch growth, the same on every rank."""
    got = {next(s["growth"] for s in steps if s["after"] == name) for steps in ranks}
    assert len(got) == 1, (name, got)
    value: int = got.pop()
    return value


def test_second_communicator_row_is_the_golden() -> None:
    steps = _growth("pynccl", 2)
    init, first, _src = nccl.SECOND_COMM_ROWS[(True, True, 2)]
    assert (_step(steps, "EP ncclCommInitRank"), _step(steps, "EP warm-up all_reduce")) == \
        (init, first) == (207_618_048, 301_989_888)
    # later collectives of the EP communicator add nothing
    assert _step(steps, "EP first all_gather 4 MiB") == _step(steps, "EP all_reduce 4 MiB") == 0
    # a first communicator (bound init + first all_reduce) costs more: 887,095,296 B
    assert _step(steps, "init_process_group (bound)") + \
        _step(steps, "world first all_reduce") == 887_095_296 > init + first
    assert "kernels-log.txt" in nccl.SECOND_COMM_ROWS[(True, True, 4)][2]
    assert (HERE / "kernels-log.txt").read_text().count("EP ncclCommInitRank 205520896") == 1


def test_a_torch_group_made_as_vllm_0_9_makes_ep_costs_nothing_until_used() -> None:
    steps = _growth("group", 2)
    assert _step(steps, "EP new_group") == 0
    assert _step(steps, "EP first all_gather_into_tensor 4 MiB") > 500 * 2**20


def _ep_row(version: str | None) -> list[Any]:
    dep = Deployment(tp=4, enable_expert_parallel=True, engine_version=version)
    e = estimate("deepseek-r1", dep, gpu_name="H100")
    return [c for c in e.ranks[0].components if c.name.startswith("NCCL EP communicator")]


def test_ep_row_by_release() -> None:
    assert nccl.ep_pynccl(None, "vllm") and nccl.ep_pynccl("0.11.0", "vllm")
    assert nccl.ep_pynccl("0.8.5", "vllm")
    assert not nccl.ep_pynccl("0.9.0", "vllm") and not nccl.ep_pynccl("0.10.1", "vllm")
    (row,) = _ep_row(None)
    assert row.bytes == 205_520_896 + 301_989_888 and "second communicator" in row.formula
    assert _ep_row("0.10.1") == []
