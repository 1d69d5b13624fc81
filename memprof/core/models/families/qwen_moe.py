"""Qwen2-MoE and Qwen3-MoE (``Qwen2MoeForCausalLM``, ``Qwen3MoeForCausalLM``): GQA with routed
experts every ``decoder_sparse_step`` layers (except ``mlp_only_layers``); Qwen2-MoE adds a
gated shared expert and q/k/v biases, Qwen3-MoE q/k norms and ``head_dim`` 128 by default.

Sources: transformers 4.57 ``models/qwen2_moe/configuration_qwen2_moe.py`` and
``models/qwen3_moe/configuration_qwen3_moe.py`` (``decoder_sparse_step=1``,
``mlp_only_layers=[]``, Qwen3MoeConfig ``head_dim=128``, ``norm_topk_prob=False``); vLLM
``qwen2_moe.py`` / ``qwen3_moe.py`` (``FusedMoE(..., renormalize=config.norm_topk_prob)``, 0.8.4,
0.10.2).
"""

from __future__ import annotations

from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import (
    Built,
    Family,
    LoraSupport,
    gqa,
    missing,
    sglang_embed_rows,
    sglang_fa3_listed,
    top_k,
    v2_listed,
)
from memprof.core.models.spec import MLP, Layer
from memprof.core.versions import Rule

QWEN3_MOE_HEAD_DIM = 128  # Qwen3MoeConfig head_dim default

# the multimodal wrappers (Qwen2.5-VL, Qwen3-VL) build their language model with this builder
VL_MODULE = "memprof/core/models/families/qwen_vl.py"


def _moe_layers(c: ConfigFields, hidden: int, n_layers: int, *, gen3: bool) -> Built:
    """``gen3``: the Qwen3-MoE layout (q/k norms, no shared expert), else Qwen2-MoE's."""
    attn = gqa(c, hidden, bias=not gen3 or c.flag("attention_bias", False), qk_norm=gen3,
               head_dim_default=QWEN3_MOE_HEAD_DIM if gen3 else None)
    n_exp = c.size("num_experts")
    step = c.size("decoder_sparse_step", 1)
    dense_only = set(c.cfg.get("mlp_only_layers") or [])
    if not gen3 and c.cfg.get("shared_expert_intermediate_size") is None:
        raise missing(c, "shared_expert_intermediate_size", "0 for no shared expert")
    shared = 0 if gen3 else c.num("shared_expert_intermediate_size")
    moe = MLP(kind="moe", num_experts=n_exp, top_k=top_k(c, n_exp, "num_experts_per_tok"),
              moe_intermediate_size=c.size("moe_intermediate_size"),
              shared_intermediate_size=shared, shared_expert_gate=shared > 0,
              renormalize=c.flag("norm_topk_prob", False))
    layers = []
    dense: MLP | None = None
    for i in range(n_layers):
        if i not in dense_only and (i + 1) % step == 0:
            layers.append(Layer(index=i, attention=attn, mlp=moe))
            continue
        dense = dense or MLP(kind="dense", intermediate_size=c.size("intermediate_size"))
        layers.append(Layer(index=i, attention=attn, mlp=dense))
    return layers, []


def _qwen2_moe_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    return _moe_layers(c, hidden, n_layers, gen3=False)


def _qwen3_moe_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    return _moe_layers(c, hidden, n_layers, gen3=True)


# SGLang models/qwen2_moe.py Qwen2MoeModel (Qwen3MoeModel extends it): embed_tokens under DP
# attention
_SGLANG_EMBED = (
    (None, "0.4.7", "tp", "0.4.3, 0.4.4, 0.4.6"),
    ("0.4.7", "0.5.9", "replicated",
     "0.4.7, 0.4.8, 0.4.8.post1, 0.4.9, 0.4.9.post5, 0.4.10, 0.5.3, 0.5.4, 0.5.6, 0.5.7, 0.5.8"),
    ("0.5.9", None, "attention_tp", "0.5.9"),
)
def _moe_lora(family: str, cls: str) -> tuple[Rule, ...]:
    """vLLM's LoRA support of Qwen2MoeForCausalLM / Qwen3MoeForCausalLM: SupportsLoRA from 0.10.0
    (0.9.2 has none); up to 0.11.0 ``get_supported_lora_modules`` takes LinearBase modules only,
    so LoRA sits on qkv_proj (q/k/v packed), o_proj, the router (``gate``, a ReplicatedLinear),
    Qwen2-MoE's shared expert (gate_up_proj packed, down_proj; its ``shared_expert_gate`` is a
    plain ``nn.Linear``: none) and the dense layers' MLP, not on the routed experts; no
    embedding modules, no extra vocabulary. From 0.11.1 ``FusedMoEWithLoRA`` puts LoRA on the
    experts too (refused until memprof models it)."""
    file = f"model_executor/models/{family}.py {cls}"
    return (
        Rule(name=f"{family}_lora", changes="LoRA: modules, expert LoRA", since="0.10.0",
             until="0.11.1", value=LoraSupport(extra_vocab=False, embeddings=False),
             introduced_by=f"SupportsLoRA on {cls} (first released in 0.10.0)",
             removed_by="FusedMoEWithLoRA (first released in 0.11.1)",
             source=f"0.9.2 / 0.10.0 / 0.10.2 / 0.11.0 {file} (0.9.2: no SupportsLoRA; then "
             "SupportsLoRA, packed_modules_mapping, gate ReplicatedLinear, no "
             "embedding_modules); 0.10.2 / 0.11.0 lora/utils.py get_supported_lora_modules "
             "(LinearBase only)", applies_to=family),
        Rule(name=f"{family}_lora", changes="LoRA: modules, expert LoRA", since="0.11.1",
             until=None, value=LoraSupport(extra_vocab=False, embeddings=False, experts=True),
             introduced_by="FusedMoEWithLoRA (first released in 0.11.1)",
             source=f"0.11.1 / 0.12.0 / 0.33.0 {file}; 0.11.1 lora/layers/fused_moe.py "
             "FusedMoEWithLoRA.can_replace_layer, lora/utils.py get_supported_lora_modules "
             "(FusedMoE)", applies_to=family),
    )


QWEN2_MOE = Family(name="qwen2_moe", model_types=("qwen2_moe",),
                   architectures=("Qwen2MoeForCausalLM",), build=_qwen2_moe_layers,
                   attention="gqa", moe=True,
                   lora=_moe_lora("qwen2_moe", "Qwen2MoeForCausalLM"),
                   v2_runner_listed=(v2_listed("qwen2_moe", "0.24.0", "0.29.0",
                                               ("Qwen2MoeForCausalLM",),
                                               "0.24.0 / 0.25.0 / 0.26.0 / 0.27.1 / 0.28.0"),),
                   dp_attention_embed=sglang_embed_rows("qwen2_moe", "qwen2_moe.py",
                                                        _SGLANG_EMBED),
                   source="vLLM model_executor/models/qwen2_moe.py")
QWEN3_MOE = Family(name="qwen3_moe", model_types=("qwen3_moe",),
                   architectures=("Qwen3MoeForCausalLM",), build=_qwen3_moe_layers,
                   sglang_fa3_listed=(sglang_fa3_listed("qwen3_moe", "0.4.7", "0.5.8",
                                                        ("Qwen3MoeForCausalLM",)),),
                   attention="gqa", moe=True,
                   lora=_moe_lora("qwen3_moe", "Qwen3MoeForCausalLM"),
                   dp_attention_embed=sglang_embed_rows("qwen3_moe", "qwen2_moe.py",
                                                        _SGLANG_EMBED),
                   modules=(VL_MODULE,),
               source="vLLM model_executor/models/qwen3_moe.py")
