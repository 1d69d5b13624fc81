"""A log that names no release, placed by its ``[file.py:LINE]`` tags: where the tags fit a
release and its patch re-release alike (memprof/probes/log_deployment.py ``patch_base``) the base
release is taken and the note names both (published row 106's quote, whose tags are the lines of
0.10.1 and 0.10.1.1); where they fit no release but lie between two consecutive releases' lines
(memprof/probes/release_lines.py ``between``), the build between them is rebuilt at the older
(published row 130), or at the newer where the older's model registry lacks the model's
architecture and the newer's has it (published row 131: gpt-oss, whose GptOssForCausalLM
0.10.1's registry has and 0.10.0's has not, configs/vllm_architectures.json)."""

from __future__ import annotations

from memprof.core.engines.vllm_registry import registered
from memprof.probes.log_deployment import patch_base, rebuild
from memprof.probes.release_lines import between, consistent
from memprof.probes.startup_log import parse_log

ROW_106 = """\
(EngineCore_0 pid=5839) INFO 08-20 18:04:10 [gpu_model_runner.py:2007] Model loading took 65.9651 GiB and 12.799889 seconds
(EngineCore_0 pid=5839) INFO 08-20 18:04:22 [gpu_worker.py:276] Available KV cache memory: -2.14 GiB
(EngineCore_0 pid=5839) ERROR 08-20 18:04:22 [core.py:700] EngineCore failed to start.
"""  # noqa: E501


def test_patch_base() -> None:
    assert patch_base("0.10.1.1", ["0.10.1", "0.10.1.1"]) == "0.10.1"
    assert patch_base("0.8.5.post1", ["0.8.5", "0.8.5.post1"]) == "0.8.5"
    assert patch_base("0.14.1", ["0.14.0", "0.14.1"]) is None  # a release of its own
    assert patch_base("0.10.1.1", ["0.10.1.1"]) is None
    assert patch_base("0.10.11", ["0.10.1"]) is None


def test_row_106_is_placed_at_the_base_release() -> None:
    log = parse_log(ROW_106)
    assert consistent("vllm", log.tags) == ["0.10.1", "0.10.1.1"]
    rb = rebuild(log, model="gpt-oss-120b", gpu="H100", gpu_memory=None)
    assert rb.deployment.engine_version == "0.10.1"
    # its stamps (08-20 18:04, 2025 by the span those releases were current in) precede
    # 0.10.1.1's upload (2025-08-20 23:17 UTC) in some time zone, so its date places it at
    # 0.10.1 (memprof/probes/log_dates.py among); an undated copy takes the base release by
    # patch_base (tests/test_log_dates.py)
    assert any("0.10.1 and 0.10.1.1;" in n and "2025-08-20" in n
               and n.endswith("rebuilt at 0.10.1") for n in rb.notes), rb.notes


def test_two_releases_are_still_placed_at_the_newer() -> None:
    """Row 107's line (0.14.0 and 0.14.1 log it there; 0.14.1 is a release of its own)."""
    log = parse_log("INFO 01-27 00:31:59 [gpu_model_runner.py:3905] Model loading took "
                    "64.38 GiB memory and 14.380607 seconds")
    assert consistent("vllm", log.tags) == ["0.14.0", "0.14.1"]
    rb = rebuild(log, model="qwen3-0.6b", gpu="H100", gpu_memory=None)
    assert rb.deployment.engine_version == "0.14.1"


ROW_131 = ("(EngineCore_0 pid=114) INFO 08-10 12:14:42 [gpu_model_runner.py:1962] "
           "Model loading took 12.8848 GiB and 3.081864 seconds")


def test_row_131_is_a_build_between_two_releases() -> None:
    """The gptoss image's "Model loading took" at gpu_model_runner.py:1962: 0.10.0 logs it at
    1892, 0.10.1 at 2007. 0.10.0 cannot load gpt-oss (its registry has no GptOssForCausalLM,
    0.10.1's has), so the build that ran it is rebuilt at 0.10.1."""
    log = parse_log(ROW_131)
    assert consistent("vllm", log.tags) == []
    assert between("vllm", log.tags) == ("0.10.0", "0.10.1")
    assert "GptOssForCausalLM" not in (registered("0.10.0") or ())
    assert "GptOssForCausalLM" in (registered("0.10.1") or ())
    rb = rebuild(log, model="gpt-oss-20b", gpu="RTX-3090", gpu_memory=None)
    assert rb.deployment.engine_version == "0.10.1"
    assert any("between 0.10.0's and 0.10.1's" in n and "rebuilt at 0.10.1" in n
               and "has no GptOssForCausalLM" in n for n in rb.notes), rb.notes


def test_a_model_the_older_release_loads_keeps_the_older() -> None:
    """The same line under a model both registries list: the build is rebuilt at 0.10.0, as a
    development build on the way to 0.10.1 is."""
    rb = rebuild(parse_log(ROW_131), model="qwen3-8b", gpu="RTX-3090", gpu_memory=None)
    assert rb.deployment.engine_version == "0.10.0"
    assert any("rebuilt at 0.10.0 (as a development build" in n for n in rb.notes), rb.notes


def test_row_130_tags_between_0_11_0_and_0_11_1() -> None:
    lines = ["(Worker_TP0 pid=26347) INFO 11-06 10:51:48 [gpu_worker.py:349] Available KV cache "
             "memory: 2.30 GiB",
             "(EngineCore_DP0 pid=26283) INFO 11-06 10:51:48 [kv_cache_utils.py:1229] GPU KV "
             "cache size: 75,840 tokens"]
    log = parse_log("\n".join(lines))
    assert consistent("vllm", log.tags) == []
    assert between("vllm", log.tags) == ("0.11.0", "0.11.1")


def test_lines_below_every_release_are_placed_nowhere() -> None:
    log = parse_log("INFO [gpu_worker.py:1] Available KV cache memory: 1.0 GiB")
    assert between("vllm", log.tags) is None
    assert between("sglang", log.tags) is None  # no table
    assert between("vllm", ()) is None
