"""The sampler stage of vLLM's V1 profile run (``sampler_stage`` in
memprof/core/terms/activation.py), term by term against hand counts and the release rows it reads:
the per-rank logits shard is freed before sampling (``LOGITS_SHARD_FREED``)."""

from __future__ import annotations

from memprof.core.components import TermContext
from memprof.core.deployment import Deployment, ranks
from memprof.core.engine_defaults import resolve
from memprof.core.gpus import find_gpu
from memprof.core.kvcache import kv_plan
from memprof.core.models import load_model
from memprof.core.terms.activation import LOGITS_SHARD_FREED, activation_stages
from memprof.core.versions import rule_in_force

H100 = find_gpu("H100")
V, H = 128_256, 4096  # Llama-3.1-8B vocabulary and hidden size


def _sampler(dep: Deployment, model: str = "llama-3.1-8b") -> dict[str, int]:
    spec = load_model(model)
    dep = resolve(dep, spec, H100)
    coord = ranks(dep)[0]
    ctx = TermContext(spec=spec, dep=dep, gpu=H100, coord=coord,
                      plan=kv_plan(spec, dep, coord, "bfloat16", H100.arch), weights_bytes=0,
                      model_dtype="bfloat16")
    (stage,) = [st for st in activation_stages(ctx) if st.name == "sampler"]
    return dict(stage.parts)


def test_no_logits_shard_at_the_sampler_with_tp() -> None:
    """``LogitsProcessor._get_logits`` rebinds ``logits`` to the all-gather's new tensor, so the
    [R, V/tp] shard is gone before the sampler: TP 2 and TP 4 hold the same sampler stage as
    TP 1 (the logits [R, V] bf16 are whole on every rank)."""
    for version in ("0.8.5", "0.10.1.1", "0.11.0", "0.17.0", "0.27.1"):
        one = _sampler(Deployment(engine_version=version, max_num_seqs=256,
                                  max_num_batched_tokens=2048))
        for tp in (2, 4):
            got = _sampler(Deployment(engine_version=version, tp=tp, max_num_seqs=256,
                                      max_num_batched_tokens=2048))
            assert got == one, (version, tp)
            assert not any("shard" in name for name in got)
        assert one["logits [R,V]"] == 256 * V * 2


def test_the_rule_holds_at_every_read_release() -> None:
    for version in ("0.7.3", "0.8.2", "0.8.5", "0.10.1.1", "0.11.0", "0.27.1"):
        assert rule_in_force(LOGITS_SHARD_FREED, version, "vllm") is not None, version
    (rule,) = LOGITS_SHARD_FREED
    assert "logits_processor.py" in rule.source and "_gather_logits" in rule.source
