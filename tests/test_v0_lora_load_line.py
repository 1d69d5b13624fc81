"""V0's "Loading model weights took" leaves the LoRA buffers out before 0.8.0: the LoRA manager
is built after ``load_model``'s ``DeviceMemoryProfiler`` block (vllm-project/vllm
``worker/model_runner.py`` ``GPUModelRunnerBase.load_model``, read in the 0.6.4.post1, 0.7.1 and
0.7.3 wheels: ``with DeviceMemoryProfiler() as m: self.model = get_model(...)``, the log line,
then ``if self.lora_config: ... create_lora_manager``); 0.8.0 moves ``create_lora_manager``
inside the block. memprof's load figure (``memprof.core.estimate.load_figure``), which the
calibration compares with that line, follows ``LORA_BUDGETED`` (``memprof/core/terms/lora.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, load_figure
from memprof.core.gpus import resolve_gpu
from tests.test_published_distribution import outcome

ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).parent / "data" / "published.json").read_text())["rows"]}


def _load(version: str, lora: bool, **extra: object) -> int:
    # float16, the dtype these T4 runs logged (vLLM before 0.9.1 refuses bfloat16 there)
    dep = Deployment(engine_version=version, enable_lora=lora, max_lora_rank=32, dtype="float16",
                     **extra)
    e = estimate("llama-3.1-8b", dep, gpu=resolve_gpu("T4", None))
    return load_figure(e, e.ranks[0])


@pytest.mark.parametrize("version", ["0.7.1", "0.7.3"])
def test_v0_load_line_before_0_8_holds_only_the_models_own_tables(version: str) -> None:
    """With LoRA the line grows by the extra vocabulary rows alone (the model's own tables,
    built in get_model: embed_tokens + 256 rows, lm_head padded to 256 with 256 more: 512 rows
    × 4096 × 2 B); the stacked A/B buffers and the punica metadata are not in it."""
    assert _load(version, True) - _load(version, False) == 512 * 4096 * 2


def test_from_0_8_0_the_load_line_holds_the_lora_buffers() -> None:
    """0.8.0 builds the manager inside the profiler: the line holds the stacked buffers too
    (32 layers × 5 MiB at rank 32 in float16, among them)."""
    grown = _load("0.8.0", True, vllm_use_v1=0) - _load("0.8.0", False, vllm_use_v1=0)
    assert grown > 512 * 4096 * 2 + 32 * 5 * 2**20


def test_row_1301_load_line_within_half_a_percent() -> None:
    """Row 1301 (Llama-3.1-8B bnb-4bit + LoRA rank 32, T4, vLLM 0.7.1): 'Loading model weights
    took 5.3541 GB' (GiB) against the calibration's figure for it."""
    o = outcome(ROWS[1301])
    key, logged, got = o.pairs["weights"]
    assert key == "weights_gb" and logged == 5.3541
    assert abs(got - logged) / logged < 0.005, got  # with the LoRA buffers: 5.53 (+3.3%)
