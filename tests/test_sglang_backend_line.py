"""``memprof explain`` reads the attention backend an SGLang log names (``memprof/probes/
sglang_log.py`` ``attention_backend_line``, ServerArgs' ``attention_backend``), so that the
rebuilt deployment runs the logged backend rather than memprof's default pick.

Each line is the f-string of the SGLang release the test names, as its source prints it, filled
in; the figures of the log are made up for the parser (row 403's lines, 0.4.9)."""

from __future__ import annotations

import pytest

from memprof.core.engines.sglang_attention import chosen_backend
from memprof.core.gpus import find_gpu
from memprof.core.models import load_model
from memprof.probes.log_deployment import rebuild
from memprof.probes.sglang_log import attention_backend_line, read_sglang
from memprof.probes.startup_log import parse_log

# (the f-string as the release's source has it, the release and file)
SOURCE_LINES = (
    # 0.4.9 model_executor/model_runner.py model_specific_adjustment
    'f"Attention backend not set. Use {server_args.attention_backend} backend by default."',
    # 0.5.5 server_args.py _handle_attention_backend
    'f"Attention backend not explicitly specified. Use {self.attention_backend} backend by '
    'default."',
    # 0.5.10 server_args.py; 0.5.19 arg_groups/overrides.py ("{backend}")
    'f"Attention backend not specified. Use {self.attention_backend} backend by default."',
    # 0.4.9 model_runner.py (MLA)
    'f"MLA optimization is turned on. Use {server_args.attention_backend} backend."',
    # 0.5.10 server_args.py; 0.5.19 arg_groups/model_hook.py ("{attention_backend}")
    'f"Using {self.attention_backend} as attention backend for {model_arch}."',
    # 0.5.10 server_args.py
    'f"Use {sm100_default_attention_backend} as attention backend on sm100 for {model_arch}"',
)


def _fill(source: str, backend: str) -> str:
    """The line the f-string prints with ``backend`` (and a model class for ``model_arch``)."""
    body = source[2:-1]
    for name in ("server_args.attention_backend", "self.attention_backend",
                 "sm100_default_attention_backend"):
        body = body.replace("{" + name + "}", backend)
    return "[2025-07-14 05:48:40] " + body.replace("{model_arch}", "Qwen3ForCausalLM")


@pytest.mark.parametrize("source", SOURCE_LINES)
@pytest.mark.parametrize("backend", ["triton", "fa3", "trtllm_mha"])
def test_each_source_lines_backend_is_read(source: str, backend: str) -> None:
    assert attention_backend_line(_fill(source, backend)) == backend


def test_the_dsa_line_names_nsa() -> None:
    # 0.5.10 server_args.py: logger.info("Use nsa attention backend for DeepSeek with DSA.")
    assert attention_backend_line("Use nsa attention backend for DeepSeek with DSA.") == "nsa"


def test_a_name_sglang_does_not_accept_or_another_line_is_not_read() -> None:
    magic = "Attention backend not set. Use magic backend by default."
    assert attention_backend_line(magic) is None
    assert attention_backend_line("Intel AMX attention backend is enabled.") is None


def test_server_args_none_is_filled_by_the_default_line() -> None:
    # 0.4.x prints ServerArgs before the model runner picks the default
    lines = ["server_args=ServerArgs(model_path='x', tp_size=1, attention_backend=None)",
             _fill(SOURCE_LINES[0], "triton")]
    settings, _ = read_sglang(lines, "sglang", {"engine_version": "0.4.9"})
    assert settings["attention_backend"] == "triton"


def test_server_args_backend_is_read() -> None:
    lines = ["server_args=ServerArgs(model_path='x', tp_size=1, attention_backend='fa3')"]
    settings, _ = read_sglang(lines, "sglang", {"engine_version": "0.5.10"})
    assert settings["attention_backend"] == "fa3"


def test_a_backend_given_on_the_command_is_kept() -> None:
    settings, _ = read_sglang([_fill(SOURCE_LINES[2], "fa3")], "sglang",
                              {"engine_version": "0.5.10", "attention_backend": "triton"})
    assert settings["attention_backend"] == "triton"


LOG_403 = """\
[2025-07-14 05:48:30] sglang==0.4.9
[2025-07-14 05:48:40] Attention backend not set. Use {backend} backend by default.
[2025-07-14 05:48:43] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail \
mem=7.37 GB, mem usage=15.02 GB.
[2025-07-14 05:48:43] KV Cache is allocated. #tokens: 38141, K size: 2.33 GB, V size: 2.33 GB
[2025-07-14 05:48:43] Memory pool end. avail mem=1.46 GB
[2025-07-14 05:48:44] Capture cuda graph begin. This can take up to several minutes. avail \
mem=0.93 GB
[2025-07-14 05:48:44] Capture cuda graph bs [1, 2, 4, 8]
[2025-07-14 05:49:02] Capture cuda graph end. Time elapsed: 18.07 s. mem usage=0.11 GB. avail \
mem=0.83 GB.
"""


@pytest.mark.parametrize("backend", ["triton", "flashinfer"])
def test_explain_rebuilds_with_the_logged_backend(backend: str) -> None:
    rb = rebuild(parse_log(LOG_403.format(backend=backend)), model="llama-3.1-8b",
                 gpu="RTX-4090", gpu_memory=None)
    assert rb.deployment.engine == "sglang"
    assert rb.deployment.attention_backend == backend
    got = chosen_backend(rb.deployment, find_gpu("RTX-4090"), load_model("llama-3.1-8b"))
    assert got == (backend, "--attention-backend")


def test_a_server_args_quote_that_elides_fields_keeps_the_backend() -> None:
    # published row 1455 quotes its ServerArgs line in part: "..., chunked_prefill_size=8192,
    # ... page_size=1, ... tp_size=1, ... attention_backend='triton', ...)"
    line = ("server_args=ServerArgs(model_path='x', chunked_prefill_size=8192, ... page_size=1, "
            "... tp_size=1, dcp_size=1, ... attention_backend='triton', ...)")
    settings, _ = read_sglang([line], "sglang", {"engine_version": "0.5.18"})
    assert settings["attention_backend"] == "triton"
    assert settings["tp"] == 1
