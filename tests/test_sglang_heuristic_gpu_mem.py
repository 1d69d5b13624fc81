"""The GPU memory SGLang's start-up heuristics read (``SGLANG_HEURISTIC_GPU_MEM`` and
``heuristic_gpu_mem_mib`` in memprof/core/engines/sglang.py): nvidia-smi's memory.total
(``get_nvgpu_memory_capacity``, every release 0.4.3 - 0.5.9), which is torch's total plus the
driver's reservation (configs/gpus.json ``smi_total_mib``), so mem_fraction_static is the
fraction of the larger figure. Each expected fraction below is counted by hand from the release's
formula in server_args.py."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.engines.sglang import heuristic_gpu_mem_mib
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu


def _sgl(version: str, **kw: object) -> Deployment:
    return Deployment(engine="sglang", engine_version=version, **kw)  # type: ignore[arg-type]


def test_the_heuristics_read_nvidia_smis_total() -> None:
    assert heuristic_gpu_mem_mib(find_gpu("H200")) == (143_771.0, None)
    assert heuristic_gpu_mem_mib(find_gpu("RTX-4090")) == (24_564.0, None)
    # the catalog's torch totals are smaller by the driver's reservation
    assert find_gpu("H200").total_bytes // 2**20 == 143_155
    assert find_gpu("RTX-4090").total_bytes // 2**20 == 24_210


def test_below_35_gib_at_049() -> None:
    # sglang 0.4.9 server_args.py: reserved_mem = (2.8 + tp*pp/10) GiB below 35 GiB:
    # round((24564 - 2969.6) / 24564, 3) = round(0.87911, 3) = 0.879 on nvidia-smi's 24,564 MiB
    # (torch's 24,210 MiB would give round(0.87734, 3) = 0.877)
    e = estimate("llama-3.1-8b", _sgl("0.4.9"), gpu_name="RTX-4090")
    assert e.mem_fraction_static == pytest.approx(0.879)


def test_the_fraction_an_l40s_log_prints() -> None:
    # published.json row 404 (SGLang main of 2025-11-11, placed at 0.5.5): its ServerArgs line
    # prints mem_fraction_static=0.851 on an L40S whose nvidia-smi shows 46,068 MiB.
    # _handle_gpu_memory_settings, 35 - 60 GiB tier (chunk 4096, graph bs 32 at tp 1):
    # 512 + 1.5*4096 + 1/8*1024 + 2*32 = 6,848 MiB; round((46068 - 6848) / 46068, 3) =
    # round(0.85135, 3) = 0.851 (torch's 45,589 MiB: round(0.84979, 3) = 0.850)
    e = estimate("llama-3.1-8b", _sgl("0.5.5"), gpu_name="L40S")
    assert e.mem_fraction_static == pytest.approx(0.851)


def test_dp_attention_on_h200_at_the_newest_release() -> None:
    # _handle_gpu_memory_settings, H200 (90 - 160 GiB tier: chunk 8192, graph bs 512 at tp 8):
    # 512 + 1.5*8192 + 8/8*1024 + 2*512 + 3*512*8 + 1.5*512*8 = 33,280 MiB reserved;
    # round((143771 - 33280) / 143771, 3) = round(0.76852, 3) = 0.769 (torch's 143,155: 0.768)
    e = estimate("llama-3.1-70b", _sgl("main@d315eb7", tp=8, dp=8, enable_dp_attention=True),
                 gpu_name="H200")
    assert e.mem_fraction_static == pytest.approx(0.769)


def test_a_card_without_an_smi_reading_says_what_it_assumed() -> None:
    gib = 2**30
    e = estimate("llama-3.1-8b", _sgl("0.4.9"), gpu_memory_bytes=round(23.5 * gib),
                 gpu_arch="sm89")
    # torch's total, 24,064 MiB: round((24064 - 2969.6) / 24064, 3) = round(0.87660, 3)
    assert e.mem_fraction_static == pytest.approx(0.877)
    assert any("nvidia-smi's memory.total" in n and "24,064 MiB" in n for n in e.notes)
    # a catalog card keeps its reading and adds no such note
    e = estimate("llama-3.1-8b", _sgl("0.4.9"), gpu_name="RTX-4090")
    assert not any("nvidia-smi's memory.total" in n for n in e.notes)
