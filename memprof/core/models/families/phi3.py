"""Phi-3 and Phi-4 (``Phi3ForCausalLM``, ``model_type`` ``phi3``): dense GQA decoders whose
checkpoints store fused ``qkv_proj`` and ``gate_up_proj``; LongRoPE in the 128k variants.

Sources: vLLM ``vllm/model_executor/models/phi3.py`` (read at commit 2bebc310):
``Phi3ForCausalLM`` is ``LlamaForCausalLM`` with a ``packed_modules_mapping`` (``qkv_proj`` ←
q/k/v, ``gate_up_proj`` ← gate/up), so a rank holds exactly what a Llama layer holds:
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
    plain_dense_layers,
    v0_gate_up_rows,
)


def _phi3_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    """Phi-3/Phi-4: the Llama layout (fused qkv and gate-up shard as the separate ones)."""
    return plain_dense_layers(c, hidden, n_layers)


FAMILY = Family(
    name="phi3", model_types=("phi3",), architectures=("Phi3ForCausalLM",),
    build=_phi3_layers, attention="gqa",
    # phi3.py's Phi3ForCausalLM subclasses LlamaForCausalLM: its MLP is LlamaMLP
    v0_mlp_gate_up=v0_gate_up_rows("phi3", "llama.py", "LlamaMLP",
                                   (("0.6.4", None, "rebound", "0.6.5, 0.7.3"),)),
    source="vLLM model_executor/models/phi3.py (LlamaForCausalLM + packed modules)",
)
