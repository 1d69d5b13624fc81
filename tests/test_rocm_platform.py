"""The ROCm platform rows (``memprof.core.terms.rocm_platform``): every ROCm card of the catalog is
covered, every non-torch component of a ROCm estimate belongs to a row and is tagged exactly
while its row is a stand-in, the cited row is what the estimate charges, and the published ROCm
reading (row 402, SGLang on MI300X) is what the log's figures say and bounds the stand-ins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.units import GiB, MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import catalog, find_gpu
from memprof.core.terms.rocm_platform import (
    ROCM_ARCHS,
    ROCM_READINGS,
    ROCM_TERMS,
    STAND_IN_TAG,
    rocm_term,
    stand_in_tag,
)
from tests.test_published_distribution import _run_args, row_estimate

ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).parent / "data" / "published.json").read_text())["rows"]}


def test_every_rocm_card_of_the_catalog_is_covered_by_every_row() -> None:
    rocm = {g.arch for g in catalog() if g.is_rocm}
    assert rocm and rocm <= set(ROCM_ARCHS)
    for row in ROCM_TERMS:
        assert set(row.archs) == set(ROCM_ARCHS), row.term
        assert row.status in ("cited", "stand-in") and row.source, row.term
        assert (row.status == "cited") == bool(row.charged_by), row.term


@pytest.mark.parametrize(("gpu", "tp"), [("MI300X", 2), ("MI355X", 4), ("MI210", 1),
                                         ("RX-7900-XTX", 1)])
def test_rocm_non_torch_components_belong_to_a_row_and_carry_its_tag(gpu: str, tp: int) -> None:
    est = estimate("qwen3-0.6b", Deployment(max_model_len=4096, tp=tp), gpu_name=gpu)
    comps = [c for c in est.ranks[0].components if c.category == "non_torch"]
    assert comps
    for c in comps:
        row = rocm_term(c.name)
        assert row is not None, c.name
        assert c.formula.endswith(STAND_IN_TAG) == (row.status == "stand-in"), c.name


def test_cuda_components_carry_no_rocm_tag() -> None:
    est = estimate("qwen3-0.6b", Deployment(max_model_len=4096, tp=2), gpu_name="H100")
    assert not any(STAND_IN_TAG in c.formula for c in est.ranks[0].components)
    assert stand_in_tag(find_gpu("H100")) == ""
    assert stand_in_tag(find_gpu("MI300X")) == STAND_IN_TAG
    # a cited row is never tagged, on ROCm either
    assert stand_in_tag(find_gpu("MI300X"), "cuBLAS workspace") == ""


@pytest.mark.parametrize(("gpu", "mib"), [("MI300X", 128), ("MI355X", 128), ("MI250X", 32)])
def test_the_cited_workspace_row_is_what_the_estimate_charges(gpu: str, mib: int) -> None:
    row = rocm_term("cuBLAS workspace")
    assert row is not None and row.status == "cited"
    est = estimate("qwen3-0.6b", Deployment(max_model_len=4096), gpu_name=gpu)
    ws = [c for c in est.ranks[0].components if c.name == "cuBLAS workspace"]
    assert ws and ws[0].bytes == mib * MiB


def test_the_mi300x_reading_is_what_row_402_logged() -> None:
    (reading,) = ROCM_READINGS
    row = ROWS[reading.row_id]
    assert row["gpu"] == reading.gpu and find_gpu(reading.gpu).arch == reading.arch
    assert row["memprof_engine_version"] == reading.release and row["engine"] == reading.engine
    obs = row["observed"]
    # free before the load = free after it + the load's own drop, both on the quoted line
    assert f"avail mem={obs['avail_mem_after_load_gb']} GB" in row["quote"]
    assert f"mem usage={obs['weights_gb']} GB" in row["quote"]
    free = obs["avail_mem_after_load_gb"] + obs["weights_gb"]
    assert reading.free_before_load_gib == pytest.approx(free)
    total = find_gpu(reading.gpu).total_bytes
    assert reading.total_gib == pytest.approx(total / GiB, abs=0.005)
    assert reading.before_load_bytes == pytest.approx(total - free * GiB, abs=0.01 * GiB)


def test_the_h100_stand_ins_fall_short_of_the_mi300x_reading() -> None:
    """The reading holds exactly the reading's terms (SGLang's before-load figure); their H100
    stand-ins (the CUDA context, the TP communicator at NCCL's cuMem off, as SGLang's launcher
    sets it, its warm-up's first kernel and custom all-reduce: SGLang 0.4.8.post1 builds no DP
    or MoE communicator) sum to 1.80 GiB against the 3.66 GiB read (1.45 GiB with the cuMem-on
    row, whose figure held the first kernel), and that
    shortfall is what the published-log harness charges to "memory in use by other processes"
    for row 402."""
    (reading,) = ROCM_READINGS
    model, dep, gpu, _ = _run_args(ROWS[reading.row_id])
    est = estimate(model, dep, gpu_name=gpu)
    before = [c for c in est.ranks[0].components if c.where == "baseline"]
    assert {rocm_term(c.name) for c in before} <= set(ROCM_TERMS)
    assert all(any(c.name.startswith(t) for t in reading.terms) for c in before)
    stand_ins = sum(c.bytes * c.count for c in before)
    gap = reading.before_load_bytes - stand_ins
    assert 1.8 * GiB < gap < 1.9 * GiB
    _, in_use = row_estimate(ROWS[reading.row_id])
    assert in_use == pytest.approx(gap, abs=0.01 * GiB)
