"""Qwen2 and Qwen3 dense (``Qwen2ForCausalLM``, ``Qwen3ForCausalLM``): GQA decoders, Qwen2
with q/k/v biases, Qwen3 with q/k norms and ``head_dim`` 128 when the config leaves it out.

Sources: transformers 4.57 ``models/qwen3/configuration_qwen3.py`` (``head_dim=128``),
``models/qwen2/configuration_qwen2.py`` (hidden // heads; ``use_sliding_window`` /
``max_window_layers``); vLLM ``qwen2.py`` (``qkv_proj`` bias=True), ``qwen3.py`` (q_norm, k_norm).
"""

from __future__ import annotations

from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import (
    Built,
    Family,
    LoraSupport,
    dense_layers,
    layer_types_windows,
    sglang_embed_rows,
    sglang_fa3_listed,
    swa_from_max_window_layers,
    v0_gate_up_rows,
    v2_listed,
)
from memprof.core.versions import Rule

QWEN3_HEAD_DIM = 128  # Qwen3Config head_dim default

# the multimodal wrappers (Qwen2.5-VL, Qwen3-VL) build their language model with this builder
VL_MODULE = "memprof/core/models/families/qwen_vl.py"


def _windows(c: ConfigFields, n_layers: int) -> list[int | None]:
    """``layer_types`` when stated, else ``use_sliding_window`` / ``max_window_layers``."""
    out = layer_types_windows(c, n_layers)
    return out if out is not None else swa_from_max_window_layers(c, n_layers)


def _qwen2_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    return dense_layers(c, hidden, n_layers, windows=_windows(c, n_layers), bias=True,
                        qk_norm=False)


def _qwen3_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    bias = c.flag("attention_bias", False)
    return dense_layers(c, hidden, n_layers, windows=_windows(c, n_layers), bias=bias,
                        qk_norm=True, head_dim_default=QWEN3_HEAD_DIM)


# SGLang models/qwen2.py Qwen2Model (Qwen3Model extends it): embed_tokens under DP attention
_SGLANG_EMBED = (
    (None, "0.4.9", "tp", "0.4.3, 0.4.4, 0.4.6, 0.4.7, 0.4.8, 0.4.8.post1"),
    ("0.4.9", "0.5.9", "replicated",
     "0.4.9, 0.4.9.post5, 0.4.10, 0.5.3, 0.5.4, 0.5.6, 0.5.7, 0.5.8"),
    ("0.5.9", None, "attention_tp", "0.5.9"),
)
# vLLM's LoRA support: every linear of the decoder (qkv_proj and gate_up_proj packed). Qwen2 and
# Qwen3 before 0.16.0: no embedding modules (``embedding_modules = {}``: embed_tokens and lm_head
# carry no LoRA) and no extra vocabulary. Qwen3ForCausalLM names embed_tokens / lm_head as
# embedding modules from 0.16.0 (read: 0.15.1 none; 0.16.0, 0.20.0, 0.27.1, 0.28.0, 0.33.0 both).
# Up to 0.27.1 a tied lm_head is ``self.model.embed_tokens`` itself, which the LoRA model
# manager wraps a second time (``LoraSupport.tied_head_embedding``); from 0.28.0 it is a
# ParallelLMHead tied by ``tie_weights``, which no LoRA class replaces (the logits processor's
# wrapper alone carries its LoRA).
_NO_EMBEDDINGS = LoraSupport(extra_vocab=False, embeddings=False)
QWEN2_LORA: tuple[Rule, ...] = (
    Rule(name="qwen2_lora", changes="LoRA: modules", since="0.7.0", until=None,
         value=_NO_EMBEDDINGS, introduced_by="before 0.7.0",
         source="0.7.0 as 0.7.1 (lora/, LoRAConfig, worker/model_runner.py "
         "and the model files compared); "
         "0.7.3 / 0.8.2 / 0.11.0 / 0.12.0 / 0.16.0 / 0.20.0 / 0.27.1 / 0.33.0 "
         "model_executor/models/qwen2.py "
         "Qwen2ForCausalLM (SupportsLoRA, no embedding_modules, no LoRA vocabulary)",
         applies_to="qwen2"),
)
QWEN3_LORA: tuple[Rule, ...] = (
    Rule(name="qwen3_lora", changes="LoRA: modules", since="0.8.4", until="0.16.0",
         value=_NO_EMBEDDINGS, introduced_by="Qwen3 support (read in 0.8.4)",
         removed_by="embedding_modules embed_tokens / lm_head (first released in 0.16.0)",
         source="0.8.4 / 0.11.0 / 0.12.0 / 0.14.0 / 0.15.1 model_executor/models/qwen3.py "
         "Qwen3ForCausalLM (SupportsLoRA, no embedding_modules)", applies_to="qwen3"),
    Rule(name="qwen3_lora", changes="LoRA: modules", since="0.16.0", until="0.28.0",
         value=LoraSupport(extra_vocab=False, embeddings=True, tied_head_embedding=True),
         introduced_by="embedding_modules embed_tokens / lm_head (first released in 0.16.0)",
         removed_by="tied lm_head a ParallelLMHead via tie_weights (first released in 0.28.0)",
         source="0.16.0 / 0.20.0 / 0.27.1 model_executor/models/qwen3.py Qwen3ForCausalLM "
         "(embedding_modules; tied: self.lm_head = self.model.embed_tokens); "
         "lora/model_manager.py _create_lora_modules (named_modules(remove_duplicate=False), "
         "from_layer on 'lm_head', then from_layer_logits_processor); "
         "lora/layers/vocal_parallel_embedding.py, logits_processor.py create_lora_weights",
         applies_to="qwen3"),
    Rule(name="qwen3_lora", changes="LoRA: modules", since="0.28.0", until=None,
         value=LoraSupport(extra_vocab=False, embeddings=True),
         introduced_by="tied lm_head a ParallelLMHead via tie_weights (first released in "
         "0.28.0)",
         source="0.28.0 / 0.33.0 model_executor/models/qwen3.py Qwen3ForCausalLM "
         "(self.lm_head = self.lm_head.tie_weights(self.model.embed_tokens)); "
         "lora/layers/vocal_parallel_embedding.py can_replace_layer (type is "
         "VocabParallelEmbedding: not a ParallelLMHead)", applies_to="qwen3"),
)

QWEN2 = Family(name="qwen2", model_types=("qwen2",), architectures=("Qwen2ForCausalLM",),
               # 0.11.0 / 0.20.0 / 0.33.0 registry.py _EMBEDDING_MODELS: ("qwen2",
               # "Qwen2ForCausalLM")
               bare_architectures=("Qwen2Model",),
               sglang_fa3_listed=(sglang_fa3_listed("qwen2", "0.4.6", "0.5.8",
                                                    ("Qwen2ForCausalLM",)),),
               build=_qwen2_layers, attention="gqa", lora=QWEN2_LORA,
               modules=(VL_MODULE,),
               dp_attention_embed=sglang_embed_rows("qwen2", "qwen2.py", _SGLANG_EMBED),
               v0_mlp_gate_up=v0_gate_up_rows("qwen2", "qwen2.py", "Qwen2MLP", (
                   ("0.6.0", None, "kept", "0.6.0, 0.6.5, 0.7.1, 0.7.3, 0.8.5"),)),
               source="vLLM model_executor/models/qwen2.py; transformers configuration_qwen2.py")
QWEN3 = Family(name="qwen3", model_types=("qwen3",), architectures=("Qwen3ForCausalLM",),
               eagle3_speculators=(("qwen3", "Eagle3Qwen3ForCausalLM"),),
               sglang_fa3_listed=(sglang_fa3_listed("qwen3", "0.4.7", "0.5.8",
                                                    ("Qwen3ForCausalLM",)),),
               build=_qwen3_layers, attention="gqa", lora=QWEN3_LORA,
               modules=(VL_MODULE,),
               v2_runner_listed=(v2_listed("qwen3", "0.22.0", "0.25.0", ("Qwen3ForCausalLM",),
                                           "0.22.0 / 0.22.1 / 0.23.0 / 0.24.0 (not 0.25.0)"),),
               dp_attention_embed=sglang_embed_rows("qwen3", "qwen2.py", _SGLANG_EMBED),
               v0_mlp_gate_up=v0_gate_up_rows("qwen3", "qwen2.py", "Qwen2MLP (qwen3.py's "
                                              "Qwen3MLP)", (("0.8.5", None, "kept", "0.8.5"),)),
               source="vLLM model_executor/models/qwen3.py; transformers configuration_qwen3.py")
