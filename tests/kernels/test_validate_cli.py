"""``memprof validate`` on the CPU: the reference path passes with the estimate's bytes to the
byte; bad input is one error line (exit 2); asking for the Triton path without a GPU exits 3."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.cli import run


def call(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cpu_mla_json_bytes_equal_the_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call(capsys, "validate", "--device", "cpu", "--kernel", "mla",
                          "--max-num-seqs", "512", "--context", "64", "--layers", "2", "-f",
                          "json")
    assert code == 0, err
    doc = json.loads(out)
    (k,) = doc["kernels"]
    by = {r["policy"]: r for r in k["runs"]}
    # R1 TP8 on CUTLASS MLA: heads padded to 128, 512 latent, bf16: 61 layers vs one buffer.
    assert by["per-layer"]["scaled_bytes"] == 61 * 512 * 128 * 512 * 2
    assert by["shared"]["scaled_bytes"] == 512 * 128 * 512 * 2
    assert all(r["estimate_bytes"] == r["scaled_bytes"] for r in k["runs"])
    assert by["per-layer"]["held_bytes"] == 2 * by["shared"]["held_bytes"]  # O(L) vs O(1)
    assert doc["passed"] and k["parity_passed"] and k["memory_passed"]


def test_cpu_turboquant_table_and_flashinfer_heads(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call(capsys, "validate", "--device", "cpu", "--kernel", "turboquant",
                          "--max-num-seqs", "16", "--context", "64", "--layers", "2")
    assert code == 0, err
    assert "verdict: all checks hold" in out and "memory [per-layer]" in out
    code, out, err = call(capsys, "validate", "--device", "cpu", "--kernel", "mla",
                          "--attention-backend", "flashinfer_mla", "--max-num-seqs", "8",
                          "--context", "32", "--layers", "2", "-f", "json")
    assert code == 0, err
    runs = json.loads(out)["kernels"][0]["runs"]
    assert runs[1]["scaled_bytes"] == 8 * 16 * 512 * 2  # no head padding: 128 / TP8 = 16 heads


@pytest.mark.parametrize("args,needle", [
    (["--kernel", "gemm"], "unknown --kernel"),
    (["--device", "tpu"], "unknown --device"),
    (["--model", "qwen3-32b"], "apply to one kernel"),
    (["--kernel", "mla", "--model", "qwen3-32b"], "no MLA attention"),
    (["--kernel", "turboquant", "--model", "deepseek-r1"], "no GQA attention"),
    (["--kernel", "mla", "-tp", "3"], "do not split"),
    (["--kernel", "mla", "--context", "200000"], "out of range"),
    (["--kernel", "mla", "--max-num-seqs", "0"], "out of range"),
    (["--kernel", "turboquant", "--attention-backend", "cutlass_mla"], "not an MLA decode"),
    (["--format", "yaml"], "unknown --format"),
])
def test_bad_input_is_one_error_line(capsys: pytest.CaptureFixture[str], args: list[str],
                                     needle: str) -> None:
    # the case's own --device replaces the default one (a flag given twice with two values is an
    # error of its own)
    base = [] if "--device" in args else ["--device", "cpu"]
    code, out, err = call(capsys, "validate", *base, *args)
    lines = err.strip().splitlines()
    assert code == 2 and out == "", err
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert needle.lower() in lines[0].lower()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_no_gpu_for_the_triton_path_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call(capsys, "validate", "--kernel", "mla")
    assert code == 3 and out == ""
    assert err.startswith("error: no CUDA GPU") and "--device cpu" in err


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flag=st.sampled_from(["--max-num-seqs", "--context", "--layers", "--steps", "-tp"]),
       value=st.one_of(st.integers(-10**12, 10**12).map(str), st.text(max_size=12)))
def test_fuzzed_numbers_never_trace_back(capsys: pytest.CaptureFixture[str], flag: str,
                                         value: str) -> None:
    # a tiny batch and context keep the runs that are accepted fast
    args = ["validate", "--device", "cpu", "--kernel", "mla", "--max-num-seqs", "2",
            "--context", "16", "--layers", "1", flag, value]
    if flag in ("--max-num-seqs", "--context", "--layers") and value.strip().isdigit() \
            and int(value) > 64:
        return  # accepted, and large: a real run, not a fuzz case
    code, _, err = call(capsys, *args)
    assert "Traceback" not in err
    assert code in (0, 2), err
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint:")


def test_running_out_of_memory_is_an_environment_error(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import memprof.commands.validate as cmd

    def oom(*_: object) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(cmd, "_run", oom)
    code, out, err = call(capsys, "validate", "--device", "cpu", "--kernel", "mla")
    lines = err.strip().splitlines()
    assert code == 3 and out == "" and len(lines) == 2
    assert lines[0].startswith("error: the mla validation ran out of cpu memory")
    assert lines[1].startswith("hint: lower --max-num-seqs")


def test_cpu_all_kernels_summary_and_markdown(capsys: pytest.CaptureFixture[str],
                                              tmp_path) -> None:  # type: ignore[no-untyped-def]
    md = tmp_path / "v.md"
    code, out, err = call(capsys, "validate", "--device", "cpu", "--kernel", "all",
                          "--max-num-seqs", "2", "--context", "64", "--layers", "1",
                          "--markdown", str(md))
    assert code == 0, err
    assert "summary" in out and "verdict: all checks hold" in out
    for k in ("mla", "tq", "dsv4", "dp_gather"):
        assert f"  {k}: PASS" in out
    assert "graph-clean [per-step]" in out and "NOT clean" in out and "what changes" in out
    text = md.read_text()
    assert text.startswith("## memprof validate") and "| dsv4 |" in text


def test_cpu_dsv4_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call(capsys, "validate", "--device", "cpu", "--kernel", "dsv4",
                          "--max-num-seqs", "2", "--context", "64", "--layers", "1",
                          "--graph-steps", "2", "-f", "json")
    assert code == 0, err
    (k,) = json.loads(out)["kernels"]
    assert k["kernel"] == "dsv4" and k["graph_passed"] and k["memory_passed"]
    assert all(r["estimate_bytes"] == r["measured_bytes"] for r in k["runs"])


@pytest.mark.parametrize("args,needle", [
    (["--kernel", "dsv4", "--model", "deepseek-r1"], "no deepseek-v4"),
    (["--kernel", "dp_gather", "--dp", "3"], "divide"),
    (["--kernel", "mla", "--dp", "2"], "--dp applies"),
    (["--kernel", "mla", "--kv-cache-memory-bytes", "1048576"], "applies to the deepseek-v4"),
    (["--kernel", "dsv4", "--graph-steps", "0"], "out of range"),
    (["--kernel", "dp_gather", "--markdown", "/nonexistent-dir/x.md", "--max-num-seqs", "1"],
     "does not exist"),
])
def test_part2_bad_input_is_one_error_line(capsys: pytest.CaptureFixture[str], args: list[str],
                                           needle: str) -> None:
    # the case's own --device replaces the default one (a flag given twice with two values is an
    # error of its own)
    base = [] if "--device" in args else ["--device", "cpu"]
    code, out, err = call(capsys, "validate", *base, *args)
    lines = err.strip().splitlines()
    assert code == 2 and out == "", err
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert needle.lower() in lines[0].lower()
