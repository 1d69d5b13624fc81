"""gpt-oss (``GptOssForCausalLM``): GQA with learned sinks and q/k/v/o biases, alternating
sliding and full attention (``layer_types`` required), MoE on every layer with biased experts
(``swigluoai``), RoPE cache in fp32.

Sources: transformers 4.57 ``models/gpt_oss/configuration_gpt_oss.py`` (``head_dim=64``);
vLLM ``model_executor/models/gpt_oss.py`` (``OAIAttention.__init__`` passes
``dtype=torch.float32`` to ``get_rope``; sinks per head; ``MLPBlock`` router and expert biases,
``FusedMoE(renormalize=True)``, 0.10.2).
"""

from __future__ import annotations

from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import (
    Built,
    Family,
    gqa,
    layer_types_windows,
    lora_refused,
    missing,
    sglang_embed_rows,
    top_k,
)
from memprof.core.models.spec import MLP, Layer
from memprof.core.versions import Rule

GPT_OSS_HEAD_DIM = 64  # GptOssConfig head_dim default

# A model's own largest capture size, set before ``_set_cudagraph_sizes`` runs (vLLM's
# ``VllmConfig.__post_init__`` calls ``try_verify_and_update_config`` first, 0.11.0
# config/__init__.py): gpt-oss raises it "for performance", whatever max_num_seqs is, unless the
# user gave the sizes (memprof has no such option, so it always applies). 0.10.1-0.11.0 replace
# the one-element default ``cuda_graph_sizes`` by the explicit list [1, 2, 4] + range(8, 256, 8)
# + range(256, max + 1, 16), which ``_set_cudagraph_sizes`` then cuts at max_num_batched_tokens;
# from 0.11.1 they set ``max_cudagraph_capture_size``, which takes the place of
# min(max_num_seqs x 2, 512) in the same list. ``value``: the largest size (``Family.max_capture``,
# read by memprof/core/terms/cudagraph.py ``model_max_capture``).
GPT_OSS_MAX_CAPTURE: tuple[Rule, ...] = (
    Rule(name="cudagraph_model_max_capture", changes="CUDA graphs: a model's largest capture size",
         applies_to="gpt_oss",
         since="0.10.1", until="0.11.0", value=1024,
         introduced_by="GptOssForCausalLMConfig raises the capture sizes (first released in "
         "0.10.1)", removed_by="capped at 992 for FA3's FULL graphs (0.11.0)", generation="v1",
         source="0.10.1 / 0.10.1.1 / 0.10.2 model_executor/models/config.py "
         "GptOssForCausalLMConfig.verify_and_update_config: 'Overriding max cuda graph capture "
         "size to 1024', cuda_graph_sizes = [1, 2, 4] + range(8, 256, 8) + range(256, 1025, 16) "
         "where the default list has one element below 1024; config/__init__.py "
         "_set_cudagraph_sizes keeps a list of several as given, <= max_num_batched_tokens"),
    Rule(name="cudagraph_model_max_capture", changes="CUDA graphs: a model's largest capture size",
         applies_to="gpt_oss",
         since="0.11.0", until="0.11.1", value=992,
         introduced_by="capped at 992 for FA3's FULL graphs (0.11.0)",
         removed_by="max_cudagraph_capture_size = 1024 (0.11.1)", generation="v1",
         source="0.11.0 model_executor/models/config.py GptOssForCausalLMConfig."
         "verify_and_update_config: 'FIXME(woosuk): When using full cuda graph with FA3, the "
         "max supported size is 992', range(256, 993, 16)"),
    Rule(name="cudagraph_model_max_capture", changes="CUDA graphs: a model's largest capture size",
         applies_to="gpt_oss",
         since="0.11.1", until=None, value=1024,
         introduced_by="max_cudagraph_capture_size = 1024 (0.11.1)", generation="v1",
         source="0.11.1 / 0.11.2 / 0.20.0 model_executor/models/config.py "
         "GptOssForCausalLMConfig.verify_and_update_config: "
         "compilation_config.max_cudagraph_capture_size = 1024 where neither it nor "
         "cudagraph_capture_sizes is set; config/vllm.py _set_cudagraph_sizes takes it instead "
         "of min(max_num_seqs * 2, 512)"),
)


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
              expert_bias=True, activation="swigluoai", renormalize=True)
    layers = [Layer(index=i, attention=attn[windows[i]], mlp=moe) for i in range(n_layers)]
    return layers, []


# vLLM's LoRA support of GptOssForCausalLM: SupportsLoRA from 0.11.1, with LoRA on the experts
# (FusedMoEWithLoRA; is_3d_moe_weight from 0.12.0): refused until memprof models it
LORA = lora_refused("gpt_oss", "GptOssForCausalLM", "0.11.1",
                    "0.10.2 / 0.11.0 (no SupportsLoRA) / 0.11.1 / 0.12.0 / 0.33.0 gpt_oss.py",
                    introduced_by="SupportsLoRA on GptOssForCausalLM (first released in 0.11.1)",
                    experts_from="0.11.1")

FAMILY = Family(name="gpt_oss", model_types=("gpt_oss",), architectures=("GptOssForCausalLM",),
                lora=LORA,
                build=_gpt_oss_layers, attention="gqa", moe=True, rope_fp32=True,
                dp_attention_embed=sglang_embed_rows(
                    "gpt_oss", "gpt_oss.py",
                    ((None, "0.5.9", "replicated", "0.5.3, 0.5.4, 0.5.6, 0.5.7, 0.5.8"),
                     ("0.5.9", None, "attention_tp", "0.5.9"))),
                max_capture=GPT_OSS_MAX_CAPTURE,
                source="vLLM model_executor/models/gpt_oss.py")
