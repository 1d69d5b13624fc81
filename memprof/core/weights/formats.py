"""Bytes of one (already sharded) linear weight under each quantisation scheme.

Each function returns ``(bytes, formula)`` for a weight of ``out × in`` elements on one rank.
Layouts are vLLM's (citations per scheme below).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memprof.base.units import cdiv, round_up
from memprof.core.dtypes import dtype_bytes
from memprof.core.models import QuantConfig


def dense_bytes(out: int, inn: int, dtype_bytes: int) -> tuple[int, str]:
    return out * inn * dtype_bytes, f"{out}×{inn}×{dtype_bytes}B"


def fp8_block(out: int, inn: int, block: tuple[int, int], arch: str = "sm90") -> tuple[int, str]:
    """fp8 e4m3 weight + fp32 ``weight_scale_inv`` of ``ceil(out/bo)×ceil(in/bi)``.

    ``Fp8LinearMethod.create_weights`` (vllm/model_executor/layers/quantization/fp8.py, v0.33.0)
    makes the block scale float32. On SM100, DeepGEMM (on by default when out % 64 == 0 and
    in % 128 == 0) repacks it per row into int32 ``(align(out, 4), ceil(ceil(in/128)/4))``
    (``kernels/linear/scaled_mm/deep_gemm.py``; DeepGEMM ``csrc/apis/layout.hpp``).
    """
    bo, bi = block
    if arch.startswith("sm10") and out % 64 == 0 and inn % 128 == 0:
        packed = round_up(out, 4) * cdiv(cdiv(inn, bi), 4)
        return out * inn + 4 * packed, f"{out}×{inn}×1B + {packed} int32 packed UE8M0 scales"
    scales = cdiv(out, bo) * cdiv(inn, bi)
    return out * inn + 4 * scales, f"{out}×{inn}×1B + {scales} fp32 block scales"


def fp8_per_tensor(out: int, inn: int) -> tuple[int, str]:
    """fp8 weight with one fp32 scale (vLLM online ``--quantization fp8`` on a bf16 checkpoint)."""
    return out * inn + 4, f"{out}×{inn}×1B + 1 fp32 scale"


def fp8_per_channel(out: int, inn: int) -> tuple[int, str]:
    """fp8 weight with an fp32 scale per output channel (compressed-tensors channel strategy)."""
    return out * inn + 4 * out, f"{out}×{inn}×1B + {out} fp32 channel scales"


def mxfp4(out: int, inn: int) -> tuple[int, str]:
    """MXFP4: two e2m1 values per byte plus one e8m0 scale byte per 32 values (OCP MX spec)."""
    return out * inn // 2 + out * cdiv(inn, 32), f"{out}×{inn}×0.5B + {out}×{cdiv(inn, 32)} e8m0"


def nvfp4(out: int, inn: int, group: int = 16) -> tuple[int, str]:
    """NVFP4 (ModelOpt): e2m1 packed two per byte, an fp8-e4m3 scale per 16 values, and fp32
    global scalars. After loading (vLLM 0.33.0 modelopt.py, nvfp4_utils.py) the CUTLASS /
    FlashInfer kernels pad the weight to 32 rows and 32 K-elements and swizzle the scale to
    ``(round_up(out, 128), round_up(in/16, 4))``; the global scales collapse to three fp32
    scalars."""
    wo, wi = round_up(out, 32), round_up(inn, 32)
    rows = round_up(out, 128)
    cols = round_up(cdiv(inn, group), 4)
    return (wo * wi // 2 + rows * cols + 12,
            f"{wo}×{wi}×0.5B + {rows}×{cols} fp8 scales + 3 fp32")


def int4_grouped(out: int, inn: int, group: int, bits: int, dtype_bytes: int) -> tuple[int, str]:
    """AWQ / GPTQ: packed int32 ``qweight`` (bits/8 B per value), ``scales`` in the model dtype
    and packed int32 ``qzeros`` per group of ``group`` input rows (vLLM 0.33.0 auto_awq.py /
    auto_gptq.py; AWQ is converted to the GPTQ layout at load, Marlin repacking keeps the bytes,
    and ``desc_act`` with groups is refused, so there is no ``g_idx``)."""
    g = group if group > 0 else inn
    groups = cdiv(inn, g)
    total = out * inn * bits // 8 + groups * out * dtype_bytes + groups * out * bits // 8
    return total, f"{out}×{inn}×{bits}/8B + {groups}×{out} scales + zeros"


def linear_bytes(
    out: int, inn: int, quant: QuantConfig | None, dtype_bytes: int, arch: str = "sm90"
) -> tuple[int, str]:
    """Bytes of a linear weight, quantised with ``quant`` (``None``: the model dtype)."""
    if quant is None or quant.method == "none":
        return dense_bytes(out, inn, dtype_bytes)
    m = quant.method
    if m == "fp8":
        return fp8_block(out, inn, quant.block or (128, 128), arch)
    if m == "fp8_per_tensor":
        return fp8_per_tensor(out, inn)
    if m == "fp8_per_channel":
        return fp8_per_channel(out, inn)
    if m == "mxfp4":
        return mxfp4(out, inn)
    if m == "nvfp4":
        return nvfp4(out, inn, quant.group_size or 16)
    if m in ("awq", "gptq"):
        return int4_grouped(out, inn, quant.group_size, quant.bits or 4, dtype_bytes)
    raise ValueError(f"unknown quantisation method {m}")


# --- the parameter tensors the engine allocates ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter tensor as the engine allocates it: its name in the module, its shape and its
    storage dtype (a ``memprof.core.dtypes`` name). ``bytes = numel × element size``."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def bytes(self) -> int:
        return math.prod(self.shape) * dtype_bytes(self.dtype)

    def stacked(self, n: int) -> Param:
        """The same parameter for ``n`` experts (a leading expert dimension)."""
        return Param(self.name, (n, *self.shape), self.dtype)


def _u8(name: str, nbytes: int, rows: int) -> Param:
    """A packed byte tensor: ``(rows, nbytes / rows)`` when it divides, else flat."""
    return Param(name, (rows, nbytes // rows) if rows and nbytes % rows == 0 else (nbytes,),
                 "uint8")


def linear_params(out: int, inn: int, quant: QuantConfig | None, dtype: str,
                  arch: str = "sm90") -> tuple[Param, ...]:
    """The tensors of one linear under each scheme, with the shapes and dtypes of the vLLM
    methods cited in this module's functions; their bytes sum to ``linear_bytes`` (a property
    test holds them together)."""
    if quant is None or quant.method == "none":
        return (Param("weight", (out, inn), dtype),)
    m = quant.method
    if m == "fp8":
        bo, bi = quant.block or (128, 128)
        w = Param("weight", (out, inn), "float8_e4m3fn")
        if arch.startswith("sm10") and out % 64 == 0 and inn % 128 == 0:
            return (w, Param("weight_scale_inv", (round_up(out, 4), cdiv(cdiv(inn, bi), 4)),
                             "int32"))
        return (w, Param("weight_scale_inv", (cdiv(out, bo), cdiv(inn, bi)), "float32"))
    if m == "fp8_per_tensor":
        return (Param("weight", (out, inn), "float8_e4m3fn"), Param("weight_scale", (1,),
                                                                     "float32"))
    if m == "fp8_per_channel":
        return (Param("weight", (out, inn), "float8_e4m3fn"),
                Param("weight_scale", (out, 1), "float32"))
    if m == "mxfp4":
        return (_u8("weight", out * inn // 2, out), Param("weight_scale", (out, cdiv(inn, 32)),
                                                          "uint8"))
    if m == "nvfp4":
        group = quant.group_size or 16
        wo, wi = round_up(out, 32), round_up(inn, 32)
        rows, cols = round_up(out, 128), round_up(cdiv(inn, group), 4)
        return (_u8("weight", wo * wi // 2, wo), Param("weight_scale", (rows, cols),
                                                       "float8_e4m3fn"),
                Param("weight_scale_2", (1,), "float32"), Param("input_scale", (1,), "float32"),
                Param("alpha", (1,), "float32"))
    if m in ("awq", "gptq"):
        g = quant.group_size if quant.group_size > 0 else inn
        groups, bits = cdiv(inn, g), quant.bits or 4
        return (_u8("qweight", out * inn * bits // 8, inn * bits // 32 or 1),
                Param("scales", (groups, out), dtype),
                _u8("qzeros", groups * out * bits // 8, groups))
    raise ValueError(f"unknown quantisation method {m}")
