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
    dense_layers,
    layer_types_windows,
    missing,
    swa_from_max_window_layers,
    v2_listed,
)


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


FAMILY = Family(
    name="llama", model_types=("llama", "mistral"),
    architectures=("LlamaForCausalLM", "MistralForCausalLM"),
    build=_llama_layers, attention="gqa",
    v2_runner_listed=(v2_listed("llama", "0.23.0", "0.25.0",
                                ("LlamaForCausalLM", "MistralForCausalLM"),
                                "0.23.0 / 0.24.0 (not 0.25.0)"),),
    source="vLLM model_executor/models/llama.py; transformers configuration_llama.py",
)
