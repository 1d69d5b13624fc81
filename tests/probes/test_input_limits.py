"""Inputs that never end, nest without end or hold a None where a count goes: each is one
``error:`` + ``hint:`` line and exit 2 before any work (never exit 70, never an endless read)."""

from __future__ import annotations

import contextlib
import io
import os
import time
from pathlib import Path

import pytest

from memprof.cli import run
from memprof.probes.serve_command import MAX_YAML_DEPTH, MAX_YAML_NODES, parse_file


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(list(argv))
    return code, out.getvalue(), err.getvalue()


def one_error(code: int, out: str, err: str, needle: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
    assert needle in lines[0], lines[0]
    assert out == ""


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)  # nobody writes: reading it would block for ever
    return path


# --- 1. endless inputs --------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ("explain", "{}"),
    ("explain", "{}", "--model", "qwen3-0.6b", "--gpu", "H100"),
    ("estimate", "--gpu", "H100", "--from-file", "{}"),
    ("estimate", "--gpu", "H100", "--model", "{}"),
])
@pytest.mark.parametrize("endless", ["fifo", "/dev/zero"])
def test_endless_inputs_are_refused_before_reading(argv: tuple[str, ...], endless: str,
                                                   fifo: Path) -> None:
    path = str(fifo) if endless == "fifo" else endless
    start = time.monotonic()
    code, out, err = call(*(a.format(path) for a in argv))
    one_error(code, out, err, "not a regular file")
    assert ("FIFO" if endless == "fifo" else "character device") in err
    assert time.monotonic() - start < 30


def test_model_folder_whose_config_is_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "config.json")
    one_error(*call("estimate", "--gpu", "H100", "--model", str(tmp_path)), "not a regular file")


def test_caps_are_stated(tmp_path: Path) -> None:
    big = tmp_path / "big.sh"
    big.write_bytes(b"#" * ((1 << 20) + 1))
    code, out, err = call("estimate", "--gpu", "H100", "--from-file", str(big))
    one_error(code, out, err, "larger than 1.00 MiB")
    cfg = tmp_path / "config.json"
    with cfg.open("wb") as f:
        f.truncate((16 << 20) + 1)
    one_error(*call("estimate", "--gpu", "H100", "--model", str(cfg)), "larger than 16.00 MiB")


# --- 3. nesting and alias bombs -----------------------------------------------------------------

def test_deep_yaml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.yml"
    path.write_text("services:\n  a:\n    command: " + "[" * 100_000 + "]" * 100_000 + "\n")
    one_error(*call("estimate", "--gpu", "H100", "--from-file", str(path)),
              f"nests deeper than {MAX_YAML_DEPTH} levels")


def _bomb(tail: str) -> str:
    text, prev = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n', "a"
    for name in "bcdefghij":
        text += f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]\n"
        prev = name
    return text + tail.format(prev)


@pytest.mark.parametrize("tail", [
    "services:\n  x:\n    image: vllm/vllm-openai\n    command: *{}\n",
    "spec:\n  z: *{}\n",
])
def test_alias_bombs_are_refused_before_they_expand(tmp_path: Path, tail: str) -> None:
    path = tmp_path / "bomb.yml"
    path.write_text(_bomb(tail))
    start = time.monotonic()
    one_error(*call("estimate", "--gpu", "H100", "--from-file", str(path)),
              f"expands to more than {MAX_YAML_NODES:,} YAML nodes")
    assert time.monotonic() - start < 30


def test_anchors_a_compose_file_uses_still_work(tmp_path: Path) -> None:
    path = tmp_path / "compose.yml"
    path.write_text("x-common: &common\n  image: vllm/vllm-openai:latest\n  environment: [A=1]\n"
                    "services:\n  vllm:\n    <<: *common\n    command: [\"--model\", "
                    "\"Qwen/Qwen3-32B\", \"-tp\", \"2\"]\n")
    c = parse_file(str(path))
    assert (c.engine, c.model, c.settings) == ("vllm", "Qwen/Qwen3-32B", {"tp": 2})


def test_deep_json_in_a_config_and_in_speculative_config(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    one_error(*call("estimate", "--gpu", "H100", "--model", str(cfg)), "nests JSON too deeply")
    one_error(*call("estimate", "--gpu", "H100", "--", "vllm", "serve", "qwen3-0.6b",
                    "--speculative-config", "[" * 100_000), "--speculative-config is not JSON")


# --- 4. None and non-integers for integer flags of a pasted command -----------------------------

@pytest.mark.parametrize(("flag", "value"), [
    ("-tp", "None"), ("--tensor-parallel-size=None", ""), ("-pp", "None"),
    ("--pipeline-parallel-size", "none"), ("-dp", "None"), ("--data-parallel-size", "2.5"),
    ("-tp", "1e400"), ("-tp", "9" * 400), ("-tp", "x"), ("--kv-cache-dtype", "None"),
])
def test_integer_flags_of_a_pasted_command(flag: str, value: str) -> None:
    argv = ["estimate", "--gpu", "H100", "--", "vllm", "serve", "qwen3-0.6b", flag]
    argv += [value] if value else []
    one_error(*call(*argv), f"for {flag.split('=')[0]}"
              if "None" in flag + value or "none" in value else flag.split("=")[0])


@pytest.mark.parametrize("body", [
    "vllm serve qwen3-0.6b --tensor-parallel-size None\n",
    "services:\n  v:\n    image: vllm/vllm-openai\n    command: [qwen3-0.6b, -tp, None]\n",
    "services:\n  v:\n    image: vllm/vllm-openai\n    command: [qwen3-0.6b, -tp, null]\n",
])
def test_none_tp_from_a_file(tmp_path: Path, body: str) -> None:
    path = tmp_path / ("serve.yml" if "services" in body else "serve.sh")
    path.write_text(body)
    code, out, err = call("estimate", "--gpu", "H100", "--from-file", str(path))
    one_error(code, out, err, "-tp" if "-tp" in body else "--tensor-parallel-size")


def test_none_stays_the_default_where_the_engine_takes_it() -> None:
    # vLLM reads --max-num-seqs None as "its default" (an Optional[int]): not an error
    code, _, err = call("estimate", "--gpu", "H100", "--", "vllm", "serve", "qwen3-0.6b",
                        "--max-num-seqs", "None")
    assert code == 0, err


@pytest.mark.parametrize(("command", "settings", "dropped"), [
    ("vllm serve qwen3-0.6b -tp None --max-model-len 4096", {"max_model_len": 4096}, "-tp"),
    ("vllm serve qwen3-0.6b --tensor-parallel-size=None --max-model-len 4096 -pp 2",
     {"max_model_len": 4096, "pp": 2}, "--tensor-parallel-size"),
    ("vllm serve qwen3-0.6b --max-model-len None -tp 2", {"tp": 2}, "--max-model-len"),
])
def test_a_logged_command_keeps_the_flags_it_can_read(command: str, settings: dict[str, int],
                                                      dropped: str) -> None:
    from memprof.probes.startup_log import parse_log

    log = parse_log(f"INFO {command}\nINFO GPU KV cache size: 1,000 tokens\n")
    assert log.settings == settings
    assert log.notes == (f"flags of the logged command not read: {dropped}",)
