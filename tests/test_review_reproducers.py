"""The reproducers of the third trust review, run as a user runs them.

Each is the command line the review found giving an internal error (exit 70), hanging, or giving an
answer a user should not get; each now has its expected exit code and what the output must (or must
not) say. Endless inputs run in a subprocess with a time limit, so a hang fails the test instead of
stalling the suite.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memprof.cli import run

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "configs" / "models"


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = run(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _one_error(err: str) -> None:
    lines = err.strip().splitlines()
    assert [ln for ln in lines if ln.startswith("error:")] and len(
        [ln for ln in lines if ln.startswith("error:")]) == 1, err
    assert any(ln.startswith("hint:") for ln in lines), err
    assert "Traceback" not in err and "internal error" not in err, err


def _config(tmp_path: Path, name: str, edit: dict[str, object] | None = None,
            drop: tuple[str, ...] = ()) -> str:
    doc = json.loads((MODELS / f"{name}.json").read_text())
    doc = copy.deepcopy(doc)
    for key in drop:
        doc.pop(key, None)
    for key, value in (edit or {}).items():
        doc[key] = value
    path = tmp_path / f"{name}-edited.json"
    path.write_text(json.dumps(doc))
    return str(path)


# --- --compare --------------------------------------------------------------------------------


@pytest.mark.parametrize("compare", ["max_model_len=32768", "max_num_seqs=1024"])
def test_a_compare_that_changes_no_component_is_answered(
        capsys: pytest.CaptureFixture[str], compare: str) -> None:
    code, out, err = _run(capsys, ["estimate", "--model", "qwen3-32b", "--gpu", "H200",
                                   "--compare", compare, "--format", "json"])
    assert code == 0, err
    doc = json.loads(out)
    assert "compare" in doc


@pytest.mark.parametrize("compare", ["None", "", "max_num_seqs"])
def test_a_compare_that_names_nothing_is_refused(
        capsys: pytest.CaptureFixture[str], compare: str) -> None:
    code, _, err = _run(capsys, ["estimate", "--model", "qwen3-32b", "--gpu", "H200",
                                 "--compare", compare])
    assert code == 2, err
    _one_error(err)


# --- configs that need a field, or carry an impossible one ------------------------------------


@pytest.mark.parametrize(("name", "edit", "drop", "field"), [
    ("deepseek-r1", None, ("n_routed_experts",), "n_routed_experts"),
    ("qwen3-32b", {"intermediate_size": 0}, (), "intermediate_size"),
    ("qwen3-235b-a22b", {"num_experts": 0}, (), "num_experts"),
    ("llama-3.1-8b", {"rope_scaling": {"rope_type": "llama3", "factor": -8.0,
                                       "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                       "original_max_position_embeddings": 8192}}, (),
     "factor"),
    ("llama-3.1-8b", {"rope_scaling": {"rope_type": "llama3", "factor": "eight",
                                       "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                       "original_max_position_embeddings": 8192}}, (),
     "factor"),
])
def test_a_config_is_refused_never_reinterpreted(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str,
        edit: dict[str, object] | None, drop: tuple[str, ...], field: str) -> None:
    path = _config(tmp_path, name, edit, drop)
    code, _, err = _run(capsys, ["estimate", "--model", path, "--gpu", "H200", "-tp", "8"])
    assert code == 2, err
    _one_error(err)
    assert field in err


# --- verdicts that follow the engine's refusals ------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["--model", "qwen3-32b", "--max-model-len", "131072"],
    ["--model", "deepseek-r1", "-tp", "8", "--attention-backend", "flashmla",
     "--block-size", "7"],
    ["--model", "qwen3-32b", "--kv-cache-dtype", "fp8_ds_mla"],
])
def test_what_the_engine_refuses_is_refused(
        capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, _, err = _run(capsys, ["estimate", "--gpu", "H200", *argv])
    assert code == 2, err
    _one_error(err)


def test_a_small_gpu_under_vllm_is_not_told_about_sglang(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, ["estimate", "--model", "qwen3-0.6b", "--gpu-memory", "3GiB",
                                   "--gpu-arch", "sm90"])
    assert code == 1, err  # startup_oom: less free at start-up than vLLM's budget asks
    assert "startup_oom" in out
    assert "mem_fraction_static" not in out + err and "mem-fraction-static" not in out + err


def test_hf_overrides_that_change_the_model_are_not_labelled_harmless(
        capsys: pytest.CaptureFixture[str]) -> None:
    base = _run(capsys, ["estimate", "--gpu", "H200", "--format", "json", "--",
                         "vllm", "serve", "Qwen/Qwen3-32B"])
    over = _run(capsys, ["estimate", "--gpu", "H200", "--format", "json", "--",
                         "vllm", "serve", "Qwen/Qwen3-32B",
                         "--hf-overrides", '{"num_hidden_layers": 4}'])
    assert over[0] == 0, over[2]  # applied, as the engines apply it: the model shrinks
    assert json.loads(over[1])["summary"] != json.loads(base[1])["summary"]
    assert "no effect on GPU memory" not in over[1] + over[2]


# --- None where an integer belongs ---------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["estimate", "--gpu", "H200", "--", "vllm", "serve", "Qwen/Qwen3-32B", "-tp", "None"],
    ["estimate", "--gpu", "H200", "--", "vllm", "serve", "Qwen/Qwen3-32B", "-pp", "None"],
    ["estimate", "--gpu", "H200", "--", "vllm", "serve", "Qwen/Qwen3-32B", "-dp", "None"],
    ["sweep", "--model", "qwen3-32b", "--gpu", "H200", "--set", "tp=None"],
])
def test_none_as_a_parallel_size_is_bad_input(
        capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, _, err = _run(capsys, argv)
    assert code == 2, err
    _one_error(err)


# --- numbers and nesting -------------------------------------------------------------------------


def test_a_400_digit_number_in_a_log(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text("INFO 11-26 10:00:00 [gpu_worker.py:1] Available KV cache memory: "
                   + "9" * 400 + " GiB\n"
                   "INFO 11-26 10:00:00 [kv_cache_utils.py:1] GPU KV cache size: "
                   + "9" * 400 + " tokens\n")
    code, _, err = _run(capsys, ["explain", str(log), "--model", "qwen3-32b", "--gpu", "H200"])
    assert code == 2, err
    _one_error(err)
    assert "not a plausible figure" in err


def test_deeply_nested_yaml_and_toml(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    yml = tmp_path / "compose.yaml"
    yml.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    code, _, err = _run(capsys, ["estimate", "--gpu", "H200", "--from-file", str(yml)])
    assert code == 2, err
    _one_error(err)
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    code, _, err = _run(capsys, ["gate", "--scenarios", str(scenarios),
                                 "--baseline", str(ROOT / "reports" / "baseline.json")])
    assert code == 2, err
    _one_error(err)


# --- snapshots --------------------------------------------------------------------------------


@pytest.mark.parametrize(("events", "expected"), [
    # one 32 TiB allocation: more than the simulated device holds, an OOM at that op
    ([{"action": "alloc", "addr": 1, "size": 1 << 45, "stream": 0}], 1),
    ([{"action": "alloc", "addr": 1, "size": "big", "stream": 0}], 2),
    ([{"action": "alloc", "addr": 1, "size": -5, "stream": "x"}], 2),
    # a None stream is the default stream, as torch writes it; a segment_free is an empty_cache
    ([{"action": "alloc", "addr": 1, "size": 512, "stream": None},
      {"action": "free_completed", "addr": 1}, {"action": "segment_free", "addr": None}], 0),
])
def test_snapshot_pickles_with_odd_fields(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          events: list[dict[str, object]],
                                          expected: int) -> None:
    snap = tmp_path / "snap.pkl"
    snap.write_bytes(pickle.dumps({"segments": [], "device_traces": [events]}))
    code, _, err = _run(capsys, ["alloc", "replay", str(snap)])
    assert code == expected, err
    if code == 2:
        _one_error(err)


# --- endless inputs: refused at once ------------------------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    yield path


def _subprocess(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "memprof", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("argv", [
    ["explain", "{src}", "--model", "qwen3-32b"],
    ["alloc", "replay", "{src}"],
    ["gate", "--baseline", "{src}"],
    ["estimate", "--gpu", "H200", "--from-file", "{src}"],
    ["estimate", "--gpu", "H200", "--model", "{src}"],
])
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_endless_inputs_are_refused_at_once(tmp_path: Path, fifo: Path, argv: list[str],
                                            kind: str) -> None:
    src = str(fifo) if kind == "fifo" else kind
    done = _subprocess([a.replace("{src}", src) for a in argv], ROOT)
    assert done.returncode == 2, done.stderr
    _one_error(done.stderr)


# --- output paths: checked before the work, never created -----------------------------------------


@pytest.mark.parametrize("argv", [
    ["sweep", "--model", "qwen3-32b", "--gpu", "H200", "--set", "tp=1,2", "-o", "nodir/x.csv"],
    ["estimate", "--model", "qwen3-32b", "--gpu", "H200", "--plot", "nodir/p.png"],
    ["gate", "--markdown", "nodir/gate.md"],
    ["validate", "--device", "cpu", "--markdown", "nodir/v.md"],
    ["trace", "--model", "qwen3-0.6b", "--gpu", "H200", "--device", "fake",
     "--snapshot", "nodir/x.pkl"],
])
def test_a_missing_output_folder_is_refused_before_any_work(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        argv: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, argv)
    assert code == 2, err
    _one_error(err)
    assert out == "", "work was done (and printed) before the path was checked"
    assert not (tmp_path / "nodir").exists()


# --- what users read ------------------------------------------------------------------------------


def test_plan_prints_a_command_a_user_can_paste(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, ["plan", "--model", "qwen3-32b", "--gpu", "H200",
                                   "--requests", "16", "--context", "32K"])
    assert code == 0, err
    best = [ln for ln in out.splitlines() if "vllm serve" in ln]
    assert best, out
    assert all("vllm serve Qwen/Qwen3-32B" in ln for ln in best), best


def test_an_invalid_sweep_point_keeps_integer_columns_integral(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, ["sweep", "--model", "qwen3-32b", "--gpu", "H200",
                                   "--set", "tp=1,3", "--format", "csv"])
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert sorted(r["tp"] for r in rows) == ["1", "3"], rows
    for row in rows:
        for key, value in row.items():
            if key in ("gpus", "max_model_len", "max_num_seqs") or key.endswith(
                    ("_tokens", "_bytes")):
                assert value == "" or value.lstrip("-").isdigit(), (key, row)
        if row["tp"] == "1":
            assert row["kv_cache_tokens"], row


def test_an_empty_gate_baseline_does_not_pass(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    base = tmp_path / "baseline.json"
    base.write_text("{}")
    code, _, err = _run(capsys, ["gate", "--baseline", str(base)])
    assert code == 2, err
    _one_error(err)


def test_the_cli_habits(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, ["-h"])
    assert code == 0 and "estimate" in out
    code, out, _ = _run(capsys, ["estimate", "-h"])
    assert code == 0 and "--model" in out
    code, out, _ = _run(capsys, ["--version"])
    assert code == 0 and out.startswith("memprof ")
    code, _, err = _run(capsys, ["estimate", "--model", "qwen3-0.6b", "--gpu", "T4"])
    assert code == 0, err  # a catalog row since the GPU catalog grew
    for gpu in ("A100", "V100"):  # ambiguous: 40/80 GB, 16/32 GB
        code, _, err = _run(capsys, ["estimate", "--model", "qwen3-0.6b", "--gpu", gpu])
        assert code == 2, err
        _one_error(err)
        assert "did you mean" in err.lower() or "--gpu-memory" in err, err
