"""The CUDA context's per-thread stack reservation by architecture
(``memprof.core.terms.non_torch.cuda_context``): the H100 golden of
recorders/gpu_context_stack.py shows the mechanism byte for byte, and every other CUDA card with
an SM count and a known thread limit gets its own reservation on top of the H100's rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import catalog, find_gpu
from memprof.core.terms.non_torch import (
    CONTEXT_REST_BYTES,
    CONTEXT_STACK_MEASURED_BYTES,
    CUDA_CONTEXT_BYTES,
    MAX_THREADS_PER_SM,
    cuda_context,
)
from memprof.core.terms.published_context import published_context_rest

GOLDEN = Path(__file__).resolve().parent.parent / "reports/gpu/context/context-stack-h100.json"


def _golden() -> dict[str, object]:
    return json.loads(GOLDEN.read_text())


def test_the_golden_grows_by_sms_times_threads_times_the_stack_change() -> None:
    g = _golden()
    runs = {r["variant"]: r for r in g["runs"]}  # type: ignore[union-attr]
    base = runs["none"]
    assert (base["sm_count"], base["max_threads_per_sm"]) == (132, 2048)
    assert base["limits_after_context"]["stack"] == 1024
    threads = base["sm_count"] * base["max_threads_per_sm"]
    for variant, new in (("stack:0", 0), ("stack:2048", 2048), ("stack:4096", 4096)):
        r = runs[variant]
        assert r["limits_after_set"]["stack"] == new
        assert r["used_delta_bytes"] == threads * (new - 1024), variant
    # the FIFO and heap limits reserve nothing when set
    assert runs["fifo:8388608"]["used_delta_bytes"] == 0
    assert runs["heap:67108864"]["used_delta_bytes"] == 0


def test_the_golden_context_is_the_one_memprof_charges_on_sm90() -> None:
    base = {r["variant"]: r for r in _golden()["runs"]}["none"]  # type: ignore[union-attr]
    ctx = base["after_context"]
    assert ctx["used_bytes"] - ctx["reserved_bytes"] == CUDA_CONTEXT_BYTES
    assert CONTEXT_STACK_MEASURED_BYTES == 132 * 2048 * 1024 == 276_824_064
    assert CONTEXT_REST_BYTES == 552_402_944 - 276_824_064 == 275_578_880


@pytest.mark.parametrize("name", ["H100", "H200", "H100-NVL", "GH200", "H800"])
def test_132_sm_sm90_cards_keep_the_measured_context_byte_for_byte(name: str) -> None:
    got, how = cuda_context(find_gpu(name))
    assert got == CUDA_CONTEXT_BYTES == 552_402_944
    assert how.startswith("measured H100")


def test_the_114_sm_h100_pcie_gets_its_own_stack_reservation() -> None:
    """The same mechanism on the PCIe H100 (114 SMs): 18 SMs × 2048 threads × 1 KiB = 36 MiB
    less than the SXM card's measured context."""
    got, how = cuda_context(find_gpu("H100-PCIe"))
    assert got == 275_578_880 + 114 * 2048 * 1024 == CUDA_CONTEXT_BYTES - 36 * 2**20
    assert "114 SMs" in how and "not derived" not in how


@pytest.mark.parametrize(("name", "sms", "threads"), [
    ("A100-80GB", 108, 2048), ("L40S", 142, 1536),
    ("L4", 58, 1536), ("RTX-4090", 128, 1536), ("T4", 40, 1024), ("V100-32GB", 80, 2048),
    ("RTX-5090", 170, 1536)])
def test_other_cards_get_their_own_stack_reservation(name: str, sms: int, threads: int) -> None:
    # (sm86 cards take a published remainder instead: tests/test_published_context.py)
    got, how = cuda_context(find_gpu(name))
    assert got == 275_578_880 + sms * threads * 1024
    assert f"{sms} SMs × {threads} threads × 1 KiB" in how
    assert "reports/gpu/context/context-stack-h100.json" in how


def test_an_rtx_3090_context_by_hand() -> None:
    # 82 SMs × 1536 threads × 1,024 B = 128,974,848 B; + the sm86 remainder vLLM 0.6.4.post1
    # printed on this card (memprof/core/terms/published_context.py), 171,869,798 B
    assert cuda_context(find_gpu("RTX-3090"))[0] == 300_844_646


@pytest.mark.parametrize("name", ["GB10", "MI300X", "MI355X", "RX-7900-XTX"])
def test_cards_without_the_facts_keep_the_h100_context(name: str) -> None:
    # GB10: sm121 has no thread limit here; ROCm: the stack reservation is the CUDA driver's
    gpu = find_gpu(name)
    assert gpu.is_rocm or gpu.sm_count is None or gpu.arch not in MAX_THREADS_PER_SM
    assert cuda_context(gpu)[0] == CUDA_CONTEXT_BYTES


def test_every_card_gets_its_own_reservation_or_keeps_the_h100_context() -> None:
    for g in catalog():
        got, _ = cuda_context(g)
        if g.is_rocm or g.sm_count is None or g.arch not in MAX_THREADS_PER_SM:
            assert got == CUDA_CONTEXT_BYTES, g.name
        else:
            reading = published_context_rest(g.arch)
            rest = CONTEXT_REST_BYTES if reading is None else reading.rest_bytes
            assert got == rest + g.sm_count * MAX_THREADS_PER_SM[g.arch] * 1024


def test_the_context_moves_the_kv_only_where_the_engine_budgets_it() -> None:
    """vLLM 0.8.0-0.9.0 (V1) charge the context to the budget: an RTX 3090's smaller context
    leaves that much more for the KV cache than the H100's figure would; from 0.9.1 on it is
    outside the budget (``NCCL_PLACEMENT``)."""
    for version, where in (("0.8.5.post1", "budget"), ("0.17.1", "baseline")):
        r = estimate("qwen3-0.6b", Deployment(max_model_len=4096, engine_version=version),
                     gpu_name="RTX-3090")
        ctx = next(c for c in r.ranks[0].components if c.name == "CUDA context")
        assert (ctx.bytes, ctx.where) == (300_844_646, where)
