"""n-gram speculation on Model Runner V2 from vLLM 0.32.0 (vllm_runner.V2_FALLBACK_SPECULATIVE):
which runner each release drafts n-gram on (read in the 0.30.0, 0.31.0, 0.32.0 and 0.33.0 wheels,
config/vllm.py)."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.engines.vllm_runner import V2_FALLBACK_SPECULATIVE, runs_v2
from memprof.core.estimate import estimate
from memprof.core.models import load_model
from memprof.core.version_diff import applies, tags

# row 1722 / 1723's deployment (Qwen2.5-7B-Instruct AWQ on an L4) at the releases around 0.32.0
BASE = Deployment(engine_version="0.33.0", max_model_len=8192, gpu_memory_utilization=0.85,
                  quantization="awq_marlin", max_num_seqs=32, max_num_batched_tokens=2048)
NGRAM = BASE.with_(num_speculative_tokens=4, speculative_method="ngram")


@pytest.mark.parametrize(("version", "v2"), [("0.30.0", False), ("0.31.0", False),
                                             ("0.32.0", True), ("0.33.0", True)])
def test_ngram_runs_model_runner_v2_from_0_32_0(version: str, v2: bool) -> None:
    # config/vllm.py _get_v2_model_runner_unsupported_features lists "ngram" / "ngram_gpu" in
    # 0.30.0 and 0.31.0, not in 0.32.0 or 0.33.0 (init_speculator's use_ngram branch)
    common = {"listed": False, "moe": False, "hybrid": False, "quantised": True}
    assert runs_v2(version, **common)
    assert runs_v2(version, **common, speculative="ngram") is v2


def test_the_note_stops_claiming_the_v1_fallback_at_0_32_0() -> None:
    def notes(version: str) -> str:
        e = estimate("qwen2.5-7b-instruct", NGRAM.with_(engine_version=version), gpu_name="L4")
        return " ".join(e.notes)
    assert "V2_FALLBACK_SPECULATIVE" in notes("0.31.0")
    assert "V2_FALLBACK_SPECULATIVE" not in notes("0.33.0")


def test_the_rules_apply_to_ngram_deployments_only() -> None:
    spec = load_model("qwen2.5-7b-instruct")
    assert "ngram" in tags(spec, NGRAM)
    assert "ngram" not in tags(spec, BASE)
    assert "ngram" not in tags(spec, BASE.with_(num_speculative_tokens=4, speculative_method="mtp"))
    assert applies(V2_FALLBACK_SPECULATIVE[0], spec, NGRAM)
    assert not applies(V2_FALLBACK_SPECULATIVE[0], spec, BASE)
