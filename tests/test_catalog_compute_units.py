"""The compute-unit counts of the catalog cards that lacked one (issue 24): each against the line
its ``sm_source`` quotes, and what the two terms that read it derive from it on one new CUDA card
(B200) and one ROCm card (MI300X), by hand and on the published logs run on those cards.

``sm_count`` is torch's ``multi_processor_count``: SMs on NVIDIA; on ROCm HIP's
``multiProcessorCount``, the compute units of a CDNA part and the workgroup processors (two CUs
each) of an RDNA one. vLLM's ``num_compute_units`` returns it on both platforms
(vllm/platforms/cuda.py and rocm.py, 0.18.0 l.887-888 on ROCm), so it sizes the sampler's Triton
row buffer there too; the CUDA context's stack reservation (SMs × resident threads × 1 KiB) is
the CUDA driver's and stays off ROCm."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from memprof.core.estimate import estimate
from memprof.core.gpus import GPU, catalog, find_gpu
from memprof.core.terms.activation import sampler_triton_buffer_rows
from memprof.core.terms.non_torch import (
    CONTEXT_REST_BYTES,
    CUDA_CONTEXT_BYTES,
    MAX_THREADS_PER_SM,
    cuda_context,
)
from tests.test_published_distribution import _run_args, row_estimate

ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).parent / "data" / "published.json").read_text())["rows"]}

# card -> (count, the figure as the cited source prints it)
NEW_COUNTS = {
    "H20": (78, "multi_processor_count=78"),
    "H20-3e": (78, "H20-3e (78 SMs)"),
    "B200": (148, "Number of SMs: 148"),
    "GB200": (152, "NVIDIA GB200 (152 SMs"),
    "B300": (148, "B300 (148 SMs)"),
    "RTX-4060": (24, "(24) Multiprocessors, (128) CUDA Cores/MP: 3072 CUDA Cores"),
    "MI210": (104, "Compute Unit: 104"),
    "MI250X": (110, "multi_processor_count=110"),
    "MI300A": (228, "228 (38 per XCD)"),
    "MI300X": (304, "multi_processor_count=304"),
    "MI308X": (80, "the number of CUs is 80"),
    "MI325X": (304, "304 (38 per XCD)"),
    "MI355X": (256, "Compute Unit: 256"),
    "RX-7900-XTX": (48, "multi_processor_count=48"),
}


def _row(name: str) -> dict[str, object]:
    rows: list[dict[str, object]] = json.loads(
        (Path(__file__).parent.parent / "configs" / "gpus.json").read_text())["gpus"]
    return next(r for r in rows if r["name"] == name)


@pytest.mark.parametrize("name", sorted(NEW_COUNTS))
def test_each_new_count_is_the_figure_its_source_prints(name: str) -> None:
    count, printed = NEW_COUNTS[name]
    row = _row(name)
    assert find_gpu(name).sm_count == row["sm_count"] == count
    assert printed in str(row["sm_source"]), name
    assert "http" in str(row["sm_source"]) or "public GitHub" in str(row["sm_source"]), name


def test_every_catalog_row_states_its_count_and_cites_it() -> None:
    for g in catalog():
        assert g.sm_count and g.sm_count > 0, g.name
        assert str(_row(g.name).get("sm_source", "")).strip(), g.name


def test_the_derived_counts_agree_with_their_architecture() -> None:
    # RTX 4060: 3072 CUDA cores / 128 FP32 cores per Ada SM; MI250X: AMD's 220 CUs are two GCDs,
    # each its own device; RX 7900 XTX: HIP's WGP mode reports AMD's 96 CUs as 48 pairs
    assert find_gpu("RTX-4060").sm_count == 3072 // 128
    assert find_gpu("MI250X").sm_count == 220 // 2
    assert find_gpu("RX-7900-XTX").sm_count == 96 // 2
    # the GB200's GPU is not the HGX B200: 152 SMs against 148
    assert (find_gpu("GB200").sm_count, find_gpu("B200").sm_count) == (152, 148)


def test_the_new_cuda_cards_need_no_new_thread_limit() -> None:
    """Every new CUDA count lands on an architecture whose max resident threads per SM are
    known (CUDA C++ Programming Guide; the B200's device query prints 'Max Threads per SM:
    2048'), so each gets its own stack reservation."""
    for name in ("H20", "H20-3e", "B200", "GB200", "B300", "RTX-4060"):
        gpu = find_gpu(name)
        assert gpu.arch in MAX_THREADS_PER_SM, name
    assert MAX_THREADS_PER_SM["sm100"] == MAX_THREADS_PER_SM["sm103"] == 2048
    assert "Max Threads per SM: 2048" in str(_row("B200")["sm_source"])


def test_a_b200_context_and_sampler_buffer_by_hand() -> None:
    gpu = find_gpu("B200")
    # 148 SMs × 2048 threads × 1,024 B = 310,378,496 B; + the H100's rest 275,578,880 B
    got, how = cuda_context(gpu)
    assert got == 310_378_496 + 275_578_880 == 585_957_376 == CUDA_CONTEXT_BYTES + 32 * 2**20
    assert "148 SMs × 2048 threads × 1 KiB" in how
    # the Triton buffer: min(next_power_of_2(min(148, R)), 148) rows
    assert sampler_triton_buffer_rows(gpu, 256) == (148, " (148 SMs)")
    assert sampler_triton_buffer_rows(gpu, 100)[0] == 128
    assert sampler_triton_buffer_rows(gpu, 8)[0] == 8


def test_an_h20_context_by_hand() -> None:
    # 78 SMs × 2048 × 1,024 B = 163,577,856 B: 108 MiB under the H100's 132-SM reservation
    got, _ = cuda_context(find_gpu("H20"))
    assert got == CONTEXT_REST_BYTES + 163_577_856 == CUDA_CONTEXT_BYTES - 108 * 2**20


def test_rocm_counts_size_the_sampler_buffer_but_not_the_context() -> None:
    mi300x, xtx = find_gpu("MI300X"), find_gpu("RX-7900-XTX")
    assert cuda_context(mi300x)[0] == cuda_context(xtx)[0] == CUDA_CONTEXT_BYTES
    # MI300X, 304 CUs: 256 rows → 256 programs → 256 (≤ 304); 1024 rows → 304 → 512, capped at 304
    assert sampler_triton_buffer_rows(mi300x, 256) == (256, " (304 compute units)")
    assert sampler_triton_buffer_rows(mi300x, 1024)[0] == 304
    # RX 7900 XTX, 48 WGPs: 256 rows → 48 programs → 64, capped at 48
    assert sampler_triton_buffer_rows(xtx, 256)[0] == 48


def _without_count(gpu: GPU) -> GPU:
    return dataclasses.replace(gpu, sm_count=None)


def _published(rid: int) -> tuple[object, object]:
    """Row ``rid`` estimated on its catalog card (after) and on the same card without a count,
    i.e. with the H100's 132 (before)."""
    model, dep, _gpu, _mem = _run_args(ROWS[rid])
    after, took = row_estimate(ROWS[rid])
    before = estimate(model, dep.with_(gpu_memory_in_use=took) if took else dep,
                      gpu=_without_count(after.gpu))
    return before, after


def _component(e: object, name: str) -> int:
    ranks = e.ranks  # type: ignore[attr-defined]
    return next(c.bytes for c in ranks[0].components if c.name == name)


def test_published_b200_rows_charge_the_b200s_own_context() -> None:
    """Rows 12/13 (SGLang, DeepSeek-V3.2-Exp, TP8 DP-attention on B200): the context grows by
    16 SMs × 2048 × 1 KiB = 32 MiB a rank, and SGLang's pool shrinks with it: 997,248 → 996,672
    and 1,495,360 → 1,494,592 tokens (the logs: 975,424 and 1,462,784; +2.2% both before and
    after, so the H100 context was not what these rows miss)."""
    for rid in (12, 13):
        before, after = _published(rid)
        assert after.gpu.name == "B200"  # type: ignore[attr-defined]
        assert _component(after, "CUDA context") - _component(before, "CUDA context") == 2**25
        assert after.kv_cache_tokens < before.kv_cache_tokens  # type: ignore[attr-defined]


def test_published_mi300x_row_samples_on_its_304_compute_units() -> None:
    """Row 113 (vLLM 0.17.1 ROCm, MiniMax-M2, TP2 on MI300X): the sampler's Triton buffer is
    304 rows of the 200,064 vocabulary instead of 132, and the KV budget loses exactly those
    172 × 200,064 × 4 B = 137,644,032 B: 519,104 → 518,016 tokens (log 497,600: +4.3% → +4.1%)."""
    before, after = _published(113)
    delta = 172 * 200_064 * 4
    assert delta == 137_644_032
    assert (_component(after, "activation peak (profile run)")
            - _component(before, "activation peak (profile run)")) == delta
    assert (before.ranks[0].available_kv_bytes  # type: ignore[attr-defined]
            - after.ranks[0].available_kv_bytes) == delta  # type: ignore[attr-defined]
    assert _component(after, "CUDA context") == _component(before, "CUDA context")
