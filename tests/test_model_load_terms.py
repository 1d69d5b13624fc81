"""Model-load terms and the version rules they read, each against a hand calculation with the
vLLM source line it follows (wheels of the named release, unzipped)."""

from __future__ import annotations

from memprof.base.units import MiB
from memprof.core.components import TermContext
from memprof.core.deployment import Deployment, ranks
from memprof.core.engine_defaults import resolve
from memprof.core.gpus import find_gpu
from memprof.core.kvcache import kv_plan
from memprof.core.models import load_model
from memprof.core.terms.dsv4_init_buffers import dsv4_init_buffer_terms
from memprof.core.terms.rope_cache import rope_cache_terms

H200 = find_gpu("H200")


def ctx(model: str, dep: Deployment, rank: int = 0) -> TermContext:
    spec = load_model(model, speculative_mtp=dep.num_speculative_tokens > 0)
    dep = resolve(dep, spec, H200)
    coord = ranks(dep)[rank]
    return TermContext(spec=spec, dep=dep, gpu=H200, coord=coord,
                       plan=kv_plan(spec, dep, coord, "bfloat16", H200.arch), weights_bytes=0,
                       model_dtype="bfloat16")


def sizes(comps: list) -> dict[str, int]:  # type: ignore[type-arg]
    return {c.name: c.bytes for c in comps}


def test_rope_default_qwen3() -> None:
    # 0.33.0 rotary_embedding/base.py RotaryEmbeddingBase._compute_cos_sin_cache: t =
    # arange(max_position_embeddings), cache = cat(cos, sin) → [40960, 128], then
    # ``cache.to(dtype)`` (bf16): 40960 × 128 × 2 B = 10 MiB; one instance for all 64 layers
    # (get_rope's _ROPE_DICT).
    got = sizes(rope_cache_terms(ctx("qwen3-32b", Deployment())))
    assert list(got.values()) == [40960 * 128 * 2] and 10 * MiB == 40960 * 128 * 2


def test_rope_llama3_uses_max_position() -> None:
    # 0.33.0 rotary_embedding/llama3_rope.py: the base cache over max_position (131072) × 128
    got = sizes(rope_cache_terms(ctx("llama-3.1-8b", Deployment())))
    assert sum(got.values()) == 131072 * 128 * 2


def test_rope_gpt_oss_is_fp32_yarn() -> None:
    # 0.33.0 gpt_oss.py OAIAttention.__init__: get_rope(..., dtype=torch.float32,
    # rope_type "yarn"); yarn_scaling_rope.py _compute_cos_sin_cache: t = arange(
    # original_max_position (4096) × factor (32)) → [131072, 64] fp32 = 32 MiB
    got = sizes(rope_cache_terms(ctx("gpt-oss-120b", Deployment())))
    assert list(got.values()) == [4096 * 32 * 64 * 4] == [32 * MiB]


def test_rope_deepseek_mla_deepseek_yarn() -> None:
    # 0.33.0 deepseek_v2.py DeepseekV2MLAAttention.__init__: get_rope(qk_rope_head_dim=64,
    # rope_type deepseek_yarn); deepseek_scaling_rope.py: arange(4096 × 40) → [163840, 64] bf16
    got = sizes(rope_cache_terms(ctx("deepseek-r1", Deployment(tp=8))))
    assert list(got.values()) == [163840 * 64 * 2]


def test_rope_deepseek_v4_one_fp32_cache_per_theta() -> None:
    # 0.33.0 models/deepseek_v4/common/rope.py build_deepseek_v4_rope: theta = rope_theta for
    # SWA-only layers, compress_rope_theta for compressed ones; DeepseekV4ScalingRotaryEmbedding
    # registers the fp32 cache of [65536 × 16 = 1,048,576, 64] = 256 MiB.
    one = 65536 * 16 * 64 * 4
    assert one == 256 * MiB
    flash = sizes(rope_cache_terms(ctx("deepseek-v4-flash", Deployment(tp=8))))
    assert sorted(flash.values()) == [one, one]  # layers 0-1 are SWA-only, the rest compressed
    pro = sizes(rope_cache_terms(ctx("deepseek-v4-pro", Deployment(tp=8))))
    assert list(pro.values()) == [one]  # Pro's trunk has no SWA-only layer
    pro_mtp = sizes(rope_cache_terms(ctx("deepseek-v4-pro", Deployment(
        tp=8, num_speculative_tokens=1))))
    assert sorted(pro_mtp.values()) == [one, one]  # the MTP block uses rope_theta


def test_dsv4_topk_buffer_and_mtp_hidden_buffer_by_version() -> None:
    # 0.33.0 nvidia/model.py DeepseekV4Model.__init__: topk_indices_buffer = empty(mnbt,
    # index_topk, int32) → 8192 × 512 × 4 = 16 MiB (Flash, H200 default mnbt 8192)
    topk = 8192 * 512 * 4
    hidden = 8192 * 4 * 4096 * 2  # _mtp_hidden_buffer: [mnbt, hc_mult·H] bf16 = 256 MiB
    new = sizes(dsv4_init_buffer_terms(ctx("deepseek-v4-flash", Deployment(tp=8))))
    assert new == {"DeepSeek-V4 topk_indices_buffer": topk}  # 0.27.0+: only with spec decode
    # 0.26.0 nvidia/model.py: ``if get_pp_group().is_last_rank:`` — no speculative condition
    old = sizes(dsv4_init_buffer_terms(ctx("deepseek-v4-flash", Deployment(
        tp=8, engine_version="0.26.0"))))
    assert old == {"DeepSeek-V4 topk_indices_buffer": topk,
                   "DeepSeek-V4 _mtp_hidden_buffer": hidden}
    # 0.21.0-0.26.0: last PP stage only; 0.20.0 model_executor/models/deepseek_v4.py: every rank
    first = sizes(dsv4_init_buffer_terms(ctx("deepseek-v4-flash", Deployment(
        pp=2, engine_version="0.26.0"), rank=0)))
    assert "DeepSeek-V4 _mtp_hidden_buffer" not in first
    day0 = sizes(dsv4_init_buffer_terms(ctx("deepseek-v4-flash", Deployment(
        pp=2, engine_version="0.20.0"), rank=0)))
    assert day0["DeepSeek-V4 _mtp_hidden_buffer"] == hidden
    spec_on = sizes(dsv4_init_buffer_terms(ctx("deepseek-v4-flash", Deployment(
        tp=8, num_speculative_tokens=1))))
    # nvidia/mtp.py DeepSeekV4MultiTokenPredictor.__init__ builds a second topk buffer
    assert spec_on == {"DeepSeek-V4 topk_indices_buffer": 2 * topk,
                       "DeepSeek-V4 _mtp_hidden_buffer": hidden}
