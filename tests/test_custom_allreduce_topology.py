"""vLLM's custom all-reduce above two ranks needs every GPU pair on NVLink (or an xGMI mesh):
``CustomAllreduce.__init__`` (vllm/distributed/device_communicators/custom_all_reduce.py) turns
it off on "more than two PCIe-only GPUs". The GPU row's ``fully_connected`` carries that fact."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import resolve_gpu
from memprof.core.terms.custom_allreduce import custom_all_reduce_applies


def _has_custom_ar_row(gpu: str, tp: int) -> bool:
    e = estimate("qwen3-32b", Deployment(tp=tp), gpu_name=gpu)
    return any(c.name.startswith("custom all-reduce") for c in e.ranks[0].components)


@pytest.mark.parametrize(("gpu", "tp", "applies"), [
    ("H100", 2, True), ("H100", 4, True), ("H100", 8, True),
    ("L40S", 2, True),   # PCIe with peer access: two ranks are enough
    ("L40S", 4, False),  # more than two PCIe-only GPUs
    ("A100-PCIe-80GB", 4, False),
    ("RTX-4090", 2, False),  # no peer access at all
    ("H100", 3, False),  # not a supported world size (2, 4, 6, 8)
])
def test_custom_all_reduce_by_topology(gpu: str, tp: int, applies: bool) -> None:
    assert custom_all_reduce_applies(Deployment(tp=tp), resolve_gpu(gpu, None)) is applies


def test_the_estimate_follows_it() -> None:
    assert _has_custom_ar_row("H100", 4)
    assert not _has_custom_ar_row("L40S", 4)
    assert _has_custom_ar_row("L40S", 2)


def test_only_nvlink_or_xgmi_meshes_are_fully_connected() -> None:
    for name in ("H100", "H200", "B200", "A100-80GB", "MI300X"):
        assert resolve_gpu(name, None).fully_connected, name
    for name in ("L40S", "L4", "A10G", "RTX-4090", "H100-PCIe", "H100-NVL", "V100-32GB"):
        assert not resolve_gpu(name, None).fully_connected, name
