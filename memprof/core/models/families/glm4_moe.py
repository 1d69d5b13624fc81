"""GLM-4.5 / GLM-4.6 (``Glm4MoeForCausalLM``, ``model_type`` ``glm4_moe``): GQA with q/k/v
biases, optional q/k norms and partial RoPE; ``first_k_dense_replace`` dense layers, then
routed experts with a shared expert and an fp32 router; an MTP layer in the checkpoint that
vLLM loads only for speculative decoding.

Source: vLLM ``vllm/model_executor/models/glm4_moe.py`` (vllm-project/vllm, read at commit
002d6073): ``Glm4MoeAttention`` — ``QKVParallelLinear(bias=attention_bias)``, row-parallel
``o_proj`` without bias, ``q_norm``/``k_norm`` (head_dim) only when ``use_qk_norm``,
``partial_rotary_factor`` defaulted to 0.5 (``rope_parameters.setdefault``); the decoder layer
is MoE when ``layer_idx >= first_k_dense_replace`` (else ``Glm4MoeMLP`` of
``intermediate_size``); ``Glm4MoE`` — the gate is ``nn.Linear(hidden, n_routed_experts,
bias=False, dtype=torch.float32)`` with an fp32 ``e_score_correction_bias``, a shared expert
``Glm4MoeMLP`` of ``moe_intermediate_size × n_shared_experts`` (TP-sharded), the routed
experts of ``moe_intermediate_size``; ``Glm4MoeModel.load_weights`` drops the MTP layers
(``skip_spec_layers``), so they cost memory only with ``--speculative-config`` (the
``glm4_moe_mtp.py`` draft). transformers ``Glm4MoeConfig``: ``use_qk_norm=False``.
"""

from __future__ import annotations

from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import (
    Built,
    Family,
    LoraSupport,
    gqa,
    missing,
    mtp_compiled_rows,
    sglang_embed_rows,
    sglang_fa3_listed,
    top_k,
)
from memprof.core.models.spec import MLP, Layer
from memprof.core.versions import Rule


def _glm4_moe_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    attn = gqa(c, hidden, bias=c.flag("attention_bias", False),
               qk_norm=c.flag("use_qk_norm", False))
    for key in ("first_k_dense_replace", "n_shared_experts", "n_routed_experts"):
        if c.cfg.get(key) is None:
            raise missing(c, key, "it decides the MoE layers' layout")
    n_exp = c.size("n_routed_experts")
    moe_i = c.size("moe_intermediate_size")
    moe = MLP(kind="moe", num_experts=n_exp, top_k=top_k(c, n_exp, "num_experts_per_tok"),
              moe_intermediate_size=moe_i,
              shared_intermediate_size=moe_i * c.num("n_shared_experts"),
              e_score_correction_bias=True, router_fp32=True)
    first_dense = c.num("first_k_dense_replace")
    dense = MLP(kind="dense", intermediate_size=c.size("intermediate_size"))
    layers = [Layer(index=i, attention=attn, mlp=moe if i >= first_dense else dense)
              for i in range(n_layers)]
    mtp = [Layer(index=n_layers + k, attention=attn, mlp=moe, is_mtp=True)
           for k in range(c.num("num_nextn_predict_layers", 0))]
    return layers, mtp


# vLLM's LoRA support of Glm4MoeForCausalLM: SupportsLoRA from 0.10.1 (0.10.0's class has none);
# up to 0.11.0 LoRA sits on qkv_proj (q/k/v packed), o_proj, the shared experts' and the dense
# layers' gate_up_proj (packed) and down_proj; the router is an fp32 ``nn.Linear``, no LinearBase,
# so it carries none (``LoraSupport.router``), nor do the routed experts; no embedding modules,
# no extra vocabulary. From 0.11.1 ``FusedMoEWithLoRA`` puts LoRA on the experts (refused).
LORA: tuple[Rule, ...] = (
    Rule(name="glm4_moe_lora", changes="LoRA: modules, expert LoRA", since="0.10.1",
         until="0.11.1", value=LoraSupport(extra_vocab=False, embeddings=False, router=False),
         introduced_by="SupportsLoRA on Glm4MoeForCausalLM (first released in 0.10.1)",
         removed_by="FusedMoEWithLoRA (first released in 0.11.1)",
         source="0.10.0 / 0.10.1 / 0.10.1.1 / 0.10.2 / 0.11.0 model_executor/models/glm4_moe.py "
         "(0.10.0: no SupportsLoRA, gate a ReplicatedLinear; then SupportsLoRA, gate "
         "nn.Linear(dtype=torch.float32), Glm4MoeMLP shared experts); lora/utils.py "
         "get_supported_lora_modules (LinearBase only)", applies_to="glm4_moe"),
    Rule(name="glm4_moe_lora", changes="LoRA: modules, expert LoRA", since="0.11.1",
         until=None,
         value=LoraSupport(extra_vocab=False, embeddings=False, experts=True, router=False),
         introduced_by="FusedMoEWithLoRA (first released in 0.11.1)",
         source="0.11.1 / 0.12.0 / 0.33.0 model_executor/models/glm4_moe.py; 0.11.1 "
         "lora/layers/fused_moe.py FusedMoEWithLoRA", applies_to="glm4_moe"),
)


FAMILY = Family(
    name="glm4_moe", model_types=("glm4_moe",), architectures=("Glm4MoeForCausalLM",),
    sglang_fa3_listed=(sglang_fa3_listed("glm4_moe", "0.4.10", "0.5.8",
                                         ("Glm4MoeForCausalLM",)),),
    build=_glm4_moe_layers, attention="gqa", moe=True, mtp=True, lora=LORA,
    # the MTP drafter's predictor input, read in the 0.27.0, 0.30.0 and 0.33.0 wheels
    mtp_predictor_input=("eh_proj", "model_executor/models/glm4_moe_mtp.py "
                         "Glm4MoeMultiTokenPredictorLayer.forward"),
    # Glm4MoeMTP is not a compiled class: its drafter runs eagerly, no graph captured
    mtp_compiled=mtp_compiled_rows("glm4_moe", "glm4_moe_mtp.py Glm4MoeMTP",
                                   (("0.11.0", None, False),),
                                   "the 0.11.0, 0.19.0 and 0.33.0 wheels"),
    dp_attention_embed=sglang_embed_rows(
        "glm4_moe", "glm4_moe.py",
        ((None, "0.5.9", "replicated", "0.4.10, 0.5.3, 0.5.4, 0.5.6, 0.5.7, 0.5.8"),
         ("0.5.9", None, "attention_tp", "0.5.9"))),
    source="vLLM model_executor/models/glm4_moe.py (read at 002d6073)",
)
