"""DeepSeek V2 / V3 / R1, Kimi K2 (``DeepseekV2ForCausalLM``, ``DeepseekV3ForCausalLM``) and
DeepSeek-V3.2 (``DeepseekV32ForCausalLM``): MLA attention (V3.2 with its lightning indexer),
``first_k_dense_replace`` dense layers then routed + shared experts, MTP layers
(``num_nextn_predict_layers``).

Sources: vLLM ``model_executor/models/deepseek_v2.py`` (``DeepseekV2MLAAttention``,
``DeepseekV2MoE``); transformers ``DeepseekV2Config`` / ``DeepseekV3Config`` (defaults that
differ between them are required, not defaulted).
"""

from __future__ import annotations

from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import (
    Built,
    Family,
    PostLoadRequant,
    lora_refused,
    missing,
    mtp_compiled_rows,
    sglang_embed_rows,
    top_k,
    v0_gate_up_rows,
    v2_listed,
)
from memprof.core.models.spec import MLP, Attention, Layer
from memprof.core.versions import Rule


def _mla_layers(c: ConfigFields, hidden: int, n_layers: int, *, sparse: bool) -> Built:
    heads = c.size("num_attention_heads")
    nope, rope = c.size("qk_nope_head_dim"), c.size("qk_rope_head_dim")
    if "q_lora_rank" not in c.cfg:
        raise missing(c, "q_lora_rank", "null for no query compression, as DeepSeek-V2-Lite")
    attn = Attention(
        kind="mla", num_heads=heads, num_kv_heads=1, head_dim=nope + rope,
        v_head_dim=c.size("v_head_dim"),
        q_lora_rank=c.size("q_lora_rank") if c.cfg["q_lora_rank"] is not None else None,
        kv_lora_rank=c.size("kv_lora_rank"), qk_nope_head_dim=nope, qk_rope_head_dim=rope,
        index_n_heads=c.size("index_n_heads") if sparse else 0,
        index_head_dim=c.size("index_head_dim") if sparse else 0,
        index_topk=c.size("index_topk") if sparse else 0,
        indexer=sparse,
    )
    # every field that decides which layers are MoE and how big they are is required: HF's
    # DeepseekV2Config and DeepseekV3Config default them differently (first_k_dense_replace 0
    # vs 3, n_routed_experts None vs 256, n_shared_experts None vs 1), so a missing one is
    # refused, never read as "dense"
    n_routed = c.size("n_routed_experts")
    for key in ("first_k_dense_replace", "n_shared_experts"):
        if c.cfg.get(key) is None:
            raise missing(c, key, "it decides the MoE layers' layout")
    first_dense = c.num("first_k_dense_replace")
    freq = c.size("moe_layer_freq", 1)  # DeepseekV2Config / DeepseekV3Config: moe_layer_freq=1
    moe_i = c.size("moe_intermediate_size")
    moe = MLP(kind="moe", num_experts=n_routed,
              top_k=top_k(c, n_routed, "num_experts_per_tok"),
              moe_intermediate_size=moe_i,
              shared_intermediate_size=moe_i * c.num("n_shared_experts"),
              e_score_correction_bias=c.cfg.get("topk_method") == "noaux_tc")
    is_moe = [i >= first_dense and i % freq == 0 for i in range(n_layers)]
    dense = (MLP(kind="dense", intermediate_size=c.size("intermediate_size"))
             if not all(is_moe) else moe)
    layers = [Layer(index=i, attention=attn, mlp=moe if is_moe[i] else dense)
              for i in range(n_layers)]
    mtp = [Layer(index=n_layers + k, attention=attn, mlp=moe, is_mtp=True)
           for k in range(c.num("num_nextn_predict_layers", 0))]
    return layers, mtp


# SGLang builds both families with models/deepseek_v2.py: embed_tokens under DP attention
_SGLANG_EMBED = (
    (None, "0.4.9", "replicated", "0.4.3, 0.4.4, 0.4.6, 0.4.7, 0.4.8, 0.4.8.post1"),
    # 0.4.9.post2 already builds it whole again; memprof runs post1 - post4 at 0.4.9's rows
    ("0.4.9", "0.4.9.post5", "attention_tp", "0.4.9"),
    ("0.4.9.post5", "0.5.8", "replicated", "0.4.9.post2, 0.4.9.post5, 0.4.10, 0.5.3, 0.5.4, "
     "0.5.6, 0.5.7"),
    ("0.5.8", None, "attention_tp", "0.5.8, 0.5.9"),
)


# What SGLang's models/deepseek_v2.py DeepseekV2ForCausalLM.post_load_weights does to a block-fp8
# (128 x 128) checkpoint after the load (memprof/core/terms/post_load_requant.py replays it):
# every layer's kv_b_proj is dequantised to bf16 (layers/quantization/fp8_utils.py
# block_quant_dequant) and split into the contiguous w_kc and w_vc; then, where DeepGEMM's
# UE8M0 scales are on (deep_gemm_wrapper/configurer.py: DEEPGEMM_SCALE_UE8M0 =
# ENABLE_JIT_DEEPGEMM and is_blackwell(), compute capability 10; ENABLE_JIT_DEEPGEMM: sm >= 90,
# deep_gemm importable, SGL_ENABLE_JIT_DEEPGEMM / SGLANG_ENABLE_JIT_DEEPGEMM default true),
# _weight_requant_ue8m0 requantises, layer by layer, the attention projections (q_a_proj and
# kv_a_proj_with_mqa are one fused_qkv_a_proj_with_mqa there), the dense MLP or the shared
# experts (fp8_utils.py requant_weight_ue8m0_inplace: block_quant_dequant, per_block_cast_to_fp8,
# _transform_scale_ue8m0, then the new weight and scale replace the old). Read in the 0.4.7
# (absent), 0.4.8, 0.4.8.post1, 0.4.9, 0.4.10, 0.5.1, 0.5.2, 0.5.3, 0.5.4 and 0.5.5 wheels; 0.5.6
# - 0.5.9 requantise elsewhere (should_deepgemm_weight_requant_ue8m0), not replayed.
_ATTN_FIRST = ("self_attn.q_a_proj", "self_attn.q_b_proj", "self_attn.kv_b_proj",
               "self_attn.o_proj")
_KV_B_FIRST = ("self_attn.kv_b_proj", "self_attn.o_proj", "self_attn.q_a_proj",
               "self_attn.q_b_proj")
_MLP = ("mlp.gate_up_proj", "mlp.down_proj", "mlp.shared_experts.gate_up_proj",
        "mlp.shared_experts.down_proj")


def _sglang_post_load(family: str) -> tuple[Rule, ...]:
    def value(attn: tuple[str, ...]) -> PostLoadRequant:
        return PostLoadRequant(
            fused=(("self_attn.q_a_proj", "self_attn.kv_a_proj_with_mqa"),),
            split=("self_attn.kv_b_proj", "self_attn.mla_attn.W_UK_T+W_UV.W_UK_T+W_UV", 2),
            requant=attn + _MLP, cc_majors=(10,))

    common = ("models/deepseek_v2.py DeepseekV2ForCausalLM.post_load_weights (kv_b_proj: "
              "block_quant_dequant, w_kc / w_vc .contiguous()), _weight_requant_ue8m0 "
              "(DEEPGEMM_SCALE_UE8M0); layers/quantization/fp8_utils.py "
              "requant_weight_ue8m0_inplace, per_block_cast_to_fp8")
    return (
        Rule(name=f"sglang_post_load_requant ({family})",
             changes="weights: allocator blocks left by post-load requantisation",
             since="0.4.8", until="0.5.2", value=value(_ATTN_FIRST), engine="sglang",
             applies_to=family, introduced_by="read in the sglang 0.4.8 wheel (not in 0.4.7)",
             removed_by="read in the sglang 0.5.2 wheel (kv_b_proj and o_proj first)",
             source=f"sglang 0.4.8, 0.4.8.post1, 0.4.9, 0.4.10, 0.5.1 {common}: fused_qkv_a, "
             "q_b, kv_b, o_proj, then the MLP"),
        Rule(name=f"sglang_post_load_requant ({family})",
             changes="weights: allocator blocks left by post-load requantisation",
             since="0.5.2", until="0.5.6", value=value(_KV_B_FIRST), engine="sglang",
             applies_to=family, introduced_by="read in the sglang 0.5.2 wheel",
             removed_by="requantisation moved (should_deepgemm_weight_requant_ue8m0, read in "
             "0.5.6; not replayed)",
             source=f"sglang 0.5.2, 0.5.3, 0.5.4, 0.5.5 {common}: kv_b, o_proj, fused_qkv_a, "
             "q_b, then the MLP"),
    )


def _deepseek_v3_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    return _mla_layers(c, hidden, n_layers, sparse=False)


def _deepseek_v32_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    return _mla_layers(c, hidden, n_layers, sparse=True)


# vLLM's LoRA support of DeepseekV2ForCausalLM (DeepseekV3ForCausalLM subclasses it): SupportsLoRA
# from 0.10.2 (0.10.1.1 has none), with LoRA on the MLA attention's projections (LinearBase) and,
# from 0.11.1, on the experts (FusedMoEWithLoRA): refused until memprof models them
DEEPSEEK_V3_LORA = lora_refused(
    "deepseek_v3", "DeepseekV2ForCausalLM", "0.10.2",
    "0.10.1.1 (no SupportsLoRA) / 0.10.2 / 0.11.0 / 0.11.1 / 0.20.0 / 0.33.0 deepseek_v2.py",
    introduced_by="SupportsLoRA on DeepseekV2ForCausalLM (first released in 0.10.2)",
    unmodelled="MLA attention projections", experts_from="0.11.1")

# the MTP drafter's predictor input (Family.mtp_predictor_input), read in the 0.27.0, 0.30.0
# and 0.33.0 wheels
DEEPSEEK_MTP_INPUT = ("eh_proj", "model_executor/models/deepseek_mtp.py "
                      "DeepSeekMultiTokenPredictorLayer.forward")

# DeepSeekMTP is compiled from 0.11.1 (0.11.0 deepseek_mtp.py has no @support_torch_compile)
def _mtp_compiled(family: str) -> tuple[Rule, ...]:
    return mtp_compiled_rows(family, "deepseek_mtp.py DeepSeekMTP",
                             (("0.11.0", "0.11.1", False), ("0.11.1", None, True)),
                             "the 0.11.0, 0.11.1, 0.19.0 and 0.33.0 wheels")

DEEPSEEK_V3 = Family(
    lora=DEEPSEEK_V3_LORA,
    name="deepseek_v3", model_types=("deepseek_v2", "deepseek_v3", "kimi_k2"),
    architectures=("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"),
    build=_deepseek_v3_layers, attention="mla", moe=True, mtp=True, lm_head_every_pp_stage=True,
    mtp_predictor_input=DEEPSEEK_MTP_INPUT, mtp_compiled=_mtp_compiled("deepseek_v3"),
    # SGLang models/deepseek_v2.py (0.4.5+): "Only Deepseek V3/R1 can use shared experts fusion"
    fusable_shared_experts=("DeepseekV3ForCausalLM",),
    v2_runner_listed=(v2_listed("deepseek_v3", "0.24.0", "0.29.0", ("DeepseekV2ForCausalLM",),
                                "0.24.0 / 0.25.0 / 0.26.0 / 0.27.1 / 0.28.0"),),
    dp_attention_embed=sglang_embed_rows("deepseek_v3", "deepseek_v2.py", _SGLANG_EMBED),
    post_load_requant=_sglang_post_load("deepseek_v3"),
    v0_mlp_gate_up=v0_gate_up_rows("deepseek_v3", "deepseek_v2.py", "DeepseekV2MLP",
                                   (("0.7.1", None, "kept", "0.7.1, 0.7.3"),)),
    source="vLLM model_executor/models/deepseek_v2.py")
DEEPSEEK_V32 = Family(
    name="deepseek_v32", model_types=("deepseek_v32",), architectures=("DeepseekV32ForCausalLM",),
    build=_deepseek_v32_layers, attention="mla", moe=True, mtp=True,
    mtp_predictor_input=DEEPSEEK_MTP_INPUT, mtp_compiled=_mtp_compiled("deepseek_v32"),
    # SGLang's settings and pool sizing for the indexer's models ("NSA"), per release (its rows
    # are in memprof/core/version_diff.py's RULEBOOK)
    modules=("memprof/core/engines/sglang_nsa.py",),
    dp_attention_embed=sglang_embed_rows("deepseek_v32", "deepseek_v2.py", _SGLANG_EMBED),
    post_load_requant=_sglang_post_load("deepseek_v32"),
    source="vLLM model_executor/models/deepseek_v2.py (DeepseekV32 indexer)")
