"""The log lines ``memprof explain`` learnt to read for issue 26 (see
tests/test_explain_calibration.py): V0's "model weights take" budget line, PEP 440 release
names, vLLM's lines that print a setting in effect, shell-continued commands, one-setting lines
(``LLM(...)`` keywords, a JSON recipe), and a logged GPU total that is a catalog card's,
printed to 0.01 GiB."""

from __future__ import annotations

import pytest

from memprof.core.gpus import resolve_gpu
from memprof.probes.log_deployment import log_gpu
from memprof.probes.startup_log import parse_log

GIB = 1 << 30


def test_v0_budget_line_gives_the_weights() -> None:
    log = parse_log("INFO 03-21 02:38:51 worker.py:269] model weights take 14.99GiB; "
                    "non_torch_memory takes 0.06GiB; PyTorch activation peak memory takes "
                    "1.70GiB; the rest of the memory reserved for KV Cache is 4.47GiB.")
    assert log.get("weights_bytes") == round(14.99 * GIB)
    assert log.get("available_kv_bytes") == round(4.47 * GIB)


@pytest.mark.parametrize(("text", "version"), [
    ("vLLM 0.8.5.post1 · transformers 4.51.3", "0.8.5.post1"),
    ("pip install vllm==0.7.4.dev12 ok", "0.7.4.dev12"),
    ("vllm 0.11.2rc1+rhai0 image", "0.11.2rc1+rhai0"),
    ("vllm 0.9.2, then", "0.9.2"),
])
def test_release_names_keep_their_suffix(text: str, version: str) -> None:
    log = parse_log(text + "\nINFO [gpu_model_runner.py:1] Model loading took 1.0 GiB")
    assert log.version == version


def test_settings_printed_in_effect() -> None:
    log = parse_log("INFO 02-06 03:33:17 [model.py:1561] Using max model len 131072\n"
                    "INFO 02-06 03:33:17 [scheduler.py:226] Chunked prefill is enabled with "
                    "max_num_batched_tokens=8192.\n"
                    "INFO [gpu_model_runner.py:1] Model loading took 14.99 GiB")
    assert log.settings["max_model_len"] == 131072
    assert log.settings["max_num_batched_tokens"] == 8192


def test_a_command_line_beats_the_line_in_effect() -> None:
    log = parse_log("vllm serve m --max-num-batched-tokens 2048\n"
                    "INFO Chunked prefill is enabled with max_num_batched_tokens=8192.\n"
                    "INFO Model loading took 1.0 GiB")
    assert log.settings["max_num_batched_tokens"] == 2048


def test_shell_continued_command() -> None:
    log = parse_log("vllm serve Qwen/Qwen3-VL-30B-A3B-Instruct \\\n"
                    "  --tensor-parallel-size 2 \\\n"
                    "  --gpu-memory-utilization 0.92 \\\n"
                    "  --max-model-len 32768 \\\n"
                    "(APIServer pid=1) INFO: 200 OK --max-num-seqs 7\n")
    assert log.settings["tp"] == 2
    assert log.settings["gpu_memory_utilization"] == 0.92
    assert log.settings["max_model_len"] == 32768
    assert "max_num_seqs" not in log.settings  # the continuation ended at the log line


def test_keyword_lines_of_a_python_call_and_a_json_recipe() -> None:
    log = parse_log('llm = LLM(\n    model="m",\n    tensor_parallel_size=2,\n'
                    '    max_model_len=30_000,\n    kv_cache_dtype="fp8",\n'
                    '    enable_expert_parallel=True,\n)\n'
                    '{\n  "max_num_seqs": 256,\n  "gpu_memory_utilization": 0.90\n}\n'
                    "INFO Model loading took 1.0 GiB")
    assert log.settings == {"entrypoint": "llm", "tp": 2, "max_model_len": 30000,
                            "kv_cache_dtype": "fp8", "enable_expert_parallel": True,
                            "max_num_seqs": 256,
                            "gpu_memory_utilization": 0.9}


def test_a_word_that_is_no_setting_is_not_read() -> None:
    log = parse_log("tp=2\nport: 8000\nINFO Model loading took 1.0 GiB")
    assert log.settings == {}


def test_a_logged_total_that_prints_as_a_catalog_card_is_that_card() -> None:
    nvl = resolve_gpu("H100-NVL", None)
    log = parse_log("INFO worker.py:269] the current vLLM instance can use total_gpu_memory "
                    "(93.10GiB) x gpu_memory_utilization (0.90) = 83.79GiB")
    g = log_gpu(log)
    assert g is not None and g.name == "H100-NVL" and g.total_bytes == nvl.total_bytes
    # 93.02 GiB is 0.08 GiB off: the same card by the 0.5% match, at the logged total
    off = log_gpu(parse_log("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                            "1.25 GiB. GPU 1 has a total capacity of 93.02 GiB of which 1.18 "
                            "GiB is free."))
    assert off is not None and off.name == "H100-NVL"
    assert off.total_bytes == round(93.02 * GIB) != nvl.total_bytes


def test_a_negative_kv_remainder_is_read_with_its_sign() -> None:
    v1 = parse_log("INFO 07-27 16:21:40 [gpu_worker.py:424] Available KV cache memory: -0.7 GiB")
    assert v1.get("available_kv_bytes") == -round(0.7 * GIB)
    v0 = parse_log("INFO worker.py:267] model weights take 5.20GiB; non_torch_memory takes "
                   "0.03GiB; PyTorch activation peak memory takes 1.42GiB; the rest of the "
                   "memory reserved for KV Cache is -1.05GiB.")
    assert v0.get("available_kv_bytes") == -round(1.05 * GIB)
    assert parse_log("Available KV cache memory: 1.71 GiB").get("available_kv_bytes") == round(
        1.71 * GIB)


@pytest.mark.parametrize(("text", "entrypoint"), [
    ("llm = LLM(model='m', max_model_len=4096)", "llm"),
    ("from vllm import LLM\nllm = vllm.LLM(\n    model='m',\n)", "llm"),
    ("vllm serve m --max-model-len 4096", None),
])
def test_the_python_entry_point(text: str, entrypoint: str | None) -> None:
    log = parse_log(text + "\nINFO Model loading took 1.0 GiB")
    assert log.settings.get("entrypoint") == entrypoint
