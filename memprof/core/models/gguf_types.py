"""GGUF tensor types as a checkpoint's ``quantization_config`` states them (``quant_method:
gguf``), and the GGML type table they are sized with (``memprof.core.weights.gguf`` sizes them).

The table is gguf-py's ``GGML_QUANT_SIZES`` (llama.cpp ``gguf-py/gguf/constants.py``; the same
layouts are the ``block_*`` structs of ``ggml/src/ggml-common.h``): a type stores ``block``
elements in ``type_size`` bytes, ``QK_K`` = 256.

``tensor_types`` maps GGUF tensor names without their ``blk.N.`` prefix (``attn_q``,
``ffn_down``, ``token_embd``, ``output``, or ``*`` for the rest) to types, as ``gguf-dump`` lists
them; ``file_type`` names a file type whose every matrix has one type
(:data:`UNIFORM_FILE_TYPES`). llama.cpp's other file types give some layers of one tensor kind
more bits than others, or the output another type (``llama_tensor_get_type`` in
``src/llama-quant.cpp``: ``use_more_bits(i_layer, n_layer)`` raises ``attn_v`` and ``ffn_down``
to Q6_K for Q4_K_M; ``output.weight`` goes to Q6_K), which a file type alone does not say: they
are refused, naming the way out.
"""

from __future__ import annotations

from memprof.base.errors import ConfigError

QK_K = 256
GGML_TYPES: dict[str, tuple[int, int]] = {
    # name: (elements per block, bytes per block)
    "F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "F64": (1, 8),
    "I8": (1, 1), "I16": (1, 2), "I32": (1, 4), "I64": (1, 8),
    "Q4_0": (32, 2 + 16), "Q4_1": (32, 2 + 2 + 16),
    "Q5_0": (32, 2 + 4 + 16), "Q5_1": (32, 2 + 2 + 4 + 16),
    "Q8_0": (32, 2 + 32), "Q8_1": (32, 4 + 4 + 32),
    "Q2_K": (256, 2 + 2 + QK_K // 16 + QK_K // 4),
    "Q3_K": (256, 2 + QK_K // 4 + QK_K // 8 + 12),
    "Q4_K": (256, 2 + 2 + QK_K // 2 + 12),
    "Q5_K": (256, 2 + 2 + QK_K // 2 + QK_K // 8 + 12),
    "Q6_K": (256, 2 + QK_K // 2 + QK_K // 4 + QK_K // 16),
    "Q8_K": (256, 4 + QK_K + QK_K // 8),
    "IQ2_XXS": (256, 2 + QK_K // 4),
    "IQ2_XS": (256, 2 + QK_K // 4 + QK_K // 32),
    "IQ3_XXS": (256, 2 + QK_K // 4 + QK_K // 8),
    "IQ1_S": (256, 2 + QK_K // 8 + QK_K // 16),
    "IQ4_NL": (32, 2 + 16),
    "IQ3_S": (256, 2 + QK_K // 4 + QK_K // 8 + QK_K // 32 + 4),
    "IQ2_S": (256, 2 + QK_K // 4 + QK_K // 16),
    "IQ4_XS": (256, 2 + 2 + QK_K // 2 + QK_K // 64),
    "IQ1_M": (256, QK_K // 8 + QK_K // 16 + QK_K // 32),
    "TQ1_0": (256, 2 + 4 * 13), "TQ2_0": (256, 2 + 64),
}

# vLLM v0.11.0 runs these (model_executor/layers/quantization/gguf.py UNQUANTIZED_TYPES |
# DEQUANT_TYPES); it refuses the rest at load ("Unsupported GGUF quantization type")
VLLM_TYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K",
              "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ1_M", "IQ1_S", "IQ2_XXS", "IQ2_XS", "IQ2_S",
              "IQ3_XXS", "IQ3_S", "IQ4_XS", "IQ4_NL")

# file types whose every matrix has one type: convert_hf_to_gguf.py --outtype f32/f16/bf16/q8_0,
# and llama-quantize Q8_0 / Q6_K, whose output.weight keeps the type (llama_tensor_get_type:
# "else if (new_type != GGML_TYPE_Q8_0) new_type = GGML_TYPE_Q6_K")
UNIFORM_FILE_TYPES = {"F32": "F32", "F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0",
                      "Q6_K": "Q6_K"}
# llama-quantize file types that put output.weight in Q6_K and/or raise some layers of a tensor
# kind (llama_tensor_get_type's per-ftype rules on attn_v, ffn_down, attn_output, ...)
MIXED_FILE_TYPES = ("Q2_K", "Q2_K_S", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
                    "Q5_K_S", "Q5_K_M", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ1_S", "IQ1_M",
                    "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "IQ3_S",
                    "IQ3_M", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0")

WAY_OUT = ("give the per-tensor types as quantization_config {\"quant_method\": \"gguf\", "
           "\"tensor_types\": {\"attn_v\": \"Q6_K\", \"*\": \"Q4_K\", ...}} (gguf-dump lists "
           "them; one type per tensor kind), or a uniform file type (F16, BF16, Q8_0, Q6_K)")


def parse_types(q: dict[str, object]) -> tuple[tuple[str, str], ...]:
    """A GGUF checkpoint's ``quantization_config`` → ``((kind or "*", type), ...)``; a kind
    left without a type reads ``"none"`` (refused when a module needs it)."""
    listing = q.get("tensor_types")
    file_type = q.get("file_type")
    if listing is None and file_type is None:
        raise ConfigError("quantization_config (gguf) states neither tensor_types nor "
                          "file_type", hint=WAY_OUT)
    if listing is not None:
        if not isinstance(listing, dict) or not listing:
            raise ConfigError("quantization_config.tensor_types must be an object of tensor "
                              "kind → GGML type", hint=WAY_OUT)
        pairs = tuple((str(k).removeprefix("blk.N.").removesuffix(".weight"),
                       str(v).upper()) for k, v in listing.items())
        for kind, t in pairs:
            _check_type(t, f"tensor_types[{kind!r}]")
        if not any(k == "*" for k, _ in pairs):
            pairs += (("*", "none"),)
        return pairs
    ft = str(file_type).upper().removeprefix("MOSTLY_")
    if ft in UNIFORM_FILE_TYPES:
        return (("*", UNIFORM_FILE_TYPES[ft]),)
    if ft in MIXED_FILE_TYPES:
        raise ConfigError(
            f"GGUF file type {ft} does not store one type for every tensor (llama.cpp "
            "src/llama-quant.cpp llama_tensor_get_type: output.weight in Q6_K, and e.g. Q4_K_M "
            "raises attn_v and ffn_down to Q6_K on the layers use_more_bits picks)",
            hint=WAY_OUT)
    raise ConfigError(f"unknown GGUF file type {ft!r}", hint=WAY_OUT)


def _check_type(t: str, where: str) -> None:
    if t not in GGML_TYPES:
        raise ConfigError(f"quantization_config.{where}: unknown GGML type {t!r}",
                          hint="one of " + ", ".join(GGML_TYPES))
    if t not in VLLM_TYPES:
        raise ConfigError(f"quantization_config.{where}: vLLM v0.11.0 does not run GGUF {t} "
                          "(gguf.py: Unsupported GGUF quantization type)",
                          hint="one of " + ", ".join(VLLM_TYPES))
