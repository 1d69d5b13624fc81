"""``--nnodes``: ranks spread evenly over several hosts (memprof/core/nodes.py). A process group
whose ranks span nodes gets NCCL's NET rows (memprof/core/terms/multinode.py, read off the
``net-cumem-*`` configurations of reports/gpu/nccl) and no custom all-reduce (vLLM
custom_all_reduce.py: "Custom allreduce is disabled because this process group spans across
nodes"); a group inside one node keeps the one-host figures.

The calibration cases are published rows 525 (TP 2 on two nodes) and 526 (TP 4 on four)."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.nodes import check_nodes, group_ranks, spread
from memprof.core.terms.nccl import TORCH_STREAM_POOL_BYTES
from memprof.probes.startup_log import parse_log

NCCL = Path(__file__).resolve().parents[1] / "reports" / "gpu" / "nccl"


def _golden_steps(world: int, config: str) -> tuple[int, int, int]:
    """(init, first all_reduce, first all_to_all) of rank 0 in the golden's configuration,
    read as the non-torch growth (used − reserved) of those steps."""
    data = json.loads((NCCL / f"nccl-matrix-{world}x-h100.json").read_text())
    run_ = next(r for r in data["runs"] if r["config"] == config)
    steps = run_["ranks"][0]["steps"]
    growth = {s["after"]: (s["used_bytes"] - s["reserved_bytes"])
              - (p["used_bytes"] - p["reserved_bytes"]) for p, s in pairwise(steps)}
    return (growth["ncclCommInitRank (init_process_group, device_id)"],
            growth["warm-up all_reduce of 1 fp32"], growth["first all_to_all_single, 1 MiB"])


def _comps(model: str = "qwen2.5-7b-instruct", gpu: str = "H100", **kw: object
           ) -> dict[str, tuple[int, str]]:
    dep = Deployment(**{"max_model_len": 4096, **kw})  # type: ignore[arg-type]
    e = estimate(model, dep, gpu_name=gpu)
    return {c.name: (c.bytes, c.formula) for c in e.ranks[0].components}


def test_groups_are_laid_out_as_vllm_reshapes_its_ranks() -> None:
    # vLLM initialize_model_parallel: arange(8).reshape(-1, dp=2, pp=2, tp=2); TP its rows,
    # PP / DP its strided columns, EP the DP x TP ranks of a PP stage (hand count)
    dep = Deployment(tp=2, pp=2, dp=2)
    assert group_ranks(dep, "TP") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert group_ranks(dep, "PP") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert group_ranks(dep, "DP") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert group_ranks(dep, "EP") == [[0, 1, 4, 5], [2, 3, 6, 7]]


def test_spread_by_node_count() -> None:
    assert spread(Deployment(tp=4, nnodes=4), "TP") == "one rank per node"
    assert spread(Deployment(tp=4, nnodes=2), "TP") == "several per node"
    assert spread(Deployment(tp=4), "TP") == "one node"
    two_by_two = Deployment(tp=2, pp=2, nnodes=2)  # a PP stage a node
    assert spread(two_by_two, "TP") == "one node"
    assert spread(two_by_two, "PP") == "one rank per node"


@pytest.mark.parametrize(("tp", "version", "config"), [
    (2, None, "net-cumem-on"), (4, None, "net-cumem-on"),
    (2, "0.10.1.1", "net-cumem-off"), (4, "0.10.1.1", "net-cumem-off")])
def test_tp_across_nodes_is_the_net_golden(tp: int, version: str | None, config: str) -> None:
    comps = _comps(tp=tp, nnodes=tp, engine_version=version)
    init, first, _ = _golden_steps(tp, config)
    got, formula = comps[f"NCCL TP communicator ({tp} ranks)"]
    # less torch's stream pool where vLLM's PyNccl communicator does not make it (before 0.14.0;
    # from 0.14.0 its warm-up does: memprof.core.terms.pynccl_pool)
    made = version is None  # the default release
    assert got == init + first - (0 if made else TORCH_STREAM_POOL_BYTES)
    assert "[measured over loopback sockets; IB not measured]" in formula
    assert f"custom all-reduce buffers (TP, {tp} ranks)" not in comps
    # the same deployment on one host: the P2P row and the custom all-reduce buffers
    one = _comps(tp=tp, engine_version=version)
    assert one[f"NCCL TP communicator ({tp} ranks)"][0] > got
    assert f"custom all-reduce buffers (TP, {tp} ranks)" in one


def test_pp_across_nodes_adds_the_net_send_recv() -> None:
    # PP 2, one stage a node: the PP communicator's first send/recv over NET is 62 MiB
    comps = _comps(tp=2, pp=2, nnodes=2)
    init, first, p2p = _golden_steps(2, "net-cumem-on")
    # less torch's stream pool: TP's communicator, made first in the process, made it (PyNccl's
    # warm-up from 0.14.0, terms.pynccl_pool); a communicator made later pays none
    pool = TORCH_STREAM_POOL_BYTES
    assert comps["NCCL PP communicator (2 ranks)"][0] == init + first + p2p - pool
    # TP stays inside the node: today's figures, custom all-reduce included
    one = _comps(tp=2, pp=2)
    assert comps["NCCL TP communicator (2 ranks)"] == one["NCCL TP communicator (2 ranks)"]
    assert "custom all-reduce buffers (TP, 2 ranks)" in comps


def test_several_ranks_a_node_keep_the_one_host_row_and_say_so() -> None:
    comps = _comps(tp=4, nnodes=2)
    one = _comps(tp=4)
    got, formula = comps["NCCL TP communicator (4 ranks)"]
    assert got == one["NCCL TP communicator (4 ranks)"][0]
    assert "assumption" in formula and "not measured" in formula
    assert "custom all-reduce buffers (TP, 4 ranks)" not in comps  # the group spans nodes


def test_one_node_is_todays_estimate() -> None:
    assert _comps(tp=2, nnodes=1) == _comps(tp=2)
    assert _comps(nnodes=1) == _comps()


def test_rows_525_and_526_move_to_their_logs() -> None:
    row525 = dict(engine_version="0.10.1.1", tp=2, max_model_len=16384,
                  gpu_memory_utilization=0.5, max_num_batched_tokens=2048)
    one = estimate("qwen2.5-7b-instruct", Deployment(**row525), gpu_name="A100-40GB")  # type: ignore[arg-type]
    two = estimate("qwen2.5-7b-instruct", Deployment(**row525, nnodes=2),  # type: ignore[arg-type]
                   gpu_name="A100-40GB")
    logged = 412_944
    assert (logged - one.kv_cache_tokens) / logged > 0.07  # one host: -7.7%
    assert abs(two.kv_cache_tokens - logged) / logged < 0.03


@pytest.mark.parametrize("argv", [
    ["-tp", "2", "--nnodes", "3"],  # does not divide the world (vLLM asserts it)
    ["-tp", "2", "--nnodes", "0"],
    ["-tp", "2", "--nnodes", "two"],
    ["-tp", "2", "-dp", "3", "--nnodes", "2"],  # 3 ranks a node: TP groups inside and across
])
def test_bad_node_counts_are_refused(argv: list[str], capsys) -> None:  # type: ignore[no-untyped-def]
    rc = run(["estimate", "--model", "qwen2.5-7b-instruct", "--gpu", "H100", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[0].startswith("error:") and err[1].startswith("hint:") and len(err) == 2


def test_check_nodes_names_a_count_that_works() -> None:
    with pytest.raises(BadInput) as got:
        check_nodes(Deployment(tp=8, nnodes=3), (("TP", 8),))
    assert "1/2/4/8" in (got.value.hint or "")
    with pytest.raises(BadInput) as got:  # 3 ranks a node: TP [0, 1] inside, [2, 3] across
        check_nodes(Deployment(tp=2, dp=3, nnodes=2), (("TP", 2), ("DP", 3)))
    assert "use --nnodes 1/3/6 " in (got.value.hint or "")


def test_the_flag_is_echoed(capsys) -> None:  # type: ignore[no-untyped-def]
    assert run(["estimate", "--model", "qwen2.5-7b-instruct", "--gpu", "H100", "-tp", "2",
                "--nnodes", "2", "--format", "json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["deployment"]["nnodes"] == 2


SPANS = ("(RayWorkerWrapper pid=1) WARNING 09-10 23:27:29 [custom_all_reduce.py:85] Custom "
         "allreduce is disabled because this process group spans across nodes.")
ARGS = ("(APIServer pid=1) INFO 09-10 23:26:12 [utils.py:326] non-default args: {'model': 'm', "
        "'tensor_parallel_size': 4}")


def _ray(gpus: int, node: str) -> str:
    return ("(EngineCore_0 pid=1) WARNING 09-10 23:26:52 [ray_utils.py:200] "
            f"tensor_parallel_size=4 is bigger than a reserved number of GPUs ({gpus} GPUs) in a "
            f"node {node}. Tensor parallel workers can be spread out to 2+ nodes")


def test_explain_reads_the_node_count_from_rays_lines() -> None:
    log = parse_log("\n".join([ARGS, _ray(2, "aa11"), _ray(2, "bb22"), SPANS]))
    assert log.settings["nnodes"] == 2 and not any("assumed" in n for n in log.notes)
    log = parse_log("\n".join([ARGS, *(_ray(1, n) for n in ("a1", "b2", "c3", "d4")), SPANS]))
    assert log.settings["nnodes"] == 4


def test_explain_assumes_one_rank_a_node_and_says_so() -> None:
    log = parse_log("\n".join([ARGS, SPANS]))
    assert log.settings["nnodes"] == 4
    assert any("one rank a node assumed (--nnodes 4)" in n for n in log.notes)
    assert "nnodes" not in parse_log(ARGS).settings
