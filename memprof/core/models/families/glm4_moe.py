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
    gqa,
    missing,
    sglang_embed_rows,
    sglang_fa3_listed,
    top_k,
)
from memprof.core.models.spec import MLP, Layer


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


FAMILY = Family(
    name="glm4_moe", model_types=("glm4_moe",), architectures=("Glm4MoeForCausalLM",),
    sglang_fa3_listed=(sglang_fa3_listed("glm4_moe", "0.4.10", "0.5.8",
                                         ("Glm4MoeForCausalLM",)),),
    build=_glm4_moe_layers, attention="gqa", moe=True, mtp=True,
    dp_attention_embed=sglang_embed_rows(
        "glm4_moe", "glm4_moe.py",
        ((None, "0.5.9", "replicated", "0.4.10, 0.5.3, 0.5.4, 0.5.6, 0.5.7, 0.5.8"),
         ("0.5.9", None, "attention_tp", "0.5.9"))),
    source="vLLM model_executor/models/glm4_moe.py (read at 002d6073)",
)
