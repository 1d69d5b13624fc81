"""vLLM's batch defaults on a card whose NVML has no memory query (GB10): the memory tiers of
0.8.5 – 0.32.x read the total through ``nvmlDeviceGetMemoryInfo``, which raises there, and
``get_batch_defaults`` falls back to ``device_memory = 0`` — the small tier
(``NVML_TOTAL_UNCAUGHT`` in memprof/core/engines/vllm.py).

The calibration case is published row 503 (NVIDIA's vLLM 0.13.0 build, gpt-oss-20b on a GB10):
the log prints "Chunked prefill is enabled with max_num_batched_tokens=2048" where the 70 GiB
tier would give 8192."""

from __future__ import annotations

from dataclasses import replace

from memprof.core.engines.vllm import NVML_TOTAL_UNCAUGHT, batch_default
from memprof.core.gpus import resolve_gpu
from memprof.core.versions import value_at


def test_the_catalog_says_nvml_has_no_memory_query_on_gb10_only() -> None:
    gb10 = resolve_gpu("GB10", None)
    assert gb10.nvml_memory_info is False
    assert resolve_gpu("H100", None).nvml_memory_info is True
    assert resolve_gpu("A100-80GB", None).nvml_memory_info is True


def test_gb10_takes_the_small_tier_while_nvml_is_read_uncaught() -> None:
    gb10 = resolve_gpu("GB10", None)
    assert gb10.total_bytes >= 70 * 2**30  # the memory alone would give the large tier
    for v in ("0.10.1.1", "0.13.0", "0.19.0", "0.25.0", "0.32.0"):
        d = batch_default(gb10, v, "serve")
        assert (d.tokens, d.seqs) == (2048, 256), v
        assert "NVML" in d.why
        llm = batch_default(gb10, v, "llm")
        assert llm.tokens == 8192, v
    # 0.33.0 catches the NVML error; its own GB10 rule keeps the small tier
    d = batch_default(gb10, "0.33.0", "serve")
    assert (d.tokens, d.seqs) == (2048, 256)
    assert "12.1" in d.why


def test_the_same_memory_with_nvml_stays_large() -> None:
    gb10 = resolve_gpu("GB10", None)
    discrete = replace(gb10, nvml_memory_info=True, arch="sm90", compute_capability="9.0")
    d = batch_default(discrete, "0.13.0", "serve")
    assert (d.tokens, d.seqs) == (8192, 1024)


def test_rule_span() -> None:
    assert value_at(NVML_TOTAL_UNCAUGHT, "0.8.4", False) is False  # name-based tiers then
    assert value_at(NVML_TOTAL_UNCAUGHT, "0.8.5", False) is True
    assert value_at(NVML_TOTAL_UNCAUGHT, "0.32.0", False) is True
    assert value_at(NVML_TOTAL_UNCAUGHT, "0.33.0", False) is False
