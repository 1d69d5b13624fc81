"""The world-8 rehearsal (``reports/cpu/world8-rehearsal/``): ``recorders/gpu_world8.sh`` with
``DEVICE=fake`` on CPU, 8 processes over gloo, each tracing its own rank through the allocator
simulator. Not GPU measurements: what they check is the 8-rank pipeline (every rank reported
with its own index and coordinates, TP8 and DP8 EP8 alike) and that each rank's weights, KV
cache and scratch equal today's estimate to the byte in the simulator (issue 27's acceptance,
the part a CPU can check); and the seed-002 DP-attention gather at dp 8 over gloo."""

from __future__ import annotations

import re
import shlex

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from tests.world8_helpers import (
    REHEARSAL,
    ROOT,
    RUNS,
    added,
    byte_exact,
    coordinates,
    kv_as_budgeted,
    read,
)

GPU = "H100"  # the script's GPU for the rehearsal (log-8x-fake.txt)


def _file(stem: str) -> str:
    return f"{stem}-8x-fake.json"


@pytest.mark.parametrize("stem", sorted(RUNS))
def test_every_rank_reported_with_its_own_index(stem: str) -> None:
    g = read(REHEARSAL / _file(stem))
    assert g["schema_version"] == 2 and g["world_size"] == RUNS[stem]["nproc"] == 8
    assert [r["rank"] for r in g["ranks"]] == list(range(8))
    for r in g["ranks"]:
        assert (r["tp_rank"], r["pp_stage"], r["dp_rank"]) == coordinates(stem, r["rank"])
        assert r["device_name"] == "fake (H100-80GB)" and r["oom"] is None
    assert g["deployment"]["data_parallel_size"] == RUNS[stem]["layout"]["dp"]
    assert g["deployment"]["tensor_parallel_size"] == RUNS[stem]["layout"]["tp"]


@pytest.mark.parametrize("stem", sorted(RUNS))
def test_weights_scratch_and_kv_equal_the_estimate_to_the_byte_on_every_rank(stem: str) -> None:
    for r in read(REHEARSAL / _file(stem))["ranks"]:
        est, traced = byte_exact(stem, GPU, r)
        assert est and traced == est, (stem, r["rank"])
        assert kv_as_budgeted(r), (stem, r["rank"])


def test_the_log_ran_the_listed_commands_and_every_one_exited_0() -> None:
    """log-8x-fake.txt holds each command as run (shell-quoted) and its exit code: the traces
    are runs.json's flags on the fake device, and every command, the gather's too, exited 0."""
    lines = (REHEARSAL / "log-8x-fake.txt").read_text().splitlines()
    ran = {ln.split(":")[0][3:]: shlex.split(ln.split(": LIMIT=", 1)[1])[1:]
           for ln in lines if ": LIMIT=" in ln}
    codes = {ln.split(":")[0][3:]: ln.split("rc=")[1].split()[0] for ln in lines if "rc=" in ln}
    assert sorted(ran) == sorted([*RUNS, "dp-gather-dp8"])
    assert set(codes.values()) == {"0"} and sorted(codes) == sorted(ran)
    for stem, run in RUNS.items():
        cmd = ran[stem]
        assert cmd[cmd.index("trace") + 1:] == [*run["args"], *added(GPU, "fake")], stem
        assert cmd[cmd.index("--nproc-per-node") + 1] == "8"


def test_dp_gather_at_dp_8_every_rank_and_the_buffer_the_estimate_gives() -> None:
    """Seed 002's gather with dp 8 over gloo: every rank passed parity, and its buffer's bytes,
    per forward and persistent, equal today's "SGLang DP-attention gathered buffer"."""
    g = read(REHEARSAL / "dp-gather-dp8-8x-fake.json")
    assert g["world_size"] == 8 and [r["rank"] for r in g["ranks"]] == list(range(8))
    for r in g["ranks"]:
        assert r["backend"] == "gloo" and r["dp"] == 8 and r["parity_passed"] is True
        assert {x["policy"] for x in r["runs"]} == {"per-forward", "persistent"}
        for run in r["runs"]:
            dep = Deployment(engine="sglang", tp=8, dp=8, enable_dp_attention=True,
                             cuda_graph_max_bs=r["max_bs"], scratch=run["catalog_policy"])
            e = estimate(r["model"], dep, gpu_name=GPU)
            want = sum(c.bytes for c in e.ranks[0].components
                       if c.name.startswith("SGLang DP-attention gathered buffer"))
            assert want > 0 and run["buffer_bytes"] == want, (r["rank"], run["policy"])
        runs = {x["policy"]: x for x in r["runs"]}  # the simulated graph-clean check, each way
        assert runs["persistent"]["graph"]["clean"] is True
        assert runs["per-forward"]["graph"]["clean"] is False


def test_each_call_of_the_script_fits_the_devices_600_s() -> None:
    """recorders/gpu_world8.sh's two calls (its header: PARTS "env traces gather", then "env
    nccl graphs"): the LIMITs of each call's commands, plus timeout's 5 s kill grace each, stay
    under the 600 s a device call may run."""
    text = (ROOT / "recorders" / "gpu_world8.sh").read_text()
    arms = {m.group(1): m.group(2) for m in re.finditer(r"\n    (\w+)\)(.*?);;", text, re.S)}
    limits = {part: [int(x) for x in re.findall(r"(?:^|\n)\s*(?:trace|run) \S+ (\d+)", body)]
              for part, body in arms.items()}
    assert limits["env"] == [] and len(limits["traces"]) == len(RUNS)
    for parts in (("env", "traces", "gather"), ("env", "nccl", "graphs")):
        assert f'PARTS="{" ".join(parts)}"' in text
        total = sum(n + 5 for p in parts for n in limits[p])
        assert 0 < total <= 600, (parts, total)
    assert sorted(limits) == ["env", "gather", "graphs", "nccl", "traces"]
