"""Phi-3 and Phi-4 (``Phi3ForCausalLM``, ``model_type`` ``phi3``): dense GQA decoders whose
checkpoints store fused ``qkv_proj`` and ``gate_up_proj``; LongRoPE in the 128k variants.

Sources: vLLM ``vllm/model_executor/models/phi3.py`` (read at commit 2bebc310):
``Phi3ForCausalLM`` is ``LlamaForCausalLM`` with a ``packed_modules_mapping`` that maps the
checkpoint's fused ``qkv_proj`` and ``gate_up_proj`` to themselves (read in the 0.7.1 to 0.33.0
wheels), so a rank holds exactly what a Llama layer holds:
``QKVParallelLinear`` (no bias: ``attention_bias`` false), row-parallel ``o_proj``,
``MergedColumnParallelLinear`` gate_up, row-parallel ``down_proj``, two RMSNorms, an untied
``lm_head`` unless ``tie_word_embeddings``. The rotary cache: ``LlamaDecoderLayer``
(``llama.py``, read at 0035bdf2) copies the config's ``original_max_position_embeddings`` into
the rope dict and ``get_rope`` builds ``Phi3LongRoPEScaledRotaryEmbedding`` for
``longrope``/``su`` (short and long caches both kept;
``memprof.core.attention.base.rope_positions``). A non-null ``sliding_window`` is every layer's
window: Llama's attention passes no per-layer window and vLLM's ``Attention``
(``attention/layer.py``) then takes the model-level ``cache_config.sliding_window``, the
config's value. transformers ``models/phi3/configuration_phi3.py``: ``num_key_value_heads``
None → ``num_attention_heads``.
"""

from __future__ import annotations

from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import (
    Built,
    Family,
    LoraSupport,
    plain_dense_layers,
    v0_gate_up_rows,
)
from memprof.core.versions import Rule


def _phi3_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    """Phi-3/Phi-4: the Llama layout (fused qkv and gate-up shard as the separate ones)."""
    return plain_dense_layers(c, hidden, n_layers)


# vLLM's LoRA support of Phi3ForCausalLM: LlamaForCausalLM's (embed_tokens and lm_head LoRA
# modules; the extra vocabulary rows while LoRAConfig has lora_extra_vocab_size), with
# ``packed_modules_mapping = {"qkv_proj": ["qkv_proj"], "gate_up_proj": ["gate_up_proj"]}``: a
# one-entry list makes ``QKVParallelLinearWithLoRA`` (``len(packed_modules_list) == 1``) and
# ``ColumnParallelLinearWithLoRA`` (a MergedColumnParallelLinear with one packed module) the
# wrappers, one LoRA slice over the fused output each (``LoraSupport.fused_slices``)
LORA: tuple[Rule, ...] = (
    Rule(name="phi3_lora", changes="LoRA: extra vocabulary rows", since="0.7.0", until="0.12.0",
         value=LoraSupport(extra_vocab=True, embeddings=True, fused_slices=True),
         introduced_by="before 0.7.0",
         removed_by="lora_extra_vocab_size removed (first released in 0.12.0)",
         source="0.7.1 / 0.7.3 / 0.8.5 / 0.10.2 / 0.11.0 model_executor/models/phi3.py "
         "(Phi3ForCausalLM(LlamaForCausalLM), packed_modules_mapping), llama.py "
         "LlamaForCausalLM (embedding_modules, unpadded_vocab_size += lora_extra_vocab_size); "
         "0.7.1 lora/layers.py QKVParallelLinearWithLora / ColumnParallelLinearWithLoRA "
         "can_replace_layer (n_slices = 1)", applies_to="phi3"),
    Rule(name="phi3_lora", changes="LoRA: extra vocabulary rows", since="0.12.0", until=None,
         value=LoraSupport(extra_vocab=False, embeddings=True, fused_slices=True),
         introduced_by="lora_extra_vocab_size removed (first released in 0.12.0)",
         source="0.12.0 / 0.16.0 / 0.20.0 / 0.28.0 / 0.33.0 model_executor/models/phi3.py "
         "(the same packed_modules_mapping on LlamaForCausalLM); 0.33.0 "
         "lora/layers/column_parallel_linear.py QKVParallelLinearWithLoRA, "
         "ColumnParallelLinearWithLoRA.can_replace_layer (n_slices = 1)", applies_to="phi3"),
)

FAMILY = Family(
    name="phi3", model_types=("phi3",), architectures=("Phi3ForCausalLM",),
    build=_phi3_layers, attention="gqa", lora=LORA,
    # phi3.py's Phi3ForCausalLM subclasses LlamaForCausalLM: its MLP is LlamaMLP
    v0_mlp_gate_up=v0_gate_up_rows("phi3", "llama.py", "LlamaMLP",
                                   (("0.6.4", None, "rebound", "0.6.5, 0.7.3"),)),
    source="vLLM model_executor/models/phi3.py (LlamaForCausalLM + packed modules)",
)
