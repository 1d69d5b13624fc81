"""vLLM's pipeline stages after the first allocate the ``IntermediateTensors`` of the profile
forward themselves (``PP_INTERMEDIATE_TENSORS``): hidden_states and residual, [T, H] each in the
model dtype, inside the budget. Each case against a hand count from the source."""

from __future__ import annotations

from memprof.core.deployment import Deployment
from memprof.core.estimate import RankEstimate, estimate
from memprof.core.terms.activation import PP_INTERMEDIATE_TENSORS
from memprof.core.version_diff import RULEBOOK

NAME = "PP intermediate tensors (profile run)"


def _inter(rank: RankEstimate) -> int:
    return sum(c.bytes for c in rank.components if c.name == NAME)


def _by_stage(e: object) -> dict[int, RankEstimate]:
    return {r.coord.pp_stage: r for r in e.ranks}  # type: ignore[attr-defined]


def test_qwen3_32b_pp2_second_stage_by_hand() -> None:
    # published row 903's deployment: vllm serve defaults on a >= 70 GiB card give
    # max_num_batched_tokens 8192; Qwen3-32B hidden_size 5120, bf16.
    # 0.27.1 gpu_model_runner.py _dummy_run: make_empty_intermediate_tensors(
    #   batch_size=self.max_num_tokens) -> qwen2.py / utils.py factory: ["hidden_states",
    #   "residual"], torch.zeros((batch_size, hidden_size), dtype) each.
    dep = Deployment(pp=2, max_model_len=32768, gpu_memory_utilization=0.426,
                     engine_version="0.27.1")
    e = estimate("qwen3-32b", dep, gpu_name="RTX-PRO-6000")
    stages = _by_stage(e)
    want = 2 * 8192 * 5120 * 2
    assert want == 167_772_160  # 160 MiB
    assert _inter(stages[1]) == want
    assert _inter(stages[0]) == 0  # the first stage embeds its own input
    comp = next(c for c in stages[1].components if c.name == NAME)
    assert comp.where == "budget" and comp.profiled and comp.category == "activation"
    # inside the budget: the stage keeps that much less for its KV cache than without the row
    assert stages[1].available_kv_bytes < stages[0].available_kv_bytes


def test_qwen3_235b_pp4_every_later_stage_by_hand() -> None:
    # published row 906's deployment: hidden_size 4096, bf16 activations, T = 8192
    dep = Deployment(pp=4, max_model_len=32768, max_num_seqs=32, gpu_memory_utilization=0.9,
                     engine_version="0.27.1")
    e = estimate("qwen3-235b-a22b-fp8", dep, gpu_name="RTX-PRO-6000")
    stages = _by_stage(e)
    assert _inter(stages[0]) == 0
    for s in (1, 2, 3):
        assert _inter(stages[s]) == 2 * 8192 * 4096 * 2 == 134_217_728


def test_follows_max_num_batched_tokens_and_not_without_pp() -> None:
    small = estimate("qwen3-0.6b", Deployment(pp=2, max_num_batched_tokens=2048,
                                              max_model_len=2048, engine_version="0.27.1"),
                     gpu_name="H100")
    assert _inter(_by_stage(small)[1]) == 2 * 2048 * 1024 * 2  # qwen3-0.6b: hidden_size 1024
    flat = estimate("qwen3-0.6b", Deployment(tp=2, engine_version="0.27.1"), gpu_name="H100")
    assert all(_inter(r) == 0 for r in flat.ranks)


def test_v0_stage_counts_it_too() -> None:
    # 0.7.3 worker/model_runner.py ModelRunner.profile_run: a non-first rank makes
    # intermediate tensors for the profile batch (max_num_batched_tokens tokens); Qwen2.5-0.5B
    # (hidden 896): 0.7.3's model registry has no Qwen3ForCausalLM
    e = estimate("qwen2.5-0.5b", Deployment(pp=2, max_num_batched_tokens=4096, max_model_len=4096,
                                            engine_version="0.7.3"), gpu_name="H100")
    assert _inter(_by_stage(e)[1]) == 2 * 4096 * 896 * 2


def test_sglang_is_not_charged() -> None:
    e = estimate("qwen3-0.6b", Deployment(engine="sglang", pp=2), gpu_name="H100")
    assert all(_inter(r) == 0 for r in e.ranks)


def test_rule_is_listed_for_versions() -> None:
    assert PP_INTERMEDIATE_TENSORS in RULEBOOK
    (row,) = PP_INTERMEDIATE_TENSORS
    assert row.applies_to == "pp" and row.engine == "vllm" and row.value == 2
