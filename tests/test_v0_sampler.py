"""vLLM V0's profile run samples on the driver worker only (``V0_DRIVER_SAMPLER``), with the
torch top-k/top-p sort; each rule against a hand calculation, the sort's temporaries against the
H100 measurement they come from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import RankEstimate, estimate
from memprof.core.terms.activation import sort_temporaries_bytes

GOLDEN = Path(__file__).resolve().parents[1] / "reports" / "gpu" / "v0-sampler"
ROW48 = Deployment(tp=2, max_model_len=131072, gpu_memory_utilization=0.98)


def _peak(rank: RankEstimate) -> int:
    return next(c.bytes for c in rank.components if c.name == "activation peak (profile run)")


def test_only_tp_rank_0_samples_under_v0() -> None:
    # 0.7.2 worker/model_runner.py execute_model: "if not self.is_driver_worker: return []"
    # before self.model.sample; logits_processor.py _gather_logits: gather to rank 0.
    e = estimate("deepseek-r1-distill-qwen-14b", ROW48.with_(engine_version="0.7.2"),
                 gpu_name="RTX-4090")
    by_rank = {r.coord.tp_rank: r for r in e.ranks}
    assert set(by_rank) == {0, 1}
    driver, other = by_rank[0], by_rank[1]
    # the driver's peak is the sampler stage, by hand: R = 256 sequences (V0 default), V =
    # 152,064, T = 2,048 batched tokens (V0 chunked prefill above 32K), H = 5,120, bf16:
    #   last hidden T·H·2 + gathered logits R·V·2 + sort moment (4 + 12 + 20)·R·V
    r, v, t, h = 256, 152_064, 2_048, 5_120
    want = t * h * 2 + r * v * 2 + 36 * r * v
    assert want == 1_500_250_112
    assert _peak(driver) == want
    assert "sampler (V0 driver)" in next(c.formula for c in driver.components
                                         if c.name == "activation peak (profile run)")
    assert "sampler" not in next(c.formula for c in other.components
                                 if c.name == "activation peak (profile run)")
    assert _peak(other) < 200 * MiB
    # one engine: both workers allocate the driver's (smaller) block count
    assert driver.kv.num_gpu_blocks == other.kv.num_gpu_blocks
    assert driver.available_kv_bytes < other.available_kv_bytes


def test_every_last_stage_rank_samples_under_v1() -> None:
    e = estimate("deepseek-r1-distill-qwen-14b", ROW48.with_(engine_version="0.8.0"),
                 gpu_name="RTX-4090")
    assert len(e.ranks) == 1 and e.ranks[0].same_as == (0, 1)
    assert "sampler [" not in e.ranks[0].components[0].formula  # (weights row)
    assert any("sampler" in c.formula for c in e.ranks[0].components
               if c.name == "activation peak (profile run)")


def test_v0_with_pp_samples_on_tp_rank_0_of_the_last_stage() -> None:
    # Qwen2.5: 0.7.3's model registry has no Qwen3ForCausalLM
    e = estimate("qwen2.5-0.5b", Deployment(tp=2, pp=2, engine_version="0.7.3"),
                 gpu_name="H100")
    samplers = {(r.coord.pp_stage, r.coord.tp_rank) for r in e.ranks
                for c in r.components if c.name == "activation peak (profile run)"
                and "sampler (V0 driver)" in c.formula}
    assert samplers == {(1, 0)}


@pytest.mark.parametrize(("rows", "vocab", "per_elem"), [
    (256, 152_064, 20),  # ≥ 128 segments: segmented_sort_pairs
    (127, 152_064, 32),  # < 128 segments: segmented_sort_pairs_by_full_sort
    (1, 152_064, 20),  # one segment: segmented_sort_large_segments
    (256, 4_096, 0),  # ≤ 4096 elements: in-place bitonic sort
])
def test_sort_temporaries_by_path(rows: int, vocab: int, per_elem: int) -> None:
    # PyTorch Sort.h should_use_small_sort (≤ 4096), SortStable.cu launch_stable_sort_kernel
    assert sort_temporaries_bytes(rows, vocab) == per_elem * rows * vocab


def test_the_sampler_peak_is_the_h100_measurement() -> None:
    """memprof's V0 sampler peak above the bf16 logits (max of the sort and the scatter moment)
    equals each shape measured by recorders/gpu_v0_sampler.py within 8 MiB: memory_allocated
    counts whole blocks (a block is not split when ≤ 1 MiB would remain, up to 1 MiB for each of
    the ~8 tensors) and cub's own radix-sort storage is not counted; the largest gap is 7.2 MiB
    (120 rows), 0.8% of that peak."""
    files = sorted(GOLDEN.glob("v0-sampler-h100*.json"))
    assert files
    n = 0
    for f in files:
        d = json.loads(f.read_text())
        assert d["torch"].startswith("2.11.0") and d["command"].startswith("PYTHONPATH=.")
        for s in d["shapes"]:
            r, v = s["rows"], s["vocab"]
            predicted = max(16 * r * v + sort_temporaries_bytes(r, v), 30 * r * v)
            measured = s["peak_above_bf16_logits"]
            assert abs(predicted - measured) <= 8 * MiB, s
            n += 1
    assert n == 17
