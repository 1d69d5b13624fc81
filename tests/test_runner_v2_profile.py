"""Model Runner V2's own profile-run budget (memprof/core/terms/runner_v2_profile.py) from 0.21.0:
with ``--enforce-eager``, on a warm compile cache, and on a cold one with the compile's
autotuning example arguments (memprof/core/terms/cold_compile.py, tests/test_cold_compile.py);
one greedy sampler pass through 0.32.x, and from 0.33.0 the second, warm-up pass
(``vllm_runner.warmup_sampler_tensors``); V1's terms where V2 does not run."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.engines.vllm_runner import (
    greedy_sampler_bytes,
    sampler_state_bytes,
    v2_flashinfer_samples,
)
from memprof.core.estimate import Estimate, estimate
from memprof.probes.startup_log import parse_log

MIB = 1 << 20


def _est(version: str, model: str = "qwen3-4b", **kw: object) -> Estimate:
    dep = Deployment(engine_version=version, max_model_len=8192, gpu_memory_utilization=0.8,
                     **kw)  # type: ignore[arg-type]
    return estimate(model, dep, gpu_name="RTX-4090")


def _comps(e: Estimate) -> dict[str, tuple[int, str]]:
    return {c.name: (c.bytes, c.where) for c in e.ranks[0].components}


def test_a_warm_start_at_0_27_charges_no_graph_estimate_and_v2s_own_sampler() -> None:
    w = _comps(_est("0.27.1", compile_cache="warm"))
    assert w["CUDA-graph estimate"][0] == 0
    # the graphs are still captured, beyond the budget
    assert w["CUDA-graph pool above the estimate"][1] == "runtime"
    assert w["CUDA-graph pool above the estimate"][0] > 0
    # the sampler state: output_bin_counts [256, V] int32 and the rest, in the 0.27 budget
    state = sampler_state_bytes(256, 151936)
    assert w["sampler state (Model Runner V2)"] == (state, "budget")
    # the greedy sampler (no fp32 top-k / top-p sort) leaves the forward's peak on top
    assert w["activation peak (profile run)"][0] >= greedy_sampler_bytes(256, 151936, 2)


def test_a_cold_start_at_0_27_is_v2s_own_terms_with_the_compiles_arguments() -> None:
    cold, warm = _est("0.27.1"), _est("0.27.1", compile_cache="warm")
    c, w = _comps(cold), _comps(warm)
    # V2's own terms on both (no graph estimate, the sampler state charged) ...
    assert c["CUDA-graph estimate"][0] == w["CUDA-graph estimate"][0] == 0
    assert c["sampler state (Model Runner V2)"] == w["sampler state (Model Runner V2)"]
    # ... and on the cold one a peak of the table's copy and the gather's [T, H] output
    table = 151936 * 2560 * 2
    assert c["activation peak (profile run)"][0] == table + 2048 * 2560 * 2
    assert w["activation peak (profile run)"][0] < table
    assert warm.kv_cache_tokens > cold.kv_cache_tokens


def test_before_0_27_the_sampler_state_is_in_use_but_not_charged() -> None:
    w = _comps(_est("0.26.0", compile_cache="warm"))
    assert w["sampler state (Model Runner V2)"][1] == "runtime"


def test_eager_v2_gets_its_own_terms_without_the_flag() -> None:
    e = _comps(_est("0.27.1", enforce_eager=True))
    assert "sampler state (Model Runner V2)" in e
    assert e["CUDA-graph estimate"][0] == 0


def test_before_0_21_v1s_terms_stand_on_either_cache() -> None:
    # before 0.21.0: no V2 runner. The cache state changes only the cold compile's peak stage.
    cold, warm = _comps(_est("0.20.0")), _comps(_est("0.20.0", compile_cache="warm"))
    assert cold["CUDA-graph estimate"] == warm["CUDA-graph estimate"]
    assert cold["CUDA-graph estimate"][0] > 0
    assert "sampler state (Model Runner V2)" not in cold
    assert "sampler state (Model Runner V2)" not in warm
    assert cold["activation peak (profile run)"][0] >= warm["activation peak (profile run)"][0]


# Qwen3-4B (H 2560, V 151936, bf16) on an RTX 4090 (sm89, 128 SMs) at vLLM 0.33.0's defaults
# there: T = 2048 tokens, R = min(T, max_num_seqs 256) = 256 rows
T, R, H, V = 2048, 256, 2560, 151936
HIDDEN = (T + R) * H * 2  # profile_run's hidden_states [T, H] and sample_hidden_states [R, H]
LOGITS = R * V * 2  # compute_logits, model dtype, held across both sampler passes
FP32_COPY = R * V * 4  # Sampler.apply_sampling_params: torch.empty_like(..., float32).copy_


def test_0_33s_warm_up_pass_by_hand_flashinfer() -> None:
    # sm89 is in FlashInferBackend.supports_compute_capability's 8.0-12.1, 128 SMs > 16 and
    # VLLM_USE_FLASHINFER_SAMPLER unset (on): every warm-up row has top_k 50, top_p 0.9,
    # temperature 0.9 and no seed, so flashinfer_sample -> top_k_top_p_sampling_from_logits with
    # a tensor top_k (not the int-only fast path): top_k_mask_logits' torch.empty_like fp32
    # [R, V] and its cached 1 MiB row states, then torch.softmax's fp32 [R, V]
    w = _comps(_est("0.33.0", compile_cache="warm"))
    peak = HIDDEN + LOGITS + FP32_COPY + 2 * R * V * 4 + (1 << 20)
    assert peak == 557_383_680
    assert w["activation peak (profile run)"] == (peak, "budget")
    # and V2's sampler state, charged by 0.27.0's total_consumed (not by V1's terms)
    assert w["sampler state (Model Runner V2)"] == (sampler_state_bytes(256, V), "budget")


def test_0_33s_warm_up_pass_by_hand_triton() -> None:
    # VLLM_USE_FLASHINFER_SAMPLER=0: apply_top_k_top_p_triton masks the fp32 copy in place with
    # its cached buffer of min(next_power_of_2(min(128 SMs, R)), 128) = 128 rows of [V] fp32, and
    # gumbel_sample keeps local_argmax int64 + local_max fp32 [R, cdiv(V, 1024) = 149]
    w = _comps(_est("0.33.0", compile_cache="warm", vllm_use_flashinfer_sampler=0))
    peak = HIDDEN + LOGITS + FP32_COPY + 128 * V * 4 + R * 149 * (8 + 4)
    assert peak == 323_419_136
    assert w["activation peak (profile run)"] == (peak, "budget")


def test_0_33s_warm_up_pass_on_the_eager_and_cold_paths_too() -> None:
    eager = _comps(_est("0.33.0", enforce_eager=True))
    cold = _comps(_est("0.33.0"))
    assert eager["activation peak (profile run)"][0] == 557_383_680
    assert "CUDA-graph estimate" not in eager or eager["CUDA-graph estimate"][0] == 0
    # cold: the table copy [V, H] + the gather's [T, H] output is the larger stage here
    assert cold["activation peak (profile run)"][0] == V * H * 2 + T * H * 2
    assert "sampler state (Model Runner V2)" in cold


def test_which_cards_take_flashinfers_sampler() -> None:
    # 0.33.0 flashinfer_sampler_supported: CUDA, capability 8.0-12.1, more than 16 SMs, the
    # environment variable not 0
    assert v2_flashinfer_samples(90, 132, rocm=False, env=None)
    assert v2_flashinfer_samples(121, 48, rocm=False, env=None)
    assert not v2_flashinfer_samples(75, 40, rocm=False, env=None)  # T4: below 8.0
    assert not v2_flashinfer_samples(89, 16, rocm=False, env=None)  # 16 SMs
    assert not v2_flashinfer_samples(90, 132, rocm=False, env=0)
    assert not v2_flashinfer_samples(None, 304, rocm=True, env=None)  # ROCm: not CUDA
    assert v2_flashinfer_samples(None, None, rocm=False, env=None)  # unknown: assumed, stated


def test_before_0_20_the_cache_state_changes_nothing() -> None:
    assert _comps(_est("0.19.1")) == _comps(_est("0.19.1", compile_cache="warm"))


@pytest.mark.parametrize("version", ["0.29.0", "0.30.0", "0.32.0", "0.33.0"])
def test_from_0_29_v2s_own_profile_and_graph_estimate_on_either_cache(version: str) -> None:
    # 0.29.0-0.32.x: one greedy sampler pass, 0.33.0 a second (V2_SAMPLER_WARMUP_PASS); V2's
    # graph estimate whatever the cache (terms/runner_v2_graphs.py), and on a cold start the
    # compile's autotuning example arguments beside the forward's peak
    c, w = _comps(_est(version)), _comps(_est(version, compile_cache="warm"))
    assert w["sampler state (Model Runner V2)"] == (sampler_state_bytes(256, 151936), "budget")
    assert c["sampler state (Model Runner V2)"] == w["sampler state (Model Runner V2)"]
    assert w["activation peak (profile run)"][0] < c["activation peak (profile run)"][0]
    assert w["CUDA-graph estimate"] == c["CUDA-graph estimate"]
    assert w["CUDA-graph estimate"][0] > 0


def test_a_model_on_the_v1_runner_keeps_v1s_terms_on_either_cache() -> None:
    # 0.27.1 runs a MoE model that is not on V2's list with the V1 runner
    cold = _comps(_est("0.27.1", model="qwen3-30b-a3b"))
    warm = _comps(_est("0.27.1", model="qwen3-30b-a3b", compile_cache="warm"))
    assert {k: v for k, v in cold.items() if k != "activation peak (profile run)"} == {
        k: v for k, v in warm.items() if k != "activation peak (profile run)"}


def test_the_note_says_which_terms_are_charged() -> None:
    warm = " ".join(_est("0.27.1", compile_cache="warm").notes)
    cold = " ".join(_est("0.27.1").notes)
    assert "memprof charges V2's own profile terms" in warm
    assert "memprof charges V2's own profile terms" in cold
    assert "autotuning example arguments" in cold and "--compile-cache warm" in cold


def test_explain_reads_a_compile_cache_hit() -> None:
    base = ("INFO 10-05 05:47:23 [api_utils.py:273] non-default args: {'model': 'Qwen/Qwen3-4B'}\n"
            "INFO 10-05 05:47:31 [core.py:121] Initializing a V1 LLM engine (v0.27.1) with "
            "config: model='Qwen/Qwen3-4B'\n"
            "INFO 10-05 05:47:49 [gpu_worker.py:563] Available KV cache memory: 10.74 GiB\n")
    hit = ("INFO 10-05 05:47:46 [decorators.py:312] Directly load AOT compilation from path "
           "/root/.cache/vllm/torch_compile_cache/torch_aot_compile/abc/rank_0_0/model\n")
    assert parse_log(base + hit).settings.get("compile_cache") == "warm"
    assert "compile_cache" not in parse_log(base).settings


@pytest.mark.parametrize("version", ["0.20.0", "0.11.0", "0.8.5"])
def test_releases_before_v2_say_nothing_of_it(version: str) -> None:
    # the V2 note of 0.29.0 on was given to every release before 0.21.0 too
    assert not any("Model Runner V2" in n for n in _est(version).notes)


def test_a_warm_cache_where_it_changes_nothing_says_so() -> None:
    v1 = " ".join(_est("0.18.0", compile_cache="warm").notes)
    assert "--compile-cache warm: vLLM 0.18.0 runs this model with the V1 runner" in v1
    late = " ".join(_est("0.33.0", compile_cache="warm").notes)
    assert "nothing is compiled in its profile run (--compile-cache warm)" in late
