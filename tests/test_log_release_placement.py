"""A log that names no release, placed by its ``[file.py:LINE]`` tags where the tags fit a
release and its patch re-release alike (memprof/probes/log_deployment.py ``patch_base``): the
base release is taken and the note names both. The quote is published row 106's (vLLM issue
#23220's log: gpt-oss-120b on an H100 PCIe), whose tags are the lines of 0.10.1 and 0.10.1.1."""

from __future__ import annotations

from memprof.probes.log_deployment import patch_base, rebuild
from memprof.probes.release_lines import consistent
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
    assert any("0.10.1 and 0.10.1.1: rebuilt at 0.10.1" in n and "patch re-release 0.10.1.1"
               in n for n in rb.notes), rb.notes


def test_two_releases_are_still_placed_at_the_newer() -> None:
    """Row 107's line (0.14.0 and 0.14.1 log it there; 0.14.1 is a release of its own)."""
    log = parse_log("INFO 01-27 00:31:59 [gpu_model_runner.py:3905] Model loading took "
                    "64.38 GiB memory and 14.380607 seconds")
    assert consistent("vllm", log.tags) == ["0.14.0", "0.14.1"]
    rb = rebuild(log, model="qwen3-0.6b", gpu="H100", gpu_memory=None)
    assert rb.deployment.engine_version == "0.14.1"
