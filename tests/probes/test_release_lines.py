"""A vLLM log that names no release is placed by its ``[file.py:LINE]`` tags
(``memprof/probes/release_lines.py``, ``configs/vllm_log_lines.json``)."""

from __future__ import annotations

import json
from pathlib import Path

from memprof.core.releases import VLLM_RELEASES
from memprof.probes.log_deployment import rebuild
from memprof.probes.release_lines import consistent, tags
from memprof.probes.startup_log import parse_log

ROOT = Path(__file__).resolve().parents[2]
TABLE = json.loads((ROOT / "configs/vllm_log_lines.json").read_text(encoding="utf-8"))
ROWS = {r["id"]: r for r in json.loads(
    (ROOT / "tests/data/published.json").read_text(encoding="utf-8"))["rows"]}


def test_the_table_covers_every_modelled_release() -> None:
    assert TABLE["_missing"] == []
    assert list(TABLE["releases"]) == list(VLLM_RELEASES)


def test_tags_of_v1_and_v0_lines() -> None:
    lines = ["(EngineCore_DP0 pid=1) INFO 02-06 03:33:33 [gpu_worker.py:356] Available KV cache "
             "memory: 19.28 GiB",
             "INFO 04-07 11:35:02 model_runner.py:1115] Loading model weights took 14.9888 GB",
             "INFO 02-06 03:33:33 [core.py:96] Initializing a V1 LLM engine (v0.15.1)",
             "INFO [gpu_worker.py:356] Available KV cache memory: 19.28 GiB"]
    assert tags(lines) == (("gpu_worker.py", 356, "Available KV cache memory", True),
                           ("model_runner.py", 1115, "Loading model weights took", False))


def test_line_numbers_place_a_release() -> None:
    # row 302: utils.py:238, gpu_model_runner.py:4364, gpu_worker.py:424, kv_cache_utils.py:1314
    found = tags(ROWS[302]["quote"].splitlines())
    assert len(found) == 4
    assert consistent("vllm", found) == ["0.17.1"]  # 0.17.0 logs model loading at 4338
    assert consistent("vllm", (("gpu_worker.py", 1, "Available KV cache memory", True),)) == []
    assert consistent("sglang", found) is None  # no table: never placed this way
    assert consistent("vllm", ()) is None


def test_explain_rebuilds_at_the_placed_release() -> None:
    log = parse_log(ROWS[105]["quote"])
    assert log.version is None
    rb = rebuild(log, model="gpt-oss-120b", gpu="H100", gpu_memory=None)
    assert rb.deployment.engine_version == "0.11.0"
    assert any("logging lines of 0.11.0" in n for n in rb.notes), rb.notes


def test_a_v0_log_placed_at_a_v1_release_keeps_v0_rules() -> None:
    """Row 128: V0 lines (worker.py:294, executor_base.py:113) of 0.9.1 and 0.9.2, whose
    default engine is V1: rebuilt at the newer with V0's rules."""
    log = parse_log(ROWS[128]["quote"])
    assert consistent("vllm", log.tags) == ["0.9.1", "0.9.2"]
    rb = rebuild(log, model="qwen3-0.6b", gpu=None, gpu_memory=None)
    assert rb.deployment.engine_version == "0.9.2+v0"
    assert any("0.9.1 and 0.9.2: rebuilt at 0.9.2 (the newest of them)" in n
               for n in rb.notes), rb.notes


def test_a_patched_build_is_placed_nowhere() -> None:
    """Row 201's V0 budget line sits at worker.py:269, two lines below 0.7.2's and 0.7.3's
    logger.info(msg) (267): the dynamo-patched build the row's notes describe."""
    assert consistent("vllm", parse_log(ROWS[201]["quote"]).tags) == []


def test_tags_that_match_no_release_leave_the_default_and_say_so() -> None:
    log = parse_log("INFO 01-01 00:00:00 [gpu_worker.py:1] Available KV cache memory: 1.0 GiB\n"
                    "INFO [gpu_model_runner.py:2] Model loading took 1.0 GiB")
    rb = rebuild(log, model="llama-3.1-8b", gpu="H100", gpu_memory=None)
    assert rb.deployment.engine_version is None  # the estimate's default: the newest release
    assert any("match no release" in n for n in rb.notes), rb.notes
