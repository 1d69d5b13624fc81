"""Llama and Mistral (``LlamaForCausalLM``, ``MistralForCausalLM``): dense GQA decoders.

Sources: transformers 4.57 ``models/llama/configuration_llama.py`` (head_dim = hidden //
heads when absent; num_key_value_heads None → num_attention_heads), ``modeling_mistral.py``
(a non-null ``sliding_window`` is every layer's window; vLLM ``llama.py`` reads it per layer).
"""

from __future__ import annotations

from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import (
    Built,
    Family,
    LoraSupport,
    dense_layers,
    layer_types_windows,
    missing,
    sglang_fa3_listed,
    swa_from_max_window_layers,
    v0_gate_up_rows,
    v2_listed,
)
from memprof.core.versions import Rule


def _windows(c: ConfigFields, n_layers: int) -> list[int | None]:
    out = layer_types_windows(c, n_layers)
    if out is not None:
        return out
    if c.cfg.get("model_type") == "mistral":
        # MistralConfig: a sliding_window (not null) is every layer's window; null: full
        if "sliding_window" not in c.cfg:
            raise missing(c, "sliding_window", "null for full attention")
        if c.opt_int("sliding_window") is not None:
            return [c.size("sliding_window")] * n_layers
        return [None] * n_layers
    return swa_from_max_window_layers(c, n_layers)


def _llama_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    bias = c.flag("attention_bias", False)
    return dense_layers(c, hidden, n_layers, windows=_windows(c, n_layers), bias=bias,
                        qk_norm=False)


# vLLM's LoRA support of LlamaForCausalLM (MistralForCausalLM runs the same class up to 0.14.x;
# from 0.15.0 its own subclass, whose empty embedding_modules leave embed_tokens and lm_head
# without LoRA: ``LoraSupport.no_embeddings``): embed_tokens
# and lm_head are LoRA modules (``embedding_modules``) at 0.8.2, 0.11.0, 0.12.0 and 0.33.0; the
# extra vocabulary rows (``lora_vocab = lora_extra_vocab_size × max_loras`` in LlamaModel,
# ``unpadded_vocab_size += lora_extra_vocab_size`` padded to ``lora_vocab_padding_size`` in
# LlamaForCausalLM) are in 0.8.2-0.11.0 and gone at 0.12.0 (LoRAConfig has no
# lora_extra_vocab_size; 0.11.0's config/lora.py deprecates it "in v0.12.0")
LORA: tuple[Rule, ...] = (
    Rule(name="llama_lora", changes="LoRA: extra vocabulary rows", since="0.7.0", until="0.12.0",
         value=LoraSupport(extra_vocab=True, embeddings=True), introduced_by="before 0.7.0",
         removed_by="lora_extra_vocab_size removed (first released in 0.12.0)",
         source="0.7.0 as 0.7.1 (lora/, LoRAConfig, worker/model_runner.py "
         "and the model files compared); "
         "0.8.2 / 0.11.0 model_executor/models/llama.py LlamaModel.__init__, "
         "LlamaForCausalLM.__init__ and embedding_modules", applies_to="llama"),
    Rule(name="llama_lora", changes="LoRA: extra vocabulary rows", since="0.12.0",
         until="0.15.0", value=LoraSupport(extra_vocab=False, embeddings=True),
         introduced_by="lora_extra_vocab_size removed (first released in 0.12.0)",
         removed_by="MistralForCausalLM its own class without embedding modules (first "
         "released in 0.15.0)",
         source="0.12.0 / 0.14.1 model_executor/models/llama.py LlamaForCausalLM "
         "(embedding_modules; no LoRA vocabulary; a tied lm_head is a ParallelLMHead via "
         "tie_weights, which no LoRA embedding class replaces); registry.py: "
         "MistralForCausalLM -> ('llama', 'LlamaForCausalLM')", applies_to="llama"),
    Rule(name="llama_lora", changes="LoRA: extra vocabulary rows", since="0.15.0", until=None,
         value=LoraSupport(extra_vocab=False, embeddings=True,
                           no_embeddings=("MistralForCausalLM",)),
         introduced_by="MistralForCausalLM its own class without embedding modules (first "
         "released in 0.15.0)",
         source="0.16.0 / 0.20.0 / 0.27.1 / 0.33.0 model_executor/models/llama.py "
         "LlamaForCausalLM (as before); 0.15.0 / 0.16.0 / 0.33.0 registry.py "
         "MistralForCausalLM -> ('mistral', 'MistralForCausalLM'), mistral.py "
         "MistralForCausalLM(LlamaForCausalLM): embedding_modules = {} ('We don't support LoRA "
         "on the embedding layers'); lora/utils.py get_supported_lora_modules (embedding names "
         "from embedding_modules only)", applies_to="llama"),
)

FAMILY = Family(
    name="llama", model_types=("llama", "mistral"),
    architectures=("LlamaForCausalLM", "MistralForCausalLM"),
    eagle3_speculators=(("llama", "Eagle3LlamaForCausalLM"),),
    # 0.11.0 / 0.20.0 / 0.33.0 registry.py _EMBEDDING_MODELS: ("llama", "LlamaForCausalLM")
    bare_architectures=("LlamaModel", "MistralModel"),
    sglang_fa3_listed=(
        sglang_fa3_listed("llama", "0.4.6", "0.4.7", ("LlamaForCausalLM", "MistralForCausalLM")),
        sglang_fa3_listed("llama", "0.4.7", "0.5.8", ("LlamaForCausalLM",))),
    build=_llama_layers, attention="gqa", lora=LORA,
    v2_runner_listed=(v2_listed("llama", "0.23.0", "0.25.0",
                                ("LlamaForCausalLM", "MistralForCausalLM"),
                                "0.23.0 / 0.24.0 (not 0.25.0)"),),
    v0_mlp_gate_up=v0_gate_up_rows("llama", "llama.py", "LlamaMLP", (
        ("0.6.0", "0.6.4", "kept", "0.6.0, 0.6.1, 0.6.2, 0.6.3"),
        ("0.6.4", None, "rebound", "0.6.4, 0.6.5, 0.7.1, 0.7.3, 0.8.5"))),
    source="vLLM model_executor/models/llama.py; transformers configuration_llama.py",
)
