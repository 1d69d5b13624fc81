"""A ``docker run`` command read as the serve command it starts (memprof/probes/serve_command.py
``docker_run``), pasted to ``estimate`` and quoted in a log ``explain`` reads
(memprof/probes/startup_log.py), and vLLM's "Free memory on device (X/Y GiB)" read as the card's
total. The quoted commands and lines are those of ``tests/data/published.json`` rows 901-904
(vLLM 0.27.1 in its official image on RTX PRO 6000 cards)."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.base.units import GiB
from memprof.cli import run
from memprof.core.release_names import map_build
from memprof.probes.serve_command import docker_run, image_release, parse_text, parse_tokens
from memprof.probes.startup_log import parse_log

# row 902's command, as the post prints it
ROW_902 = """docker run -d --name vllm-tp2 \\
  --gpus '"device=1,4"' --ipc=host -p 8101:8000 \\
  -v /root/.cache/huggingface:/root/.cache/huggingface \\
  -e HF_HUB_OFFLINE=1 -e HF_HOME=/root/.cache/huggingface \\
  vllm/vllm-openai:latest Qwen/Qwen3-32B \\
    --tensor-parallel-size 2 \\
    --gpu-memory-utilization 0.426 \\
    --max-model-len 32768 \\
    --port 8000
"""
# row 904's: the image and the model each on a line of their own, after a shell prompt
ROW_904 = """root@utho-gpu-rtxpro6000-8-62383:~# docker run -d --name vllm-tp4 \\
  --gpus '"device=1,4,5,6"' \\
  --ipc=host \\
  -p 8000:8000 \\
  -v /root/.cache/huggingface:/root/.cache/huggingface \\
  -e HF_HUB_OFFLINE=1 \\
  -e HF_HOME=/root/.cache/huggingface \\
  -e VLLM_USE_DEEP_GEMM=0 \\
  vllm/vllm-openai:latest \\
    Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 \\
    --served-model-name qwen3-235b \\
    --tensor-parallel-size 4 \\
    --gpu-memory-utilization 0.90 \\
    --max-model-len 32768 \\
    --max-num-seqs 32 \\
    --port 8000
"""
LOAD_902 = ("(Worker_TP0 pid=611) INFO [model_runner.py:329] Model loading took 30.59 GiB and "
            "20.690370 seconds")
FREE_904 = ("(Worker_TP1 pid=771) INFO 08-21 18:22:06 [gpu_worker.py:789] Free memory on device "
            "(94.05/95.01 GiB) on startup. Desired GPU memory utilization is (0.9, 85.51 GiB). "
            "Actual usage is 56.89 GiB for consumed memory (weights + non-torch), 0.76 GiB for "
            "peak activation, and 0.32 GiB for CUDAGraph memory.")


def _tokens(text: str) -> list[str]:
    return shlex.split(text.replace("\\\n", " ").split("# ", 1)[-1])


def test_row_902_command_pasted() -> None:
    cmd = parse_tokens(_tokens(ROW_902))
    assert cmd.engine == "vllm" and cmd.model == "Qwen/Qwen3-32B"
    assert cmd.settings == {"tp": 2, "gpu_memory_utilization": 0.426, "max_model_len": 32768}
    assert cmd.ignored == ("--port",)  # docker's -p, -v, -e, --ipc, --gpus are not serve flags
    assert cmd.image_release is None  # :latest names no release


def test_row_904_command_in_a_log() -> None:
    log = parse_log(ROW_904 + "\n" + LOAD_902)
    assert log.model == "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"
    assert log.settings["tp"] == 4 and log.settings["max_num_seqs"] == 32
    assert log.settings["gpu_memory_utilization"] == 0.9
    assert log.settings["max_model_len"] == 32768
    assert log.version is None  # neither the log nor the image's tag names a release


def test_row_901_elided_options_and_continued_flags() -> None:
    text = ("$ docker run --gpus '\"device=1\"' ... vllm/vllm-openai:latest Qwen/Qwen3-32B \\\n"
            "    --tensor-parallel-size 1 --gpu-memory-utilization 0.426 --max-model-len 32768\n"
            + LOAD_902)
    log = parse_log(text)
    assert log.model == "Qwen/Qwen3-32B"
    assert log.settings == {"tp": 1, "gpu_memory_utilization": 0.426, "max_model_len": 32768}


def test_another_container_in_the_log_is_not_the_command() -> None:
    log = parse_log("$ docker run -d --name cache -p 6379:6379 redis:7\n" + ROW_902 + LOAD_902)
    assert log.model == "Qwen/Qwen3-32B" and log.settings["tp"] == 2
    assert log.notes == ()


def test_the_image_tag_is_the_release() -> None:
    assert image_release("vllm/vllm-openai:v0.27.1") == "0.27.1"
    assert image_release("docker.io/vllm/vllm-openai:0.8.5.post1") == "0.8.5.post1"
    assert image_release("lmsysorg/sglang:v0.4.6.post1-cu124") == "0.4.6.post1"
    for none in ("vllm/vllm-openai:latest", "vllm/vllm-openai:gptoss", "vllm/vllm-openai",
                 "localhost:5000/vllm-openai", "vllm/vllm-openai@sha256:abc"):
        assert image_release(none) is None, none
    log = parse_log(ROW_902.replace(":latest", ":v0.27.1") + LOAD_902)
    assert log.version == "0.27.1"
    # a release the log prints itself wins over the tag
    log = parse_log("INFO vLLM API server version 0.27.0\n"
                    + ROW_902.replace(":latest", ":v0.27.1") + LOAD_902)
    assert log.version == "0.27.0"


def test_docker_environment_and_switches() -> None:
    cmd = parse_tokens(shlex.split(
        "sudo docker run -it --rm --privileged --shm-size 16g --ipc host -p8000:8000 "
        "-e VLLM_USE_V1=0 --env=HF_TOKEN=x vllm/vllm-openai:v0.10.1 Qwen/Qwen3-32B -tp 2"))
    assert cmd.model == "Qwen/Qwen3-32B"
    assert cmd.settings == {"vllm_use_v1": 0, "tp": 2, "engine_version": "0.10.1"}


def test_an_sglang_image_runs_its_launcher() -> None:
    cmd = parse_tokens(shlex.split(
        "docker run --gpus all lmsysorg/sglang:v0.4.6.post1-cu124 python3 -m "
        "sglang.launch_server --model-path Qwen/Qwen3-32B --tp 2"))
    assert (cmd.engine, cmd.model, cmd.settings["tp"]) == ("sglang", "Qwen/Qwen3-32B", 2)
    assert cmd.image_release == "0.4.6.post1"


def test_an_image_post_release_is_taken_and_mapped_later() -> None:
    """An SGLang tag naming a post release memprof does not list is the engine version, which
    ``--engine-version``'s mapping (``release_names.map_build``) then places at 0.4.6 with a
    note, as a log naming it is placed."""
    cmd = parse_tokens(shlex.split(
        "docker run lmsysorg/sglang:v0.4.6.post1-cu124 python3 -m sglang.launch_server "
        "--model-path Qwen/Qwen3-32B"))
    assert cmd.settings["engine_version"] == "0.4.6.post1" and not cmd.not_modelled
    mapped = map_build("0.4.6.post1", "sglang")
    assert mapped is not None and mapped.release == "0.4.6"
    cmd = parse_tokens(shlex.split(
        "docker run lmsysorg/sglang:v0.4.6-cu124 python3 -m sglang.launch_server "
        "--model-path Qwen/Qwen3-32B"))
    assert cmd.settings["engine_version"] == "0.4.6" and not cmd.not_modelled


def test_an_entrypoint_override_is_read() -> None:
    cmd = parse_tokens(["docker", "run", "--entrypoint", "/bin/bash", "vllm/vllm-openai:latest",
                        "-c", "vllm serve Qwen/Qwen3-8B --max-model-len 10k"])
    assert (cmd.model, cmd.settings) == ("Qwen/Qwen3-8B", {"max_model_len": 10000})


def test_a_script_with_docker_run() -> None:
    cmd = parse_text("#!/bin/sh\nTP=2\n" + ROW_902.replace("2 \\", "$TP \\"))
    assert cmd.settings["tp"] == 2 and cmd.model == "Qwen/Qwen3-32B"


@pytest.mark.parametrize("tokens", [
    ["docker", "run", "--gpus", "all"],  # no image
    ["docker", "run", "ubuntu:22.04", "Qwen/Qwen3-8B"],  # an image of no engine
    ["docker", "run", "vllm/vllm-openai:latest", "Qwen/Qwen3-8B", "--no-such-flag"],
])
def test_bad_docker_commands_are_bad_input(tokens: list[str]) -> None:
    with pytest.raises(BadInput):
        parse_tokens(tokens)


def test_docker_run_is_none_for_other_commands() -> None:
    assert docker_run(["vllm", "serve", "x"]) is None
    assert docker_run(["docker", "ps"]) is None


def test_free_memory_line_gives_the_total() -> None:
    log = parse_log(FREE_904)
    assert log.get("total_gpu_bytes") == round(95.01 * GiB)
    assert log.get("free_at_start_bytes") == round(94.05 * GiB)
    # 0.9.1 - 0.26's form of the same line (v1/worker/gpu_worker.py, then v1/worker/utils.py)
    log = parse_log("ValueError: Free memory on device cuda:0 (12.18/23.56 GiB) on startup is "
                    "less than desired GPU memory utilization (0.92, 21.67 GiB).")
    assert log.get("total_gpu_bytes") == round(23.56 * GiB)
    assert log.get("gpu_memory_utilization") == 0.92
    assert log.get("requested_bytes") == round(21.67 * GiB)


def test_desired_utilization_of_0_27() -> None:
    log = parse_log(FREE_904)
    assert log.get("gpu_memory_utilization") == 0.9
    assert log.get("requested_bytes") == round(85.51 * GiB)


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


def test_estimate_takes_the_image_release() -> None:
    code, out, err = _cli(["estimate", "--gpu", "H200", "-f", "json", "--", "docker", "run",
                           "--gpus", "all", "vllm/vllm-openai:v0.10.1", "Qwen/Qwen3-32B",
                           "--max-model-len", "8k"])
    assert code in (0, 1), err
    dep = json.loads(out)["deployment"]
    assert dep["engine_version"] == "0.10.1" and dep["max_model_len"] == 8000


def test_explain_rebuilds_at_the_image_release(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text(ROW_902.replace(":latest", ":v0.27.1") + LOAD_902, encoding="utf-8")
    code, out, err = _cli(["explain", str(log), "-m", "qwen3-32b", "--gpu", "RTX-PRO-6000",
                           "-f", "json"])
    assert code in (0, 1), err
    dep = json.loads(out)["deployment"]
    got = (dep["engine_version"], dep["tensor_parallel_size"], dep["max_model_len"])
    assert got == ("0.27.1", 2, 32768)


# --- fuzz: a docker run command made of real and broken parts must be read or refused (one
# error: and one hint: line, exit 2), never crash

DOCKER_OPTIONS = ["-d", "-it", "--rm", "--gpus", "all", "'\"device=1,4\"'", "--ipc=host",
                  "--ipc", "host", "-p", "8000:8000", "-v", "/a:/b", "-e", "VLLM_USE_V1=0",
                  "-e", "VLLM_USE_V1=x", "--env=VLLM_USE_V1=1", "--shm-size", "16g", "...",
                  "--entrypoint", "vllm", "--name", "x", "-", "--", "=", "-e", ""]
IMAGES = ["vllm/vllm-openai:latest", "vllm/vllm-openai:v0.27.1", "vllm/vllm-openai:v0.1.0",
          "vllm/vllm-openai:v99.0.0", "vllm/vllm-openai:v0.7.4.dev12", "lmsysorg/sglang:latest",
          "ubuntu", "vllm/vllm-openai:", ":", "vllm/vllm-openai@sha256:00"]
ARGS = ["Qwen/Qwen3-32B", "qwen3-0.6b", "--tensor-parallel-size", "2", "-tp", "None",
        "--max-model-len", "10k", "1e400", "--gpu-memory-utilization", "0.426", "serve",
        "python3", "-m", "sglang.launch_server", "--model-path", "--port", "8000", "-c",
        "vllm serve x", "&&", "--no-such-flag", "ü", ""]


@settings(max_examples=60, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(DOCKER_OPTIONS), max_size=6), st.sampled_from(IMAGES),
       st.lists(st.one_of(st.sampled_from(ARGS), st.text(max_size=4)), max_size=8),
       st.booleans())
def test_fuzz_docker_commands(options: list[str], image: str, args: list[str],
                              sudo: bool) -> None:
    tokens = [*(["sudo"] if sudo else []), "docker", "run", *options, image, *args]
    tokens = [t.replace("\x00", "") for t in tokens]
    code, _out, err = _cli(["estimate", "--gpu", "H200", "--", *tokens])
    assert code in (0, 1, 2), err
    assert "Traceback" not in err
    if code == 2:
        lines = err.strip("\n").split("\n")
        assert lines[-2].startswith("error:") and lines[-1].startswith("hint:"), err
        assert sum(x.startswith("error:") for x in lines) == 1, err
    # the same command quoted in a log, over continuation lines: read, or refused as BadInput
    text = " \\\n  ".join(shlex.quote(t) for t in tokens) + "\n" + LOAD_902
    with contextlib.suppress(BadInput):
        parse_log(text)


NUMBERS = st.one_of(st.integers(0, 600).map(lambda n: "9" * max(n, 1)),
                    st.sampled_from(["0", "0.00", "1e400", "nan", "95.01", "1,024.5", "-3",
                                     "12." + "5" * 50]))


@settings(max_examples=80, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(NUMBERS, NUMBERS, st.booleans())
def test_fuzz_free_memory_line(free: str, total: str, newer: bool) -> None:
    """The "Free memory on device (X/Y GiB)" line with extreme numbers: read, skipped, or
    refused as BadInput; explain on it exits 0, 1 or 2 (one error: and one hint: line)."""
    tail = (". Desired GPU memory utilization is (0.9, 85.51 GiB)." if newer else
            " is less than desired GPU memory utilization (0.92, 21.67 GiB).")
    text = f"INFO [gpu_worker.py:789] Free memory on device ({free}/{total} GiB) on startup{tail}"
    got = None
    with contextlib.suppress(BadInput):
        got = parse_log(text).get("total_gpu_bytes")
    assert got is None or 0 <= got <= 1 << 50
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "free.log"
        path.write_text(text, encoding="utf-8")
        code, _out, err = _cli(["explain", str(path), "-m", "qwen3-0.6b", "-f", "json"])
    assert code in (0, 1, 2), err
    assert "Traceback" not in err
    if code == 2:
        lines = err.strip("\n").split("\n")
        assert lines[-2].startswith("error:") and lines[-1].startswith("hint:"), err



def test_the_description_names_the_image_release() -> None:
    """The release the image's tag names is said as such, apart from the flag table's release."""
    from memprof.probes.serve_command import parse_tokens

    cmd = parse_tokens(["docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.10.1",
                        "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"])
    first = cmd.describe()[0]
    assert first.startswith("read as vLLM (release 0.10.1 from the image's tag; flags as vLLM ")
    plain = parse_tokens(["vllm", "serve", "m", "--max-model-len", "8192"]).describe()[0]
    assert "image" not in plain
