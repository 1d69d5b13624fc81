"""n-gram speculation on Model Runner V2 from vLLM 0.32.0 (memprof/core/terms/ngram_speculator.py,
vllm_runner.V2_FALLBACK_SPECULATIVE): which runner each release drafts n-gram on and what V2's
``NgramGPUSpeculator`` keeps on the GPU. The figures are hand calculations with the shapes of
the 0.32.0 / 0.33.0 wheels (v1/worker/gpu/spec_decode/ngram/speculator.py, v1/worker/gpu/
states.py)."""

from __future__ import annotations

import json

import pytest

from memprof.base.errors import BadInput
from memprof.core.deployment import Deployment
from memprof.core.engines.vllm_runner import V2_FALLBACK_SPECULATIVE, runs_v2
from memprof.core.estimate import estimate
from memprof.core.models import load_model
from memprof.core.speculative import drafting_method
from memprof.core.terms.ngram_speculator import NAME, NGRAM_V2_BUFFERS, scan_block
from memprof.core.version_diff import applies, tags
from memprof.probes.serve_command import parse_tokens

# row 1722 / 1723's deployment (Qwen2.5-7B-Instruct AWQ on an L4) at the releases around 0.32.0
BASE = Deployment(engine_version="0.33.0", max_model_len=8192, gpu_memory_utilization=0.85,
                  quantization="awq_marlin", max_num_seqs=32, max_num_batched_tokens=2048)
NGRAM = BASE.with_(num_speculative_tokens=4, speculative_method="ngram")


def _components(dep: Deployment, stage: int = 0) -> dict[str, object]:
    e = estimate("qwen2.5-7b-instruct", dep, gpu_name="L4")
    rank = next(r for r in e.ranks if r.coord.pp_stage == stage)
    return {c.name: c for c in rank.components}


@pytest.mark.parametrize(("version", "v2"), [("0.30.0", False), ("0.31.0", False),
                                             ("0.32.0", True), ("0.33.0", True)])
def test_ngram_runs_model_runner_v2_from_0_32_0(version: str, v2: bool) -> None:
    # config/vllm.py _get_v2_model_runner_unsupported_features lists "ngram" / "ngram_gpu" in
    # 0.30.0 and 0.31.0, not in 0.32.0 or 0.33.0 (init_speculator's use_ngram branch)
    common = {"listed": False, "moe": False, "hybrid": False, "quantised": True}
    assert runs_v2(version, **common)
    assert runs_v2(version, **common, speculative="ngram") is v2


@pytest.mark.parametrize(("length", "block"), [(32768, 256), (1024, 256), (1023, 128),
                                               (256, 128), (255, 64), (64, 64), (63, 64),
                                               (20, 32), (10, 16), (1, 16)])
def test_the_scan_block_follows_the_speculators_ladder(length: int, block: int) -> None:
    # NgramGPUSpeculator.__init__: 256 from L = 1024, 128 from 256, 64 from 64, else
    # max(16, next_power_of_2(L))
    assert scan_block(length, NGRAM_V2_BUFFERS[0].value) == block  # type: ignore[arg-type]


def test_the_buffers_at_0_33_0_by_hand() -> None:
    c = _components(NGRAM)[NAME]
    # R = 32, L = 8192, k = 4: all_token_ids int32 [32, 8192] = 1 MiB; scratch int64
    # [32, cdiv(8192, 256) = 32] = 8 KiB; drafts int64 [32, 4] = 1 KiB (512 B blocks)
    assert c.bytes == 32 * 8192 * 4 + 32 * 32 * 8 + 32 * 4 * 8 == 1_057_792  # type: ignore[attr-defined]
    assert c.category == "activation"  # type: ignore[attr-defined]
    assert "all_token_ids int32 [R,L]" in c.formula  # type: ignore[attr-defined]


def test_v2_terms_replace_the_v1_runners_at_0_32_0() -> None:
    at31, at32 = (_components(NGRAM.with_(engine_version=v)) for v in ("0.31.0", "0.32.0"))
    # 0.31.0: the V1 runner (the CPU NgramProposer), no V2 sampler state, no n-gram buffers
    assert NAME not in at31 and "sampler state (Model Runner V2)" not in at31
    # 0.32.0: V2's sampler state (its bitmask of R × (1 + k) rows) and the n-gram buffers
    assert NAME in at32 and "sampler state (Model Runner V2)" in at32
    # the same deployment without speculation makes no n-gram buffer
    assert NAME not in _components(BASE)


def test_only_the_last_stage_builds_the_speculator() -> None:
    # RequestState (all_token_ids) on every stage; init_speculator on the last PP rank only
    dep = NGRAM.with_(pp=2)
    first, last = _components(dep, 0)[NAME], _components(dep, 1)[NAME]
    assert first.bytes == 32 * 8192 * 4  # type: ignore[attr-defined]
    assert last.bytes == 32 * 8192 * 4 + 32 * 32 * 8 + 32 * 4 * 8  # type: ignore[attr-defined]


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
    for rule in (V2_FALLBACK_SPECULATIVE[0], NGRAM_V2_BUFFERS[0]):
        assert applies(rule, spec, NGRAM)
        assert not applies(rule, spec, BASE)


# ngram_gpu (memprof/core/speculative.py NGRAM_GPU_DRAFTER): from 0.32.0 init_speculator builds
# the same NgramGPUSpeculator for it as for ngram (config/speculative.py use_ngram); 0.18.0 -
# 0.31.x run the V1 NgramProposerGPU, whose compiled kernel memprof does not size: refused


def test_ngram_gpu_drafts_as_ngram_from_0_32_0() -> None:
    gpu = NGRAM.with_(speculative_method="ngram_gpu")
    for version in ("0.32.0", "0.33.0"):
        a = _components(NGRAM.with_(engine_version=version))
        b = _components(gpu.with_(engine_version=version))
        assert {n: c.bytes for n, c in a.items()} == {  # type: ignore[attr-defined]
            n: c.bytes for n, c in b.items()}  # type: ignore[attr-defined]
        assert b[NAME].bytes == 1_057_792  # type: ignore[attr-defined]
    assert drafting_method("ngram_gpu", "0.32.0") == "ngram"
    assert "ngram" in tags(load_model("qwen2.5-7b-instruct"), gpu)


@pytest.mark.parametrize(("version", "says"), [("0.31.0", "torch.compile'd kernel"),
                                               ("0.18.0", "torch.compile'd kernel"),
                                               ("0.17.0", "from 0.18.0 only")])
def test_ngram_gpu_before_0_32_0_is_refused_with_a_hint(version: str, says: str) -> None:
    with pytest.raises(BadInput, match=says) as exc:
        estimate("qwen2.5-7b-instruct", NGRAM.with_(engine_version=version,
                                                   speculative_method="ngram_gpu"),
                 gpu_name="L4")
    assert "--speculative-method ngram" in exc.value.hint


def test_a_pasted_ngram_gpu_config_sets_the_method() -> None:
    c = parse_tokens(["vllm", "serve", "m", "--speculative-config",
                      json.dumps({"method": "ngram_gpu", "num_speculative_tokens": 4})])
    assert c.settings == {"num_speculative_tokens": 4, "speculative_method": "ngram_gpu"}
    assert not c.not_modelled
