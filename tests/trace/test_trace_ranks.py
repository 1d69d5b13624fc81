"""Every rank under torchrun (issue 25 item 1) on CPU: two processes over gloo on the fake
device, each tracing its own rank, rank 0 alone printing the gathered report; and the layouts
refused before any work."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from memprof.cli import run
from memprof.commands.trace import _rank_path
from memprof.core.deployment import Deployment
from memprof.core.terms.non_torch import nccl_groups
from memprof.trace.dist import group_partition, tp_members
from memprof.trace.ranks import rank_span

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _torchrun(n: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(n),
         "--master-addr", "127.0.0.1", "--master-port", str(_free_port()),
         "-m", "memprof", "trace", "--device", "fake", "--decode-steps", "1", "--graphs", "1",
         *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False)


def test_two_ranks_each_trace_their_own_and_rank_0_prints_one_json(tmp_path: Path) -> None:
    md = tmp_path / "report.md"
    p = _torchrun(2, "-m", "qwen3-0.6b", "-tp", "2", "--max-num-seqs", "8", "-f", "json",
                  "--markdown", str(md))
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)  # one document: rank 1 printed nothing
    assert p.stdout.count('"schema_version"') == 1
    assert doc["schema_version"] == 2 and doc["world_size"] == 2
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert [r["tp_rank"] for r in doc["ranks"]] == [0, 1]
    assert doc["same_as"] == [0, 1] and doc["rank"] == 0
    for r in doc["ranks"]:  # each rank traced the whole rank: weights and KV as estimated
        kv = next(c for c in r["components"] if c["category"] == "kv_cache")
        assert kv["traced_bytes"] == kv["estimated_bytes"] > 0
        assert [p["name"] for p in r["phases"]][:2] == ["context", "weights"]
    text = md.read_text()  # written once, by rank 0: the two equal ranks shown once
    assert text.count("## ranks 0–1 of 2") == 1 and "rank 1 of 2" not in text


def test_two_ranks_table_shows_equal_ranks_once() -> None:
    p = _torchrun(2, "-m", "qwen3-0.6b", "-tp", "2", "--max-num-seqs", "8")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.count("ranks 0–1 of 2") == 1
    assert p.stdout.count("memprof trace: qwen3-0.6b") == 1


def test_pipeline_stages_are_distinct_ranks() -> None:
    """TP 1 × PP 2: two distinct ranks (the stages; their estimates differ), each traced with
    its own estimate's figures."""
    p = _torchrun(2, "-m", "qwen3-0.6b", "-pp", "2", "--max-num-seqs", "8", "-f", "json")
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert [(r["rank"], r["pp_stage"]) for r in doc["ranks"]] == [(0, 0), (1, 1)]
    assert doc["same_as"] == [0]  # rank 1 is another estimate rank
    for r in doc["ranks"]:
        w = [c for c in r["components"]
             if c["category"] == "weights" and c["name"] != "allocator rounding (model load)"]
        assert w and all(c["traced_bytes"] == c["estimated_bytes"] for c in w)


def _refused(monkeypatch: pytest.MonkeyPatch, world: int, *args: str) -> str:
    monkeypatch.setenv("WORLD_SIZE", str(world))
    monkeypatch.setenv("RANK", "0")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = run(["trace", "-m", "qwen3-0.6b", "--device", "fake", *args])
    assert code == 2
    lines = err.getvalue().strip().splitlines()
    assert lines[0].startswith("error:") and lines[1].startswith("hint:")
    return err.getvalue()


def test_data_parallel_ranks_each_trace_their_own() -> None:
    """vLLM's DP under torchrun: each DP rank is an engine of its own, traced with its own
    index and DP coordinate (DP outermost in the global order), weights and KV as estimated."""
    p = _torchrun(2, "-m", "qwen3-0.6b", "--dp", "2", "--max-num-seqs", "8", "-f", "json")
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert [(r["rank"], r["tp_rank"], r["dp_rank"]) for r in doc["ranks"]] == [(0, 0, 0),
                                                                               (1, 0, 1)]
    assert doc["same_as"] == [0, 1]  # the DP ranks share one estimate
    for r in doc["ranks"]:
        kv = next(c for c in r["components"] if c["category"] == "kv_cache")
        assert kv["traced_bytes"] == kv["estimated_bytes"] > 0


def test_sglang_dp_attention_under_torchrun_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _refused(monkeypatch, 4, "--engine", "sglang", "-tp", "4", "--dp", "2",
                   "--enable-dp-attention")
    assert "--enable-dp-attention" in out


def test_rank_flag_under_torchrun_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "--rank under torchrun" in _refused(monkeypatch, 2, "-tp", "2", "--rank", "1")


def test_tp_group_members_follow_vllm_order() -> None:
    dep = Deployment(tp=2, pp=2)
    assert tp_members(dep, 0) == [0, 1] and tp_members(dep, 3) == [2, 3]


def test_group_partitions_follow_vllm_order() -> None:
    """DP outermost, then PP, TP fastest (vllm/distributed/parallel_state.py
    initialize_model_parallel): TP groups are consecutive ranks, PP and DP groups stride over
    them, the EP group is every DP × TP rank of a stage; each partition covers the world once."""
    dep = Deployment(tp=2, pp=2, dp=2)
    assert group_partition(dep, "TP") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert group_partition(dep, "PP") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert group_partition(dep, "DP") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert group_partition(dep, "EP") == [[0, 1, 4, 5], [2, 3, 6, 7]]
    assert group_partition(dep, "MoE EP") is None
    for name in ("TP", "PP", "DP", "EP"):
        part = group_partition(dep, name)
        assert part is not None and sorted(r for g in part for r in g) == list(range(8))
    # DP8 EP8 at TP 1 (seed 003's layout): the DP and the EP communicator both span the world,
    # DP's first, as vLLM makes them and the estimate charges them
    dp8 = Deployment(dp=8, enable_expert_parallel=True)
    assert nccl_groups(dp8) == [("DP", 8), ("EP", 8)]
    assert group_partition(dp8, "DP") == group_partition(dp8, "EP") == [list(range(8))]


def test_rank_span_and_snapshot_names() -> None:
    assert rank_span([0, 1, 2, 3]) == "ranks 0–3"
    assert rank_span([0, 2]) == "ranks 0, 2"
    assert rank_span([1]) == "rank 1"
    assert _rank_path("out/snap.pickle", 3) == "out/snap.rank3.pickle"
    assert _rank_path("snap", 1) == "snap.rank1"


def test_expert_parallel_ranks_and_one_snapshot_per_rank(tmp_path: Path) -> None:
    """--enable-expert-parallel over a TP world of 2 (DeepSeek-R1's shape, 4 layers): both ranks
    traced, and --snapshot written by each rank under its own name."""
    snap = tmp_path / "snap.pickle"
    p = _torchrun(2, "-m", "deepseek-r1", "-tp", "2", "--enable-expert-parallel",
                  "--hf-overrides", '{"num_hidden_layers": 4}', "--max-num-seqs", "8",
                  "-f", "json", "--snapshot", str(snap))
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert sorted(f.name for f in tmp_path.iterdir()) == ["snap.rank0.pickle",
                                                          "snap.rank1.pickle"]


COMMS = """
import torch, torch.distributed as dist
from memprof.core.deployment import Deployment
from memprof.trace.dist import communicators, env_world, init_world
w = env_world()
init_world(w, False)
c = communicators(Deployment(tp=2, dp=2, enable_expert_parallel=True), w, False)
out = [c.first[0], dist.get_process_group_ranks(c.first[1].group), c.replica is c.first[1]]
for name, part in c.later:
    g = c.make(part)
    x = torch.tensor([float(1 << w.rank)])
    y = g.all_reduce(x)
    out += [name, g.group is not dist.group.WORLD, int(y.item()), int(x.item())]
open(f"{OUT}/rank{w.rank}.txt", "w").write(repr(out))
dist.destroy_process_group()
"""


def test_communicators_over_real_groups_in_vllm_order(tmp_path: Path) -> None:
    """TP 2 × DP 2 with EP over gloo, 4 processes: the first communicator is TP's (the
    replica's group), then DP's and EP's, each a group of its own (vLLM's GroupCoordinator: a
    new device group even where its ranks are the world's) whose out-of-place all_reduce of
    2^rank sums exactly its members (DP: ranks r and r + 2; EP: all four) into a new tensor,
    the input left as it was."""
    script = tmp_path / "comms.py"
    script.write_text(f"OUT = {str(tmp_path)!r}\n" + COMMS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    p = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4",
         "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), str(script)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    tp = {0: [0, 1], 1: [0, 1], 2: [2, 3], 3: [2, 3]}
    for r in range(4):  # DP: 2^r + 2^(r ± 2); EP: 1 + 2 + 4 + 8
        got = (tmp_path / f"rank{r}.txt").read_text()
        assert got == repr(["TP", tp[r], True, "DP", True, (1 << r % 2) * 5, 1 << r,
                            "EP", True, 15, 1 << r])
