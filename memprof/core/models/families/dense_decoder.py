"""The generic dense decoder a user opts into for an architecture memprof does not know
(``--assume-architecture dense-decoder``): never picked by a config's ``model_type`` or
``architectures``, only by that flag, and the estimate then states the assumption.

What it assumes (the layout of vLLM ``vllm/model_executor/models/llama.py``, the common
decoder many architectures copy): every layer is GQA attention (``QKVParallelLinear`` with
``attention_bias``, row-parallel ``o_proj``, ``head_dim`` as stated or hidden // heads,
``num_key_value_heads`` absent → MHA) and a gated dense MLP (``gate_up_proj`` of
``2 × intermediate_size``, ``down_proj``), two RMSNorms per layer, a sliding window per layer
from ``layer_types`` or a non-null ``sliding_window`` on every layer; no MoE, no MTP, no q/k
norms. A field it needs and the config lacks is still refused.
"""

from __future__ import annotations

from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import Built, Family, plain_dense_layers

ASSUMED = ("every layer GQA attention (q/k/v biases per attention_bias) and a gated dense "
           "MLP of intermediate_size, as vLLM's llama.py; no MoE, no MTP, no q/k norms")


def _dense_decoder_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    """the generic reading."""
    return plain_dense_layers(c, hidden, n_layers)


FAMILY = Family(
    name="dense_decoder", model_types=(), architectures=(), build=_dense_decoder_layers,
    attention="gqa",
    source="assumed by --assume-architecture dense-decoder: vLLM model_executor/models/llama.py",
)
