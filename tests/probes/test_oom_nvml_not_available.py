"""torch's OOM message under WSL 2 (or Windows' WDDM driver): NVML keeps no per-process figure
there and reports NVML_VALUE_NOT_AVAILABLE, (unsigned long long)-1, as the process's
usedGpuMemory; torch formats it as a size ("this process has 17179869184.00 GiB memory in use",
c10/cuda/CUDACachingAllocator.cpp reportProcessMemoryInfo). That is no figure: the rest of the
line (the total, the free memory) is still read, and a note says why the process's memory is
not."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.probes.startup_log import NVML_VALUE_NOT_AVAILABLE, parse_log

GIB = 1 << 30

# the line of published row 2472 (a WSL 2 start of vLLM 0.16.0 on a 6 GiB card), as logged
WSL_OOM = ("(EngineCore_DP0 pid=1462) ERROR 03-10 07:38:43 [gpu_model_runner.py:4219] Failed to "
           "load model - not enough GPU memory. Try lowering --gpu-memory-utilization to free "
           "memory for weights, increasing --tensor-parallel-size, or using --quantization. See "
           "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more tips. "
           "(original error: CUDA out of memory. Tried to allocate 260.00 MiB. GPU 0 has a total "
           "capacity of 6.00 GiB of which 0 bytes is free. Including non-PyTorch memory, this "
           "process has 17179869184.00 GiB memory in use. Of the allocated memory 12.43 GiB is "
           "allocated by PyTorch, ...)")


def test_torch_prints_the_sentinel_as_this_figure() -> None:
    """torch's format_size of 2^64 - 1 bytes: GiB to two places."""
    assert f"{NVML_VALUE_NOT_AVAILABLE / GIB:.2f}" == "17179869184.00"


def test_the_sentinel_is_no_figure_and_the_rest_is_read() -> None:
    log = parse_log(WSL_OOM)
    assert log.get("oom_process_bytes") is None
    assert log.get("oom_total_bytes") == 6 * GIB
    assert any("NVML's 'not available' value" in n for n in log.notes)


def test_a_figure_of_the_process_is_still_read() -> None:
    log = parse_log(WSL_OOM.replace("17179869184.00 GiB", "5.71 GiB"))
    assert log.get("oom_process_bytes") == round(5.71 * GIB)
    assert not any("NVML" in n for n in log.notes)


@pytest.mark.parametrize("figure", ["17179869185.00 GiB", "9999999999999.00 GiB"])
def test_another_absurd_figure_is_still_a_damaged_log(figure: str) -> None:
    with pytest.raises(BadInput, match="not a plausible figure"):
        parse_log(WSL_OOM.replace("17179869184.00 GiB", figure))
