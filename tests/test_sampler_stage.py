"""The sampler stage of vLLM's V1 profile run (``sampler_stage`` in
memprof/core/terms/activation.py), term by term against hand counts and the release rows it reads:
the per-rank logits shard is freed before sampling (``LOGITS_SHARD_FREED``) and the hidden
states alive there differ by release (``V1_SAMPLER_HIDDEN``)."""

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


R, T = 256, 2048


def _hidden(version: str) -> dict[str, int]:
    parts = _sampler(Deployment(engine_version=version, max_num_seqs=R,
                                max_num_batched_tokens=T))
    return {n: b for n, b in parts.items() if "hidden" in n}


def test_08_keeps_only_the_last_rows() -> None:
    """0.8.x ``_dummy_run`` returns ``hidden_states[logit_indices]`` (a new [R, H]) and the
    forward's [T, H] is freed with its locals: the sampler stage holds one [R, H]."""
    for version in ("0.8.0", "0.8.2", "0.8.5"):
        assert _hidden(version) == {"last hidden [R,H]": R * H * 2}, version


def test_09_adds_the_rand_like_copy() -> None:
    """0.9.0-0.9.1: ``_dummy_sampler_run`` replaces its argument by ``torch.rand_like`` while
    ``profile_run`` still holds the original: 2 × [R, H]."""
    for version in ("0.9.0", "0.9.1"):
        assert _hidden(version) == {"last hidden [R,H] + its rand_like": 2 * R * H * 2}, version


def test_from_092_the_full_output_stays_too() -> None:
    """0.9.2 on: ``profile_run`` keeps ``(hidden_states, last_hidden_states)`` through the
    sampler: [T, H] + 2 × [R, H]."""
    for version in ("0.9.2", "0.10.1.1", "0.11.0", "0.17.0", "0.27.1"):
        assert _hidden(version) == {"hidden [T,H]": T * H * 2,
                                    "last hidden [R,H] + its rand_like": 2 * R * H * 2}, version


def test_v0_keeps_its_own_stage() -> None:
    """V0 (0.7.3, or ``--vllm-use-v1 0``) runs its driver's sampler stage, which no V1 row
    changes: the last hidden [T, H] as before."""
    spec = load_model("llama-3.1-8b")
    dep = resolve(Deployment(engine_version="0.7.3", max_num_seqs=R, max_num_batched_tokens=T),
                  spec, H100)
    coord = ranks(dep)[0]
    ctx = TermContext(spec=spec, dep=dep, gpu=H100, coord=coord,
                      plan=kv_plan(spec, dep, coord, "bfloat16", H100.arch), weights_bytes=0,
                      model_dtype="bfloat16")
    (stage,) = [st for st in activation_stages(ctx) if st.name.startswith("sampler")]
    assert stage.name == "sampler (V0 driver)"
    assert dict(stage.parts)["last hidden [T,H]"] == T * H * 2
