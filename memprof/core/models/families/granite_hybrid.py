"""Granite-4.0-H (``GraniteMoeHybridForCausalLM``, ``model_type`` ``granitemoehybrid``;
granite-4.0-h-small / -tiny / -micro / -1b / -350m): Mamba-2 or GQA attention per layer by
``layer_types``, each layer followed by routed experts (when ``num_local_experts`` > 0) plus
a shared gated MLP of ``shared_intermediate_size``, two RMSNorms per layer.

Source: vLLM ``vllm/model_executor/models/granitemoehybrid.py`` (v0.11.0):
``GraniteMoeHybridMambaDecoderLayer`` — ``MambaMixer2(ssm_state_size=mamba_d_state,
conv_kernel_size=mamba_d_conv, intermediate_size=mamba_expand × hidden_size,
use_conv_bias=mamba_conv_bias, use_bias=mamba_proj_bias, n_groups=mamba_n_groups,
num_heads=mamba_n_heads, head_dim=mamba_d_head)``; ``GraniteMoeHybridAttention`` —
``QKVParallelLinear(bias=attention_bias)`` of ``hidden // heads``, a rotary embedding only
when ``position_embedding_type == "rope"``; both layer kinds carry ``block_sparse_moe``
(``GraniteMoeMoE``: a ``ReplicatedLinear`` gate without quantisation, ``FusedMoE`` of
``intermediate_size``) when ``num_local_experts > 0`` and ``shared_mlp``
(``GraniteMoeSharedMLP``: merged ``input_linear`` H → 2·shared, ``output_linear``) when
``shared_intermediate_size > 0``, and ``input_layernorm`` / ``post_attention_layernorm``.
transformers ``GraniteMoeHybridConfig``: ``mamba_expand`` defaults to 2.
"""

from __future__ import annotations

from dataclasses import replace

from memprof.base.errors import ConfigError
from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import Built, Family, gqa, lora_refused, missing, top_k
from memprof.core.models.spec import MLP, Layer, StateMixer

MAMBA_EXPAND = 2  # GraniteMoeHybridConfig mamba_expand default


def _granite_hybrid_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    types = c.cfg.get("layer_types")
    if not isinstance(types, list):
        raise missing(c, "layer_types", "it says which layers are Mamba-2 and which attention")
    if len(types) != n_layers or any(t not in ("mamba", "attention") for t in types):
        raise ConfigError(f"layer_types must list {n_layers} entries of 'mamba' or 'attention'",
                          hint="fix the config.json")
    rope = str(c.cfg.get("position_embedding_type") or "nope")
    if rope not in ("rope", "nope"):
        raise ConfigError(f"position_embedding_type {rope[:40]!r} is not known",
                          hint="rope or nope")
    attn = replace(gqa(c, hidden, bias=c.flag("attention_bias", False), qk_norm=False,
                       kv_heads_required=True),
                   rope="none" if rope == "nope" else "")
    for key in ("mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state",
                "mamba_d_conv"):
        if c.cfg.get(key) is None:
            raise missing(c, key, "it sizes the Mamba-2 layers and their state")
    inner = c.size("mamba_expand", MAMBA_EXPAND) * hidden
    mamba = replace(attn, mixer=StateMixer(
        kind="mamba2", num_heads=c.size("mamba_n_heads"), num_k_heads=c.size("mamba_n_groups"),
        head_k_dim=c.size("mamba_d_state"), head_v_dim=c.size("mamba_d_head"),
        conv_kernel=c.size("mamba_d_conv"), intermediate_size=inner,
        conv_bias=c.flag("mamba_conv_bias", True), proj_bias=c.flag("mamba_proj_bias", False)))
    experts = c.num("num_local_experts", 0)
    shared = c.num("shared_intermediate_size", 0)
    if experts:
        mlp = MLP(kind="moe", num_experts=experts,
                  top_k=top_k(c, experts, "num_experts_per_tok"),
                  moe_intermediate_size=c.size("intermediate_size"),
                  shared_intermediate_size=shared,
                  renormalize=True)  # GraniteMoeMoE: FusedMoE(renormalize=True), 0.10.2
    elif shared:
        mlp = MLP(kind="dense", intermediate_size=shared)
    else:
        raise ConfigError("config.json has neither num_local_experts nor "
                          "shared_intermediate_size", hint="fix the config.json")
    return [Layer(index=i, attention=mamba if t == "mamba" else attn, mlp=mlp)
            for i, t in enumerate(types)], []


# vLLM's LoRA support of GraniteMoeHybridForCausalLM: SupportsLoRA in every release read (0.9.2
# on), with LoRA on the Mamba-2 mixers' in_proj / out_proj (LinearBase): refused until memprof
# models them
LORA = lora_refused("granite_hybrid", "GraniteMoeHybridForCausalLM", "0.9.2",
                    "0.9.2 / 0.10.2 / 0.12.0 / 0.20.0 / 0.33.0 granitemoehybrid.py",
                    introduced_by="read first in 0.9.2 (0.9.0 and 0.9.1 not read)",
                    unmodelled="Mamba-2 mixers (in_proj, out_proj)")

FAMILY = Family(
    lora=LORA,
    name="granite_hybrid", model_types=("granitemoehybrid",),
    architectures=("GraniteMoeHybridForCausalLM",), build=_granite_hybrid_layers,
    attention="gqa", moe=True,
    source="vLLM model_executor/models/granitemoehybrid.py (v0.11.0)",
)
