"""memprof.core.terms: each term against a hand calculation, then against published figures.

Published figures (tests/data/published.json, a copy of shared/calibration/published.json) come
from vLLM versions older than the V1 semantics memprof models; every calibration test states what
it compares, the error measured when it was written, and why its tolerance is what it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.units import GiB, KiB, MiB
from memprof.core.components import Component, TermContext
from memprof.core.deployment import Deployment, ranks
from memprof.core.gpus import GPU, find_gpu
from memprof.core.kvcache import kv_plan, kv_tensor_sizes
from memprof.core.models import ModelSpec, load_model, spec_from_config
from memprof.core.terms import (
    activation,
    allocator,
    cudagraph,
    draft_head,
    encoder,
    graph_input_handles,
    in_use,
    init_buffers,
    load_rounding,
    load_segments,
    lora,
    marlin_workspace,
    nccl_nvls,
    nccl_warmup,
    ngram_speculator,
    non_torch,
    post_load_requant,
    request_table,
    reserved_charge,
    rocm_load_cache,
    rope_cache,
    runner_buffers,
    runner_v2_graphs,
    stream_pool,
)
from memprof.core.terms.nccl_image import image_delta
from memprof.core.terms.registry import BUDGET_TERMS, RUNTIME_TERMS

ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).parent / "data" / "published.json").read_text())["rows"]}

H100 = find_gpu("H100")


def make_ctx(spec: ModelSpec, dep: Deployment, gpu: GPU = H100, *, rank: int = 0,
             dtype: str = "bfloat16", num_gpu_blocks: int = 0) -> TermContext:
    coord = ranks(dep)[rank]
    plan = kv_plan(spec, dep, coord, dtype, gpu.arch)
    return TermContext(spec=spec, dep=dep, gpu=gpu, coord=coord, plan=plan, weights_bytes=0,
                       model_dtype=dtype, num_gpu_blocks=num_gpu_blocks)


def by_name(comps: list[Component]) -> dict[str, Component]:
    return {c.name: c for c in comps}


def total(comps: list[Component]) -> int:
    return sum(c.bytes for c in comps)


# A toy dense model whose live sets are easy to write down by hand.
TOY = spec_from_config({
    "model_type": "llama", "hidden_size": 1024, "intermediate_size": 4096,
    "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 4,
    "head_dim": 64, "vocab_size": 32000, "torch_dtype": "bfloat16",
}, name="toy")

TOY_MOE = spec_from_config({
    "model_type": "qwen3_moe", "hidden_size": 1024, "intermediate_size": 4096,
    "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 4,
    "head_dim": 64, "vocab_size": 32000, "torch_dtype": "bfloat16", "num_experts": 8,
    "num_experts_per_tok": 2, "moe_intermediate_size": 512,
}, name="toy-moe")

# deepseek-ai/DeepSeek-R1-Distill-Qwen-14B config.json (Qwen2ForCausalLM: 48 layers, hidden 5120,
# intermediate 13824, 40 heads, 8 KV heads, vocab 152064, 131072 positions, bf16), checked against
# a public dump of that config.json ("Qwen2ForCausalLM, 48层, 40注意力头, 隐藏层5120维,
# 中间层13824维, 8个KV头", blog.youkuaiyun.com/gitblog_02847/article/details/150261037).
QWEN14B = spec_from_config({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 5120,
    "intermediate_size": 13824, "num_hidden_layers": 48, "num_attention_heads": 40,
    "num_key_value_heads": 8, "vocab_size": 152064, "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}, name="deepseek-r1-distill-qwen-14b")

# deepseek-ai/DeepSeek-V2-Lite(-Chat) config.json, as dumped verbatim in a public
# ``DeepseekV2Config {...}`` print (27 layers, hidden 2048, intermediate 10944, 16 heads,
# q_lora_rank null, kv_lora_rank 512, qk_nope 128, qk_rope 64, v_head 128, 64 routed + 2 shared
# experts, moe_intermediate 1408, first_k_dense_replace 1, top-6, vocab 102400), and a Megatron
# model yaml citing https://huggingface.co/deepseek-ai/DeepSeek-V2-Lite with the same sizes.
V2_LITE = spec_from_config({
    "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
    "hidden_size": 2048, "intermediate_size": 10944, "num_hidden_layers": 27,
    "num_attention_heads": 16, "num_key_value_heads": 16, "q_lora_rank": None,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "n_routed_experts": 64, "n_shared_experts": 2, "moe_intermediate_size": 1408,
    "first_k_dense_replace": 1, "moe_layer_freq": 1, "num_experts_per_tok": 6,
    "vocab_size": 102400, "max_position_embeddings": 163840, "torch_dtype": "bfloat16",
    "topk_method": "greedy",
}, name="deepseek-v2-lite-chat")


# --- 1. activations: hand calculations ------------------------------------------------------------


def test_toy_dense_mlp_stage_sets_the_peak() -> None:
    # a warm compile cache: no cold compile's example arguments (terms/cold_compile.py: the
    # toy's [32000, 1024] table copy, 62.5 MiB, would set the peak)
    dep = Deployment(max_num_batched_tokens=2048, max_num_seqs=4, max_model_len=4096,
                     compile_cache="warm")
    comps = by_name(activation.activation_terms(make_ctx(TOY, dep)))
    # T = 2048, bf16. residual + hidden = 2·2048·1024·2 = 8 MiB; gate_up 2048·8192·2 = 32 MiB,
    # act 16 MiB, down 4 MiB -> 60 MiB. Attention: qkv 2048·(16·64 + 4·128)·2 = 6 MiB + out 4 + o
    # 4 + 8 = 22 MiB. Sampler (R = 4 < 8: sort path): 4 MiB + 4·32000·(2 + 22) B ≈ 7 MiB.
    assert comps["activation peak (profile run)"].bytes == 60 * MiB
    assert "dense MLP" in comps["activation peak (profile run)"].formula
    assert comps["cuBLAS workspace"].bytes == 32 * MiB  # sm90
    assert "fused-MoE workspace (WorkspaceManager)" not in comps
    assert all(c.where == "budget" and c.profiled and c.category == "activation"
               for c in comps.values())


def test_toy_sampler_sets_the_peak_with_many_rows() -> None:
    dep = Deployment(max_num_batched_tokens=2048, max_num_seqs=1024, max_model_len=4096)
    stages = {s.name: s.bytes for s in activation.activation_stages(make_ctx(TOY, dep))}
    # R = min(1024, 2048) = 1024 ≥ 8 (Triton top-k/top-p): hidden 2048·1024·2 + the last rows
    # and their rand_like 2·1024·1024·2 (activation.V1_SAMPLER_HIDDEN) + logits
    # 1024·32000·2 + fp32/probs/noise 12·1024·32000 + row buffer 132·32000·4.
    assert stages["sampler"] == 4 * MiB + 4 * MiB + 65_536_000 + 393_216_000 + 16_896_000
    assert stages["sampler"] > stages["dense MLP"]


def test_toy_sort_path_below_eight_rows() -> None:
    dep = Deployment(max_num_batched_tokens=2048, max_num_seqs=4, max_model_len=4096)
    stage = activation.sampler_stage(make_ctx(TOY, dep), 2048, 4)
    # the sort's moment beats the masks' (22·R·V): fp32 copy 4 + values 4 + int64 indices 8 +
    # PyTorch's few-segment sort temporaries 32 (SortStable.cu segmented_sort_pairs_by_full_sort;
    # 48 B per element measured on an H100 at 8-127 rows, reports/gpu/v0-sampler/); the hidden
    # states [T, H] + 2 × [R, H] (activation.V1_SAMPLER_HIDDEN)
    assert stage.bytes == 4 * MiB + 2 * 4 * 1024 * 2 + 4 * 32000 * 2 + 4 * 32000 * 48


def test_toy_tp2_halves_the_mlp_and_adds_the_all_reduce_copy() -> None:
    dep = Deployment(tp=2, max_num_batched_tokens=2048, max_num_seqs=4, max_model_len=4096)
    stages = {s.name: s.bytes for s in activation.activation_stages(make_ctx(TOY, dep))}
    # I/tp = 2048: gate_up 16 MiB + act 8 + down 4 + all-reduce out 4 + base 8 = 40 MiB
    assert stages["dense MLP"] == 40 * MiB


def test_pp_first_stage_has_no_sampler_last_has_no_embedding() -> None:
    dep = Deployment(pp=2, max_num_batched_tokens=2048, max_num_seqs=4, max_model_len=4096)
    first = {s.name for s in activation.activation_stages(make_ctx(TOY, dep, rank=0))}
    last = {s.name for s in activation.activation_stages(make_ctx(TOY, dep, rank=1))}
    assert "sampler" not in first and "embedding" in first
    assert "sampler" in last and "embedding" not in last


def test_moe_workspace_and_stage_by_hand() -> None:
    dep = Deployment(max_num_batched_tokens=1024, max_num_seqs=4, max_model_len=4096)
    ctx = make_ctx(TOY_MOE, dep)
    # TritonExperts: (M, k, max(I, H)) + (M, k, max(2I, H)) = 1024·2·1024·2 + 1024·2·1024·2
    assert activation.moe_workspace_bytes(ctx) == 8 * MiB
    stages = {s.name: s.bytes for s in activation.activation_stages(ctx)}
    # base 4 MiB + router logits 1024·8·4 + top-k 1024·2·8 + sorted ids (1024·2 + 8·63)·4
    # + experts' output 1024·1024·2
    assert stages["MoE"] == 4 * MiB + 32 * KiB + 16 * KiB + (2048 + 504) * 4 + 2 * MiB
    comps = by_name(activation.activation_terms(ctx))
    assert comps["fused-MoE workspace (WorkspaceManager)"].bytes == 8 * MiB


def test_moe_with_dp_gathers_tokens_and_splits_intermediate() -> None:
    dep = Deployment(dp=2, max_num_batched_tokens=1024, max_num_seqs=4, max_model_len=4096)
    # M = T·dp = 2048, I/(tp·dp) = 256: 2048·2·max(256, 1024)·2 twice = 16 MiB
    assert activation.moe_workspace_bytes(make_ctx(TOY_MOE, dep)) == 16 * MiB
    ep = Deployment(dp=2, enable_expert_parallel=True, max_num_batched_tokens=1024,
                    max_num_seqs=4, max_model_len=4096)
    # EP keeps the full I = 512: 2048·2·1024·2 + 2048·2·1024·2 = 16 MiB as well (H dominates)
    assert activation.moe_workspace_bytes(make_ctx(TOY_MOE, ep)) == 16 * MiB


def test_mla_worst_case_kv_b_rows() -> None:
    # W = max(min(max(8·mml, 4·seqs·block), 65536), seqs·block); block 64 on sm90 (FlashMLA)
    dep = Deployment(max_num_batched_tokens=8192, max_num_seqs=256, max_model_len=8192)
    assert activation.mla_chunked_prefill_rows(make_ctx(V2_LITE, dep)) == 65536
    small = Deployment(max_num_batched_tokens=2048, max_num_seqs=16, max_model_len=2048)
    assert activation.mla_chunked_prefill_rows(make_ctx(V2_LITE, small)) == 16384


def test_v2_lite_mla_stage_by_hand() -> None:
    dep = Deployment(dtype="float16", max_num_batched_tokens=8192, max_num_seqs=256,
                     max_model_len=8192, enforce_eager=True)
    stages = {s.name: s.bytes for s in
              activation.activation_stages(make_ctx(V2_LITE, dep, dtype="float16"))}
    # T = 8192, fp16: base 2·8192·2048·2 = 64 MiB; kv_a 8192·576·2 = 9 MiB; q 8192·16·192·2 =
    # 48 MiB; kv_c 8 MiB; out 8192·16·128·2 = 32 MiB; kv_b worst case 65536·16·256·2 = 512 MiB;
    # o_proj 32 MiB
    assert stages["attention (mla)"] == (64 + 9 + 48 + 8 + 32 + 512 + 32) * MiB


def test_dsv4_mhc_stage_and_aux_stream_workspaces() -> None:
    flash = load_model("deepseek-v4-flash")
    dep = Deployment(max_num_batched_tokens=1024, max_num_seqs=4, max_model_len=65536)
    ctx = make_ctx(flash, dep, find_gpu("H200"))
    stages = {s.name: s.bytes for s in activation.activation_stages(ctx)}
    # old + new residual 2·1024·4·4096·2 + x in/out 2·1024·4096·2 + mixes 2·1024·(4+16)·4
    assert stages["mHC post/pre"] == 64 * MiB + 16 * MiB + 160 * KiB
    # C4 attention: base = residual [T,hc,H] 32 MiB + input [T,H] 8 MiB + mixes 1024·20·4 B;
    # fused wq_a|wkv 1024·1536·2 = 3 MiB, q_norm 2, q 1024·64·512·2 = 64, kv_norm 1, indexer q
    # 1024·64·128·2 = 16 (+ weights fp32 1024·64·4 B), compressor kv|score fp32 1024·2·1024·4 =
    # 8, indexer compressor kv|score fp32 1024·2·256·4 = 2 (attention.py
    # _run_parallel_input_projections, out_dtype=torch.float32, vLLM 0.26.0–0.33.0),
    # o_padded 1024·64·512·2 = 64, z 1024·8·1024·2 = 16, wo_b 8
    c4 = (32 + 8 + 3 + 2 + 64 + 1 + 16 + 8 + 2 + 64 + 16 + 8) * MiB + 80 * KiB + 256 * KiB
    assert stages["attention (dsv4, C4)"] == c4
    # C128: no indexer, compressor kv|score fp32 1024·2·512·4 = 4 MiB
    assert stages["attention (dsv4, C4)"] - stages["attention (dsv4, C128)"] == \
        16 * MiB + 256 * KiB + 10 * MiB - 4 * MiB
    assert by_name(activation.activation_terms(ctx))["cuBLAS workspace"].bytes == 4 * 32 * MiB
    rocm = make_ctx(flash, dep, find_gpu("MI300X"))
    assert by_name(activation.activation_terms(rocm))["cuBLAS workspace"].bytes == 128 * MiB


def test_dsv4_sparse_indexer_op_holds_the_logits_stand_in() -> None:
    # The C4 layer's SparseAttnIndexer, in the profile run (attn_metadata not a dict), allocates
    # torch.empty(VLLM_SPARSE_INDEXER_MAX_LOGITS_MB · 2^20, uint8), default 512, and holds it
    # until the op returns (vllm/model_executor/layers/sparse_attn_indexer.py sparse_attn_indexer,
    # read in the 0.23.0, 0.26.0 and 0.33.0 wheels; vllm/envs.py default "512"). It runs in
    # _sparse_indexer_and_attn just before forward_mqa: o_padded (``_alloc_attn_out``) and the
    # input projections are live, z and wo_b not yet.
    flash = load_model("deepseek-v4-flash")
    dep = Deployment(max_num_batched_tokens=1024, max_num_seqs=4, max_model_len=65536)
    ctx = make_ctx(flash, dep, find_gpu("H200"))
    stages = {s.name: s.bytes for s in activation.activation_stages(ctx)}
    # the C4 attention set of test_dsv4_mhc_stage_and_aux_stream_workspaces less z 16 MiB and
    # wo_b 8 MiB, plus 512 MiB
    c4_inputs = (32 + 8 + 3 + 2 + 64 + 1 + 16 + 8 + 2 + 64) * MiB + 80 * KiB + 256 * KiB
    assert stages["sparse indexer op (dsv4, C4, profile run)"] == c4_inputs + 512 * MiB
    assert stages["attention (dsv4, C4)"] == c4_inputs + (16 + 8) * MiB
    # per token (bf16, TP1): base 32768 + 8192 + 80, inputs 3072 + 2048 + 65536 + 1024 + 16384
    # + 256 + 8192 + 2048 + 65536 = 205,136 B; at T = 8224 (row 25's mnbt):
    # 8224 · 205,136 + 2^29 = 2,223,909,376 B
    big = make_ctx(flash, Deployment(max_num_batched_tokens=8224, max_num_seqs=1,
                                     max_model_len=262144), find_gpu("H200"))
    top = activation.activation_terms(big)[0]
    assert top.bytes == 8224 * 205_136 + 512 * MiB == 2_223_909_376
    assert "sparse indexer op" in top.formula
    # a CUDA-graph decode step runs with metadata: no stand-in there
    decode = activation.activation_stages(ctx, tokens=8, rows=8, decode=True)
    assert not any("indexer op" in s.name for s in decode)
    # no indexer, no stand-in: a model without C4 layers keeps its stages
    assert not any("indexer op" in s.name for s in activation.activation_stages(make_ctx(
        TOY, dep)))


def test_cublas_workspace_by_arch() -> None:
    assert activation.cublas_workspace_bytes(find_gpu("RTX-4090")) == 8 * MiB + 128 * KiB
    assert activation.cublas_workspace_bytes(H100) == 32 * MiB
    assert activation.cublas_workspace_bytes(find_gpu("MI300X")) == 128 * MiB
    unknown = GPU(name="x", total_bytes=GiB, arch="unknown")
    assert activation.cublas_workspace_bytes(unknown) == 32 * MiB


# --- 2. CUDA graphs -------------------------------------------------------------------------------


def test_capture_sizes_default() -> None:
    dep = Deployment(max_num_batched_tokens=8192, max_num_seqs=256)
    sizes = cudagraph.capture_sizes(dep)
    # min(256·1·2, 512) = 512: [1,2,4] + 8..248 step 8 (31) + 256..512 step 16 (17) = 51
    assert len(sizes) == 51 and sizes[:4] == [1, 2, 4, 8] and sizes[-1] == 512
    modes = cudagraph.graph_modes(dep)
    assert len(modes["FULL"]) == 35 and max(modes["FULL"]) == 256  # 1 ≤ x ≤ 256


def test_capture_sizes_spec_decode_and_small_mnbt() -> None:
    spec = Deployment(max_num_batched_tokens=8192, max_num_seqs=4, num_speculative_tokens=1)
    # dql = 2: max = min(4·2·2, 512) = 16 -> [1,2,4,8,16]; FULL: 2 ≤ x ≤ 8
    assert cudagraph.capture_sizes(spec) == [1, 2, 4, 8, 16]
    assert cudagraph.graph_modes(spec)["FULL"] == [2, 4, 8]
    small = Deployment(max_num_batched_tokens=12, max_num_seqs=256)
    assert cudagraph.capture_sizes(small) == [1, 2, 4, 8, 12]  # mnbt appended when it caps the max


def test_cudagraph_estimate_and_pool_by_hand() -> None:
    dep = Deployment(max_num_batched_tokens=2048, max_num_seqs=4, max_model_len=4096)
    ctx = make_ctx(TOY, dep)
    # sizes [1,2,4,8] (PIECEWISE), FULL [1,2,4]. Decode live set at b = 8 is the MLP stage:
    # base 2·8·1024·2 = 32 KiB + gate_up 8·8192·2 = 128 KiB + act 64 KiB + down 16 KiB = 240 KiB;
    # at b = 4: 120 KiB.
    decode = activation.activation_stages(ctx, tokens=8, rows=0, decode=True)
    assert max(st.bytes for st in decode) == 240 * KiB
    g = cudagraph.cudagraph_model(ctx)
    # 2 attention layers -> 3 pieces per PIECEWISE size: 4·3 + 3 = 15 graph executables
    assert cudagraph.graph_pieces(ctx) == 3 and g.graphs == 15
    # per size, both layers: GEMMs (qkv, o_proj, gate_up, down) 2·4 = 8; other kernels 2·(2 + 2)
    # = 8, and 2 attention kernels per layer more in FULL graphs: 12
    assert cudagraph.graph_nodes(ctx, "PIECEWISE") == (8, 8)
    assert cudagraph.graph_nodes(ctx, "FULL") == (8, 12)
    piece = 3 * 110 * KiB + 8 * 3350 + 8 * 2310  # 383,200 B per PIECEWISE size
    full = 110 * KiB + 8 * 3350 + 12 * 2310  # 167,160 B per FULL size
    assert (piece, full) == (383_200, 167_160)
    assert g.driver == 70 * MiB + 4 * piece + 3 * full
    # every tensor is < 1 MiB: one 2 MiB small-pool segment, plus the capture stream's cuBLAS
    # workspace (32 MiB on Hopper)
    tensors = 2 * MiB + 32 * MiB
    assert g.actual == tensors + g.driver
    comps = by_name(cudagraph.cudagraph_terms(ctx))
    est = comps["CUDA-graph estimate"]
    # first PIECEWISE sample: tensors + 70 MiB + one size's pieces; per-size samples are below
    # 1 MiB, so floored: estimate = first + 1 MiB·(4−1) + 1 MiB·(3−1)
    assert est.bytes == tensors + 70 * MiB + piece + 5 * MiB
    assert est.where == "budget" and est.profiled
    above = comps["CUDA-graph pool above the estimate"]
    assert above.bytes == max(0, g.actual - est.bytes) == 0
    assert above.where == "runtime" and not above.profiled


def test_cudagraph_enforce_eager_is_zero() -> None:
    dep = Deployment(max_num_batched_tokens=2048, max_num_seqs=4, enforce_eager=True)
    comps = cudagraph.cudagraph_terms(make_ctx(TOY, dep))
    assert [c.bytes for c in comps] == [0, 0]
    assert all(c.formula == "enforce_eager" for c in comps)


def test_cudagraph_estimate_off_moves_the_pool_to_runtime() -> None:
    dep = Deployment(max_num_batched_tokens=2048, max_num_seqs=4, max_model_len=4096)
    comps = cudagraph.cudagraph_terms_estimate_off(make_ctx(TOY, dep))
    g = cudagraph.cudagraph_model(make_ctx(TOY, dep))
    assert comps[0].bytes == 0 and comps[1].bytes == g.actual == 34 * MiB + g.driver


# --- 3. non-torch ---------------------------------------------------------------------------------


def test_non_torch_single_gpu() -> None:
    dep = Deployment(max_num_batched_tokens=2048, max_num_seqs=4)
    comps = by_name(non_torch.non_torch_terms(make_ctx(TOY, dep)))
    # measured_h100_overheads.json: 554,500,096 − 2,097,152
    assert comps["CUDA context"].bytes == 552_402_944
    assert comps["CUDA context"].where == "baseline"
    # (623,706,112 − 552,402,944) + 0 + (718,077,952 − 623,706,112) = 165,675,008 B = 158 MiB
    assert comps["non-torch increase (profile run)"].bytes == 158 * MiB
    assert comps["non-torch increase (profile run)"].where == "budget"
    assert not any(n.startswith("NCCL") for n in comps)
    assert all(c.category == "non_torch" for c in comps.values())


def test_non_torch_one_communicator_per_group_larger_than_one() -> None:
    dep = Deployment(tp=2, pp=2, dp=2, enable_expert_parallel=True, max_num_batched_tokens=2048,
                     max_num_seqs=4)
    comps = non_torch.non_torch_terms(make_ctx(TOY_MOE, dep))
    nccl = [c for c in comps if c.name.startswith("NCCL")]
    # TP(2), the process's first: (458 + 474) MiB with torch's stream pool (73,400,320 B, which
    # vLLM's PyNccl communicator's warm-up makes from 0.14.0: memprof.core.terms.pynccl_pool),
    # all before the baseline; PP(2), DP(2) and EP(tp·dp = 4), made after it in the same process
    # (non_torch.made_after_another): each a second communicator, 207,618,048 + 301,989,888 B
    # at 2 ranks and 205,520,896 + 301,989,888 B at 4 (nccl.SECOND_COMM_ROWS, measured without
    # the pool; reports/gpu/nccl-later); and PP's first send/recv:
    # 62 MiB + 1 peer × 32 channels × 12 MiB = 446 MiB (memprof.core.terms.nccl)
    assert len(nccl) == 4
    # (the first communicator's init at the default release's NCCL 2.30.7 sm_90 image, a page
    # above the measured 2.28.9 one: memprof.core.terms.nccl_image)
    image = image_delta(find_gpu("H100"), "2.30.7")[0]
    assert image == 2 * MiB
    assert total(nccl) == (932 * MiB + image) \
        + 2 * (207_618_048 + 301_989_888) + 205_520_896 + 301_989_888 + 446 * MiB
    assert all(c.where == "baseline" for c in nccl)
    tp_only = non_torch.non_torch_terms(make_ctx(TOY, Deployment(tp=2, max_num_batched_tokens=2048,
                                                             max_num_seqs=4)))
    assert [c.name for c in tp_only if c.name.startswith("NCCL")] == [
        "NCCL TP communicator (2 ranks)"]


def test_non_torch_rocm_is_flagged_unverified() -> None:
    dep = Deployment(max_num_batched_tokens=2048, max_num_seqs=4)
    comps = non_torch.non_torch_terms(make_ctx(TOY, dep, find_gpu("MI300X")))
    assert all("unverified" in c.formula for c in comps)


# --- 4. allocator ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("request_bytes", "reserved"), [
    (1, 2 * MiB),  # small pool, 2 MiB segment
    (MiB, 2 * MiB),
    (MiB + 1, 20 * MiB),  # 1-10 MiB -> 20 MiB segment
    (300 * MiB + 7, 302 * MiB),  # internals §5.4 measured: +302 MiB
])
def test_allocation_size(request_bytes: int, reserved: int) -> None:
    assert allocator.allocation_size(request_bytes) == reserved


def test_allocator_slack_of_kv_tensors_by_hand() -> None:
    # 0.26.0: a release that loads under max_split_size_mb:20 and whose budget does not charge
    # the load's holes (reserved_charge.RESERVED_CHARGED: 0.27.0 on), so the slack keeps them
    dep = Deployment(engine_version="0.26.0", max_num_batched_tokens=2048, max_num_seqs=4,
                     max_model_len=4096)
    ctx = make_ctx(TOY, dep, num_gpu_blocks=1000)
    # page = 16 tokens · 4 KV heads · (64+64) · 2 B = 16,384 B; one tensor per layer of
    # 16,384,000 B, reserved round_up(·, 2 MiB) = 16,777,216 -> 393,216 B slack × 2 layers
    comps = allocator.allocator_runtime_terms(ctx)
    assert "the KV tensors' 2 MiB rounding alone is 768.00 KiB" in comps[0].formula
    assert comps[0].where == "runtime" and not comps[0].profiled
    assert comps[0].category == "allocator"
    # the replay also holds the weights: the slack is the KV rounding plus what the weights'
    # segments leave free, less what the load figure holds already: at vLLM's newest release
    # the load runs under max_split_size_mb:20 (load_rounding.LOAD_MAX_SPLIT), so embed_tokens
    # and lm_head ([32000, 1024] bf16 = 62.5 MiB, a 64 MiB segment each) are allocated whole,
    # 2 × 1.5 MiB in the weights figure; no later tensor (3, 2, 16, 8 MiB, or small-pool) fits
    # in those rests, so the segments are the same as at PyTorch's default
    from memprof.alloc import CachingAllocator
    from memprof.core.terms.allocations import rank_allocations
    from memprof.core.terms.load_rounding import load_rounding_bytes

    assert load_rounding_bytes(ctx) == 2 * (64 * MiB - 32000 * 1024 * 2) == 3 * MiB
    sim = CachingAllocator()
    allocs = rank_allocations(ctx)
    for a in allocs:
        sim.malloc(a.bytes)
    s = sim.memory_stats()
    assert comps[0].bytes == (s["reserved_bytes.all.current"] - sum(a.bytes for a in allocs)
                              - 3 * MiB)
    # the KV tensors alone: a large-pool segment each, 393,216 B of rounding each
    kv_only = CachingAllocator()
    for a in allocs:
        if a.phase == "kv_cache":
            kv_only.malloc(a.bytes)
    assert kv_only.memory_stats()["reserved_bytes.all.current"] - 2 * 16_384_000 == 2 * 393_216


def test_kv_tensor_layouts() -> None:
    flash = load_model("deepseek-v4-flash")
    dep = Deployment(max_num_batched_tokens=2048, max_num_seqs=4, max_model_len=65536)
    ctx = make_ctx(flash, dep, find_gpu("H200"))
    assert kv_tensor_sizes(ctx.plan, 10) == [ctx.plan.block_bytes * 10]  # one packed slab
    assert len(kv_tensor_sizes(make_ctx(TOY, dep).plan, 10)) == 2


def test_term_lists() -> None:
    budget, runtime = BUDGET_TERMS, RUNTIME_TERMS
    assert budget == [rope_cache.rope_cache_terms, init_buffers.init_buffer_terms,
                      draft_head.draft_head_weight_terms,
                      marlin_workspace.marlin_workspace_terms, lora.lora_terms,
                      load_rounding.load_rounding_terms, load_segments.load_segments_terms,
                      rocm_load_cache.rocm_load_cache_terms,
                      post_load_requant.post_load_requant_terms, activation.activation_terms,
                      runner_buffers.runner_buffer_terms, draft_head.proposer_buffer_terms,
                      ngram_speculator.ngram_buffer_terms, encoder.encoder_terms,
                      cudagraph.cudagraph_terms, graph_input_handles.graph_input_handle_terms,
                      runner_v2_graphs.runner_v2_graph_terms,
                      non_torch.non_torch_terms, nccl_nvls.nccl_nvls_terms,
                      nccl_warmup.warm_up_first_kernel, stream_pool.stream_pool_terms,
                      reserved_charge.reserved_charge_terms, in_use.in_use_terms]
    assert runtime == [allocator.allocator_runtime_terms, request_table.request_table_terms]


# --- calibration against published figures --------------------------------------------------------


def _dsv4_spark(mnbt: int) -> tuple[float, float]:
    row = ROWS[25 if mnbt == 8224 else 26]
    assert row["max_num_batched_tokens"] == mnbt
    spark = GPU(name="GB10", total_bytes=int(row["gpu_mem_gib"] * GiB), arch="sm121",
                exact=False)
    dep = Deployment(max_num_batched_tokens=mnbt, max_num_seqs=1, max_model_len=262144,
                     gpu_memory_utilization=0.93)
    got = total(activation.activation_terms(make_ctx(load_model("deepseek-v4-flash"), dep, spark)))
    return got / GiB, row["observed"]["activation_peak_gib"]


def test_rows_25_26_dsv4_flash_spark_activation() -> None:
    # Published 5.30 GiB (mnbt 8224) and 1.39 GiB (mnbt 2048), TP1, max_num_seqs 1, on one GB10.
    # memprof (upstream vLLM DSv4 path): 2.59 and 0.74 GiB, i.e. −51% and −47% when written;
    # 2.64 and 0.75 GiB (−50%, −46%) with the fp32 compressor GEMM outputs (vLLM 0.26–0.33);
    # 2.95 and 1.20 GiB (−44%, −13%) with the sparse indexer's 512 MiB logits stand-in (vLLM
    # 0.23–0.33, a constant: the slope is 296 KiB per batched token against ~664 published).
    # That deployment is not upstream vLLM. The recipe's start.sh (MiaAI-Lab/DeepSeek-v4-Flash-
    # One-DGX-Spark @d4ba142) pins ghcr.io/0xsero/deepseek-v4-flash-0731-spark-sparkinfer@sha256:
    # 2e077489…, whose Dockerfile (0xSero/deepseek-v4-flash-0731-spark-sparkinfer @590d217) builds
    # local-inference-lab/vllm @30038602 + sparkinfer @272a84bd with four patches; its
    # entrypoint.sh runs BACKEND=b12x-a8, INDEXER_BACKEND=b12x, EXL3 experts and a DSpark K5
    # drafter, SM12x kernels only (CUTE_DSL_ARCH=sm_121a). Upstream 0.33.0 picks no b12x DSv4
    # attention (nvidia/model.py ``_select_dsv4_attn_cls``: sm_12x runs
    # DeepseekV4FlashInferSM120Attention, whose profile run reserves a fixed 128 MiB) and
    # Marlin for its MXFP4 experts (workspaces M·k·(max(I,H) + max(2I,H)) bf16, as counted).
    # Issue #4 quotes the b12x compressed-MLA workspace locked at 1157.00 MB (vLLM's MB = MiB)
    # with mnbt 2048: sparkinfer @272a84bd ``attention/compressed_mla/_scratch.py``
    # ``_compressed_mla_scratch_layout`` (tmp_output bf16 + tmp_lse fp32 per q-chunk and head,
    # final_lse fp32 per row and head) at 2048 rows, 64 heads and 9 chunks per row
    # (``max_chunks_per_row`` is the fork's caller's: an inference) is 2048·64·(9·(512·2 + 4) + 4) B
    # = 1,213,202,432 B = 1157.00 MiB exactly, 578.5 KiB per row. The rest of the fork's forward
    # cannot be modelled: vLLM @30038602 is in neither stored copy (the snapshot ends 2026-05-29,
    # the file index lacks the commit) and its kernels need a GB10 to trace. Tolerance: memprof
    # must stay below the published peak and above 40% of it, and so must the per-token slope.
    hi, pub_hi = _dsv4_spark(8224)
    lo, pub_lo = _dsv4_spark(2048)
    assert 0.40 * pub_hi < hi < pub_hi
    assert 0.40 * pub_lo < lo < pub_lo
    assert 0.40 * (pub_hi - pub_lo) < hi - lo < pub_hi - pub_lo


def _qwen14b_ctx(rank: int) -> TermContext:
    # V0 (Feb 2025) defaults for max_model_len 131072 > 32K: chunked prefill on,
    # max_num_batched_tokens 2048, max_num_seqs 256 (V0 SchedulerConfig); RTX 4090, TP2
    # (compared with V1 at the default release on a warm compile cache: the profile run's own
    # stages, without a cold compile's example arguments, terms/cold_compile.py)
    dep = Deployment(tp=2, max_num_batched_tokens=2048, max_num_seqs=256, max_model_len=131072,
                     gpu_memory_utilization=0.98, compile_cache="warm")
    return make_ctx(QWEN14B, dep, find_gpu("RTX-4090"), rank=rank)


def test_row48_qwen14b_forward_activation_on_the_non_sampling_rank() -> None:
    # "PyTorch activation peak memory takes 0.19GiB" (vLLM V0). V0's profile differs from V1's:
    # only the driver rank gathered logits and sampled, and the quoted log is the other rank's —
    # the KV the engine actually got (81,536 tokens × 98,304 B = 7.46 GiB) is 1.23 GiB below the
    # quoted rank's 8.69 GiB, the min over workers being the driver's. So compare memprof's
    # forward (no sampler) + cuBLAS workspace: 161 MiB + 8.1 MiB = 0.165 GiB, −13% when written.
    # Tolerance 25%: V0 ran attention in the profile and allocated differently.
    ctx = _qwen14b_ctx(rank=1)
    forward = max(s.bytes for s in activation.activation_stages(ctx) if s.name != "sampler")
    got = (forward + activation.cublas_workspace_bytes(ctx.gpu)) / GiB
    published = ROWS[48]["observed"]["activation_peak_gib"]
    assert abs(got - published) / published < 0.25


def test_row48_qwen14b_driver_rank_sampler_is_leaner_in_v1() -> None:
    # The driver rank's extra non-KV memory in that V0 run: 8.69 − 81,536·98,304 B = 1.23 GiB, so
    # its activation peak was ≈ 0.19 + 1.23 = 1.42 GiB (V0 sorted the [256, 152064] logits). V1
    # samples on every rank with the Triton top-k/top-p kernel (12·R·V instead of ≥ 22·R·V):
    # memprof's V1 peak (0.65 GiB when written) must be set by the sampler, lie below the V0
    # driver figure and above a third of it.
    obs = ROWS[48]["observed"]
    v0_driver = obs["activation_peak_gib"] + obs["kv_cache_gib"] - obs["kv_tokens"] * 98_304 / GiB
    comps = by_name(activation.activation_terms(_qwen14b_ctx(rank=0)))
    assert "sampler" in comps["activation peak (profile run)"].formula
    got = total(list(comps.values())) / GiB
    assert v0_driver / 3 < got < v0_driver


def test_row48_qwen14b_non_torch_increase() -> None:
    # "non_torch_memory takes 0.25GiB" (V0 0.7.2). V0 takes its baseline before the NCCL
    # communicators exist (0.7.2 worker/worker.py Worker.init_device: MemorySnapshot() l.161,
    # init_worker_distributed_environment l.166), so NCCL is inside that figure
    # (non_torch.NCCL_PLACEMENT). Two RTX 4090s have no peer access, so NCCL runs over host shared
    # memory, and 0.7.2 sets NCCL_CUMEM_ENABLE=0 (vllm/__init__.py l.30): measured on 2× H100
    # with NCCL_P2P_DISABLE=1, NCCL 2.28.9, 195,035,136 + 195,035,136 B = 372 MiB, of which
    # torch's stream pool (70 MiB) is not NCCL's: vLLM's PyNccl communicator does not make it,
    # the profile run's logits gather on ProcessGroupNCCL does, inside the same figure
    # (memprof.core.terms.pynccl_pool; charged by stream_pool_terms, not here): 302 + 70 MiB.
    # With cuBLAS and Triton's 102 MiB (sm89: cuBLAS's 4 MiB-row pool, 56 MiB under the H100's
    # 158 MiB, non_torch.cublas_small_pool) that is 474 MiB, 1.85× the published figure: the
    # pair's NCCL 2.21.5 took at most the ~154 MiB the log leaves beside the libraries.
    # Tolerance: the composition exactly, and memprof at or above the published figure (NCCL is
    # in it) and below 2.2× of it.
    dep = Deployment(tp=2, max_num_batched_tokens=2048, max_num_seqs=256, max_model_len=131072,
                     gpu_memory_utilization=0.98, engine_version="0.7.2")
    comps = by_name(non_torch.non_torch_terms(make_ctx(QWEN14B, dep, find_gpu("RTX-4090"))))
    nccl = comps["NCCL TP communicator (2 ranks)"]
    assert nccl.where == "budget" and comps["CUDA context"].where == "baseline"
    # less torch's stream pool (memprof.core.terms.pynccl_pool): 302 MiB at the H100 SHM rows'
    # 4 channels; the 4090's PCIe Gen4 x16 link gets 2 over SHM (memprof.core.terms.
    # nccl_channels, reports/gpu/nccl/nccl-channels-4x-h100.json: 178 + 2n MiB at init), 4 MiB
    # less: 298 MiB; with the pool that stream_pool_terms charges, 368 MiB in the budget
    # and its first all_reduce's stack reservation at the 4090's 128 SMs × 1536 threads and NCCL
    # 2.21.5's sm_80 kernel (1,312 B): 54 MiB, not the H100's 186 (memprof.core.terms.nccl_stack)
    # and init's NCCL device code, 2.21.5's sm_80 image (24 pages) for the measured 2.28.9
    # sm_90 one (51; memprof.core.terms.nccl_image)
    assert nccl.bytes == 195_035_136 + 195_035_136 - 73_400_320 - 4 * MiB - 132 * MiB - 54 * MiB
    pool = sum(c.bytes for c in stream_pool.stream_pool_terms(
        make_ctx(QWEN14B, dep, find_gpu("RTX-4090"))))
    assert pool == 73_400_320
    budget = sum(c.bytes for c in comps.values() if c.where == "budget") + pool
    # the profile run's first kernel is the 4090's own step (128 SMs × 1536 threads: 66 MiB after
    # the first GEMM, not the H100's 90; memprof.core.terms.first_kernel): 260 MiB in all
    assert budget == 158 * MiB - non_torch.CUBLAS_SMALL_POOL_SAVING_BYTES - 24 * MiB + 182 * MiB
    published = ROWS[48]["observed"]["non_torch_gib"] * GiB
    assert published <= budget < 2.2 * published


def _v2_lite_ctx() -> TermContext:
    # benchmark_throughput.py --enforce-eager --max-model-len 8192 --dtype float16 (Dec 2024 V0):
    # no chunked prefill at 8192 ≤ 32K, so max_num_batched_tokens = max(8192, 2048) and
    # max_num_seqs = 256 (V0 defaults)
    dep = Deployment(dtype="float16", max_num_batched_tokens=8192, max_num_seqs=256,
                     max_model_len=8192, enforce_eager=True, gpu_memory_utilization=0.9)
    return make_ctx(V2_LITE, dep, H100, dtype="float16")


def test_row8_v2_lite_activation() -> None:
    # peak_torch_memory 30.56 GiB includes the weights ("took 29.3010 GB", bytes / 2**30): the
    # profile's activation ≈ 1.26 GiB. memprof (V1 semantics): MLA stage 705 MiB + fused-MoE
    # workspace 456 MiB + cuBLAS 32 MiB = 1.165 GiB, −7.5% when written. V0 (Dec 2024, pre-MLA
    # MHA layout) allocated differently (transient fused-MoE caches of 588 MiB, FlashInfer's
    # 256 MiB workspace, no kv_b worst-case tensor), so the agreement is partly coincidental.
    # Tolerance 25%.
    obs = ROWS[8]["observed"]
    published = obs["peak_torch_gib"] - obs["weights_gb"]
    got = total(activation.activation_terms(_v2_lite_ctx())) / GiB
    assert abs(got - published) / published < 0.25


def test_row8_v2_lite_non_torch_is_not_comparable() -> None:
    # "non_torch_memory=5.21GiB" (Dec 2024 V0): that version's baseline was taken before the
    # engine existed, so the figure holds the CUDA context and everything non-torch the process
    # made (internals §7.2: 1.79 GiB for Llama-3-8B TP1 then); it is not vLLM's current
    # non_torch_increase. The only honest check: memprof's whole non-torch (context + profile
    # increase, 0.67 GiB) must not exceed it.
    comps = non_torch.non_torch_terms(_v2_lite_ctx())
    assert total(comps) / GiB < ROWS[8]["observed"]["non_torch_gib"]
    assert [c for c in comps if c.name.startswith("NCCL")] == []


def test_allocator_slack_replays_the_load_under_its_split_limit() -> None:
    # vLLM 0.30.0 loads under max_split_size_mb:20 and restores PyTorch's default after
    # (v1/worker/gpu_worker.py Worker.load_model, _scoped_allocator_max_split): the runtime
    # slack's replay runs the model load's allocations under that setting and the rest at the
    # default, then leaves out what the load figure holds (the unsplit blocks) and the load's
    # holes, which 0.30.0's budget line charges already (total_consumed: reserved_charge)
    from memprof.alloc import CachingAllocator
    from memprof.alloc.config import parse_conf
    from memprof.core.estimate import estimate, rank_context
    from memprof.core.terms.allocations import rank_allocation_sizes_and_load
    from memprof.core.terms.load_rounding import load_rounding_bytes
    from memprof.core.terms.reserved_charge import load_holes_bytes

    e = estimate("qwen2.5-1.5b-instruct", Deployment(engine_version="0.30.0",
                                                     max_model_len=4096), gpu_name="RTX-4090")
    ctx = rank_context(e, e.ranks[0])
    sizes, loaded = rank_allocation_sizes_and_load(ctx)
    sim = CachingAllocator("max_split_size_mb:20")
    for n in sizes[:loaded]:
        sim.malloc(n)
    sim.conf = parse_conf("")  # torch._C._accelerator_setAllocatorSettings after the load
    for n in sizes[loaded:]:
        sim.malloc(n)
    s = sim.memory_stats()
    load = load_rounding_bytes(ctx)
    assert load == 100_007_936  # tests/test_model_load_terms.py: 4.375 MiB + 28 × 3.25 MiB
    (slack,) = [c for c in e.ranks[0].components if c.name == "allocator slack (simulated)"]
    holes = load_holes_bytes(ctx)  # tests/test_reserved_charge_term.py: 10 × 3.5 MiB and more
    assert holes > 35 * MiB
    assert slack.bytes == s["reserved_bytes.all.current"] - s["requested_bytes.all.current"] \
        - load - holes > 0
