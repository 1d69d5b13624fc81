"""The families memprof knows: one registry (``FAMILIES``) from family name to the builder of
its layers, found by the config's ``model_type`` (or ``architectures``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memprof.base.errors import ConfigError
from memprof.core.models.config import ConfigFields
from memprof.core.models.spec import MLP, Attention, Layer

Built = tuple[list[Layer], list[Layer]]  # (layers, MTP layers)
LayerBuilder = Callable[[ConfigFields, int, int], Built]


_FAMILY_BY_MODEL_TYPE = {
    "llama": "llama",
    "mistral": "llama",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "qwen3_moe": "qwen3_moe",
    "qwen2_moe": "qwen2_moe",
    "gpt_oss": "gpt_oss",
    "deepseek_v2": "deepseek_v3",
    "deepseek_v3": "deepseek_v3",
    "kimi_k2": "deepseek_v3",
    "deepseek_v32": "deepseek_v32",
    "deepseek_v4": "deepseek_v4",
}
_FAMILY_BY_ARCH = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "GptOssForCausalLM": "gpt_oss",
    "DeepseekV2ForCausalLM": "deepseek_v3",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV32ForCausalLM": "deepseek_v32",
    "DeepseekV4ForCausalLM": "deepseek_v4",
}


def known_model_types() -> list[str]:
    return sorted(_FAMILY_BY_MODEL_TYPE)


def family_of(cfg: dict[str, Any]) -> tuple[str, str]:
    archs = cfg.get("architectures") or []
    arch = archs[0] if isinstance(archs, list) and archs else str(cfg.get("model_type", "?"))
    model_type = cfg.get("model_type")
    if not archs and model_type is None:
        raise ConfigError(
            "the config names no architecture (no 'architectures' and no 'model_type')",
            hint="pass the model's HF config.json",
        )
    if model_type in _FAMILY_BY_MODEL_TYPE:
        return _FAMILY_BY_MODEL_TYPE[str(model_type)], arch
    if arch in _FAMILY_BY_ARCH:
        return _FAMILY_BY_ARCH[arch], arch
    raise ConfigError(
        f"memprof does not know the architecture {arch!r} (model_type {model_type!r})",
        hint="known model_type values: " + ", ".join(known_model_types()),
    )



def _head_dim(c: ConfigFields, hidden: int, heads: int) -> int:
    """``head_dim`` as stated (Qwen3: 128, not hidden/heads); derived only when absent."""
    stated = c.opt_int("head_dim")
    if stated:
        return stated
    if hidden % heads:
        raise ConfigError(
            f"config.json has no head_dim and hidden_size {hidden} is not a multiple of "
            f"num_attention_heads {heads}",
            hint="add head_dim to the config",
        )
    return hidden // heads


def _gqa(c: ConfigFields, hidden: int, *, bias: bool, qk_norm: bool, window: int | None = None,
         sinks: bool = False, o_bias: bool = False) -> Attention:
    heads = c.num("num_attention_heads")
    kv = c.num("num_key_value_heads", heads)
    if heads == 0 or kv == 0 or heads % kv:
        raise ConfigError(
            f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}",
            hint="fix the config.json",
        )
    hd = _head_dim(c, hidden, heads)
    return Attention(kind="gqa", num_heads=heads, num_kv_heads=kv, head_dim=hd, v_head_dim=hd,
                     qkv_bias=bias, o_bias=o_bias, qk_norm=qk_norm, sliding_window=window,
                     sinks=sinks)


def _sliding_windows(c: ConfigFields, n_layers: int) -> list[int | None]:
    """Per-layer sliding window from ``layer_types`` / ``use_sliding_window`` (Qwen2/3 style)."""
    types = c.cfg.get("layer_types")
    window = c.opt_int("sliding_window")
    if isinstance(types, list):
        if len(types) < n_layers:
            raise ConfigError(
                f"layer_types lists {len(types)} layers but num_hidden_layers is {n_layers}",
                hint="fix the config.json",
            )
        out: list[int | None] = []
        for t in types[:n_layers]:
            if t == "sliding_attention":
                if not window:
                    raise ConfigError(
                        "layer_types has sliding_attention but sliding_window is missing",
                        hint="add sliding_window to the config",
                    )
                out.append(window)
            elif t == "full_attention":
                out.append(None)
            else:
                raise ConfigError(f"unknown layer type {t!r} in layer_types", hint="")
        return out
    if c.flag("use_sliding_window", False) and window:
        # Qwen2: layers >= max_window_layers use SWA (HF Qwen2Attention).
        first = c.num("max_window_layers", n_layers)
        return [window if i >= first else None for i in range(n_layers)]
    return [None] * n_layers


def _dense_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    fam = c.family
    bias = fam == "qwen2" or c.flag("attention_bias", False)
    windows = _sliding_windows(c, n_layers)
    mlp = MLP(kind="dense", intermediate_size=c.num("intermediate_size"),
              mlp_bias=c.flag("mlp_bias", False), activation=str(c.cfg.get("hidden_act", "silu")))
    attn = {w: _gqa(c, hidden, bias=bias, qk_norm=fam == "qwen3", window=w)
            for w in set(windows)}
    layers = [Layer(index=i, attention=attn[windows[i]], mlp=mlp) for i in range(n_layers)]
    return layers, []


def _qwen_moe_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    qwen3 = c.family == "qwen3_moe"
    attn = _gqa(c, hidden, bias=not qwen3 or c.flag("attention_bias", False), qk_norm=qwen3)
    n_exp = c.num("num_experts")
    step = c.num("decoder_sparse_step", 1) or 1
    dense_only = set(c.cfg.get("mlp_only_layers") or [])
    shared = 0 if qwen3 else c.num("shared_expert_intermediate_size", 0)
    moe = MLP(kind="moe", num_experts=n_exp, top_k=c.num("num_experts_per_tok"),
              moe_intermediate_size=c.num("moe_intermediate_size"),
              shared_intermediate_size=shared, shared_expert_gate=shared > 0)
    layers = []
    for i in range(n_layers):
        is_moe = n_exp > 0 and i not in dense_only and (i + 1) % step == 0
        mlp = moe if is_moe else MLP(kind="dense", intermediate_size=c.num("intermediate_size"))
        layers.append(Layer(index=i, attention=attn, mlp=mlp))
    return layers, []


def _gpt_oss_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    windows = _sliding_windows(c, n_layers)
    attn = {w: _gqa(c, hidden, bias=True, o_bias=True, qk_norm=False, window=w, sinks=True)
            for w in set(windows)}
    n_exp = c.num("num_local_experts")
    moe = MLP(kind="moe", num_experts=n_exp,
              top_k=c.num("num_experts_per_tok", c.num("experts_per_token", 0)),
              moe_intermediate_size=c.num("intermediate_size"), router_bias=True,
              expert_bias=True, activation="swigluoai")
    layers = [
        Layer(index=i, attention=attn[windows[i]], mlp=moe) for i in range(n_layers)
    ]
    return layers, []


def _deepseek_v3_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    heads = c.num("num_attention_heads")
    nope, rope = c.num("qk_nope_head_dim"), c.num("qk_rope_head_dim")
    sparse = c.family == "deepseek_v32"
    attn = Attention(
        kind="mla", num_heads=heads, num_kv_heads=1, head_dim=nope + rope,
        v_head_dim=c.num("v_head_dim"), q_lora_rank=c.opt_int("q_lora_rank") or None,
        kv_lora_rank=c.num("kv_lora_rank"), qk_nope_head_dim=nope, qk_rope_head_dim=rope,
        index_n_heads=c.num("index_n_heads") if sparse else 0,
        index_head_dim=c.num("index_head_dim") if sparse else 0,
        index_topk=c.num("index_topk") if sparse else 0,
    )
    n_routed = c.num("n_routed_experts", 0)
    first_dense = c.num("first_k_dense_replace", 0)
    freq = c.num("moe_layer_freq", 1) or 1
    moe_i = c.num("moe_intermediate_size") if n_routed else 0
    moe = MLP(kind="moe", num_experts=n_routed, top_k=c.num("num_experts_per_tok", 0),
              moe_intermediate_size=moe_i,
              shared_intermediate_size=moe_i * c.num("n_shared_experts", 0),
              e_score_correction_bias=c.cfg.get("topk_method") == "noaux_tc")
    dense = MLP(kind="dense", intermediate_size=c.num("intermediate_size"))
    layers = [
        Layer(index=i, attention=attn,
              mlp=moe if n_routed and i >= first_dense and i % freq == 0 else dense)
        for i in range(n_layers)
    ]
    mtp = [Layer(index=n_layers + k, attention=attn, mlp=moe if n_routed else dense, is_mtp=True)
           for k in range(c.num("num_nextn_predict_layers", 0))]
    return layers, mtp


def _deepseek_v4_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    """DeepSeek-V4: per-layer ``compress_ratios`` (L+1 entries, the last for the MTP block).

    Layer types and sizes follow HF deepseek-ai/DeepSeek-V4 config.json; the DeepSeek-V4
    checkpoint's tensors (model.safetensors.index.json) (checkpoint-verified).
    """
    ratios = c.cfg.get("compress_ratios")
    if not isinstance(ratios, list) or len(ratios) < n_layers:
        raise ConfigError(
            "DeepSeek-V4 config needs compress_ratios with one entry per layer",
            hint="use the model's original config.json",
        )
    for key in ("o_groups", "o_lora_rank", "q_lora_rank", "index_n_heads", "index_head_dim",
                "sliding_window", "hc_mult", "head_dim"):
        c.num(key)
    heads = c.num("num_attention_heads")
    n_hash = c.num("num_hash_layers", 0)

    def attn(ratio: int) -> Attention:
        if ratio not in (0, 1, 4, 128):
            raise ConfigError(f"unknown DeepSeek-V4 compress ratio {ratio}", hint="0, 4 or 128")
        return Attention(
            kind="dsv4", num_heads=heads, num_kv_heads=1, head_dim=c.num("head_dim"),
            v_head_dim=c.num("head_dim"), q_lora_rank=c.num("q_lora_rank"),
            qk_rope_head_dim=c.num("qk_rope_head_dim"), sliding_window=c.num("sliding_window"),
            compress_ratio=0 if ratio <= 1 else ratio, o_groups=c.num("o_groups"),
            o_lora_rank=c.num("o_lora_rank"), sinks=True,
            index_n_heads=c.num("index_n_heads"), index_head_dim=c.num("index_head_dim"),
            index_topk=c.num("index_topk"),
        )

    moe_i = c.num("moe_intermediate_size")

    def mlp(hash_routed: bool) -> MLP:
        return MLP(kind="moe", num_experts=c.num("n_routed_experts"),
                   top_k=c.num("num_experts_per_tok"), moe_intermediate_size=moe_i,
                   shared_intermediate_size=moe_i * c.num("n_shared_experts", 0),
                   e_score_correction_bias=not hash_routed, hash_routed=hash_routed)

    attns = {r: attn(int(r)) for r in set(ratios[:n_layers])}
    mlps = {h: mlp(h) for h in (True, False)}
    layers = [Layer(index=i, attention=attns[ratios[i]], mlp=mlps[i < n_hash])
              for i in range(n_layers)]
    mtp = [Layer(index=n_layers + k, attention=attn(0), mlp=mlp(False), is_mtp=True)
           for k in range(c.num("num_nextn_predict_layers", 0))]
    return layers, mtp



FAMILIES: dict[str, LayerBuilder] = {
    "llama": _dense_layers,
    "qwen2": _dense_layers,
    "qwen3": _dense_layers,
    "qwen3_moe": _qwen_moe_layers,
    "qwen2_moe": _qwen_moe_layers,
    "gpt_oss": _gpt_oss_layers,
    "deepseek_v3": _deepseek_v3_layers,
    "deepseek_v32": _deepseek_v3_layers,
    "deepseek_v4": _deepseek_v4_layers,
}
"""Family name → the builder of its layers (and MTP layers)."""
