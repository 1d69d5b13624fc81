"""A pasted serve command (or one read from a file) → the deployment it starts."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.probes.serve_command import parse_file, parse_text, parse_tokens
from memprof.probes.serve_flags import ENGINE_VERSION_ASSUMED

DATA = Path(__file__).resolve().parents[1] / "data" / "serve"


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


def test_vllm_serve_flags_applied_and_ignored() -> None:
    c = parse_tokens(shlex.split(
        "vllm serve Qwen/Qwen3-32B --tensor-parallel-size 2 --max-model-len 32k "
        "--gpu-memory-utilization=0.85 --kv_cache_dtype fp8 --enforce-eager --host 0.0.0.0 "
        "--port 8000 --trust-remote-code --cpu-offload-gb 4 --no-enable-prefix-caching"))
    assert c.engine == "vllm" and c.model == "Qwen/Qwen3-32B"
    # --no-enable-prefix-caching moves memory for hybrid models (vLLM's mamba_cache_mode):
    # applied, not ignored
    assert c.settings == {"tp": 2, "max_model_len": 32000, "gpu_memory_utilization": 0.85,
                          "kv_cache_dtype": "fp8", "enforce_eager": True,
                          "enable_prefix_caching": False}
    assert c.ignored == ("--host", "--port", "--trust-remote-code")
    assert [f for f, _ in c.not_modelled] == ["--cpu-offload-gb"]
    assert "32K" not in c.describe()[0]


def test_human_readable_ints_as_vllm_reads_them() -> None:
    assert parse_tokens(["vllm", "serve", "m", "--max-model-len", "32K"]).settings == {
        "max_model_len": 32768}
    assert parse_tokens(["vllm", "serve", "m", "--max-model-len", "1m"]).settings == {
        "max_model_len": 1_000_000}


def test_openai_api_server_and_sglang_launchers() -> None:
    c = parse_tokens(shlex.split("FOO=1 python3 -m vllm.entrypoints.openai.api_server "
                                 "--model deepseek-ai/DeepSeek-R1 -tp 8 -ep"))
    assert c.engine == "vllm" and c.model == "deepseek-ai/DeepSeek-R1"
    assert c.settings == {"tp": 8, "enable_expert_parallel": True}
    c = parse_tokens(shlex.split(
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 "
        "--enable-dp-attention --mem-fraction-static 0.8 --chunked-prefill-size -1 "
        "--context-length 65536 --max-running-requests 512 --page-size 64 --ep-size 8"))
    assert c.engine == "sglang"
    assert c.settings == {"tp": 8, "dp": 8, "enable_dp_attention": True,
                          "mem_fraction_static": 0.8, "chunked_prefill_size": -1,
                          "max_model_len": 65536, "max_num_seqs": 512, "block_size": 64,
                          "enable_expert_parallel": True}


def test_compilation_level_is_not_modelled() -> None:
    c = parse_tokens(["vllm", "serve", "m", "-O3", "-tp", "2"])
    assert c.settings == {"tp": 2} and [f for f, _ in c.not_modelled] == ["-O"]


def test_speculative_config_mtp() -> None:
    c = parse_tokens(["vllm", "serve", "deepseek-ai/DeepSeek-R1", "--speculative-config",
                      json.dumps({"method": "deepseek_mtp", "num_speculative_tokens": 2})])
    assert c.settings == {"num_speculative_tokens": 2}
    # a drafter without its token count: vLLM refuses it ('num_speculative_tokens must be
    # provided'), so does the paste
    with pytest.raises(BadInput, match="without num_speculative_tokens"):
        parse_tokens(["vllm", "serve", "x", "--speculative-config", '{"method": "eagle3"}'])


@pytest.mark.parametrize(("argv", "message"), [
    (["vllm", "serve", "m", "--tensor-parallel-sze", "2"], "unknown vLLM flag"),
    (["vllm", "serve", "m", "--mem-fraction-static", "0.8"], "unknown vLLM flag"),
    (["python", "-m", "sglang.launch_server", "--gpu-memory-utilization", "0.8"],
     "unknown SGLang flag"),
    (["vllm", "serve", "m", "--max-model-len"], "needs a value"),
    (["vllm", "serve", "m", "--max-model-len", "lots"], "bad value"),
    (["vllm", "serve", "m", "extra"], "unexpected argument"),
    (["docker", "run", "x"], "not a serve command"),
    (["vllm", "serve", "m", "--speculative-config", "{"], "not JSON"),
    (["vllm", "serve", "m", "--config", "c.yaml"], "YAML file"),
])
def test_bad_commands_are_one_error(argv: list[str], message: str) -> None:
    with pytest.raises(BadInput, match=message) as exc:
        parse_tokens(argv)
    if "unknown" in message:
        assert any(v in exc.value.message for v in ENGINE_VERSION_ASSUMED.values())


def test_files() -> None:
    c = parse_file(str(DATA / "serve.sh"))
    assert (c.engine, c.model) == ("vllm", "Qwen/Qwen3-32B")
    assert c.settings == {"tp": 2, "max_model_len": 32768, "gpu_memory_utilization": 0.9,
                          "kv_cache_dtype": "fp8", "enable_prefix_caching": True}
    c = parse_file(str(DATA / "docker-compose.yml"))  # image: vllm/vllm-openai:v0.11.0
    assert c.settings == {"tp": 2, "max_model_len": 32768, "max_num_seqs": 128,
                          "engine_version": "0.11.0"}
    assert c.image_release == "0.11.0"
    c = parse_file(str(DATA / "k8s.yaml"))
    assert (c.engine, c.model) == ("sglang", "deepseek-ai/DeepSeek-V3")
    assert c.settings == {"tp": 8, "dp": 8, "enable_dp_attention": True}
    c = parse_file(str(DATA / "k8s-shell.yaml"))
    assert c.settings == {"max_model_len": 16384, "enforce_eager": True}


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="does not exist"):
        parse_file(str(tmp_path / "missing.sh"))
    with pytest.raises(BadInput, match="no serve command"):
        parse_text("echo hello\n")
    with pytest.raises(BadInput, match="not set in the file"):
        parse_text("vllm serve $MODEL\n")
    with pytest.raises(BadInput, match="not valid YAML"):
        parse_text("services: [\n", yaml_hint=True)
    with pytest.raises(BadInput, match="no container or service"):
        parse_text("services:\n  db:\n    image: postgres\n")


def test_launch_environment_applied_or_stated_not_modelled() -> None:
    """VLLM_ATTENTION_BACKEND sets the backend as --attention-backend does; VLLM_BATCH_INVARIANT,
    which memprof has no model of, is stated as not modelled when on and dropped when off; so is
    PYTORCH_CUDA_ALLOC_CONF under SGLang, whose model load memprof replays under the defaults."""
    c = parse_tokens(shlex.split("VLLM_ATTENTION_BACKEND=FLASHINFER VLLM_BATCH_INVARIANT=1 "
                                 "vllm serve Qwen/Qwen3-8B -tp 2"))
    assert c.settings == {"attention_backend": "FLASHINFER", "tp": 2}
    assert [f for f, _ in c.not_modelled] == ["VLLM_BATCH_INVARIANT=1"]
    assert any("not modelled" in line and "VLLM_BATCH_INVARIANT=1" in line
               for line in c.describe())
    off = parse_tokens(shlex.split("VLLM_BATCH_INVARIANT=0 vllm serve Qwen/Qwen3-8B"))
    assert not off.not_modelled and off.settings == {}
    docker = parse_tokens(shlex.split("docker run --gpus all -e VLLM_BATCH_INVARIANT=1 "
                                      "vllm/vllm-openai:v0.30.0 Qwen/Qwen3-8B"))
    assert "VLLM_BATCH_INVARIANT=1" in [f for f, _ in docker.not_modelled]
    sglang = parse_tokens(shlex.split("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                                      "python -m sglang.launch_server --model-path "
                                      "Qwen/Qwen3-8B"))
    assert sglang.settings == {}
    assert [f for f, _ in sglang.not_modelled] == [
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]
    code, out, err = invoke(["estimate", "--gpu", "H100", "--", "VLLM_ATTENTION_BACKEND=NOPE",
                             "vllm", "serve", "Qwen/Qwen3-8B"])
    assert code != 0 and not out and "error: unknown --attention-backend 'NOPE'" in err


def test_estimate_with_a_pasted_command() -> None:
    code, out, err = invoke(["estimate", "--gpu", "H200", "-f", "json", "--", "vllm", "serve",
                             "Qwen/Qwen3-32B", "--tensor-parallel-size", "2",
                             "--max-model-len", "32768", "--port", "8000"])
    assert code == 0, err
    d = json.loads(out)
    assert d["model"]["name"] == "qwen3-32b"
    assert d["deployment"]["tensor_parallel_size"] == 2
    assert d["deployment"]["max_model_len"] == 32768
    assert "ignored (no effect on GPU memory): --port" in err
    # the same deployment as memprof's own flags give
    _, out2, _ = invoke(["estimate", "--gpu", "H200", "-f", "json", "-m", "qwen3-32b",
                             "-tp", "2", "--max-model-len", "32768"])
    assert json.loads(out2)["summary"] == d["summary"]


def test_estimate_from_file_and_conflicts() -> None:
    code, out, err = invoke(["estimate", "--gpu", "H200", "-f", "json", "--from-file",
                             str(DATA / "k8s.yaml")])
    assert code in (0, 1), err
    assert json.loads(out)["deployment"]["engine"] == "sglang"
    code, _, err = invoke(["estimate", "-tp", "4", "--", "vllm", "serve", "Qwen/Qwen3-32B",
                           "-tp", "2"])
    assert code == 2 and err.startswith("error: --tensor-parallel-size is 2")
    code, _, err = invoke(["estimate", "--from-file", "x.sh", "--", "vllm", "serve", "m"])
    assert code == 2 and "both" in err


FUZZ = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
WORDS = st.sampled_from(["vllm", "serve", "python", "-m", "sglang.launch_server", "--tp", "-tp",
                         "--max-model-len", "32k", "--port", "8000", "--no-enforce-eager",
                         "--enforce-eager=1", "--kv-cache-dtype", "fp8", "-1", "--",
                         "--speculative-config", "{}", "=", "--model", "&&", "--dp-size"])


@FUZZ
@given(st.lists(st.one_of(WORDS, st.text(max_size=12)), max_size=14))
def test_fuzz_parser_never_crashes(tokens: list[str]) -> None:
    for engine in (None, "vllm", "sglang"):
        try:
            parse_tokens(tokens, engine=engine)
        except BadInput as exc:
            assert "\n" not in exc.message and exc.hint


@FUZZ
@given(st.text(max_size=200))
def test_fuzz_files_never_crash(text: str) -> None:
    for yaml_hint in (False, True):
        with contextlib.suppress(BadInput):
            parse_text(text, yaml_hint=yaml_hint)


@FUZZ
@given(st.lists(st.one_of(WORDS, st.text(max_size=8)), max_size=10))
def test_fuzz_pasted_command_cli_contract(tokens: list[str]) -> None:
    code, _, err = invoke(["estimate", "-f", "json", "--", "vllm", "serve", "qwen3-0.6b",
                             *tokens])
    assert code in (0, 1, 2), err
    assert "Traceback" not in err and "internal error" not in err
    if code == 2:
        lines = [x for x in err.strip().splitlines() if x.startswith(("error:", "hint:"))]
        assert len(lines) == 2
