"""GGUF weights as vLLM v0.11.0 holds them: each tensor in its GGML type's blocks.

A row of ``n`` elements in a GGML type of ``block`` elements per ``type_size`` bytes takes
``n / block × type_size`` bytes (the table and the types a checkpoint states:
``memprof.core.models.gguf_types``).

**What vLLM keeps.** ``GGUFConfig.get_quant_method`` (model_executor/layers/quantization/
gguf.py, v0.11.0) gives every ``LinearBase`` ``GGUFLinearMethod``, every ``VocabParallelEmbedding``
(the input embedding and ``lm_head``) ``GGUFEmbeddingMethod`` and ``FusedMoE``
``GGUFMoEMethod``: each keeps the GGUF bytes as a ``uint8`` ``qweight`` and dequantises per call
(``apply_gguf_embedding`` for an embedding lookup), so **nothing is dequantised at load, the
embeddings included**. 1-D tensors (norms) are ordinary parameters in the model dtype, and so
are the linears a model builds with ``quant_config=None`` (MoE routers). A merged linear
(``qkv_proj``, ``gate_up_proj``) whose shards arrive with different row widths is padded to the
widest (``GGUFLinearMethod._create_padded_weight_param``: ``padded_side = max(...)``), so every
row of it takes the widest shard type's row bytes. Tensor parallelism splits rows (column
parallel) or row bytes (row parallel), so a rank's rows must stay whole blocks.
"""

from __future__ import annotations

from memprof.base.errors import ConfigError
from memprof.core.models.gguf_types import GGML_TYPES

# memprof's modules (their last names) → the GGUF tensor kinds they are loaded from
# (gguf-py/gguf/tensor_mapping.py; vLLM's gguf_loader.py maps them back to HF names)
MODULE_KINDS: dict[str, tuple[str, ...]] = {
    "embed_tokens": ("token_embd",),
    "lm_head": ("output",),
    "qkv_proj": ("attn_q", "attn_k", "attn_v"),
    "o_proj": ("attn_output",),
    "gate_up_proj": ("ffn_gate", "ffn_up"),
    "down_proj": ("ffn_down",),
    "experts": ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"),
    "shared_experts.gate_up_proj": ("ffn_gate_shexp", "ffn_up_shexp"),
    "shared_experts.down_proj": ("ffn_down_shexp",),
}


def row_bytes(ggml_type: str, n: int) -> int:
    """Bytes of a row of ``n`` elements in ``ggml_type`` (``n`` a multiple of its block)."""
    block, size = GGML_TYPES[ggml_type]
    if n % block:
        raise ConfigError(f"a GGUF {ggml_type} row of {n} elements is not whole {block}-element "
                          "blocks", hint="vLLM cannot split a GGUF block across ranks; use a "
                          "tensor parallel size that keeps the rows whole")
    return n // block * size


def gguf_bytes(out: int, inn: int, ggml_type: str) -> tuple[int, str]:
    """A GGUF linear (or embedding) of ``out`` rows of ``inn`` elements, as ``qweight`` bytes."""
    rb = row_bytes(ggml_type, inn)
    block, size = GGML_TYPES[ggml_type]
    return out * rb, f"{out}×{inn // block}×{size}B {ggml_type} blocks (GGUF qweight)"


def module_type(types: tuple[tuple[str, str], ...], module: str) -> str | None:
    """The GGML type a memprof module is stored in: the widest (most bytes per element) of the
    GGUF tensors it is loaded from, as vLLM pads a merged linear to its widest shard. None: a
    module no GGUF tensor kind is known for."""
    by_kind = dict(types)
    base = module.split("(")[0]
    for suffix, kinds in sorted(MODULE_KINDS.items(), key=lambda kv: -len(kv[0])):
        if base == suffix or base.endswith("." + suffix):
            found = [by_kind.get(k, by_kind.get("*", "none")) for k in kinds]
            missing = [k for k, t in zip(kinds, found, strict=True) if t == "none"]
            if missing:
                raise ConfigError("quantization_config.tensor_types gives no type for "
                                  + ", ".join(missing),
                                  hint='give every tensor kind a type, or "*" for the rest')
            return max(found, key=lambda t: GGML_TYPES[t][1] / GGML_TYPES[t][0])
    return None
