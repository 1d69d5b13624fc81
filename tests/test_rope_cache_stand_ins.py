"""A bundled stand-in config must carry the logged checkpoint's ``max_position_embeddings``: vLLM
sizes the RoPE cos/sin cache by it, whatever ``max_model_len`` is (0.27.1-0.30.0
model_executor/layers/rotary_embedding/base.py ``_compute_cos_sin_cache``: [max_position_embeddings,
rotary_dim] in the model dtype). Rows 1601/1602 (a Qwen3-4B fine-tune with 262,144 positions run as
the bundled qwen3-4b's 40,960) and 906 (Qwen3-235B-A22B-Instruct-2507-FP8, 262,144 against
40,960) set it through ``memprof_run.hf_overrides``."""

from __future__ import annotations

import json

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from tests.test_published_distribution import ROWS, outcome

BY_ID = {r["id"]: r for r in ROWS}


def _rope_bytes(positions: int | None) -> int:
    over = None if positions is None else json.dumps({"max_position_embeddings": positions})
    dep = Deployment(engine="vllm", engine_version="0.30.0", max_model_len=8192,
                     hf_overrides=over)
    e = estimate("qwen3-4b", dep, gpu_name="H100-80GB")
    return sum(c.bytes for c in e.ranks[0].components if c.name.startswith("RoPE cos/sin cache"))


def test_the_rope_cache_follows_max_position_embeddings_not_max_model_len() -> None:
    # [positions, head_dim 128] bf16: 10 MiB at qwen3-4b's 40,960, 64 MiB at 262,144
    assert _rope_bytes(None) == 40960 * 128 * 2
    assert _rope_bytes(262144) == 262144 * 128 * 2 == 64 * MiB


@pytest.mark.parametrize("rid", [1601, 1602, 906])
def test_the_rows_run_the_checkpoints_positions(rid: int) -> None:
    run = BY_ID[rid]["memprof_run"]
    assert json.loads(run["hf_overrides"]) == {"max_position_embeddings": 262144}
    assert "262,144" in run["why"] or "262144" in run["why"]


@pytest.mark.parametrize(("rid", "within"), [(1601, 0.005), (1602, 0.005), (906, 0.0005)])
def test_the_load_figure_lands_with_the_checkpoints_rope_cache(rid: int, within: float) -> None:
    """With the bundled positions the load was 1.1% (1601/1602) and 0.1% (906) below the log."""
    _key, logged, got = outcome(BY_ID[rid]).pairs["weights"]
    assert abs(got - logged) / logged < within
