"""``memprof explain`` rebuilds a log at the release it names: dev, release-candidate and vendor
builds mapped to the nearest modelled release (``memprof.core.release_names``), V0 logs of
0.8.0 – 0.10.2 with V0's rules, and the V0 lines, ``args: Namespace(…)`` and ``VLLM_USE_V1=0``
read (``memprof.probes.startup_log``, ``memprof.probes.serve_command``).

The log lines below are written in the format strings of the vLLM release each test names
(worker.py ``determine_num_available_blocks``, executor_base.py ``initialize_cache``,
api_server.py ``run_server``'s "args: Namespace(…)" / arg_utils "non-default args"); their
figures are made up for the parser, not measurements."""

from __future__ import annotations

import pytest

from memprof.base.units import GiB
from memprof.core.release_names import map_release
from memprof.probes.log_deployment import rebuild
from memprof.probes.startup_log import parse_log

V0_085 = """\
INFO 05-01 10:00:01 [api_server.py:1043] vLLM API server version 0.8.5.post1+cu124
INFO 05-01 10:00:01 [api_server.py:1044] args: Namespace(subparser='serve', model_tag='x', \
host=None, port=8000, model='meta-llama/Llama-3.1-8B', tensor_parallel_size=1, \
pipeline_parallel_size=1, max_model_len=16384, gpu_memory_utilization=0.85, max_num_seqs=None, \
enforce_eager=False, kv_cache_dtype='auto', dtype='auto', quantization=None, block_size=None)
INFO 05-01 10:00:20 [worker.py:267] Memory profiling takes 3.10 seconds
INFO 05-01 10:00:20 [worker.py:267] the current vLLM instance can use total_gpu_memory \
(79.18GiB) x gpu_memory_utilization (0.85) = 67.30GiB
INFO 05-01 10:00:20 [worker.py:267] model weights take 14.99GiB; non_torch_memory takes 0.15GiB; \
PyTorch activation peak memory takes 1.21GiB; the rest of the memory reserved for KV Cache is \
50.95GiB.
INFO 05-01 10:00:21 [executor_base.py:112] # cuda blocks: 26086, # CPU blocks: 2048
INFO 05-01 10:00:21 [executor_base.py:117] Maximum concurrency for 16384 tokens per request: 25.47x
"""


def test_v0_lines_and_namespace_are_read() -> None:
    log = parse_log(V0_085)
    assert log.generation == "V0" and log.version == "0.8.5.post1+cu124"
    assert log.get("total_gpu_bytes") == round(79.18 * GiB)
    assert log.get("gpu_memory_utilization") == 0.85
    assert log.get("requested_bytes") == round(67.30 * GiB)
    assert log.get("num_gpu_blocks") == 26086 and log.get("num_cpu_blocks") == 2048
    assert log.model == "meta-llama/Llama-3.1-8B"
    assert log.settings["max_model_len"] == 16384 and log.settings["tp"] == 1
    assert "max_num_seqs" not in log.settings  # None in the Namespace: the engine's default


def test_v0_log_of_0_8_is_rebuilt_at_its_release_with_v0_rules() -> None:
    rb = rebuild(parse_log(V0_085), model="llama-3.1-8b", gpu=None, gpu_memory=None)
    assert rb.deployment.engine_version == "0.8.5.post1+v0"
    assert any("vendor build (+cu124)" in n for n in rb.notes)
    assert any("rebuilt with V0's rules" in n for n in rb.notes)


def test_an_override_wins_over_the_logged_release() -> None:
    rb = rebuild(parse_log(V0_085), model="llama-3.1-8b", gpu=None, gpu_memory=None,
                 overrides={"engine_version": "0.7.3"})
    assert rb.deployment.engine_version == "0.7.3"


V1_0101 = """\
INFO 08-20 09:00:00 [api_server.py:1805] vLLM API server version 0.10.1
INFO 08-20 09:00:00 [utils.py:326] non-default args: {'model': 'Qwen/Qwen3-32B', \
'max_model_len': 32768, 'tensor_parallel_size': 2}
INFO 08-20 09:01:00 [gpu_worker.py:276] Available KV cache memory: 44.10 GiB
INFO 08-20 09:01:00 [kv_cache_utils.py:849] GPU KV cache size: 361,264 tokens
"""


def test_v1_log_is_rebuilt_at_its_release_not_the_newest() -> None:
    rb = rebuild(parse_log(V1_0101), model="qwen3-32b", gpu="H100", gpu_memory=None)
    assert rb.deployment.engine_version == "0.10.1"
    assert rb.deployment.tp == 2 and rb.deployment.max_model_len == 32768
    assert any("rebuilt at the release the log names (0.10.1)" in n for n in rb.notes)


def test_vllm_use_v1_0_in_a_logged_command() -> None:
    text = ("INFO 07-10 [api_server.py:1] vLLM API server version 0.9.2\n"
            "$ VLLM_USE_V1=0 vllm serve meta-llama/Llama-3.1-8B --max-model-len 10k\n")
    log = parse_log(text)
    assert log.generation == "V0"
    assert log.settings["vllm_use_v1"] == 0 and log.settings["max_model_len"] == 10_000
    rb = rebuild(log, model="llama-3.1-8b", gpu="H100", gpu_memory=None)
    assert rb.deployment.engine_version == "0.9.2+v0"


@pytest.mark.parametrize(("text", "release"), [
    ("0.7.4.dev12", "0.7.3"),            # 12 commits after v0.7.3 (setuptools-scm)
    ("0.9.1.dev30+g1a2b3c4", "0.9.0.1"),
    ("0.11.2rc1+rhai0", "0.11.2"),       # a candidate of 0.11.2, a vendor's build
    ("0.8.5.post1+cu124", "0.8.5.post1"),
    ("0.8.6", "0.8.5.post1"),            # not a release memprof models: the one before
    ("0.5.4", "0.6.0"), ("0.99.0", "0.33.0"),  # outside the range: the nearest end
    ("0.7.0+cu124", "0.7.0"),  # a CUDA-variant build of a modelled release
])
def test_dev_and_vendor_builds_map_to_the_nearest_release(text: str, release: str) -> None:
    m = map_release(text)
    assert m is not None and m.release == release and m.note and text in m.note


def test_a_modelled_release_maps_to_itself_without_a_note() -> None:
    assert map_release("0.10.1.1") == map_release("0.10.1.1")
    m = map_release("0.10.1.1")
    assert m is not None and (m.release, m.note) == ("0.10.1.1", None)
    assert map_release("nightly") is None
    dev = map_release("0.9.1.dev30+g1a2b3c4")
    assert dev is not None and dev.note is not None and "vendor" not in dev.note


def test_a_v0_engine_line_names_the_generation_and_release() -> None:
    # 0.8.3 llm_engine.py LLMEngine.__init__: "Initializing a V0 LLM engine (v0.8.3) with config"
    log = parse_log("INFO 04-11 12:37:49 [llm_engine.py:242] Initializing a V0 LLM engine "
                    "(v0.8.3) with config: model='Qwen/Qwen2.5-7B-Instruct', "
                    "tensor_parallel_size=1, max_seq_len=8192, kv_cache_dtype=auto\n")
    assert (log.generation, log.version) == ("V0", "0.8.3")
    assert log.settings["max_model_len"] == 8192
    rb = rebuild(log, model="qwen2.5-7b-instruct", gpu="A100-80GB", gpu_memory=None)
    assert rb.deployment.engine_version == "0.8.3+v0"


def test_explain_command_shows_the_release_it_rebuilt_at(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from memprof.cli import run

    log = tmp_path / "v0-0.8.5.log"
    log.write_text(V0_085, encoding="utf-8")
    assert run(["explain", str(log), "--model", "llama-3.1-8b", "--format", "json"]) in (0, 1)
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["deployment"]["engine_version"] == "0.8.5.post1+v0"
    assert doc["log"]["version"] == "0.8.5.post1+cu124" and doc["log"]["generation"] == "V0"
    keys = {f["key"]: f for f in doc["figures"]}
    assert keys["num_cpu_blocks"]["estimated"] is not None
    assert keys["requested_bytes"]["reproduced"]  # 0.85 × 79.18 GiB, as the log prints it


def _lora_log(engine_line: str) -> str:
    return f"""\
INFO 04-05 05:51:44 [api_server.py:981] vLLM API server version 0.8.2
INFO 04-05 05:51:44 [api_server.py:982] args: Namespace(host=None, port=8000, \
model='meta-llama/Llama-3.1-8B-Instruct', tensor_parallel_size=1, pipeline_parallel_size=1, \
max_model_len=8192, gpu_memory_utilization=0.9, max_num_seqs=None, enforce_eager=False, \
kv_cache_dtype='auto', dtype='auto', quantization=None, block_size=None, enable_lora=True, \
max_loras=2, max_lora_rank=16)
{engine_line}
"""


def test_a_v1_lora_log_of_0_8_2_is_rebuilt_under_vllm_use_v1() -> None:
    """0.8.0-0.8.2 run --enable-lora on V0 unless VLLM_USE_V1=1 (engine/arg_utils.py
    _is_v1_supported_oracle: _warn_or_fallback('LORA')): a log with V1 lines had it set."""
    v1 = _lora_log("INFO 04-05 05:52:01 [core.py:53] Initializing a V1 LLM engine (v0.8.2) "
                   "with config: model='meta-llama/Llama-3.1-8B-Instruct'")
    rb = rebuild(parse_log(v1), model="llama-3.1-8b", gpu="A100-40GB", gpu_memory=None)
    assert rb.deployment.vllm_use_v1 == 1 and rb.deployment.engine_version == "0.8.2"
    assert any("rebuilt with VLLM_USE_V1=1" in n for n in rb.notes)
    v0 = _lora_log("INFO 04-05 05:52:01 [llm_engine.py:241] Initializing a V0 LLM engine "
                   "(v0.8.2) with config: model='meta-llama/Llama-3.1-8B-Instruct'")
    rb = rebuild(parse_log(v0), model="llama-3.1-8b", gpu="A100-40GB", gpu_memory=None)
    assert rb.deployment.vllm_use_v1 is None
    assert rb.deployment.engine_version == "0.8.2+v0"
