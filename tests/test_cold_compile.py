"""A cold compile's autotuning example arguments in vLLM's profile window
(memprof/core/terms/cold_compile.py): a copy of the rank's embedding table and the gather's
[T, H] output, charged as the profile run's peak from 0.20.0 where the model is compiled cold;
nothing on a warm cache, with --enforce-eager, or before 0.20.0."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.engines.vllm_compile import COLD_COMPILE_EXAMPLE_ARGS
from memprof.core.estimate import Estimate, estimate
from memprof.core.versions import rule_in_force

GIB = 1 << 30
PEAK = "activation peak (profile run)"


def _est(version: str, model: str, gpu: str = "RTX-4090", **kw: object) -> Estimate:
    dep = Deployment(engine_version=version, max_model_len=8192, **kw)  # type: ignore[arg-type]
    return estimate(model, dep, gpu_name=gpu)


def _peak(e: Estimate) -> int:
    return next(c.bytes for c in e.ranks[0].components if c.name == PEAK)


def _formula(e: Estimate) -> str:
    return next(c.formula for c in e.ranks[0].components if c.name == PEAK)


@pytest.mark.parametrize(("version", "held"), [
    ("0.19.1", False), ("0.20.0", True), ("0.24.0", True), ("0.27.1", True), ("0.33.0", True)])
def test_the_rule_holds_from_0_20(version: str, held: bool) -> None:
    assert (rule_in_force(COLD_COMPILE_EXAMPLE_ARGS, version) is not None) is held


@pytest.mark.parametrize(("model", "hidden", "logged_gib"), [
    ("qwen3-8b", 4096, 1.18), ("qwen3-1.7b", 2048, 0.59)])
def test_the_published_cold_peaks_of_0_27_1(model: str, hidden: int, logged_gib: float) -> None:
    # rows 1603 / 1604 (tests/data/published.json): "Actual usage is ... X GiB for peak
    # activation" on a cold compile at vLLM 0.27.1 on an RTX 4090, max_num_batched_tokens 2048
    e = _est("0.27.1", model, gpu_memory_utilization=0.92)
    assert _peak(e) == 151936 * hidden * 2 + 2048 * hidden * 2
    assert abs(_peak(e) / GIB - logged_gib) < 0.01
    assert "cold compile (autotuning example arguments)" in _formula(e)
    # the warm restarts log 0.19 GiB: the forward's own peak, no copy of the table
    warm = _est("0.27.1", model, gpu_memory_utilization=0.92, compile_cache="warm")
    assert _peak(warm) < _peak(e) / 2


def test_a_tp2_rank_copies_its_shard_of_the_table() -> None:
    cold = _est("0.28.0", "qwen3-32b", tp=2, max_num_batched_tokens=3584, max_num_seqs=40,
                gpu_memory_utilization=0.85, quantization="awq_marlin")
    assert cold.deployment.tp == 2
    assert _peak(cold) == 151936 // 2 * 5120 * 2 + 3584 * 5120 * 2


@pytest.mark.parametrize("kw", [{"compile_cache": "warm"}, {"enforce_eager": True}])
def test_nothing_compiled_cold_charges_no_copy(kw: dict[str, object]) -> None:
    e = _est("0.27.1", "qwen3-8b", gpu_memory_utilization=0.92, **kw)
    assert "cold compile" not in _formula(e) and _peak(e) < 151936 * 4096 * 2


def test_before_0_20_a_cold_compile_is_not_charged() -> None:
    e = _est("0.17.1", "llama-3.1-8b", gpu_memory_utilization=0.9)
    assert "cold compile" not in _formula(e)


def test_the_lora_embedding_stack_is_copied_beside_the_table() -> None:
    # rows 1607 / 1647 (vLLM 0.27.1, Qwen3-4B on an RTX 4090, cold): peak activation 0.80 GiB
    # with one adapter slot, 1.09 with 64; the LoRA-A stack [max_loras · V, rank 16] bf16 grows
    # by 4.6 MiB a slot
    def peak(n: int) -> int:
        return _peak(_est("0.27.1", "qwen3-4b", gpu_memory_utilization=0.8, enable_lora=True,
                          max_loras=n))
    grown = peak(64) - peak(1)
    assert grown == 63 * 151936 * 16 * 2
    assert abs(grown / GIB - (1.09 - 0.80)) < 0.01


def test_a_multimodal_profile_run_feeds_inputs_embeds_and_copies_no_table() -> None:
    # Qwen3.5-0.8B (a vision tower) at 0.28.0: the V1 runner's _dummy_run passes the compiled
    # model inputs_embeds and input_ids=None (_prepare_mm_inputs), so the graph gathers nothing
    # and a cold compile copies no embedding table ([248320, 1024] bf16 = 485 MiB)
    table = 248320 * 1024 * 2
    mm = _est("0.28.0", "qwen3.5-0.8b", gpu="A100-PCIe-80GB", gpu_memory_utilization=0.85,
              max_num_seqs=32)  # row 1706's settings: the copy would be the largest stage
    assert "cold compile" not in _formula(mm) and "embedding table copy" not in _formula(mm)
    # with every modality's limit at 0 vLLM runs the model text-only: input_ids, the gather,
    # and the copy of the table
    text = _est("0.28.0", "qwen3.5-0.8b", gpu="A100-PCIe-80GB", gpu_memory_utilization=0.85,
                max_num_seqs=32, limit_mm_per_prompt='{"image": 0, "video": 0}')
    assert "cold compile" in _formula(text) and _peak(text) >= table > _peak(mm)


# The freed copy kept a second time (COLD_COPY_PINNABLE): stated in the estimate where the
# budget line can hold it, never charged.
@pytest.mark.parametrize(("version", "kw", "noted"), [
    ("0.26.0", {}, False),  # the budget line reads no reserved memory
    ("0.27.1", {}, True), ("0.28.0", {}, True), ("0.30.0", {}, True),
    ("0.31.0", {}, False),  # the profile run's split limit rules it out
    ("0.33.0", {}, False),
    ("0.28.0", {"compile_cache": "warm"}, False), ("0.28.0", {"enforce_eager": True}, False)])
def test_a_pinned_copy_is_stated_not_charged(version: str, kw: dict[str, object],
                                             noted: bool) -> None:
    e = _est(version, "qwen3-8b", "RTX-5070-Ti", **kw)
    formula = _formula(e)
    assert ("not charged: the freed table copy (1.16 GiB)" in formula) is noted
    if noted:  # the same estimate at the same settings, the copy's peak charged once
        assert _peak(e) == _peak(_est("0.31.0", "qwen3-8b", "RTX-5070-Ti", **kw))


@pytest.mark.parametrize("workspace", [(4096 * 2 + 16 * 8) * 1024, 4096 * 8 * 1024])
def test_only_without_a_split_limit_can_a_later_allocation_pin_the_freed_copy(
        workspace: int) -> None:
    """The mechanism 0.31.0's profile run guards against, on memprof.alloc's replica of PyTorch's
    allocator: the freed copy is the only free block, and a persistent allocation of either
    cuBLAS workspace size comes after it. At PyTorch's default it is carved out of the copy and
    keeps the copy's whole segment past ``empty_cache()``; under vLLM's ``max_split_size_mb:20``
    it gets a segment of its own and the copy's goes back."""
    from memprof.alloc import CachingAllocator

    table = 151936 * 2048 * 2  # Qwen3-1.7B's bf16 table (row 1604): 593.5 MiB
    for conf, pinned in (("", True), ("max_split_size_mb:20", False)):
        sim = CachingAllocator(conf)
        sim.free(sim.malloc(table))  # the autotuning example argument, freed in the window
        sim.malloc(workspace)  # alive past the window
        sim.empty_cache()
        reserved = sim.memory_stats()["reserved_bytes.all.current"]
        assert (reserved >= table) is pinned, (conf, reserved)
        assert reserved <= table + 2 * (1 << 20)
