"""Kimi-Linear (``KimiLinearForCausalLM``, ``model_type`` ``kimi_linear``; Kimi-Linear-48B-A3B):
Kimi Delta Attention in the layers ``linear_attn_config.kda_layers`` names (1-based), MLA
without rotary embedding and without query compression in the others, and routed experts with
shared experts after ``first_k_dense_replace`` dense layers.

Source: vLLM ``vllm/model_executor/models/kimi_linear.py`` (v0.11.2): ``KimiDecoderLayer`` —
``KimiDeltaAttention`` when ``config.is_kda_layer(layer_idx)`` (``layer_idx + 1`` in
``kda_layers``), else ``KimiMLAAttention`` (asserts ``use_nope`` and ``q_lora_rank is None``:
``q_proj`` column-parallel, ``kv_a_proj_with_mqa`` replicated, ``kv_a_layernorm``, ``kv_b_proj``,
``o_proj``; ``rotary_emb=None``); ``KimiMoE`` when ``layer_idx >= first_k_dense_replace`` and
``layer_idx % moe_layer_freq == 0`` — a ``ReplicatedLinear`` gate without quantisation, an
``e_score_correction_bias`` of ``num_experts`` [approximation: memprof counts it fp32 as
DeepSeek's; vLLM creates it in the model dtype, 512 B a layer less], ``FusedMoE`` of
``moe_intermediate_size`` (``num_experts_per_token`` each), shared experts of
``moe_intermediate_size × num_shared_experts``; else ``KimiMLP`` of ``intermediate_size``.
The KDA state and weights: ``memprof.core.attention.state.KimiDeltaAttention``
(``model_executor/layers/kda.py``, v0.11.2).
"""

from __future__ import annotations

from dataclasses import replace

from memprof.base.errors import ConfigError
from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import Built, Family, missing, top_k
from memprof.core.models.spec import MLP, Attention, Layer, StateMixer


def _kda(c: ConfigFields, n_layers: int) -> tuple[set[int], StateMixer]:
    """The 0-based KDA layer indices and their mixer, from ``linear_attn_config``."""
    cfg = c.cfg.get("linear_attn_config")
    if not isinstance(cfg, dict):
        raise missing(c, "linear_attn_config", "it places and sizes the KDA layers")
    for key in ("kda_layers", "num_heads", "head_dim", "short_conv_kernel_size"):
        if cfg.get(key) is None:
            raise missing(c, f"linear_attn_config.{key}", "it places and sizes the KDA layers")
    layers = cfg["kda_layers"]
    if not isinstance(layers, list) or not all(
            isinstance(i, int) and 1 <= i <= n_layers for i in layers):
        raise ConfigError(f"linear_attn_config.kda_layers must list layers 1..{n_layers} "
                          "(1-based)", hint="fix the config.json")
    sizes = {k: cfg[k] for k in ("num_heads", "head_dim", "short_conv_kernel_size")}
    if not all(isinstance(v, int) and v > 0 for v in sizes.values()):
        raise ConfigError("linear_attn_config num_heads, head_dim and short_conv_kernel_size "
                          "must be positive integers", hint="fix the config.json")
    heads, dim = sizes["num_heads"], sizes["head_dim"]
    return {i - 1 for i in layers}, StateMixer(
        kind="kda", num_heads=heads, num_k_heads=heads, head_k_dim=dim, head_v_dim=dim,
        conv_kernel=sizes["short_conv_kernel_size"], state_dtype="float32")


def _kimi_linear_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    if c.cfg.get("q_lora_rank") is not None or not c.flag("mla_use_nope", False):
        raise ConfigError("Kimi-Linear's MLA layers are read with q_lora_rank null and "
                          "mla_use_nope true (vLLM kimi_linear.py asserts both)",
                          hint="fix the config.json")
    nope, rope = c.size("qk_nope_head_dim"), c.size("qk_rope_head_dim")
    mla = Attention(kind="mla", num_heads=c.size("num_attention_heads"), num_kv_heads=1,
                    head_dim=nope + rope, v_head_dim=c.size("v_head_dim"), q_lora_rank=None,
                    kv_lora_rank=c.size("kv_lora_rank"), qk_nope_head_dim=nope,
                    qk_rope_head_dim=rope, rope="none")
    kda_layers, mixer = _kda(c, n_layers)
    kda = replace(mla, mixer=mixer)
    n_exp = c.num("num_experts", 0)
    for key in ("first_k_dense_replace", "num_shared_experts"):
        if n_exp and c.cfg.get(key) is None:
            raise missing(c, key, "it decides the MoE layers' layout")
    moe = None
    if n_exp:
        moe_i = c.size("moe_intermediate_size")
        moe = MLP(kind="moe", num_experts=n_exp,
                  top_k=top_k(c, n_exp, "num_experts_per_token"), moe_intermediate_size=moe_i,
                  shared_intermediate_size=moe_i * c.num("num_shared_experts"),
                  e_score_correction_bias=True)
    first, freq = c.num("first_k_dense_replace", 0), c.size("moe_layer_freq", 1)
    dense = MLP(kind="dense", intermediate_size=c.size("intermediate_size"))
    return [Layer(index=i, attention=kda if i in kda_layers else mla,
                  mlp=moe if moe is not None and i >= first and i % freq == 0 else dense)
            for i in range(n_layers)], []


FAMILY = Family(
    name="kimi_linear", model_types=("kimi_linear",), architectures=("KimiLinearForCausalLM",),
    build=_kimi_linear_layers, attention="mla", moe=True,
    source="vLLM model_executor/models/kimi_linear.py (v0.11.2)",
)
