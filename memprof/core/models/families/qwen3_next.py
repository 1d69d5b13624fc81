"""Qwen3-Next (``Qwen3NextForCausalLM``, ``model_type`` ``qwen3_next``; Qwen3-Next-80B-A3B):
Gated DeltaNet linear attention in three layers of four, gated full attention (q/k norms, a
sigmoid output gate from q_proj, partial RoPE) in every ``full_attention_interval``-th layer,
and routed experts with a gated shared expert on every ``decoder_sparse_step``-th layer.

Source: vLLM ``vllm/model_executor/models/qwen3_next.py`` (v0.11.0; the v0.10.2 release that
first served it builds the same modules): ``Qwen3NextDecoderLayer`` — ``linear_attn``
(``Qwen3NextGatedDeltaNet``) or ``self_attn`` (``Qwen3NextAttention``) by
``config.layer_types[layer_idx]``; ``Qwen3NextAttention`` — ``QKVParallelLinear`` of
``total_num_heads × (1 + attn_output_gate)`` query heads (``attn_output_gate`` defaults to
True), ``bias=attention_bias``, ``q_norm``/``k_norm`` of ``head_dim``; the MLP is
``Qwen3NextSparseMoeBlock`` (gate ``num_experts``, experts of ``moe_intermediate_size``,
``shared_expert`` of ``shared_expert_intermediate_size`` and a ``shared_expert_gate`` of one
output) when ``layer_idx`` is not in ``mlp_only_layers`` and ``(layer_idx + 1) %
decoder_sparse_step == 0``, else a dense MLP of ``intermediate_size``; ``load_weights`` skips
the checkpoint's ``mtp.*`` tensors, so the MTP layer costs nothing without speculative
decoding (not modelled here). transformers ``Qwen3NextConfig`` derives ``layer_types`` when the
config leaves it out: ``full_attention`` where ``(i + 1) % full_attention_interval == 0``.
The linear-attention state and its weights: ``memprof.core.attention.state.GatedDeltaNet``.
"""

from __future__ import annotations

from dataclasses import replace

from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import (
    Built,
    Family,
    gqa,
    linear_full_layer_types,
    lora_refused,
    missing,
    sglang_embed_rows,
    top_k,
)
from memprof.core.models.spec import MLP, Layer, StateMixer


def _qwen3_next_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    attn = replace(gqa(c, hidden, bias=c.flag("attention_bias", False), qk_norm=True,
                       kv_heads_required=True),
                   output_gate=c.flag("attn_output_gate", True))
    for key in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                "linear_value_head_dim", "linear_conv_kernel_dim"):
        if c.cfg.get(key) is None:
            raise missing(c, key, "it sizes the Gated DeltaNet layers and their state")
    gdn = StateMixer(kind="gdn", num_heads=c.size("linear_num_value_heads"),
                     num_k_heads=c.size("linear_num_key_heads"),
                     head_k_dim=c.size("linear_key_head_dim"),
                     head_v_dim=c.size("linear_value_head_dim"),
                     conv_kernel=c.size("linear_conv_kernel_dim"))
    linear = replace(attn, mixer=gdn)
    n_exp = c.num("num_experts", 0)
    step = c.size("decoder_sparse_step", 1)
    dense_only = set(c.cfg.get("mlp_only_layers") or [])
    moe: MLP | None = None
    if n_exp:
        if c.cfg.get("shared_expert_intermediate_size") is None:
            raise missing(c, "shared_expert_intermediate_size", "0 for no shared expert")
        shared = c.num("shared_expert_intermediate_size")
        moe = MLP(kind="moe", num_experts=n_exp, top_k=top_k(c, n_exp, "num_experts_per_tok"),
                  moe_intermediate_size=c.size("moe_intermediate_size"),
                  shared_intermediate_size=shared, shared_expert_gate=True,
                  # vLLM qwen3_next.py FusedMoE(renormalize=config.norm_topk_prob) (0.10.2);
                  # transformers Qwen3NextConfig norm_topk_prob defaults to True
                  renormalize=c.flag("norm_topk_prob", True))
    dense: MLP | None = None
    layers = []
    for i, kind in enumerate(linear_full_layer_types(c, n_layers)):
        mlp: MLP
        if moe is not None and i not in dense_only and (i + 1) % step == 0:
            mlp = moe
        else:
            dense = dense or MLP(kind="dense", intermediate_size=c.size("intermediate_size"))
            mlp = dense
        layers.append(Layer(index=i, attention=attn if kind == "full_attention" else linear,
                            mlp=mlp))
    return layers, []


# vLLM's LoRA support of Qwen3NextForCausalLM: SupportsLoRA from its first release (0.10.2), with
# LoRA on the Gated DeltaNet layers' projections (in_proj_qkvz, in_proj_ba, out_proj) and, from
# 0.11.1, on the experts (FusedMoEWithLoRA): refused until memprof models them
LORA = lora_refused("qwen3_next", "Qwen3NextForCausalLM", "0.10.2",
                    "0.10.1.1 (no qwen3_next.py) / 0.10.2 / 0.11.0 / 0.11.1 / 0.20.0 / 0.33.0 "
                    "qwen3_next.py",
                    introduced_by="Qwen3-Next support with SupportsLoRA (first released in "
                    "0.10.2)", unmodelled="Gated DeltaNet projections", experts_from="0.11.1")

FAMILY = Family(
    lora=LORA,
    name="qwen3_next", model_types=("qwen3_next",), architectures=("Qwen3NextForCausalLM",),
    build=_qwen3_next_layers, attention="gqa", moe=True,
    # the MTP drafter's predictor input, read in the 0.27.0, 0.30.0 and 0.33.0 wheels
    mtp_predictor_input=("fc", "model_executor/models/qwen3_next_mtp.py "
                         "Qwen3NextMultiTokenPredictor.forward"),
    dp_attention_embed=sglang_embed_rows(
        "qwen3_next", "qwen3_next.py",
        ((None, "0.5.9", "replicated", "0.5.3, 0.5.4, 0.5.6, 0.5.7, 0.5.8"),
         ("0.5.9", None, "attention_tp", "0.5.9"))),
    source="vLLM model_executor/models/qwen3_next.py (v0.10.2 / v0.11.0)",
)
