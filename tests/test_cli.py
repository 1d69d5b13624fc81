"""CLI: exit codes, the one-line errors, and the JSON contract."""

import json
import os
from pathlib import Path

import pytest

from memprof.cli import run


def call(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_default_job_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call(capsys, "estimate", "--model", "deepseek-r1", "--gpu", "H200", "-tp",
                          "8", "--format", "json")
    assert code == 0 and err == ""
    d = json.loads(out)  # nothing but JSON on stdout
    assert d["schema_version"] == 1
    assert {"model", "deployment", "gpu", "ranks", "summary"} <= set(d)
    assert d["gpu"] == {"name": "H200", "total_bytes": 150_109_880_320, "arch": "sm90",
                        "exact": True}
    r = d["ranks"][0]
    for key in ("rank", "tp_rank", "pp_stage", "dp_rank", "ep_rank", "components",
                "weights_bytes", "kv_cache_bytes", "kv_cache_bytes_per_token", "num_gpu_blocks",
                "kv_cache_tokens", "verdict"):
        assert key in r
    assert r["count"] == 8 and r["kv_cache_bytes_per_token"] == 70_272
    for c in r["components"]:
        assert {"name", "category", "bytes", "count", "profiled", "formula"} <= set(c)
        assert isinstance(c["bytes"], int)
        assert c["category"] in {"weights", "kv_cache", "scratch", "activation", "cudagraph",
                                 "non_torch", "allocator"}
    s = d["summary"]
    assert s["verdict"] in {"fits", "startup_oom", "runtime_oom"}
    for key in ("kv_cache_tokens", "kv_cache_bytes_per_token", "max_concurrency",
                "weights_bytes_max", "reasons"):
        assert key in s
    weights = sum(c["bytes"] for c in r["components"] if c["category"] == "weights")
    assert weights == r["weights_bytes"] == s["weights_bytes_max"]


def test_table_and_markdown_render(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = call(capsys, "estimate", "-m", "qwen3-32b", "--gpu", "h200")
    assert code == 0 and "GPU KV cache size" in out and "verdict: fits" in out
    code, out, _ = call(capsys, "estimate", "-m", "qwen3-32b", "--gpu", "h200", "-f", "markdown")
    assert code == 0 and out.startswith("### memprof estimate: qwen3-32b")
    assert "| component | category |" in out


def test_listing_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = call(capsys, "models")
    assert code == 0 and "gpt-oss-120b" in out and "kimi-k2" in out
    code, out, _ = call(capsys, "gpus")
    assert code == 0 and "MI355X" in out and "85,017,493,504" in out


def test_oom_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = call(capsys, "estimate", "-m", "llama-3.1-70b", "--gpu", "H100", "-f", "json")
    assert code == 1
    assert json.loads(out)["summary"]["verdict"] == "startup_oom"


def _bad(tmp: Path) -> list[tuple[list[str], str]]:
    malformed = tmp / "malformed" / "config.json"
    malformed.parent.mkdir()
    malformed.write_text('{"hidden_size": 4096,')
    unreadable = tmp / "unreadable.json"
    unreadable.write_text("{}")
    unreadable.chmod(0)
    binary = tmp / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    empty_obj = tmp / "empty_obj.json"
    empty_obj.write_text("{}")
    empty_dir = tmp / "empty"
    empty_dir.mkdir()
    return [
        (["-m", "not-a-model"], "unknown model"),
        (["-m", str(tmp / "missing" / "config.json")], "no such file"),
        (["-m", str(empty_dir)], "no config.json"),
        (["-m", str(malformed.parent)], "not valid JSON"),
        (["-m", str(unreadable)], "cannot read" if os.geteuid() != 0 else "names no architecture"),
        (["-m", str(binary)], "not UTF-8"),
        (["-m", str(empty_obj)], "names no architecture"),
        (["-m", "llama-3.1-8b", "-tp", "3"], "does not divide"),
        (["-m", "llama-3.1-8b", "-pp", "33"], "larger than the 32 layers"),
        (["-m", "llama-3.1-8b", "--enable-expert-parallel", "-tp", "2"], "no experts"),
        (["-m", "llama-3.1-8b", "-tp", "0"], "at least 1"),
        (["-m", "llama-3.1-8b", "-dp", "-2"], "at least 1"),
        (["-m", "llama-3.1-8b", "--max-model-len", "0"], "at least 1"),
        (["-m", "llama-3.1-8b", "--max-num-seqs", "-5"], "at least 1"),
        (["-m", "llama-3.1-8b", "--gpu-memory", "0GiB"], "at least one byte"),
        (["-m", "llama-3.1-8b", "--gpu-memory", "lots"], "cannot read the size"),
        (["-m", "llama-3.1-8b", "--kv-cache-memory", "-1GiB"], "cannot read the size"),
        (["-m", "llama-3.1-8b", "--gpu-memory-utilization", "0"], "in (0, 1]"),
        (["-m", "llama-3.1-8b", "--gpu-memory-utilization", "1.5"], "in (0, 1]"),
        (["-m", "llama-3.1-8b", "--gpu", "H900"], "unknown GPU"),
        (["-m", "llama-3.1-8b", "--kv-cache-dtype", "int3"], "unknown --kv-cache-dtype"),
        (["-m", "llama-3.1-8b", "--format", "xml"], "unknown --format"),
        (["-m", "llama-3.1-8b", "--tensor-parallel-size", "x"], "tensor-parallel-size"),
        (["--no-such-flag"], "No such option"),
    ]


def test_every_bad_input_is_one_error_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for args, needle in _bad(tmp_path):
        code, out, err = call(capsys, "estimate", *args)
        lines = err.strip().splitlines()
        assert code == 2, (args, err)
        assert lines[0].startswith("error: ") and needle.lower() in lines[0].lower(), (args, err)
        assert len(lines) == 2 and lines[1].startswith("hint: "), (args, err)
        assert "Traceback" not in err and out == ""


def test_python_dash_m_entry_point() -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "memprof", "estimate", "-m", "qwen3-0.6b",
                           "--gpu", "RTX-4090", "-f", "json"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["model"]["name"] == "qwen3-0.6b"


def test_an_error_quoting_a_control_character_stays_one_line(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A config.json key may hold any character; the error that quotes it escapes the ones
    that are not printable (a record separator splits a line for ``str.splitlines``), so the
    error is still one ``error:`` line and one ``hint:`` line."""
    cfg = json.loads((Path("configs/models/qwen3-0.6b.json")).read_text())
    cfg["quantization_config"] = {"quant_method": "compressed-tensors",
                                  "config_groups": {"g\x1e\u2028": 5}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert run(["estimate", "-m", str(path), "--gpu", "H200"]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert "g\\x1e\\u2028" in lines[0]
