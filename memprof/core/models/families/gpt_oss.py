"""gpt-oss (``GptOssForCausalLM``): GQA with learned sinks and q/k/v/o biases, alternating
sliding and full attention (``layer_types`` required), MoE on every layer with biased experts
(``swigluoai``), RoPE cache in fp32.

Sources: transformers 4.57 ``models/gpt_oss/configuration_gpt_oss.py`` (``head_dim=64``);
vLLM ``model_executor/models/gpt_oss.py`` (``OAIAttention.__init__`` passes
``dtype=torch.float32`` to ``get_rope``; sinks per head; ``MLPBlock`` router and expert biases).
"""

from __future__ import annotations

from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import (
    Built,
    Family,
    gqa,
    layer_types_windows,
    missing,
    sglang_embed_rows,
    top_k,
)
from memprof.core.models.spec import MLP, Layer

GPT_OSS_HEAD_DIM = 64  # GptOssConfig head_dim default


def _gpt_oss_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    windows = layer_types_windows(c, n_layers)
    if windows is None:
        raise missing(c, "layer_types", "gpt-oss alternates sliding and full attention")
    attn = {w: gqa(c, hidden, bias=True, o_bias=True, qk_norm=False, window=w, sinks=True,
                   head_dim_default=GPT_OSS_HEAD_DIM, kv_heads_required=True)
            for w in set(windows)}
    n_exp = c.size("num_local_experts")
    moe = MLP(kind="moe", num_experts=n_exp,
              top_k=top_k(c, n_exp, "num_experts_per_tok", "experts_per_token"),
              moe_intermediate_size=c.size("intermediate_size"), router_bias=True,
              expert_bias=True, activation="swigluoai")
    layers = [Layer(index=i, attention=attn[windows[i]], mlp=moe) for i in range(n_layers)]
    return layers, []


FAMILY = Family(name="gpt_oss", model_types=("gpt_oss",), architectures=("GptOssForCausalLM",),
                build=_gpt_oss_layers, attention="gqa", moe=True, rope_fp32=True,
                dp_attention_embed=sglang_embed_rows(
                    "gpt_oss", "gpt_oss.py",
                    ((None, "0.5.9", "replicated", "0.5.3, 0.5.4, 0.5.6, 0.5.7, 0.5.8"),
                     ("0.5.9", None, "attention_tp", "0.5.9"))),
                source="vLLM model_executor/models/gpt_oss.py")
