"""Compute-capability gates: what a CUDA GPU's capability lets vLLM run, as rows with their
source (vLLM v0.11.0).

Two kinds of rule:

- :data:`QUANT_MIN_CC`: the smallest capability each quantisation method accepts
  (``QuantizationConfig.get_min_capability``). vLLM refuses a method below it before loading
  (``vllm/config/__init__.py`` ``VllmConfig._get_quantization_config``: "The quantization method
  ... is not supported for the current GPU. Minimum capability: ..."), so memprof refuses it too.
- :data:`GATES`: features a capability switches between two kernels, each naming what vLLM
  does below it (bf16 falls back to fp16; fp8 W8A8 to Marlin fp8 weight-only; NVFP4 W4A4 to
  Marlin FP4). Where the fallback changes storage the weight formats read it
  (``memprof.core.weights.formats``); the estimate states the fallback as a note.

Only CUDA GPUs of a known architecture are gated: a ROCm GPU has no compute capability (its gfx
name gates its kernels), and an unknown architecture is stated by the estimate
(``memprof.core.gpus.UNKNOWN_ARCH_RULES``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from memprof.base.errors import BadInput
from memprof.core.gpus import GPU, arch_cc
from memprof.core.models import QuantConfig
from memprof.core.versions import Rule, value_at

_Q = "vllm/model_executor/layers/quantization/"


class Gate(NamedTuple):
    """A feature that needs compute capability ``min_cc`` (``89`` = 8.9), and what vLLM does on
    a GPU below it."""

    feature: str
    min_cc: int
    below: str
    source: str


BF16 = Gate(
    feature="bfloat16", min_cc=80,
    below="--dtype bfloat16 is refused; from 0.9.1 --dtype auto serves a bfloat16 (or float32) "
    "checkpoint in float16, the platform's first supported dtype, with a warning (same bytes "
    "per weight), and before 0.9.1 keeps a bfloat16 checkpoint's dtype, which the worker refuses "
    "(memprof.core.auto_dtype)",
    source="vllm/platforms/cuda.py CudaPlatformBase.supported_dtypes ('Pascal, Volta and Turing "
    "NVIDIA GPUs, BF16 is not supported') and check_if_supports_dtype; vllm/config/model.py "
    "_resolve_auto_dtype (v0.11.0)")
FP8_W8A8 = Gate(
    feature="fp8 W8A8", min_cc=89,
    below="fp8 runs weight-only on Marlin: the fp8 weight repacked into int32 at the same bytes, "
    "its scales in the model dtype, one per output channel (per group of the block for "
    "block-quantised checkpoints); activations are not quantised",
    source=_Q + "fp8.py Fp8LinearMethod.__init__ / Fp8MoEMethod.__init__ (use_marlin = not "
    "has_device_capability(89)); utils/marlin_utils_fp8.py prepare_fp8_layer_for_marlin "
    "(v0.11.0); compressed-tensors: compressed_tensors.py _get_scheme_from_parts "
    "(CompressedTensorsW8A16Fp8)")
NVFP4_W4A4 = Gate(
    feature="NVFP4 W4A4", min_cc=100,
    below="no CUTLASS FP4 GEMM: vLLM picks FlashInfer's CUTLASS kernel when FlashInfer is "
    "installed, else Marlin FP4 weight-only (8.0+); the storage memprof sizes is the "
    "CUTLASS/FlashInfer layout either way (the Marlin layout is not modelled)",
    source=_Q + "modelopt.py ModelOptNvFp4Config.get_min_capability (80) and "
    "ModelOptNvFp4LinearMethod.__init__ (backend choice); utils/marlin_utils_fp4.py "
    "prepare_fp4_layer_for_marlin (v0.11.0)")
GATES: tuple[Gate, ...] = (BF16, FP8_W8A8, NVFP4_W4A4)

# The smallest compute capability on which vLLM runs GPTQ / AWQ on Marlin: below it
# query_marlin_supported_quant_types returns no type, so check_marlin_supported fails (a
# checkpoint stays on the plain kernels: AWQMarlinConfig / GPTQMarlinConfig's override, and
# from 0.22.0 / 0.24.0 AutoGPTQConfig's kernel choice and AutoAWQConfig.get_quant_method), and
# the _marlin methods' get_min_capability is the same figure
MARLIN_MIN_CC: tuple[Rule, ...] = (
    Rule(name="marlin_min_capability", changes="GPTQ / AWQ on Marlin: smallest capability",
         since=None, until="0.14.0", value=80, applies_to="marlin",
         introduced_by="read first in 0.11.0 (earlier releases not read)",
         removed_by="Marlin on Turing (sm75), first released in 0.14.0",
         source="0.11.0 / 0.13.0 model_executor/layers/quantization/utils/marlin_utils.py "
         "query_marlin_supported_quant_types ('if device_capability < 80: return []'); "
         "awq_marlin.py / gptq_marlin.py get_min_capability 80"),
    Rule(name="marlin_min_capability", changes="GPTQ / AWQ on Marlin: smallest capability",
         since="0.14.0", until=None, value=75, applies_to="marlin",
         introduced_by="Marlin on Turing (sm75), first released in 0.14.0",
         source="0.14.0 / 0.14.1 / 0.15.0 / 0.16.0 / 0.20.0 / 0.22.0 / 0.23.0 / 0.24.0 "
         "model_executor/layers/quantization/utils/marlin_utils.py "
         "query_marlin_supported_quant_types ('if device_capability < 75: return []'); "
         "0.14.0 - 0.23.0 awq_marlin.py / gptq_marlin.py get_min_capability 75; 0.24.0 "
         "kernels/linear/mixed_precision/marlin.py MarlinLinearKernel.get_min_capability 75"),
)


def marlin_min_cc(version: str | None, engine: str = "vllm") -> int:
    """The smallest compute capability on which ``engine`` at ``version`` runs GPTQ / AWQ on
    Marlin (:data:`MARLIN_MIN_CC`; an engine whose releases these rows do not read: 8.0)."""
    least = value_at(MARLIN_MIN_CC, version, 80, engine=engine)
    return least if isinstance(least, int) else 80


# vLLM's quantisation method (``--quantization`` / the checkpoint's) → its smallest capability
# (the _marlin methods' is :func:`marlin_min_cc`'s, by release)
QUANT_MIN_CC: dict[str, tuple[int, str]] = {
    "fp8": (80, _Q + "fp8.py Fp8Config.get_min_capability"),
    "modelopt": (89, _Q + "modelopt.py ModelOptFp8Config.get_min_capability"),
    "modelopt_fp4": (80, _Q + "modelopt.py ModelOptNvFp4Config.get_min_capability"),
    "mxfp4": (80, _Q + "mxfp4.py Mxfp4Config.get_min_capability"),
    "awq": (75, _Q + "awq.py AWQConfig.get_min_capability"),
    "awq_marlin": (80, _Q + "awq_marlin.py AWQMarlinConfig.get_min_capability"),  # by release
    "gptq": (60, _Q + "gptq.py GPTQConfig.get_min_capability"),
    "gptq_marlin": (80, _Q + "gptq_marlin.py GPTQMarlinConfig.get_min_capability"),
    "bitsandbytes": (70, _Q + "bitsandbytes.py BitsAndBytesConfig.get_min_capability"),
    "compressed-tensors": (70, _Q + "compressed_tensors/compressed_tensors.py "
                           "CompressedTensorsConfig.get_min_capability"),
    "gguf": (60, _Q + "gguf.py GGUFConfig.get_min_capability"),
}


@lru_cache(maxsize=64)
def cuda_cc(gpu: GPU) -> int | None:
    """The compute capability of a CUDA GPU of known architecture as an int (``sm89`` → 89);
    None for ROCm and for an unknown architecture. Kept by value (every estimate asks twice)."""
    return None if gpu.is_rocm else arch_cc(gpu.arch)


def vllm_method(quant: QuantConfig) -> str:
    """The vLLM quantisation method a memprof ``QuantConfig`` runs as, on a GPU with Marlin
    (``awq`` / ``gptq`` checkpoints are converted to their Marlin methods on sm80+:
    ``AWQMarlinConfig.override_quantization_method`` / ``GPTQMarlinConfig``'s, v0.11.0)."""
    if quant.checkpoint_format == "modelopt" and quant.method == "nvfp4":
        return "modelopt_fp4"
    if quant.checkpoint_format:
        return quant.checkpoint_format
    return {"fp8": "fp8", "fp8_per_tensor": "fp8", "fp8_per_channel": "modelopt",
            "nvfp4": "modelopt_fp4", "mxfp4": "mxfp4", "awq": "awq", "gptq": "gptq",
            "bnb4": "bitsandbytes", "gguf": "gguf"}.get(quant.method, quant.method)


def _cc(cc: int) -> str:
    return f"{cc // 10}.{cc % 10}"


def check_capability(gpu: GPU, dtype: str, quant: QuantConfig | None,
                     version: str | None = None, engine: str = "vllm") -> None:
    """Refuse what vLLM refuses on ``gpu`` (:class:`BadInput`): bfloat16 served below 8.0
    (``dtype``: the dtype served, ``auto_dtype.served_dtype``, so only an explicit ``--dtype
    bfloat16`` under vLLM reaches it: SGLang serves float16 there), a quantisation method below
    its minimum capability (the _marlin methods' at ``version``: :func:`marlin_min_cc`)."""
    cc = cuda_cc(gpu)
    if cc is None:
        return
    if dtype in ("bfloat16", "bf16") and cc < BF16.min_cc:
        raise BadInput(f"--dtype bfloat16 on {gpu.name} (compute capability {_cc(cc)}): vLLM "
                       "supports bfloat16 from compute capability 8.0",
                       hint="use --dtype float16 (or auto, which vLLM serves in float16 there)")
    if quant is None or quant.method == "none":
        return
    method = vllm_method(quant)
    marlin = marlin_min_cc(version, engine)
    if method == "awq" and cc >= marlin:
        method = "awq_marlin"
    row = QUANT_MIN_CC.get(method)
    if method in ("awq_marlin", "gptq_marlin") and row is not None:
        row = (marlin, row[1])  # 8.0 up to 0.13.x, 7.5 from 0.14.0
    if row is not None and cc < row[0]:
        raise BadInput(f"quantization {method} needs compute capability {_cc(row[0])}; "
                       f"{gpu.name} is {_cc(cc)} (vLLM refuses it before loading: {row[1]})",
                       hint="pick a GPU of that capability (memprof gpus), or another "
                       "checkpoint format")


def capability_notes(gpu: GPU, quant: QuantConfig | None) -> tuple[str, ...]:
    """What vLLM runs differently on ``gpu`` than on a newer GPU, as the estimate's notes (the
    dtype served: ``memprof.core.auto_dtype.served_dtype_notes``)."""
    cc = cuda_cc(gpu)
    if cc is None:
        return ()
    notes: list[str] = []
    if quant is not None and quant.method in ("fp8", "fp8_per_tensor", "fp8_per_channel") \
            and cc < FP8_W8A8.min_cc:
        notes.append(f"capability {_cc(cc)} < 8.9: fp8 runs weight-only on Marlin (scales in the "
                     f"model dtype, sized so; {FP8_W8A8.source.split(';')[0]})")
    if quant is not None and quant.method == "nvfp4" and cc < NVFP4_W4A4.min_cc:
        notes.append(f"capability {_cc(cc)} < 10.0: no CUTLASS FP4 GEMM; {NVFP4_W4A4.below}")
    return tuple(notes)
