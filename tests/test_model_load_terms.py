"""Model-load terms and the version rules they read, each against a hand calculation with the
vLLM source line it follows (wheels of the named release, unzipped)."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.base.units import MiB
from memprof.core.components import TermContext
from memprof.core.deployment import Deployment, pp_layer_split, ranks
from memprof.core.engine_defaults import resolve
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu
from memprof.core.kvcache import kv_plan
from memprof.core.models import load_model
from memprof.core.terms.init_buffers import init_buffer_terms
from memprof.core.terms.load_rounding import NAME, fused, load_rounding_bytes, load_rounding_terms
from memprof.core.terms.rope_cache import rope_cache_terms
from memprof.core.weights import rank_weights

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
    new = sizes(init_buffer_terms(ctx("deepseek-v4-flash", Deployment(tp=8))))
    assert new == {"indexer topk_indices_buffer": topk}  # 0.27.0+: only with spec decode
    # 0.26.0 nvidia/model.py: ``if get_pp_group().is_last_rank:`` — no speculative condition
    old = sizes(init_buffer_terms(ctx("deepseek-v4-flash", Deployment(
        tp=8, engine_version="0.26.0"))))
    assert old == {"indexer topk_indices_buffer": topk,
                   "DeepSeek-V4 _mtp_hidden_buffer": hidden}
    # 0.21.0-0.26.0: last PP stage only; 0.20.0 model_executor/models/deepseek_v4.py: every rank
    first = sizes(init_buffer_terms(ctx("deepseek-v4-flash", Deployment(
        pp=2, engine_version="0.26.0"), rank=0)))
    assert "DeepSeek-V4 _mtp_hidden_buffer" not in first
    day0 = sizes(init_buffer_terms(ctx("deepseek-v4-flash", Deployment(
        pp=2, engine_version="0.20.0"), rank=0)))
    assert day0["DeepSeek-V4 _mtp_hidden_buffer"] == hidden
    spec_on = sizes(init_buffer_terms(ctx("deepseek-v4-flash", Deployment(
        tp=8, num_speculative_tokens=1))))
    # nvidia/mtp.py DeepSeekV4MultiTokenPredictor.__init__ builds a second topk buffer
    assert spec_on == {"indexer topk_indices_buffer": 2 * topk,
                       "DeepSeek-V4 _mtp_hidden_buffer": hidden}


def _groups(got: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in got.items() if "index group" in k}


def test_dsv32_topk_indices_buffer_target_and_mtp_drafter() -> None:
    # 0.11.0 / 0.19.0 / 0.33.0 deepseek_v2.py DeepseekV2Model.__init__: is_v32 =
    # hasattr(config, "index_topk") → torch.empty(max_num_batched_tokens, index_topk, int32)
    # = 8192 × 2048 × 4 B = 64 MiB (H200 default mnbt 8192), before make_layers (every rank)
    topk = 8192 * 2048 * 4
    assert topk == 64 * MiB
    for version in ("0.11.0", "0.19.0"):
        got = sizes(init_buffer_terms(ctx("deepseek-v3.2", Deployment(
            tp=8, engine_version=version))))
        assert got == {"indexer topk_indices_buffer": topk}
        # deepseek_mtp.py DeepSeekMultiTokenPredictorLayer.__init__ makes the drafter's own:
        # DeepseekV2Model keeps its buffer as a local, so the proposer's sharing (0.20.0 on,
        # llm_base_proposer.py: hasattr(target model, "topk_indices_buffer")) never applies
        spec_on = sizes(init_buffer_terms(ctx("deepseek-v3.2", Deployment(
            tp=8, num_speculative_tokens=1, engine_version=version))))
        assert spec_on == {"indexer topk_indices_buffer": 2 * topk}
    # the buffer is made before make_layers: on the first PP stage too; the drafter is built on
    # the last stage only
    first = init_buffer_terms(ctx("deepseek-v3.2", Deployment(
        pp=2, num_speculative_tokens=1, engine_version="0.19.0"), rank=0))
    assert [(c.name, c.bytes, c.count) for c in first] == [
        ("indexer topk_indices_buffer", topk, 1)]
    # a model with no index_topk makes none
    assert init_buffer_terms(ctx("deepseek-r1", Deployment(tp=8))) == []


def test_dsv32_sparse_mla_index_groups_by_release() -> None:
    # 0.31.0 - 0.33.0 v1/attention/backends/mla/index_group.py: each indexer layer opens a group
    # of physical_topk_indices [rows + 1, index_topk] int32 and valid_topk_counts [rows + 1]
    # int32, rows = min(mnbt, max_num_seqs × (1 + k)) = min(8192, 1024 × 1) = 1024 (H200
    # default max_num_seqs 1024); 61 layers, all with an indexer, on one rank at TP8
    rows = 1024
    got = _groups(sizes(init_buffer_terms(ctx("deepseek-v3.2", Deployment(tp=8)))))
    assert got == {"sparse MLA index groups (physical top-k)": 61 * (rows + 1) * 2048 * 4,
                   "sparse MLA index groups (valid counts)": 61 * (rows + 1) * 4}
    # 0.30.0 also keeps request_ids = arange(rows) int32
    old = _groups(sizes(init_buffer_terms(ctx("deepseek-v3.2", Deployment(
        tp=8, engine_version="0.30.0")))))
    assert old["sparse MLA index groups (request ids)"] == 61 * rows * 4
    # 0.29.0 has no index_group.py
    assert _groups(sizes(init_buffer_terms(ctx("deepseek-v3.2", Deployment(
        tp=8, engine_version="0.29.0"))))) == {}
    # with one draft token: the target's rows 1024 × 2 = 2048; the MTP layer's implementation
    # gets no builder from deepseek_mtp.py and makes one over its own buffer: rows = 8192
    spec_on = _groups(sizes(init_buffer_terms(ctx("deepseek-v3.2", Deployment(
        tp=8, num_speculative_tokens=1)))))
    assert spec_on == {
        "sparse MLA index groups (physical top-k)": 61 * 2049 * 2048 * 4,
        "sparse MLA index groups (valid counts)": 61 * 2049 * 4,
        "MTP drafter index group (physical top-k)": 8193 * 2048 * 4,
        "MTP drafter index group (valid counts)": 8193 * 4}
    # PP2 (0.8.0+ get_pp_indices: 31 / 30): the first stage's groups are its own 31 layers
    assert pp_layer_split(61, 2) == [(0, 31), (31, 61)]
    pp = init_buffer_terms(ctx("deepseek-v3.2", Deployment(pp=2), rank=0))
    assert [c.count for c in pp if "index group" in c.name] == [31, 31]


def test_index_groups_on_rocm_from_0320() -> None:
    # ROCMAiterMLASparseImpl subclasses SparseMLACommonImpl from 0.32.0 (0.30.0 / 0.31.0
    # rocm_aiter_mla_sparse.py: not a subclass, no group)
    mi = find_gpu("MI300X")
    spec = load_model("deepseek-v3.2")
    for version, has in (("0.31.0", False), ("0.32.0", True)):
        dep = resolve(Deployment(tp=8, engine_version=version), spec, mi)
        coord = ranks(dep)[0]
        c = TermContext(spec=spec, dep=dep, gpu=mi, coord=coord,
                        plan=kv_plan(spec, dep, coord, "bfloat16", mi.arch), weights_bytes=0,
                        model_dtype="bfloat16")
        assert any("index group" in x.name for x in init_buffer_terms(c)) is has


# --- layout and weights rules by version ---------------------------------------------------------



def test_pp_split_remainder_by_version() -> None:
    # 0.7.3 distributed/utils.py get_pp_indices: "the last partition will have the remaining
    # layers" → 61 layers / PP4: 15, 15, 15, 16. 0.8.0: partitions[-i] += 1 for i in 2..2 →
    # 15, 15, 16, 15.
    assert pp_layer_split(61, 4, "0.7.3") == [(0, 15), (15, 30), (30, 45), (45, 61)]
    assert pp_layer_split(61, 4, "0.8.0") == [(0, 15), (15, 30), (30, 46), (46, 61)]
    assert pp_layer_split(61, 4) == pp_layer_split(61, 4, "0.33.0")


def test_deepseek_lm_head_on_every_pp_stage_before_080() -> None:
    # 0.7.3 deepseek_v2.py DeepseekV2ForCausalLM.__init__: ParallelLMHead built unconditionally;
    # 0.8.0 builds it only ``if get_pp_group().is_last_rank``. Vocab 129280 (a multiple of 64)
    # × 7168 × 2 B on the first stage of PP2.
    spec = load_model("deepseek-r1")
    for version, has in (("0.7.3", True), ("0.8.0", False)):
        dep = Deployment(pp=2, engine_version=version)
        mods = {t.module for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0])}
        assert ("lm_head" in mods) is has
    e = estimate("deepseek-r1", Deployment(pp=2, engine_version="0.7.3"), gpu_name="H200")
    heads = [c for r in e.ranks for c in r.components if c.name == "lm_head"]
    assert [c.bytes for c in heads] == [129280 * 7168 * 2] * 2


def test_mla_absorption_071_fp8_by_hand() -> None:
    # 0.7.1 attention/backends/mla/utils.py process_weights_after_loading, DeepSeek-R1 fp8 at
    # TP8 (N = 16 local heads, L 512, P 128, V 128, R 64, Lq 1536, H 7168), per layer:
    n, lat, lq, h = 16, 512, 1536, 7168
    w_qr = lq * n * 64 * 2  # W_QR.to(act_dtype): bf16
    dequant = lat * n * (128 + 128) * 4  # scaled_dequantize(out_dtype=float32) kept as W_UK/W_UV
    w_q_uk = n * lat * lq + (lq // 128) * (n * lat // 128) * 4  # fp8 + fp32 block scales
    w_uv_o = h * n * lat + (n * lat // 128) * (h // 128) * 4
    per_layer = w_qr + dequant + w_q_uk + w_uv_o
    spec = load_model("deepseek-r1")
    dep = Deployment(tp=8, engine_version="0.7.1")
    (t,) = [t for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0])
            if t.module.endswith("mla_attn.absorbed")]
    assert t.bytes_each == per_layer and t.count == 61
    # 0.7.3: the dequantised copy in the model dtype (get_and_maybe_dequant_weights dtype=
    # act_dtype): 4 MiB less per layer
    dep3 = Deployment(tp=8, engine_version="0.7.3")
    (t3,) = [t for t in rank_weights(spec, dep3, spec.quant, ranks(dep3)[0])
             if t.module.endswith("mla_attn.absorbed")]
    assert per_layer - t3.bytes_each == lat * n * 256 * 2
    # 0.8.0 (PR #14770): no absorption; only the dequantised kv_b_proj (W_UK_T/W_UV) stays
    dep8 = Deployment(tp=8, engine_version="0.8.0")
    assert not [t for t in rank_weights(spec, dep8, spec.quant, ranks(dep8)[0])
                if t.module.endswith("mla_attn.absorbed")]


def test_load_rounding_qwen2_14b_tp2_by_hand() -> None:
    # Published row 48: vLLM 0.7.2 worker/model_runner.py:1115 logs the memory_allocated delta
    # around get_model (platforms/cuda.py get_current_memory_usage: reset_peak_memory_stats, then
    # max_memory_allocated). PyTorch counts the allocated *block*; a large block is split only
    # when more than kSmallSize (1 MiB) would remain (CUDACachingAllocator.cpp should_split), and
    # a fresh segment is the request rounded up to 2 MiB (get_allocation_size, ≥ 10 MiB). Per
    # layer at TP2 (qwen2.py Qwen2Attention/Qwen2MLP; linear.py QKVParallelLinear is ONE tensor):
    qkv = (20 + 2 * 4) * 128 * 5120 * 2  # 35 MiB → 36 MiB segment, 1 MiB left: not split
    o_proj = 5120 * 2560 * 2  # 25 MiB → 26
    gate_up = 2 * 6912 * 5120 * 2  # 135 MiB → 136
    down = 5120 * 6912 * 2  # 67.5 MiB → 68
    assert (qkv, o_proj, gate_up, down) == (35 * MiB, 25 * MiB, 135 * MiB, 67 * MiB + MiB // 2)
    per_layer = 3 * MiB + MiB // 2  # 1 + 1 + 1 + 0.5 MiB counted beyond the tensors
    # Layer 0 builds the RoPE cache after o_proj (qwen2.py Qwen2Attention.__init__: get_rope), on
    # the GPU in fp32 (rotary_embedding.py RotaryEmbedding._compute_cos_sin_cache: freqs, cos,
    # sin [131072, 64] = 32 MiB each, cat [131072, 128] = 64 MiB), then cache.to(bf16) (32 MiB,
    # into one freed 32 MiB block). Left cached: 32, 32 and 64 MiB. Layer 1's qkv is split from
    # the 64 (29 left), its o_proj from the 29; layers 2 and 3's o_proj from the two 32s. Those
    # four tensors leave > 1 MiB behind, so they are split: 4 MiB less. Embedding and lm_head
    # (742.5 MiB in a 744 MiB segment) are split (1.5 MiB left).
    expected = 48 * per_layer - 4 * MiB
    assert expected == 164 * MiB == 171_966_464
    c = ctx("deepseek-r1-distill-qwen-14b", Deployment(tp=2, engine_version="0.7.2"))
    assert sizes(load_rounding_terms(c)) == {NAME: expected}
    # The log's 13.9476 GB is 14,976,121,464 ± 53,687 B; the tensors are 14,804,084,736 B.
    # Checked on an H100 (torch 2.11.0+cu130, 2026-11-25): torch.empty of this sequence under
    # ``with torch.device("cuda")``, the RoPE code above and 0.7.2 attention/layer.py's four fp32
    # scalars per layer (_k_scale, _v_scale, k_range, v_range: 512-B blocks, not modelled) moved
    # memory_allocated by 14,976,149,504 B = 13.9476 GiB, 28,040 B from the log's midpoint.
    assert abs(14_804_084_736 + expected - 14_976_121_464) < 100 * 1024
    # the runtime slack (reserved − requested) no longer counts these bytes a second time
    assert load_rounding_bytes(c) == expected


def test_load_rounding_joins_qkv_parts() -> None:
    params = [("l.self_attn.qkv_proj(q).weight", 3), ("l.self_attn.qkv_proj(kv).weight", 2),
              ("l.self_attn.qkv_proj(q).bias.bias", 1), ("l.self_attn.qkv_proj(kv).bias.bias", 1),
              ("l.self_attn.o_proj.weight", 4)]
    assert fused(params) == [("l.self_attn.qkv_proj.weight", 5),
                             ("l.self_attn.qkv_proj.bias.bias", 2),
                             ("l.self_attn.o_proj.weight", 4)]
    # SGLang's load figure is a free-memory drop, not memory_allocated: no term
    assert load_rounding_terms(ctx("deepseek-r1-distill-qwen-14b",
                                   Deployment(tp=2, engine="sglang"))) == []


def test_load_rounding_equals_the_gpu_allocator() -> None:
    # reports/gpu/load-rounding/load-rounding-h200.json: each rank's model-load sequence
    # allocated with torch 2.11 on an H200 (recorders/gpu_load_rounding.py, its command in the
    # file); memory_allocated moved by exactly the bytes the term predicts, in all five cases
    # (R1-Distill-14B TP2 at 0.7.2, Qwen3-32B, Llama-3.1-8B, DeepSeek-R1 TP8 rank 0,
    # gpt-oss-120b). Today's term must still predict the measured bytes.
    import json
    from pathlib import Path

    from memprof.core.estimate import rank_context
    from memprof.core.terms.load_rounding import load_ops, replay_rounding

    golden = json.loads((Path(__file__).resolve().parents[1] / "reports" / "gpu" /
                         "load-rounding" / "load-rounding-h200.json").read_text())
    assert len(golden["cases"]) == 5
    for name, case in golden["cases"].items():
        e = estimate(case["model"], Deployment(**case["deployment"]),
                     gpu_name=case["estimate_gpu"])
        ops, requested = load_ops(rank_context(e, e.ranks[0]))
        assert requested + replay_rounding(ops)[0] == case["measured_allocated"], name


def test_rank_allocation_sizes_are_the_allocations_bytes() -> None:
    # the allocator term reads sizes only; they must be rank_allocations' bytes, in order
    from memprof.core.estimate import rank_context
    from memprof.core.terms.allocations import rank_allocation_sizes, rank_allocations

    for model, dep, gpu in (("qwen3-32b", Deployment(kv_cache_dtype="turboquant_k8v4",
                                                     scratch="per-layer"), "H200"),
                            ("deepseek-r1", Deployment(tp=8), "H200"),
                            ("deepseek-v4-flash", Deployment(tp=4, scratch="per-layer"),
                             "MI300X"),
                            ("gpt-oss-120b", Deployment(pp=2, engine_version="0.24.0"), "H100"),
                            ("deepseek-r1-distill-qwen-14b",
                             Deployment(tp=2, engine_version="0.7.2"), "RTX-4090")):
        e = estimate(model, dep, gpu_name=gpu)
        for r in e.ranks:
            ctx = rank_context(e, r)
            assert rank_allocation_sizes(ctx) == [a.bytes for a in rank_allocations(ctx)]


def test_load_rounding_under_vllm_max_split_qwen2_5_1_5b_by_hand() -> None:
    # Published row 1736 (Qwen2.5-1.5B-Instruct bf16, vLLM 0.30.0, one CUDA GPU): "Model loading
    # took 2.98 GiB". From 0.21.0 Worker.load_model runs the load under max_split_size_mb:20
    # (0.21.0 / 0.28.0 / 0.30.0 v1/worker/gpu_worker.py _scoped_allocator_max_split, vLLM PR
    # #41268; not in 0.20.x), CUDA only. PyTorch then never splits a block for a request of
    # 20 MiB or more (CUDACachingAllocator.cpp should_split: size < max_split_size), so such a
    # tensor holds its whole 2 MiB-rounded segment. Per layer (qwen2.py Qwen2MLP, H 1536,
    # I 8960): gate_up [2·8960, 1536] bf16 = 52.5 MiB in a 54 MiB segment; down [1536, 8960] =
    # 26.25 MiB in 28. Before 0.21.0 both rests (1.5 and 1.75 MiB, > kSmallSize) are split off
    # and later tensors take them; qkv (6 MiB) and o_proj (4.5 MiB) are under 20 MiB either way.
    gate_up, down = 2 * 8960 * 1536 * 2, 1536 * 8960 * 2
    assert (gate_up, down) == (52 * MiB + MiB // 2, 26 * MiB + MiB // 4)
    per_layer = (54 * MiB - gate_up) + (28 * MiB - down)
    assert per_layer == 3 * MiB + MiB // 4

    def rounding(version: str, gpu: str = "RTX-4090") -> int:
        from memprof.core.estimate import rank_context
        e = estimate("qwen2.5-1.5b-instruct",
                     Deployment(engine_version=version, max_model_len=4096), gpu_name=gpu)
        return load_rounding_bytes(rank_context(e, e.ranks[0]))

    before = rounding("0.20.2")
    assert before == 4_587_520  # the embedding's 0.875 MiB rest and the small tensors' blocks
    assert rounding("0.21.0") == rounding("0.30.0") == before + 28 * per_layer
    # the tensors (embedding tied to lm_head, 28 layers, the 8 MiB bf16 RoPE cache over
    # max_position_embeddings 32,768) and the blocks: 2.9763 GiB, the log's 2.98 (± 0.005)
    layer = (16 * 128 * 1536 * 2 + 16 * 128 * 2  # qkv [(12 + 2·2)·128, 1536] + its bias
             + 1536 * 1536 * 2 + gate_up + down + 2 * 1536 * 2)  # o_proj, MLP, two norms
    tensors = 151936 * 1536 * 2 + 28 * layer + 1536 * 2 + 32768 * 128 * 2
    assert tensors == 3_095_817_216
    assert abs((tensors + before + 28 * per_layer) / 2**30 - 2.98) < 0.005
    # ROCm: the scope is a no-op there through 0.30.0 (current_platform.is_cuda() is False);
    # 0.31.0's checks is_cuda_alike() (v1/worker/gpu_worker.py _scoped_allocator_max_split),
    # so the same unsplit segments from there (LOAD_MAX_SPLIT_ROCM)
    assert rounding("0.30.0", "MI300X") == before
    assert rounding("0.31.0", "MI300X") == rounding("0.33.0", "MI300X") == before + 28 * per_layer


def test_mrope_cache_is_four_times_max_position_from_0_7_2() -> None:
    # Qwen2.5-VL-7B: rope_scaling {"type": "mrope", "mrope_section": [16, 24, 24]}, head_dim
    # 128, max_position_embeddings 128,000. vLLM 0.7.2 rotary_embedding.py MRotaryEmbedding
    # .__init__: cache_max_position_num = max_position_embeddings * 4 ("In Qwen2.5-VL, the
    # maximum index value is related to the duration of the input video"), the same in 0.28.0
    # rotary_embedding/mrope.py; 0.7.1's MRotaryEmbedding passes max_position_embeddings itself
    # (Qwen2-VL's, which memprof does not bundle).
    def rope(version: str, engine: str = "vllm") -> dict[str, int]:
        return sizes(rope_cache_terms(ctx("qwen2.5-vl-7b-instruct",
                                          Deployment(engine=engine, engine_version=version))))

    # Qwen2.5-VL itself is first in 0.7.2's model registry: 0.7.1 refuses it before any term
    with pytest.raises(BadInput, match="model registry"):
        rope("0.7.1")
    assert rope("0.7.2") == rope("0.28.0") == {
        "RoPE cos/sin cache mrope ×4 (M-RoPE)": 4 * 128_000 * 128 * 2}
    # SGLang's get_rope builds its own MRotaryEmbedding over max_position_embeddings (fp32 on
    # CUDA): not vLLM's enlargement
    (only,) = rope("0.5.10", "sglang").values()
    assert only == 128_000 * 128 * 4


def test_load_rounding_with_expandable_segments_by_hand() -> None:
    # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (published row 1801's environment, vLLM
    # 0.28.0): PyTorch's should_split splits every block down to the request rounded to 512 B
    # when expandable segments are on (CUDACachingAllocator.cpp: "if (block->pool->is_small ||
    # CUDAAllocatorConfig::expandable_segments()) return remaining >= kMinBlockSize"), so a
    # tensor keeps no 2 MiB-rounded segment of its own. One tensor of 25 MiB + 100 B: by
    # default a fresh segment of 26 MiB whose 1 MiB − 100 B rest is not split off (≤ kSmallSize);
    # expandable, a block of 25 MiB + 512 B.
    from memprof.alloc.config import parse_conf
    from memprof.base.errors import BadInput
    from memprof.core.estimate import rank_context
    from memprof.core.terms.load_rounding import load_alloc_conf, replay_rounding

    n = 25 * MiB + 100
    assert replay_rounding(((0, n),), "")[0] == 26 * MiB - n
    assert replay_rounding(((0, n),), "expandable_segments:True")[0] == 512 - 100
    assert replay_rounding(((0, n),), "max_split_size_mb:20,expandable_segments:True")[0] == 412

    # vLLM sets max_split_size_mb:20 alone around the load (0.21.0 on, CUDA); torch's parseArgs
    # resets max_split_size, roundup_power2_divisions and garbage_collection_threshold and
    # keeps expandable_segments: the load runs under vLLM's split size with the launch's
    # expandable segments. Before 0.21.0 the launch's setting is the load's, whole.
    gpu = find_gpu("RTX-4090")
    launch = "expandable_segments:True,roundup_power2_divisions:4,max_split_size_mb:128"
    for version, want in (("0.28.0", "max_split_size_mb:20,expandable_segments:True"),
                          ("0.20.2", launch)):
        assert load_alloc_conf(Deployment(engine_version=version,
                                          pytorch_cuda_alloc_conf=launch), gpu) == want
    assert load_alloc_conf(Deployment(engine_version="0.28.0"), gpu) == "max_split_size_mb:20"
    assert parse_conf(load_alloc_conf(Deployment(engine_version="0.20.2"), gpu)) == parse_conf("")

    # Qwen2.5-1.5B (the test above): every weight, bias and norm and the RoPE cache is a whole
    # number of 512-B blocks (e.g. the qkv bias 16·128·2 = 4,096 B, a norm 1536·2 = 3,072 B), so
    # with expandable segments the load rounds nothing, where vLLM 0.30.0's max_split_size_mb:20
    # leaves 100,007,936 B (4,587,520 + 28 layers × 3.25 MiB)
    def rounding(conf: str | None) -> int:
        e = estimate("qwen2.5-1.5b-instruct", Deployment(
            engine_version="0.30.0", max_model_len=4096, pytorch_cuda_alloc_conf=conf),
            gpu_name="RTX-4090")
        return load_rounding_bytes(rank_context(e, e.ranks[0]))

    assert rounding(None) == 4_587_520 + 28 * (3 * MiB + MiB // 4)
    assert rounding("expandable_segments:True") == 0
    try:
        rounding("expandable_segments:yes")
    except BadInput as exc:
        assert "expandable_segments" in exc.message and exc.hint
    else:
        raise AssertionError("a malformed allocator setting was accepted")


def test_pytorch_cuda_alloc_conf_from_a_serve_command() -> None:
    from memprof.probes.serve_command import parse_tokens

    cmd = parse_tokens(["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "vllm", "serve",
                        "Qwen/Qwen3-32B-AWQ", "-tp", "2"])
    assert cmd.settings["pytorch_cuda_alloc_conf"] == "expandable_segments:True"
