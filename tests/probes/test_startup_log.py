"""Start-up logs → figures: every log row of published.json reads back as its source quotes it."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.probes.startup_log import parse_log

ROOT = Path(__file__).resolve().parents[2]
ROWS = {r["id"]: r for r in json.loads(
    (ROOT / "tests/data/published.json").read_text(encoding="utf-8"))["rows"]}
GIB = 1 << 30

# published.json row → {observed key: figure key}. The other rows quote no log line (a PR's
# summary, a table of results, a title): 1, 2, 3, 20, 25, 26.
LOG_ROWS: dict[int, dict[str, str]] = {
    4: {"oom_tried_alloc_gib": "oom_tried_bytes", "free_gib_at_oom": "oom_free_bytes"},
    8: {"weights_gb": "weights_bytes", "non_torch_gib": "non_torch_bytes",
        "peak_torch_gib": "peak_torch_bytes", "kv_cache_gib": "available_kv_bytes",
        "num_gpu_blocks": "num_gpu_blocks", "max_concurrency_x": "max_concurrency"},
    9: {"kv_tokens_before_fix": "kv_tokens"},
    12: {"kv_tokens": "kv_tokens", "kv_cache_gb": "kv_cache_bytes",
         "avail_mem_after_pool_gb": "avail_after_pool_bytes"},
    13: {"kv_tokens": "kv_tokens", "kv_cache_gb_logged": "kv_cache_bytes",
         "avail_mem_after_pool_gb": "avail_after_pool_bytes"},
    17: {"weights_gb": "weights_bytes", "avail_after_load_gb": "avail_after_load_bytes"},
    32: {"kv_cache_gib": "available_kv_bytes", "kv_tokens": "kv_tokens"},
    33: {"kv_tokens": "kv_tokens", "k_size_gb": "k_bytes", "v_size_gb": "v_bytes"},
    46: {"num_gpu_blocks": "num_gpu_blocks"},
    48: {"weights_gb": "weights_bytes", "non_torch_gib": "non_torch_gib",
         "activation_peak_gib": "activation_peak_bytes", "kv_cache_gib": "available_kv_bytes",
         "kv_tokens": "kv_tokens"},
}
LOG_ROWS[48]["non_torch_gib"] = "non_torch_bytes"


def test_every_row_is_classified() -> None:
    # rows 1-48: read back figure by figure below; rows 101 on (the calibration set's later
    # rows, compared by tests/test_published_distribution.py) must parse or be refused as input
    assert {r for r in ROWS if r < 100} - set(LOG_ROWS) == {1, 2, 3, 20, 25, 26}
    for row in (r for r in ROWS if r > 100):
        with contextlib.suppress(BadInput):
            parse_log(ROWS[row]["quote"])


@pytest.mark.parametrize("row", sorted(LOG_ROWS))
def test_published_log_rows_read_back(row: int) -> None:
    r = ROWS[row]
    log = parse_log(r["quote"])
    for observed, key in LOG_ROWS[row].items():
        want = r["observed"][observed]
        got = log.figures[key].value
        if key.endswith("_bytes"):
            assert got / GIB == pytest.approx(want, abs=5e-5), (row, key)
        else:
            assert got == want, (row, key)
    assert log.engine == r["engine"]
    if row in (4, 48, 17):
        assert log.failed


def test_engine_generation_and_settings() -> None:
    assert parse_log(ROWS[8]["quote"]).generation == "V0"
    assert parse_log(ROWS[9]["quote"]).generation == "V1"
    log = parse_log(ROWS[4]["quote"])
    assert log.model == "nvidia/DeepSeek-R1-0528-NVFP4"
    assert log.settings == {"kv_cache_dtype": "fp8", "tp": 1, "dp": 4, "max_num_seqs": 1024,
                            "max_model_len": 10240, "gpu_memory_utilization": 0.9,
                            "max_num_batched_tokens": 8192, "enable_expert_parallel": True}
    log = parse_log(ROWS[12]["quote"])
    # the release: the newest SGLang built by the log's date, 2025-10-07 (probes/sglang_log.py)
    assert log.settings == {"tp": 8, "dp": 8, "enable_dp_attention": True,
                            "engine_version": "0.5.3"}
    assert "v_bytes" not in log.figures  # "KV size" is not "V size"


def test_v1_lines_and_config_line() -> None:
    text = "\n".join([
        "INFO 11-02 10:00:01 [api_server.py:1] vLLM API server version 0.11.0",
        "INFO 11-02 10:00:01 [utils.py:1] non-default args: {'model': 'Qwen/Qwen3-32B', "
        "'tensor_parallel_size': 2, 'max_model_len': 32768, 'enforce_eager': True}",
        "(EngineCore_DP0 pid=1) INFO [gpu_model_runner.py:2] Model loading took 30.5123 GiB "
        "and 12.1 seconds",
        "(EngineCore_DP0 pid=1) INFO [gpu_worker.py:3] Available KV cache memory: 95.12 GiB",
        "(EngineCore_DP0 pid=1) INFO [kv_cache_utils.py:4] GPU KV cache size: 779,264 tokens",
        "(EngineCore_DP0 pid=1) INFO [kv_cache_utils.py:5] Maximum concurrency for 32,768 "
        "tokens per request: 23.78x",
    ])
    log = parse_log(text)
    assert (log.engine, log.generation, log.version) == ("vllm", "V1", "0.11.0")
    assert log.model == "Qwen/Qwen3-32B"
    assert log.settings == {"tp": 2, "max_model_len": 32768, "enforce_eager": True}
    assert log.figures["weights_bytes"].value == round(30.5123 * GIB)
    assert log.figures["kv_tokens"].value == 779_264
    assert log.figures["concurrency_tokens"].value == 32_768


def test_nothing_to_read() -> None:
    with pytest.raises(BadInput, match="no figure"):
        parse_log("hello\nworld\n")


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(
    st.sampled_from([q for r in ROWS.values() for q in r["quote"].splitlines()]),
    st.text(max_size=80)), max_size=8))
def test_fuzz_log_reader(lines: list[str]) -> None:
    try:
        log = parse_log("\n".join(lines))
    except BadInput as exc:
        assert exc.hint and "\n" not in exc.message
        return
    for f in log.figures.values():
        assert f.value == f.value  # not NaN
