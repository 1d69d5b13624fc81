"""Platform figures by architecture (``memprof.core.gpus.PLATFORM_ROWS``): the CUDA context,
library modules and NCCL communicators are measured on Hopper only; an estimate on any other
architecture says whose figures it used, and one on Hopper says nothing."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import (
    PLATFORM_ROWS,
    catalog,
    find_gpu,
    measured_platform,
    platform_note,
    unlisted_gpu,
)
from memprof.core.terms.non_torch import CONTEXT_REST_BYTES, CUDA_CONTEXT_BYTES


def test_hopper_is_the_measured_row_and_its_sources_exist() -> None:
    from pathlib import Path

    row = PLATFORM_ROWS[0]
    assert row.archs == ("sm90",)
    root = Path(__file__).resolve().parent.parent
    for path in ("tests/data/measured_h100_overheads.json",
                 "reports/gpu/trace/context-probe-h200.json", "reports/gpu/nccl"):
        assert path in row.source and (root / path).exists(), path


def test_the_h200_probe_measures_the_context_memprof_charges() -> None:
    import json
    from pathlib import Path

    probe = json.loads((Path(__file__).resolve().parent.parent
                        / "reports/gpu/trace/context-probe-h200.json").read_text())
    first = next(s for s in probe["steps"] if s["after"] == "first tensor")
    assert first["used_bytes"] - first["reserved_bytes"] == CUDA_CONTEXT_BYTES


@pytest.mark.parametrize("name", ["H100", "H200", "H20", "GH200"])
def test_hopper_cards_carry_no_platform_note(name: str) -> None:
    assert platform_note(find_gpu(name)) is None


@pytest.mark.parametrize(("name", "arch"), [
    ("T4", "sm75"), ("V100-32GB", "sm70"), ("A100-80GB", "sm80"), ("L40S", "sm89"),
    ("B200", "sm100"), ("RTX-5090", "sm120")])
def test_unmeasured_cuda_archs_say_they_use_hoppers_figures(name: str, arch: str) -> None:
    g = find_gpu(name)
    assert g.arch == arch and measured_platform(arch) is None
    note = platform_note(g)
    assert note == (f"platform: CUDA context, cuBLAS/Triton modules and NCCL communicators: "
                    f"{arch}'s not measured; memprof uses sm90's (H100 SXM and H200) figures "
                    "where the card's own are not derived (the CUDA context and profile-run "
                    "rows say which parts are)")


@pytest.mark.parametrize("name", ["MI300X", "MI308X", "MI355X", "MI250X", "RX-7900-XTX"])
def test_rocm_cards_say_the_hip_context_and_rccl_are_hoppers(name: str) -> None:
    note = platform_note(find_gpu(name)) or ""
    assert note.startswith("platform: HIP context, hipBLAS/hipBLASLt/Triton modules and RCCL")
    assert "memprof uses sm90's" in note


def test_every_catalog_architecture_is_measured_or_noted() -> None:
    for g in catalog():
        assert (measured_platform(g.arch) is None) == (platform_note(g) is not None), g.name


def test_the_note_reaches_the_estimate_and_moves_no_figure() -> None:
    dep = Deployment(max_model_len=4096)
    a100 = estimate("qwen3-0.6b", dep, gpu_name="A100-80GB")
    assert platform_note(a100.gpu) in a100.notes
    h100 = estimate("qwen3-0.6b", dep, gpu_name="H100")
    assert not any(n.startswith("platform:") for n in h100.notes)
    ctx = [c.bytes for r in (a100, h100) for c in r.ranks[0].components
           if c.name == "CUDA context"]
    # the A100's context differs from the H100's by its own stack reservation only (108 SMs ×
    # 2048 threads × 1 KiB, ``memprof.core.terms.non_torch.cuda_context``), not by the note
    assert ctx == [CONTEXT_REST_BYTES + 108 * 2048 * 1024, CUDA_CONTEXT_BYTES]
    unknown = estimate("qwen3-0.6b", dep, gpu=unlisted_gpu(20 << 30))
    assert any("the unknown architecture's not measured" in n for n in unknown.notes)
