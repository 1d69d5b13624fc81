"""The one table of element types: bytes per element, and the short names formulas print.

Long names are torch's (``bfloat16``, ``float32``); short ones what kernels and engine code use
(``bf16``, ``fp32``, ``fp8``). Either is a key.
"""

from __future__ import annotations

# name: (bytes per element, short name)
DTYPES: dict[str, tuple[int, str]] = {
    "float32": (4, "fp32"),
    "float16": (2, "fp16"),
    "bfloat16": (2, "bf16"),
    "int64": (8, "int64"),
    "int32": (4, "int32"),
    "uint8": (1, "uint8"),
    "int8": (1, "int8"),
    "bool": (1, "bool"),
    "float8_e4m3fn": (1, "fp8"),
}
_SHORT = {short: name for name, (_b, short) in DTYPES.items()}

# --dtype's other spellings, as the element type each names: the engines' "half" and "float"
# (vLLM config/model.py _STR_DTYPE_TO_TORCH_DTYPE, SGLang srt/configs/model_config.py) and
# memprof's own "fp16" and "bf16" (memprof.core.deployment.DTYPES)
FLAG_ALIASES = {"half": "float16", "fp16": "float16", "bf16": "bfloat16", "float": "float32"}


def dtype_bytes(dtype: str) -> int:
    """Bytes of one element of ``dtype`` (long or short name): ``dtype_bytes("bf16") == 2``."""
    return DTYPES[_SHORT.get(dtype, dtype)][0]


def short_name(dtype: str) -> str:
    """The short name (``bf16``) of a long (``bfloat16``) or short dtype name."""
    return DTYPES[_SHORT.get(dtype, dtype)][1]
