"""Two forms of V0's start-up figures that ``memprof explain`` reads (``memprof/probes/
startup_log.py``):

- the multi-line "Memory profiling results:" report of PR #10511's branch of 2024-12-13
  (vllm/worker/worker.py, one "name    value" row a line; https://github.com/vllm-project/vllm/
  pull/10511, published rows 115 and 116), whose card total, utilisation, budget and KV figure
  explain now reads, so it no longer asks for ``--gpu``;
- "# GPU blocks: %d, # CPU blocks: %d" (0.6.4's executor/gpu_executor.py) as a paste that lost
  its leading "# " shows it (published row 101's quote), read only with the CPU count after it.
"""

from __future__ import annotations

import json
from pathlib import Path

from memprof.probes.log_deployment import log_gpu, rebuild
from memprof.probes.startup_log import parse_log

ROOT = Path(__file__).resolve().parents[2]
ROWS = {r["id"]: r for r in json.loads(
    (ROOT / "tests/data/published.json").read_text(encoding="utf-8"))["rows"]}
GiB = 1 << 30
HALF_CENT = GiB // 200  # half the 0.01 GiB the report rounds to


def _near(value: float | None, gib: float) -> bool:
    return value is not None and abs(value - gib * GiB) <= HALF_CENT


def test_the_branch_report_of_pr_10511() -> None:
    log = parse_log(ROWS[115]["quote"])
    assert _near(log.get("total_gpu_bytes"), 79.22)
    assert log.get("gpu_memory_utilization") == 0.90
    assert _near(log.get("requested_bytes"), 71.29)
    assert _near(log.get("available_kv_bytes"), 53.29)
    assert _near(log.get("weights_bytes"), 14.96)  # read before, as 0.6.5's one-line form
    gpu = log_gpu(log)
    assert gpu is not None and _near(gpu.total_bytes, 79.22)
    rb = rebuild(log, model="meta-llama-3-8b", gpu=None, gpu_memory=None)
    assert rb.deployment.gpu_memory_utilization == 0.90
    assert any("79.22 GiB as the log shows it" in n for n in rb.notes), rb.notes


def test_the_branch_report_at_tp2_has_no_kv_line() -> None:
    log = parse_log(ROWS[116]["quote"])  # the thread cuts it before available_kv_cache_memory
    assert _near(log.get("total_gpu_bytes"), 79.22)
    assert log.get("available_kv_bytes") is None
    assert log.settings.get("tp") == 2


def test_released_forms_read_as_before() -> None:
    one_line = ("INFO 01-16 09:40:00 worker.py:238] the current vLLM instance can use "
                "total_gpu_memory (79.22GiB) x gpu_memory_utilization (0.90) = 71.29GiB")
    log = parse_log(one_line)
    assert _near(log.get("total_gpu_bytes"), 79.22) and _near(log.get("requested_bytes"), 71.29)
    log = parse_log("Memory profiling results: total_gpu_memory=23.58GiB "
                    "initial_memory_usage=15.34GiB kv_cache_size=3.81GiB "
                    "gpu_memory_utilization=0.90")
    assert _near(log.get("total_gpu_bytes"), 23.58) and _near(log.get("available_kv_bytes"), 3.81)


def test_gpu_blocks_without_the_leading_hash() -> None:
    assert parse_log(ROWS[101]["quote"]).get("num_gpu_blocks") == 1952
    assert parse_log(ROWS[102]["quote"]).get("num_gpu_blocks") == 1478  # "# GPU blocks: 1478"
    tagged = "INFO 12-02 10:00:00 gpu_executor.py:76] GPU blocks: 5373, # CPU blocks: 606"
    assert parse_log(tagged).get("num_gpu_blocks") == 5373
    # without the CPU count after it, "GPU blocks:" is no line of the engine's: not read
    log = parse_log("Loading model weights took 14.9888 GB\nGPU blocks: 1952")
    assert log.get("num_gpu_blocks") is None
