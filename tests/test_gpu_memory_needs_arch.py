"""``--gpu-memory`` alone (a card the catalog lacks, its architecture not given) is refused by
every command and API that takes it: estimate, plan, sweep, versions, trace, explain, the gate's
scenarios and ``memprof.budget``; with ``--gpu-arch`` (``gpu_arch``) each runs on that
architecture's rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.errors import BadInput
from tests.test_did_you_mean import call

ERROR = ("error: --gpu-memory without --gpu-arch: the card's architecture decides its kernels, "
         "attention backends and platform figures")
LOG = "tests/data/logs/vllm-v0-deepseek-v2-lite-h100.log"

COMMANDS = [
    ["estimate", "-m", "qwen3-0.6b"],
    ["plan", "-m", "qwen3-0.6b", "--requests", "2", "--context", "4096"],
    ["sweep", "-m", "qwen3-0.6b", "--set", "tp=1,2"],
    ["versions", "-m", "qwen3-0.6b", "--from", "0.10.0", "--to", "0.11.0"],
    ["trace", "-m", "qwen3-0.6b", "--device", "fake"],
    ["explain", LOG, "-m", "deepseek-v2-lite"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_command_refuses_a_size_without_an_architecture(argv: list[str]) -> None:
    code, out, err = call(*argv, "--gpu-memory", "20GiB")
    lines = err.strip().splitlines()
    assert code == 2 and out == "", err
    assert lines[0] == ERROR
    assert lines[1].startswith("hint: add --gpu-arch ARCH") and "memprof gpus" in lines[1]


@pytest.mark.parametrize("argv", COMMANDS[:4], ids=[c[0] for c in COMMANDS[:4]])
def test_with_the_architecture_every_command_runs(argv: list[str]) -> None:
    code, _out, err = call(*argv, "--gpu-memory", "20GiB", "--gpu-arch", "sm89")
    assert code in (0, 1), err
    assert "error:" not in err


def test_estimate_on_the_given_architecture_is_that_architectures() -> None:
    code, out, err = call("estimate", "-m", "qwen3-0.6b", "--gpu-memory", "20GiB", "--gpu-arch",
                          "8.9", "-f", "json")
    assert code == 0, err
    gpu = json.loads(out)["gpu"]
    assert (gpu["arch"], gpu["total_bytes"]) == ("sm89", 20 << 30)


def _scenario(tmp_path: Path, extra: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text('model = "qwen3-0.6b"\ngpu_memory = "20GiB"\n' + extra, encoding="utf-8")
    return p


def test_a_scenario_with_gpu_memory_alone_is_refused(tmp_path: Path) -> None:
    from memprof.core.scenarios import load_scenario

    with pytest.raises(BadInput) as info:
        load_scenario(_scenario(tmp_path, ""))
    assert "gpu_memory without gpu or gpu_arch" in info.value.message
    assert 'gpu_arch = "sm89"' in (info.value.hint or "")
    s = load_scenario(_scenario(tmp_path, 'gpu_arch = "sm89"\n'))
    assert s.request.gpu_arch == "sm89"
    from memprof.core.scenarios import evaluate

    assert evaluate(s.request).gpu.arch == "sm89"
    with pytest.raises(BadInput, match="gpu_arch must be a string"):
        load_scenario(_scenario(tmp_path, "gpu_arch = 89\n"))


def test_the_budget_api_needs_the_architecture_too() -> None:
    from memprof.budget import check_budget

    with pytest.raises(BadInput, match="gpu_memory without gpu or gpu_arch"):
        check_budget("qwen3-0.6b", gpu_memory="20GiB")
    report = check_budget("qwen3-0.6b", gpu_memory="20GiB", gpu_arch="gfx942")
    assert report.estimate["gpu"]["arch"] == "gfx942"


def test_the_python_estimate_refuses_a_bare_size_but_takes_an_unlisted_gpu() -> None:
    from memprof.core.deployment import Deployment
    from memprof.core.estimate import estimate
    from memprof.core.gpus import UNKNOWN_ARCH_RULES, unlisted_gpu

    with pytest.raises(BadInput):
        estimate("qwen3-0.6b", Deployment(), gpu_memory_bytes=20 << 30)
    e = estimate("qwen3-0.6b", Deployment(), gpu=unlisted_gpu(20 << 30))
    assert e.gpu.arch == "unknown" and UNKNOWN_ARCH_RULES in e.notes
    assert "fp8 hardware and Marlin" in UNKNOWN_ARCH_RULES and "sm90" in UNKNOWN_ARCH_RULES
