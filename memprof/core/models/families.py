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



# ``head_dim`` when the config leaves it out, as each family's HF config class defaults it:
# Qwen3Config / Qwen3MoeConfig ``head_dim=128`` and GptOssConfig ``head_dim=64``
# (transformers 4.57 models/qwen3/configuration_qwen3.py, qwen3_moe, gpt_oss); LlamaConfig and
# Qwen2Config derive hidden_size // num_attention_heads (configuration_llama.py, qwen2).
_HF_HEAD_DIM = {"qwen3": 128, "qwen3_moe": 128, "gpt_oss": 64}


def _head_dim(c: ConfigFields, hidden: int, heads: int) -> int:
    """``head_dim`` as stated (Qwen3: 128, not hidden/heads); when absent, HF's default for the
    family (``_HF_HEAD_DIM``), else derived as HF derives it."""
    if c.cfg.get("head_dim") is not None:
        return c.size("head_dim")
    if c.family in _HF_HEAD_DIM:
        return _HF_HEAD_DIM[c.family]
    if hidden % heads:
        raise ConfigError(
            f"config.json has no head_dim and hidden_size {hidden} is not a multiple of "
            f"num_attention_heads {heads}",
            hint="add head_dim to the config",
        )
    return hidden // heads


def _gqa(c: ConfigFields, hidden: int, *, bias: bool, qk_norm: bool, window: int | None = None,
         sinks: bool = False, o_bias: bool = False) -> Attention:
    heads = c.size("num_attention_heads")
    # LlamaConfig / Qwen2Config / Qwen3Config: num_key_value_heads None -> num_attention_heads
    kv = c.size("num_key_value_heads", None if c.family == "gpt_oss" else heads)
    if heads % kv:
        raise ConfigError(
            f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}",
            hint="fix the config.json",
        )
    hd = _head_dim(c, hidden, heads)
    return Attention(kind="gqa", num_heads=heads, num_kv_heads=kv, head_dim=hd, v_head_dim=hd,
                     qkv_bias=bias, o_bias=o_bias, qk_norm=qk_norm, sliding_window=window,
                     sinks=sinks)


def _missing(c: ConfigFields, key: str, why: str) -> ConfigError:
    return ConfigError(f"config.json of this {c.family} model has no {key!r} ({why})",
                       hint=f"add {key!r} to the config.json: memprof does not guess it")


def _sliding_windows(c: ConfigFields, n_layers: int) -> list[int | None]:
    """Per-layer sliding window from ``layer_types`` / ``use_sliding_window`` (Qwen2/3 style),
    or Mistral's ``sliding_window`` on every layer."""
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
                        "layer_types has sliding_attention but sliding_window is missing or 0",
                        hint="add sliding_window to the config",
                    )
                out.append(window)
            elif t == "full_attention":
                out.append(None)
            else:
                raise ConfigError(f"unknown layer type {t[:40]!r} in layer_types",
                                  hint="sliding_attention or full_attention")
        return out
    if c.family == "gpt_oss":
        raise _missing(c, "layer_types", "gpt-oss alternates sliding and full attention")
    if c.cfg.get("model_type") == "mistral":
        # MistralConfig: a sliding_window (not null) is every layer's window (HF
        # modeling_mistral.py; vLLM llama.py reads it per layer); null: full attention
        if "sliding_window" not in c.cfg:
            raise _missing(c, "sliding_window", "null for full attention")
        if window is not None:
            return [c.size("sliding_window")] * n_layers
        return [None] * n_layers
    if c.flag("use_sliding_window", False):
        # Qwen2/Qwen3: layers >= max_window_layers use SWA (HF Qwen2Config.layer_types)
        if not window:
            raise _missing(c, "sliding_window", "use_sliding_window is true")
        if c.cfg.get("max_window_layers") is None:
            raise _missing(c, "max_window_layers", "use_sliding_window is true")
        first = c.num("max_window_layers")
        return [window if i >= first else None for i in range(n_layers)]
    return [None] * n_layers


def _top_k(c: ConfigFields, experts: int, *keys: str) -> int:
    """Experts per token: the first of ``keys`` the config states, in [1, experts]."""
    key = next((k for k in keys if c.cfg.get(k) is not None), keys[0])
    k = c.size(key)
    if k > experts:
        raise ConfigError(f"config.json field {key!r} is {k}, more than the {experts} experts",
                          hint=f"fix {key!r} in the config.json")
    return k


def _dense_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    fam = c.family
    bias = fam == "qwen2" or c.flag("attention_bias", False)
    windows = _sliding_windows(c, n_layers)
    mlp = MLP(kind="dense", intermediate_size=c.size("intermediate_size"),
              mlp_bias=c.flag("mlp_bias", False), activation=str(c.cfg.get("hidden_act", "silu")))
    attn = {w: _gqa(c, hidden, bias=bias, qk_norm=fam == "qwen3", window=w)
            for w in set(windows)}
    layers = [Layer(index=i, attention=attn[windows[i]], mlp=mlp) for i in range(n_layers)]
    return layers, []


def _qwen_moe_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    qwen3 = c.family == "qwen3_moe"
    attn = _gqa(c, hidden, bias=not qwen3 or c.flag("attention_bias", False), qk_norm=qwen3)
    n_exp = c.size("num_experts")
    # Qwen2MoeConfig / Qwen3MoeConfig: decoder_sparse_step=1, mlp_only_layers=[]
    step = c.size("decoder_sparse_step", 1)
    dense_only = set(c.cfg.get("mlp_only_layers") or [])
    if not qwen3 and c.cfg.get("shared_expert_intermediate_size") is None:
        raise _missing(c, "shared_expert_intermediate_size", "0 for no shared expert")
    shared = 0 if qwen3 else c.num("shared_expert_intermediate_size")
    moe = MLP(kind="moe", num_experts=n_exp, top_k=_top_k(c, n_exp, "num_experts_per_tok"),
              moe_intermediate_size=c.size("moe_intermediate_size"),
              shared_intermediate_size=shared, shared_expert_gate=shared > 0)
    layers = []
    dense: MLP | None = None
    for i in range(n_layers):
        if i not in dense_only and (i + 1) % step == 0:
            layers.append(Layer(index=i, attention=attn, mlp=moe))
            continue
        dense = dense or MLP(kind="dense", intermediate_size=c.size("intermediate_size"))
        layers.append(Layer(index=i, attention=attn, mlp=dense))
    return layers, []


def _gpt_oss_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    windows = _sliding_windows(c, n_layers)
    attn = {w: _gqa(c, hidden, bias=True, o_bias=True, qk_norm=False, window=w, sinks=True)
            for w in set(windows)}
    n_exp = c.size("num_local_experts")
    moe = MLP(kind="moe", num_experts=n_exp,
              top_k=_top_k(c, n_exp, "num_experts_per_tok", "experts_per_token"),
              moe_intermediate_size=c.size("intermediate_size"), router_bias=True,
              expert_bias=True, activation="swigluoai")
    layers = [
        Layer(index=i, attention=attn[windows[i]], mlp=moe) for i in range(n_layers)
    ]
    return layers, []


def _deepseek_v3_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    heads = c.size("num_attention_heads")
    nope, rope = c.size("qk_nope_head_dim"), c.size("qk_rope_head_dim")
    sparse = c.family == "deepseek_v32"
    if "q_lora_rank" not in c.cfg:
        raise _missing(c, "q_lora_rank", "null for no query compression, as DeepSeek-V2-Lite")
    attn = Attention(
        kind="mla", num_heads=heads, num_kv_heads=1, head_dim=nope + rope,
        v_head_dim=c.size("v_head_dim"),
        q_lora_rank=c.size("q_lora_rank") if c.cfg["q_lora_rank"] is not None else None,
        kv_lora_rank=c.size("kv_lora_rank"), qk_nope_head_dim=nope, qk_rope_head_dim=rope,
        index_n_heads=c.size("index_n_heads") if sparse else 0,
        index_head_dim=c.size("index_head_dim") if sparse else 0,
        index_topk=c.size("index_topk") if sparse else 0,
    )
    # every field that decides which layers are MoE and how big they are is required: HF's
    # DeepseekV2Config and DeepseekV3Config default them differently (first_k_dense_replace 0
    # vs 3, n_routed_experts None vs 256, n_shared_experts None vs 1), so a missing one is
    # refused, never read as "dense"
    n_routed = c.size("n_routed_experts")
    for key in ("first_k_dense_replace", "n_shared_experts"):
        if c.cfg.get(key) is None:
            raise _missing(c, key, "it decides the MoE layers' layout")
    first_dense = c.num("first_k_dense_replace")
    freq = c.size("moe_layer_freq", 1)  # DeepseekV2Config / DeepseekV3Config: moe_layer_freq=1
    moe_i = c.size("moe_intermediate_size")
    moe = MLP(kind="moe", num_experts=n_routed,
              top_k=_top_k(c, n_routed, "num_experts_per_tok"),
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
                "sliding_window", "head_dim", "qk_rope_head_dim", "index_topk"):
        c.size(key)
    c.num("hc_mult")
    if c.cfg.get("n_shared_experts") is None:
        raise _missing(c, "n_shared_experts", "it sizes the shared experts")
    heads = c.size("num_attention_heads")
    n_exp = c.size("n_routed_experts")
    top_k = _top_k(c, n_exp, "num_experts_per_tok")
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

    moe_i = c.size("moe_intermediate_size")

    def mlp(hash_routed: bool) -> MLP:
        return MLP(kind="moe", num_experts=n_exp,
                   top_k=top_k, moe_intermediate_size=moe_i,
                   shared_intermediate_size=moe_i * c.num("n_shared_experts"),
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
