"""MiniMax-M2 (``MiniMaxM2ForCausalLM``, ``model_type`` ``minimax_m2``; M2, M2.1, M2.5, M2.7):
GQA with one q norm and one k norm across all heads (TP-split), partial RoPE from
``rotary_dim``, and a top-k MoE of ``num_local_experts`` on every layer with an fp32 router and
an fp32 routing bias, no shared expert; its MTP modules are not loaded for serving.

Source: vLLM ``vllm/model_executor/models/minimax_m2.py`` (vllm-project/vllm, read at commit
01d99586): ``MiniMaxM2Attention`` — ``QKVParallelLinear(bias=attention_bias)``, row-parallel
``o_proj``, ``q_norm = MiniMaxText01RMSNormTP(head_dim × total_num_heads)`` and ``k_norm`` of
``head_dim × total_num_kv_heads`` (a TP-split weight), ``partial_rotary_factor = rotary_dim /
head_dim``; ``MiniMaxM2MoE`` — ``gate = ReplicatedLinear(hidden, num_local_experts,
params_dtype=torch.float32)``, ``e_score_correction_bias`` fp32 when ``use_routing_bias``,
``FusedMoE(intermediate_size=config.intermediate_size)``; ``load_weights`` skips the spec-decode
layers. Every layer is full attention: an ``attn_type_list`` entry other than 1 (MiniMax-01's
lightning attention) is refused.
"""

from __future__ import annotations

from dataclasses import replace

from memprof.base.errors import ConfigError
from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import Built, Family, gqa, lora_refused, top_k
from memprof.core.models.spec import MLP, Layer


def _minimax_m2_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    types = c.cfg.get("attn_type_list")
    if isinstance(types, list) and any(t != 1 for t in types[:n_layers]):
        raise ConfigError(
            "attn_type_list has layers other than full attention (1)",
            hint="memprof reads MiniMaxM2ForCausalLM as full attention on every layer",
        )
    qk_norm = c.flag("use_qk_norm", False)
    if qk_norm and c.cfg.get("qk_norm_type", "per_layer") != "per_layer":
        raise ConfigError(f"qk_norm_type {str(c.cfg.get('qk_norm_type'))[:40]!r} is not known",
                          hint="per_layer (vLLM minimax_m2.py) is the one memprof reads")
    attn = replace(gqa(c, hidden, bias=c.flag("attention_bias", False), qk_norm=qk_norm,
                       kv_heads_required=True), qk_norm_across_heads=qk_norm)
    n_exp = c.size("num_local_experts")
    moe = MLP(kind="moe", num_experts=n_exp, top_k=top_k(c, n_exp, "num_experts_per_tok"),
              moe_intermediate_size=c.size("intermediate_size"),
              e_score_correction_bias=c.flag("use_routing_bias", False), router_fp32=True,
              activation=str(c.cfg.get("hidden_act", "silu")))
    return [Layer(index=i, attention=attn, mlp=moe) for i in range(n_layers)], []


# vLLM's LoRA support of MiniMaxM2ForCausalLM: SupportsLoRA from 0.15.0 (0.14.1 has none), with
# LoRA on the experts (FusedMoEWithLoRA): refused until memprof models it
LORA = lora_refused("minimax_m2", "MiniMaxM2ForCausalLM", "0.15.0",
                    "0.12.0 / 0.14.1 (no SupportsLoRA) / 0.15.0 / 0.16.0 / 0.33.0 minimax_m2.py",
                    introduced_by="SupportsLoRA on MiniMaxM2ForCausalLM (first released in "
                    "0.15.0)", experts_from="0.15.0")

FAMILY = Family(
    lora=LORA,
    name="minimax_m2", model_types=("minimax_m2",), architectures=("MiniMaxM2ForCausalLM",),
    build=_minimax_m2_layers, attention="gqa", moe=True,
    source="vLLM model_executor/models/minimax_m2.py (read at 01d99586)",
)
