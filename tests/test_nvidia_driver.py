"""``--nvidia-driver`` (memprof/core/nvidia_driver.py): the driver a deployment states decides the
CUDA-graph kernel nodes' cost (R580 or later: R580's measured costs; before it NVIDIA's published
~10 KiB, except under a CUDA 13 wheel's forward compatibility), and a driver before R550 is
warned about; a version that is none, or an NVIDIA driver for a ROCm GPU, is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate, rank_context
from memprof.core.nvidia_driver import before_r550_note, driver_major
from memprof.core.terms.cudagraph import driver_stack, driver_stack_note
from memprof.probes.startup_log import parse_log


@pytest.mark.parametrize(("text", "major"), [("580.82.07", 580), ("535.247.01", 535),
                                             ("550.54", 550), ("570", 570), ("R535", 535),
                                             (" 575.57.08 ", 575)])
def test_the_branch_of_each_form_nvidia_smi_prints(text: str, major: int) -> None:
    assert driver_major(text) == major


@pytest.mark.parametrize("text", ["12.2", "13.0", "", "latest", "580.82.07.1", "5800",
                                  "abc.def", "099.1", "-535"])
def test_what_is_no_driver_version_is_refused(text: str) -> None:
    with pytest.raises(BadInput, match="no NVIDIA driver version"):
        driver_major(text)


@given(st.text(max_size=20))
def test_any_text_is_a_branch_or_a_refusal(text: str) -> None:
    try:
        major = driver_major(text)
    except BadInput:
        return
    assert 300 <= major <= 999 and str(major) in text


def _est(gpu: str, version: str, driver: str | None, **kw: object) -> Estimate:
    dep = Deployment(engine_version=version, nvidia_driver=driver, **kw)  # type: ignore[arg-type]
    return estimate("qwen3-0.6b", dep, gpu_name=gpu)


def _graphs(e: Estimate) -> int:
    return sum(c.bytes for c in e.ranks[0].components if c.category == "cudagraph")


def _stack(e: Estimate) -> tuple[str, str]:
    ctx = rank_context(e, e.ranks[0])
    return driver_stack(ctx), driver_stack_note(ctx)


def test_r580_takes_the_measured_costs_at_a_cuda12_release() -> None:
    unstated = _est("H100", "0.19.1", None)
    r580 = _est("H100", "0.19.1", "580.82.07")
    r535 = _est("H100", "0.19.1", "535.247.01")
    assert _stack(unstated)[0] == "cuda12" and "[assumption]" in _stack(unstated)[1]
    assert _stack(r580) == ("cuda13", "")
    assert _stack(r535)[0] == "cuda12" and "driver 535.247.01" in _stack(r535)[1]
    # R580's measured node costs are below the published ~10 KiB: fewer graph bytes
    assert _graphs(r580) < _graphs(unstated) == _graphs(r535)


def test_a_cuda13_wheel_under_an_older_driver_keeps_r580_and_says_why() -> None:
    unstated = _est("H100", "0.22.0", None)
    r550 = _est("H100", "0.22.0", "550.54.15")
    stack, note = _stack(r550)
    assert stack == "cuda13" and "forward compatibility" in note
    assert _graphs(r550) == _graphs(unstated)


def test_before_hopper_the_published_cost_whatever_the_driver() -> None:
    assert _graphs(_est("A100-80GB", "0.19.1", "580.82.07")) == _graphs(
        _est("A100-80GB", "0.19.1", "535.247.01"))


def test_other_engines_take_the_stated_driver() -> None:
    sg = estimate("qwen3-0.6b", Deployment(engine="sglang"), gpu_name="H100")
    sg535 = estimate("qwen3-0.6b", Deployment(engine="sglang", nvidia_driver="535.247.01"),
                     gpu_name="H100")
    assert _stack(sg)[0] == "cuda13" and _stack(sg535)[0] == "cuda12"


def test_the_warning_below_r550_where_graphs_are_captured() -> None:
    warned = _est("H100", "0.19.1", "535.247.01")
    assert any("before R550" in n and "#5517" in n for n in warned.notes)
    for quiet in (_est("H100", "0.19.1", "550.54.15"), _est("H100", "0.19.1", None),
                  _est("H100", "0.19.1", "535.247.01", enforce_eager=True)):
        assert not any("before R550" in n for n in quiet.notes)
    assert before_r550_note("535", graphs=False) == ""


@pytest.mark.parametrize(("args", "needle"), [
    (["--nvidia-driver", "12.2"], "no NVIDIA driver version"),
    (["--nvidia-driver", "535", "--gpu", "MI300X"], "is a ROCm GPU"),
])
def test_the_cli_refuses_with_a_hint(capsys: pytest.CaptureFixture[str], args: list[str],
                                     needle: str) -> None:
    gpu = [] if "--gpu" in args else ["--gpu", "H100"]
    code = run(["estimate", "--model", "qwen3-0.6b", *gpu, *args])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err and "hint:" in err and "Traceback" not in err


@pytest.mark.parametrize("line", [
    "| NVIDIA-SMI 535.247.01             Driver Version: 535.247.01     CUDA Version: 12.2     |",
    "Nvidia driver version: 535.247.01",
])
def test_explain_reads_the_driver_from_a_pasted_log(line: str) -> None:
    log = parse_log(line + "\nINFO 04-14 08:39:26 model_runner.py:1115] Loading model weights "
                    "took 13.9281 GB\n")
    assert log.settings["nvidia_driver"] == "535.247.01"
