"""Golden output of every command but ``estimate`` (whose goldens are in test_golden.py): gate,
trace, explain, plan, sweep, validate, alloc replay, versions, models, gpus and devices, each in
every format its reporters offer (table, JSON, Markdown), compared whole with committed files
in tests/golden/commands/ at a pinned width with no colour. A changed character fails; after a
change you mean, regenerate with ``pytest tests/test_golden_commands.py --update-goldens`` and
review the diff.

The reporter functions are called directly on results the core builds (the CLI is being
rebuilt); where a command's output is stable it is also checked through ``memprof.cli.run``.
Results that hold measurements are fixed: validate renders the H100 run recorded in
reports/gpu/validate-h100/ (no kernel runs here), trace runs the fake device and zeroes each
phase's wall time, devices renders two made-up GPUs (this machine may have none).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from memprof.cli import run

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "commands"
LOG = "tests/data/logs/sglang-qwen3-235b-fp8-tp4-h100.log"
VALIDATE_RUN = ROOT / "reports" / "gpu" / "validate-h100" / "validate-all.json"
ALLOC_OPS = "tests/data/alloc_ops_example.json"


@pytest.fixture(autouse=True)
def _pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output that is not a terminal is $COLUMNS wide (the one width policy): the goldens are
    80 columns, where a table must stay readable; paths are the repo's; the gate writes no CI
    step summary."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(ROOT)


def check(name: str, text: str, request: pytest.FixtureRequest | None) -> None:
    """``text`` is the golden ``name`` (rewritten first under ``--update-goldens``)."""
    path = GOLDEN / name
    if request is not None and request.config.getoption("--update-goldens"):
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{name} has no golden; run with --update-goldens and review it"
    assert text == path.read_text(encoding="utf-8"), \
        f"{name} changed; rerun with --update-goldens if intended"
    assert "\x1b[" not in text
    if name.endswith(".json"):
        json.loads(text)


def cli(argv: list[str], codes: tuple[int, ...] = (0,)) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    assert code in codes, err.getvalue()
    return out.getvalue()


# --- the results, built once ----------------------------------------------------------------


def gate_result() -> Any:
    from tests.test_gate_files import golden_result

    return golden_result()


def explanation() -> tuple[Any, dict[str, Any]]:
    """What ``memprof explain LOG --gpu H100 -m qwen3-235b-a22b -q fp8`` computes."""
    from memprof.core.deployment import Deployment
    from memprof.core.explain import explain
    from memprof.probes.log_deployment import rebuild
    from memprof.probes.startup_log import read_log

    parsed = read_log(LOG)
    rb = rebuild(parsed, model="qwen3-235b-a22b", gpu="H100", gpu_memory=None,
                 overrides={"quantization": "fp8"})
    assert Deployment().quantization != "fp8"
    x = explain(rb.measured, rb.model, rb.deployment, rb.gpu, given=rb.given,
                failed=parsed.failed, engine_fix=rb.engine_fix)
    about = {"path": LOG, "engine": parsed.engine, "generation": parsed.generation,
             "version": parsed.version, "error": parsed.errors[0] if parsed.errors else None,
             "notes": [*parsed.notes, *rb.notes]}
    return x, about


def plan_report() -> Any:
    from memprof.batch.plan import plan, serve_model
    from memprof.batch.plan_report import PlanReport
    from memprof.core.deployment import Deployment
    from memprof.core.gpus import find_gpu

    g = find_gpu("H100")
    rows = plan("qwen3-32b", g, requests=64, context=32000, headroom=1 << 30,
                base=Deployment(), max_gpus=64, kv_dtypes=("auto", "fp8"))
    served, note = serve_model("qwen3-32b")
    return PlanReport(model="qwen3-32b", gpu=g.name, requests=64, context=32000,
                      rows=tuple(rows[:10]), found=len(rows), served=served, served_note=note)


SWEEP_AXES = ["tp=1,2,3", "max_model_len=8k,128k"]


def sweep_frame() -> Any:
    from memprof.batch.sweep import parse_axis, sweep
    from memprof.core.deployment import Deployment
    from memprof.report.sweep import dataframe

    return dataframe(sweep("qwen3-32b", Deployment(), "H100", None,
                           [parse_axis(a) for a in SWEEP_AXES]))


SWEEP_COLUMNS = ["tp", "max_model_len", "gpus", "verdict", "kv_cache_tokens", "max_concurrency",
                 "headroom_bytes"]


def validations() -> Any:
    from memprof.validation.results import run_from_dict

    return run_from_dict(json.loads(VALIDATE_RUN.read_text(encoding="utf-8")))


def replay_result() -> Any:
    from memprof.alloc.replay import load_ops, replay

    return replay(load_ops(Path(ALLOC_OPS)), "", None)


def version_diff() -> Any:
    from memprof.core.deployment import Deployment
    from memprof.core.version_diff import version_diff as diff

    return diff("deepseek-r1", Deployment(tp=8), "0.7.3", "0.33.0", gpu_name="H200")


def made_up_devices() -> list[Any]:
    from memprof.probes.devices import Device, Process

    return [Device(index=0, vendor="nvidia", name="NVIDIA H100 80GB HBM3",
                   total_bytes=85_017_493_504, free_bytes=84_000_000_000,
                   used_bytes=1_017_493_504, driver="570.86.15", arch="sm90",
                   processes=(Process(pid=4242, name="python", used_bytes=1_000_000_000),)),
            Device(index=1, vendor="amd", name=None, total_bytes=None, free_bytes=None,
                   used_bytes=None, driver=None, processes=None,
                   problems=("amdsmi refused the memory query",))]


def trace_result() -> Any:
    """A fake-device trace of qwen3-0.6b, each phase's wall time zeroed (it varies)."""
    pytest.importorskip("torch")
    from memprof.core.deployment import Deployment
    from memprof.trace.run import run_trace

    t = run_trace("qwen3-0.6b", Deployment(max_model_len=2048, max_num_seqs=4),
                  gpu_name="H100", device="fake", decode_steps=1)
    phases = tuple(dataclasses.replace(p, seconds=0.0) for p in t.phases)
    return dataclasses.replace(t, phases=phases, torch_version="(pinned)")


def console_text(draw: Callable[[Console], None], width: int = 80) -> str:
    buf = io.StringIO()
    draw(Console(file=buf, width=width, color_system=None, force_terminal=False))
    return buf.getvalue()


# --- the goldens ------------------------------------------------------------------------------


def _gate() -> dict[str, str]:
    from memprof.report.gate import render_json, render_markdown, render_table

    r = gate_result()
    return {"gate.txt": console_text(lambda c: render_table(r, c)),
            "gate.md": render_markdown(r), "gate.json": render_json(r)}


def _explain() -> dict[str, str]:
    from memprof.report.explain import render_explain_json, render_explain_table, render_markdown

    x, about = explanation()
    return {"explain.txt": render_explain_table(x, about, 80),
            "explain.md": render_markdown(x, about), "explain.json": render_explain_json(x, about)}


def _plan() -> dict[str, str]:
    from memprof.report.plan import render_json, render_markdown, render_table

    p = plan_report()
    return {"plan.txt": render_table(p, 80), "plan.md": render_markdown(p),
            "plan.json": render_json(p)}


def _sweep() -> dict[str, str]:
    from memprof.report.sweep import render_markdown, render_table

    df = sweep_frame()
    title = f"qwen3-32b: {len(df)} deployments"
    return {"sweep.txt": render_table(df, SWEEP_COLUMNS, title=title, width=80),
            "sweep.md": render_markdown(df, SWEEP_COLUMNS, title=title),
            "sweep.jsonl": df.to_json(orient="records", lines=True)}


def _validate() -> dict[str, str]:
    pytest.importorskip("torch")
    from memprof.report.validate import render_json, render_markdown, render_table

    run = validations()
    return {"validate.txt": render_table(run, 120), "validate.md": render_markdown(run),
            "validate.json": render_json(run)}


def _alloc() -> dict[str, str]:
    from memprof.report.alloc import render_json, render_markdown, render_table

    r = replay_result()
    return {"alloc-replay.txt": render_table(r), "alloc-replay.md": render_markdown(r),
            "alloc-replay.json": render_json(r)}


def _versions() -> dict[str, str]:
    from memprof.report.versions import (
        render_json,
        render_markdown,
        render_rulebook,
        render_version_diff,
    )

    d = version_diff()
    return {"versions.txt": render_rulebook(), "versions.md": render_markdown(),
            "versions.json": render_json(),
            "versions-diff.txt": render_version_diff(d), "versions-diff.md": render_markdown(d),
            "versions-diff.json": render_json(d)}


def _listings() -> dict[str, str]:
    from memprof.report.listing import render_json, render_markdown, render_table

    return {"models.txt": render_table("models", 80),
            "models.md": render_markdown("models"), "models.json": render_json("models"),
            "gpus.txt": render_table("gpus", 80),
            "gpus.md": render_markdown("gpus"), "gpus.json": render_json("gpus")}


def _devices() -> dict[str, str]:
    from memprof.report.devices import render_json, render_markdown, render_table

    devs = made_up_devices()
    return {"devices.txt": render_table(devs, 80), "devices.md": render_markdown(devs),
            "devices.json": render_json(devs)}


def _trace() -> dict[str, str]:
    from memprof.report.trace import render_json, render_markdown, render_table

    t = trace_result()
    return {"trace.txt": render_table(t, 100), "trace.md": render_markdown(t),
            "trace.json": render_json(t)}


COMMANDS: dict[str, Callable[[], dict[str, str]]] = {
    "gate": _gate, "explain": _explain, "plan": _plan, "sweep": _sweep, "validate": _validate,
    "alloc": _alloc, "versions": _versions, "listings": _listings, "devices": _devices,
    "trace": _trace}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_reporter_goldens(command: str, request: pytest.FixtureRequest) -> None:
    texts = COMMANDS[command]()
    formats = {n.rsplit(".", 1)[1] for n in texts}
    assert {"txt", "md"} <= formats and formats & {"json", "jsonl"}  # table, Markdown, JSON
    for name, text in texts.items():
        check(name, text, request)


# through the CLI: the command's own wiring (flags → core → reporter), where it is stable
CLI = {
    "cli-gate.txt": (["gate", "--scenarios", "configs/scenarios", "--baseline",
                      "reports/baseline.json"], (0,)),
    # exit 1: the log names no release, so explain rebuilds it at the newest, 0.5.23, whose
    # prefill CUDA graphs (SGLANG_PREFILL_GRAPH_RESERVE, captured from 0.5.10; 1.52 GiB here)
    # leave this bf16 checkpoint quantised online (-q fp8) less than its run-time peak outside
    # the logged --mem-fraction-static 0.93: runtime_oom against the logged start (at
    # main@d315eb7, the newest before SGLang's releases were ordered by date, it fit)
    "cli-explain.txt": (["explain", LOG, "--gpu", "H100", "-m", "qwen3-235b-a22b", "-q", "fp8"],
                        (1,)),
    "cli-explain.json": (["explain", LOG, "--gpu", "H100", "-m", "qwen3-235b-a22b", "-q", "fp8",
                          "-f", "json"], (1,)),
    "cli-plan.txt": (["plan", "-m", "qwen3-32b", "--requests", "64", "--context", "32000",
                      "--gpu", "H100"], (0,)),
    "cli-plan.json": (["plan", "-m", "qwen3-32b", "--requests", "64", "--context", "32000",
                       "--gpu", "H100", "-f", "json"], (0,)),
    "cli-sweep.txt": (["sweep", "-m", "qwen3-32b", "--gpu", "H100", "--set", SWEEP_AXES[0],
                       "--set", SWEEP_AXES[1]], (0,)),
    "cli-alloc-replay.txt": (["alloc", "replay", ALLOC_OPS], (0,)),
    "cli-alloc-replay.json": (["alloc", "replay", ALLOC_OPS, "-f", "json"], (0,)),
    "cli-versions.txt": (["versions"], (0,)),
    "cli-versions-diff.txt": (["versions", "-m", "deepseek-r1", "-tp", "8", "--gpu", "H200",
                               "--from", "0.7.3", "--to", "0.33.0"], (0,)),
    "cli-models.txt": (["models"], (0,)),
    "cli-gpus.txt": (["gpus"], (0,)),
}


@pytest.mark.parametrize("name", sorted(CLI))
def test_cli_goldens(name: str, request: pytest.FixtureRequest) -> None:
    argv, codes = CLI[name]
    check(name, cli(argv, codes), request)


def test_the_cli_prints_what_the_reporters_render() -> None:
    """Where the command is a reporter's output as is, the two goldens are the same text."""
    pairs = [("cli-plan.json", "plan.json"), ("cli-plan.txt", "plan.txt"),
             ("cli-explain.json", "explain.json"), ("cli-alloc-replay.json", "alloc-replay.json"),
             ("cli-alloc-replay.txt", "alloc-replay.txt"), ("cli-versions.txt", "versions.txt"),
             ("cli-versions-diff.txt", "versions-diff.txt"), ("cli-models.txt", "models.txt"),
             ("cli-gpus.txt", "gpus.txt"), ("cli-sweep.txt", "sweep.txt")]
    for a, b in pairs:
        assert (GOLDEN / a).read_text(encoding="utf-8") == (GOLDEN / b).read_text(
            encoding="utf-8"), (a, b)


def test_the_recorded_gpu_validation_renders_as_it_was_recorded() -> None:
    """The H100 run's JSON rebuilt into results renders back to the recorded JSON and Markdown
    byte for byte: the validate reporters have not drifted since the GPU run."""
    pytest.importorskip("torch")
    from memprof.report.validate import render_json, render_markdown

    run = validations()
    assert render_json(run) == VALIDATE_RUN.read_text(encoding="utf-8")
    assert render_markdown(run) == VALIDATE_RUN.with_suffix(".md").read_text(encoding="utf-8")


def test_a_golden_fails_on_a_changed_character() -> None:
    """The comparison is exact: one digit changed in a rendering is a failure."""
    text = _alloc()["alloc-replay.json"]
    changed = re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), text, count=1)
    assert text != changed
    with pytest.raises(AssertionError, match="changed"):
        check("alloc-replay.json", changed, None)



def test_cli_devices_prints_the_reporters_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """``memprof devices`` on a host with the two made-up GPUs prints devices.txt / .json."""
    import memprof.probes.devices as probe

    monkeypatch.setattr(probe, "devices", made_up_devices)
    assert cli(["devices"]) == (GOLDEN / "devices.txt").read_text(encoding="utf-8")
    assert cli(["devices", "-f", "json"]) == (GOLDEN / "devices.json").read_text(encoding="utf-8")
