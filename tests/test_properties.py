"""Invariants (hypothesis): shards sum to the model, TP never grows a rank, KV is linear."""

from hypothesis import given, settings
from hypothesis import strategies as st

from memprof.core.deployment import Deployment, ranks
from memprof.core.kvcache import kv_plan
from memprof.core.models import load_model
from memprof.core.weights import rank_weights, unsharded_total

BF16_MODELS = ["llama-3.1-8b", "qwen3-32b", "qwen3-0.6b", "qwen3-235b-a22b", "llama-3.1-70b"]


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(BF16_MODELS), tp=st.sampled_from([1, 2, 4, 8]),
       pp=st.sampled_from([1, 2, 3, 4]), dp=st.sampled_from([1, 2]), ep=st.booleans())
def test_shards_sum_to_the_whole_model(name: str, tp: int, pp: int, dp: int, ep: bool) -> None:
    spec = load_model(name)
    ep = ep and spec.is_moe
    dep = Deployment(tp=tp, pp=pp, dp=dp, enable_expert_parallel=ep)
    total = 0.0
    for coord in ranks(dep):
        for t in rank_weights(spec, dep, None, coord):
            total += (t.bytes_each - t.padding_each) * t.count / t.replicas
    assert round(total) == unsharded_total(spec, None)


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from([*BF16_MODELS, "deepseek-r1", "gpt-oss-120b", "deepseek-v4-flash"]),
       tp=st.sampled_from([1, 2, 4]), arch=st.sampled_from(["sm90", "sm100"]))
def test_larger_tp_never_grows_a_rank(name: str, tp: int, arch: str) -> None:
    spec = load_model(name)

    def biggest(t: int) -> int:
        dep = Deployment(tp=t)
        return max(sum(x.bytes for x in rank_weights(spec, dep, spec.quant, c, arch))
                   for c in ranks(dep))

    assert biggest(2 * tp) <= biggest(tp)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["llama-3.1-8b", "qwen3-32b", "deepseek-r1", "kimi-k2"]),
       kv=st.sampled_from(["auto", "fp8"]), a=st.integers(1, 5000), b=st.integers(1, 5000))
def test_kv_bytes_linear_in_tokens(name: str, kv: str, a: int, b: int) -> None:
    spec = load_model(name)
    dep = Deployment(kv_cache_dtype=kv)
    plan = kv_plan(spec, dep, ranks(dep)[0], "bfloat16")

    def kv_bytes(tokens: int) -> int:  # whole blocks of context
        return plan.blocks_per_request(tokens * plan.block_size, 1) * plan.block_bytes

    assert kv_bytes(a + b) == kv_bytes(a) + kv_bytes(b)
    assert kv_bytes(a) == a * plan.block_size * plan.bytes_per_token
