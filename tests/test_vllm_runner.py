"""vLLM's Model Runner V2 (memprof/core/engines/vllm_runner.py): which model runs it at which
release, and its three terms counted by hand from the 0.27.1 source."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.engines.vllm_runner import (
    greedy_sampler_bytes,
    listed_at,
    runs_v2,
    sampler_state_bytes,
    v2_terms,
)
from memprof.core.estimate import estimate
from memprof.core.models.families import ROWS

# architecture -> its family's DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES rows
LISTED = {a: f.v2_runner_listed for f in ROWS for a in f.architectures}


def _v2(version: str, architecture: str, *, moe: bool = False, hybrid: bool = False,
        quantised: bool = False, env: int | None = None) -> bool:
    return runs_v2(version, listed=listed_at(LISTED.get(architecture, ()), architecture, version),
                   moe=moe, hybrid=hybrid, quantised=quantised, env=env)


def test_sampler_state_of_row_902_by_hand() -> None:
    # 0.27.1 PenaltiesState: output_bin_counts [1024, 151936] int32 = 622,329,856 B and
    # prompt_bin_mask [1024, cdiv(151936, 32) = 4748] int32 = 19,447,808 B; StructuredOutputs-
    # Worker: grammar_bitmask [1024, 4748] int32 = 19,447,808 B and logits_indices [1024] int32;
    # LogitBiasState 3 x [1024, 1024] + [1024, 128], BadWordsState [1024, 1024] + [1024, 129],
    # LogprobTokenIdsState [1024, 128], 4-byte words: 1024 x 17,924 B = 18,354,176 B
    assert sampler_state_bytes(1024, 151_936) == (622_329_856 + 2 * 19_447_808 + 4096
                                                  + 1024 * (4 * 1024 + 128 + 129 + 128) * 4)


def test_sampler_state_of_row_907_by_hand() -> None:
    # Qwen2.5-7B: vocab 152064, max_num_seqs 256: 256 x 152064 x 4 = 155,713,536;
    # cdiv(152064, 32) = 4752 words: 256 x 4752 x 4 = 4,866,048 twice; 256 x 4 = 1024; the
    # logit-bias, bad-words and logprob-token-ids states 256 x 17,924 = 4,588,544
    n = sampler_state_bytes(256, 152_064)
    assert n == 155_713_536 + 2 * 4_866_048 + 1024 + 4_588_544
    assert round(n / 2**20, 1) == 162.2  # 157.8 in the row's notes, before those states


def test_speculative_tokens_widen_the_bitmask_only() -> None:
    # decode_query_len q: grammar_bitmask [R*q, cdiv(V, 32)], logits_indices [R*q]; the
    # penalties' tensors stay [R, ...]
    one, three = sampler_state_bytes(8, 64, 1), sampler_state_bytes(8, 64, 3)
    assert three - one == 2 * 8 * 2 * 4 + 2 * 8 * 4


def test_greedy_sampler_stage_by_hand() -> None:
    # bf16 logits [1024, 151936] = 311,164,928 B; gumbel_sample: cdiv(151936, 1024) = 149
    # blocks, local_argmax int64 + local_max fp32 = 1024 x 149 x 12 = 1,830,912 B
    assert greedy_sampler_bytes(1024, 151_936, 2) == 311_164_928 + 1_830_912


@pytest.mark.parametrize(("version", "charged"), [("0.25.0", False), ("0.26.0", False),
                                                   ("0.27.1", True), ("0.28.0", True)])
def test_the_budget_charges_the_sampler_state_from_0_27(version: str, charged: bool) -> None:
    t = v2_terms(version, max_num_seqs=256, max_num_batched_tokens=2048, vocab=128_256,
                 logits_itemsize=2)
    assert t.sampler_state_charged is charged
    assert t.graph_estimate is False  # profile_cudagraph_memory returns 0 through 0.28.0
    assert t.sampler_stage_bytes == greedy_sampler_bytes(256, 128_256, 2)


def test_0_29_estimates_the_graphs() -> None:
    t = v2_terms("0.29.0", max_num_seqs=256, max_num_batched_tokens=2048, vocab=128_256,
                 logits_itemsize=2)
    assert t.graph_estimate is True and t.sampler_state_charged is True


def test_rows_are_the_smaller_of_tokens_and_seqs() -> None:
    # _dummy_run: num_reqs = min(num_tokens, max_num_reqs)
    t = v2_terms("0.27.1", max_num_seqs=1024, max_num_batched_tokens=512, vocab=1000,
                 logits_itemsize=2)
    assert t.sampler_stage_bytes == greedy_sampler_bytes(512, 1000, 2)


def test_0_21_runs_v2_only_with_the_env() -> None:
    assert not _v2("0.21.0", "Qwen3ForCausalLM")
    assert _v2("0.21.0", "Qwen3ForCausalLM", env=1)


def test_0_23_lists_three_architectures_unquantised() -> None:
    # 0.23.0: listed and 'not model_config.is_moe and not model_config.is_quantized'
    assert _v2("0.23.0", "LlamaForCausalLM")
    assert not _v2("0.23.0", "LlamaForCausalLM", quantised=True)
    assert not _v2("0.23.0", "Qwen2ForCausalLM")


def test_0_24_any_listed_architecture() -> None:
    assert _v2("0.24.0", "Qwen2MoeForCausalLM", moe=True)
    assert _v2("0.24.0", "Qwen3ForCausalLM", quantised=True)
    assert not _v2("0.24.0", "Qwen2ForCausalLM")
    assert not _v2("0.24.0", "Qwen3MoeForCausalLM", moe=True)


@pytest.mark.parametrize("version", ["0.25.0", "0.26.0", "0.27.1", "0.28.0"])
def test_0_25_to_0_28_every_model_without_routed_experts(version: str) -> None:
    assert _v2(version, "Qwen2ForCausalLM")
    assert _v2(version, "Qwen2ForCausalLM", quantised=True)  # rows 908 / 909
    assert not _v2(version, "Qwen3MoeForCausalLM", moe=True)  # rows 904-906 print V1's line
    assert _v2(version, "DeepseekV2ForCausalLM", moe=True)  # listed
    assert not _v2(version, "NemotronHForCausalLM", hybrid=True)


def test_a_listed_hybrid_runs_v2_from_0_27() -> None:
    # 0.26.0: 'if is_hybrid: return False'; 0.27.1: '... and not is_default_v2_architecture'
    assert not _v2("0.26.0", "DeepseekV2ForCausalLM", hybrid=True)
    assert _v2("0.27.1", "DeepseekV2ForCausalLM", hybrid=True)


def test_0_29_every_model_and_the_env_decides_first() -> None:
    assert _v2("0.29.0", "Qwen3MoeForCausalLM", moe=True, hybrid=True)
    assert not _v2("0.29.0", "Qwen3ForCausalLM", env=0)
    assert not _v2("0.27.1", "Qwen3ForCausalLM", env=0)
    assert _v2("0.27.1", "Qwen3MoeForCausalLM", moe=True, env=1)


def test_v0_and_old_releases_never() -> None:
    assert not _v2("0.8.5+v0", "Qwen3ForCausalLM", env=1)
    assert not _v2("0.20.0", "Qwen3ForCausalLM", env=1)


def _note(model: str, dep: Deployment, gpu: str) -> str:
    (note,) = [n for n in estimate(model, dep, gpu_name=gpu).notes if "Model Runner V2" in n]
    return note


def test_the_note_gives_row_902s_terms() -> None:
    dep = Deployment(tp=2, max_model_len=32768, gpu_memory_utilization=0.426,
                     engine_version="0.27.1")
    note = _note("qwen3-32b", dep, "RTX-PRO-6000")
    assert "charges no CUDA-graph estimate" in note
    assert "648.10 MiB" in note and "[1024, 151936]" in note  # the hand count above
    assert "charged by the budget line's total_consumed" in note


def test_the_note_at_0_26_says_the_state_is_not_charged() -> None:
    # row 310: Llama-3.1-8B on an A40 at 0.26.0
    note = _note("llama-3.1-8b", Deployment(max_model_len=4096, max_num_seqs=256,
                                            engine_version="0.26.0"), "A40")
    assert "which this release's budget line does not charge" in note


def test_0_23_notes_the_listed_llama_and_not_its_quantised_run() -> None:
    dep = Deployment(max_model_len=4096, engine_version="0.23.0")
    assert _note("llama-3.1-8b", dep, "H100").startswith(
        "vLLM 0.23.0 runs LlamaForCausalLM with Model Runner V2")
    fp8 = estimate("llama-3.1-8b", Deployment(max_model_len=4096, engine_version="0.23.0",
                                              quantization="fp8"), gpu_name="H100")
    assert not [n for n in fp8.notes if "Model Runner V2" in n]


def test_the_runner_matches_what_each_published_log_prints() -> None:
    # A 0.21.0+ start-up log names its runner in its line tags: Model Runner V2's load line is
    # v1/worker/gpu/model_runner.py's ('[model_runner.py:329] Model loading took'), V1's
    # v1/worker/gpu_model_runner.py's (rows 901-903, 1104 and 1205-1215 print the first, row 904
    # the second).
    import re

    from memprof.base.errors import MemprofError
    from memprof.core.versions import split_generation, version_key
    from tests.test_published_distribution import ROWS, Refused, row_estimate

    seen = {}
    for row in ROWS:
        release, generation = split_generation(row.get("memprof_engine_version") or "")
        if row["engine"] != "vllm" or generation != "v1" or version_key(release) < (0, 21):
            continue
        v2 = re.search(r"\[model_runner\.py:\d+\]", row["quote"]) is not None
        v1 = re.search(r"\[gpu_model_runner\.py:\d+\]", row["quote"]) is not None
        if v1 == v2:
            continue
        try:
            est, _ = row_estimate(row)
        except (Refused, MemprofError):  # a card or model memprof does not know
            continue
        seen[row["id"]] = any("Model Runner V2" in n for n in est.notes)
        assert seen[row["id"]] is v2, row["id"]
    assert seen == {901: True, 902: True, 903: True, 904: False, 1104: True,
                    **{i: True for i in range(1205, 1216)},
                    **{i: True for i in (1601, 1602, 1603, 1604, 1607, 1611,
                                         *range(1640, 1650), 1736, 2455)},
                    2456: False, 2457: True, 2470: False, 2512: False, 2515: True}
