"""Bytes of one (already sharded) linear weight under each quantisation scheme.

Each function returns ``(bytes, formula)`` for a weight of ``out × in`` elements on one rank.
Layouts are vLLM's (citations per scheme below).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from memprof.base.units import cdiv, round_up
from memprof.core.dtypes import dtype_bytes
from memprof.core.gpus import arch_cc
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
    """AWQ, and GPTQ as ``--quantization gptq`` sizes an unquantised checkpoint: packed int32
    ``qweight`` (bits/8 B per value), ``scales`` in the model dtype and packed int32 ``qzeros``
    per group of ``group`` input rows. AWQ keeps these three on both kernels: plain
    ``AWQLinearMethod`` (awq.py) and ``AWQMarlinLinearMethod`` (awq_marlin.py, v0.11.0), whose
    ``process_weights_after_loading`` repacks ``qweight``, ``scales`` and ``qzeros`` at the same
    sizes and leaves ``g_idx`` / ``g_idx_sort_indices`` empty. A GPTQ checkpoint's own config is
    sized by ``gptq`` (kernel-dependent zero points and ``g_idx``)."""
    g = group if group > 0 else inn
    groups = cdiv(inn, g)
    total = out * inn * bits // 8 + groups * out * dtype_bytes + groups * out * bits // 8
    return total, f"{out}×{inn}×{bits}/8B + {groups}×{out} scales + zeros"


def _cuda_sm(arch: str) -> int:
    """The compute capability of an ``smNN`` arch as an int (``sm90`` → 90); 0 for a non-CUDA
    arch (``gfx942``); 80 for ``unknown`` (the estimate states that generic rules apply)."""
    if arch == "unknown":
        return 80
    return arch_cc(arch) or 0


def _ct_fp8_on_marlin(quant: QuantConfig, arch: str) -> bool:
    """A compressed-tensors fp8 tensor / channel checkpoint on a CUDA GPU below sm89: vLLM
    v0.11.0 falls back from W8A8 to ``CompressedTensorsW8A16Fp8`` (compressed_tensors.py
    ``_get_scheme_from_parts``: ``CompressedTensorsW8A8Fp8.get_min_capability()`` is 89)."""
    cc = arch_cc(arch)
    return quant.checkpoint_format == "compressed-tensors" and cc is not None and cc < 89


def fp8_on_marlin(quant: QuantConfig, arch: str) -> bool:
    """vLLM's own fp8 method (a ``quant_method: fp8`` checkpoint, block or per-tensor, or
    ``--quantization fp8`` on an unquantised one) on a CUDA GPU below sm89: ``Fp8LinearMethod``
    and ``Fp8MoEMethod`` set ``use_marlin = not has_device_capability(89)`` and repack every
    layer with ``prepare_fp8_layer_for_marlin`` / ``prepare_moe_fp8_layer_for_marlin``
    (model_executor/layers/quantization/fp8.py, v0.11.0; blocks included: the block-to-group
    scale conversion is in utils/marlin_utils_fp8.py). ROCm keeps W8A8 (``use_marlin = False``);
    an unknown architecture is sized as one with fp8 hardware (sm89+)."""
    cc = arch_cc(arch)
    return not quant.checkpoint_format and cc is not None and cc < 89


def marlin_blocks(quant: QuantConfig | None, arch: str, moe: bool = False,
                  marlin_cc: int = 80) -> int:
    """The thread blocks per SM a layer's Marlin workspace is sized for, 0 where no Marlin
    kernel runs: vLLM v0.11.0 gives each Marlin layer its own ``workspace`` of
    ``marlin_make_workspace_new(device, max_blocks_per_sm)`` int32s, one per SM × blocks
    (quantization/utils/marlin_utils.py): 1 for a linear (``MarlinLinearKernel``,
    ``AWQMarlinLinearMethod``, ``prepare_fp8_layer_for_marlin``), 4 for a FusedMoE layer
    (``prepare_moe_fp8_layer_for_marlin``, ``GPTQMarlinMoEMethod``, ``AWQMarlinMoEMethod``).
    Marlin runs for vLLM's fp8 below sm89 (:func:`fp8_on_marlin`, compressed-tensors'
    W8A16 fallback) and for GPTQ / AWQ checkpoints from compute capability ``marlin_cc``
    (gptq_marlin / awq_marlin: 8.0, 7.5 from vLLM 0.14.0, ``memprof.core.capability.
    marlin_min_cc``); MXFP4 experts on Marlin are marked by their builder."""
    if quant is None:
        return 0
    m = quant.method
    fp8 = m in ("fp8", "fp8_per_tensor", "fp8_per_channel") and (
        fp8_on_marlin(quant, arch) or _ct_fp8_on_marlin(quant, arch))
    int4 = ((quant.source == "config" or quant.marlin) and _cuda_sm(arch) >= marlin_cc
            and ((m == "gptq" and quant.marlin) or m == "awq"))
    return (4 if moe else 1) if fp8 or int4 else 0


def fp8_block_marlin(out: int, inn: int, block: tuple[int, int], dtype_bytes: int
                     ) -> tuple[int, str]:
    """Block fp8 on Marlin (``prepare_fp8_layer_for_marlin``, utils/marlin_utils_fp8.py,
    v0.11.0): the fp8 weight repacked into int32 at the same bytes; the fp32
    ``weight_scale_inv`` ``(ceil(out/bo), ceil(in/bi))`` turned into Marlin group scales in
    the model dtype, each block's scale repeated over its ``bo`` output channels and cut to
    ``out``: ``(ceil(in/bi), out)`` (group size ``bi``). The per-layer Marlin workspace is
    not counted here."""
    rows = cdiv(inn, block[1])
    return (out * inn + rows * out * dtype_bytes,
            f"{out}×{inn}×1B + {rows}×{out} group scales (Marlin fp8)")


def fp8_marlin(out: int, inn: int, dtype_bytes: int, static_input: bool) -> tuple[int, str]:
    """fp8 weight-only on Marlin (``prepare_fp8_layer_for_marlin``,
    quantization/utils/marlin_utils_fp8.py, v0.11.0): the fp8 weight repacked into int32 at the
    same bytes, its per-tensor or per-channel scales expanded to one per output channel in the
    model dtype ``(1, out)``; a static input scale stays fp32 (one per fused part, counted as
    one). The per-layer Marlin workspace (one int32 per SM) is not counted."""
    total = out * inn + out * dtype_bytes + (4 if static_input else 0)
    return total, f"{out}×{inn}×1B + {out} channel scales (Marlin fp8)"


def gptq(out: int, inn: int, group: int, bits: int, dtype_bytes: int, desc_act: bool,
         marlin: bool) -> tuple[int, str]:
    """GPTQ after loading, by the kernel vLLM v0.11.0 picks.

    gptq_marlin (a checkpoint ``QuantConfig.marlin`` admits, on CUDA sm80+: Marlin's
    ``query_marlin_supported_quant_types`` is empty below capability 80,
    quantization/utils/marlin_utils.py): ``GPTQMarlinLinearMethod`` registers int32 ``qweight``
    ``(in / (32/bits), out)``, ``scales`` ``(in/group, out)`` in the model dtype, int32
    ``qzeros`` and ``g_idx``; the Marlin kernel's ``process_weights_after_loading``
    (kernels/mixed_precision/marlin.py) repacks ``qweight`` and ``scales`` at the same size,
    replaces ``qzeros`` by an empty tensor (symmetric types carry no zero points), and leaves
    ``g_idx`` empty unless ``desc_act``, when the sorted ``g_idx`` and ``g_idx_sort_indices``
    (an int32 per input row each) stay. Per layer it also allocates a workspace of one int32 per
    SM (``marlin_make_workspace_new``), not counted here (≤ 1 KiB a layer).

    plain gptq (``GPTQLinearMethod``, gptq.py; pre-sm80, ROCm, asymmetric or unstated ``sym``,
    or ``--quantization gptq``): ``qweight``, ``scales`` and ``qzeros`` ``(in/group, out /
    (32/bits))`` int32 stay; ``g_idx`` is emptied at the exllama shuffle unless ``desc_act``
    (then an argsorted int32 per input row). Scales are sized per partition; with ``desc_act``
    on a row-parallel layer under TP both kernels keep the whole input's scales, which this does
    not add."""
    g = group if group > 0 else inn
    groups = cdiv(inn, g)
    total = out * inn * bits // 8 + groups * out * dtype_bytes
    parts = [f"{out}×{inn}×{bits}/8B", f"{groups}×{out} scales"]
    if not marlin:
        total += groups * out * bits // 8
        parts.append("zeros")
    if desc_act:
        n_idx = 2 if marlin else 1
        total += 4 * n_idx * inn
        parts.append(f"{n_idx}×{inn} int32 g_idx")
    return total, " + ".join(parts) + (" (gptq_marlin)" if marlin else " (gptq)")


def bnb4(out: int, inn: int, block: int, double_quant: bool) -> tuple[int, str]:
    """bitsandbytes 4-bit (nf4 / fp4): ``BitsAndBytesLinearMethod.create_weights``
    (quantization/bitsandbytes.py, vLLM v0.11.0) allocates the weight as uint8
    ``(out·in/2, 1)``; the loader (model_loader/bitsandbytes_loader.py) moves each weight's
    ``QuantState.from_dict`` onto the GPU: the 16-value fp32 ``quant_map`` and an absmax per
    ``block`` values, fp32, or with double quantisation uint8 plus an fp32 ``nested_absmax``
    per 256 absmax values, the 256-value fp32 ``nested_quant_map`` and an fp32
    ``nested_offset`` (bitsandbytes functional.py ``quantize_4bit``, ``compress_statistics``).
    A fused linear keeps one quant state per sub-weight; the constants are counted once."""
    n = out * inn
    blocks = cdiv(n, block)
    if double_quant:
        nested = cdiv(blocks, 256)
        return (cdiv(n, 2) + blocks + 4 * nested + 1024 + 4 + 64,
                f"{out}×{inn}×0.5B + {blocks} uint8 absmax + {nested} fp32 nested + maps")
    return cdiv(n, 2) + 4 * blocks + 64, f"{out}×{inn}×0.5B + {blocks} fp32 absmax + map"


def wna16(out: int, inn: int, group: int, bits: int, dtype_bytes: int, zero_point: bool,
          act_order: bool) -> tuple[int, str]:
    """compressed-tensors W4A16 / W8A16 int (``CompressedTensorsWNA16.create_weights``,
    vllm/model_executor/layers/quantization/compressed_tensors/schemes/compressed_tensors_wNa16.py,
    v0.11.0): int32 ``weight_packed`` ``(out, in / (32/bits))``, ``weight_scale`` in the model
    dtype ``(out, in/group)`` (one column for the channel strategy, ``group = -1``), an int64
    ``weight_shape`` of 2, int32 ``weight_zero_point`` ``(out / (32/bits), in/group)`` when
    asymmetric, and with ``actorder: group`` an int32 ``weight_g_idx`` per input row, to which
    the Marlin kernel (kernels/mixed_precision/marlin.py ``process_weights_after_loading``) adds
    an int32 ``g_idx_sort_indices`` per input row; its repack keeps the other sizes. Scales are
    sized per partition: with act order on a row-parallel layer under TP, vLLM keeps every
    rank's scales whole (``marlin_repeat_scales_on_all_ranks``), which this does not add."""
    groups = 1 if group <= 0 else cdiv(inn, group)
    total = out * inn * bits // 8 + out * groups * dtype_bytes + 16
    parts = [f"{out}×{inn}×{bits}/8B", f"{out}×{groups} scales", "2 int64 shape"]
    if zero_point:
        total += out * groups * bits // 8
        parts.append(f"{out * bits // 32}×{groups} int32 zeros")
    if act_order:
        total += 8 * inn
        parts.append(f"2×{inn} int32 g_idx + sort")
    return total, " + ".join(parts)


def int8_w8a8(out: int, inn: int, channel: bool, static_input: bool,
              input_symmetric: bool) -> tuple[int, str]:
    """compressed-tensors W8A8 int8 (``CompressedTensorsW8A8Int8.create_weights``,
    compressed_tensors/schemes/compressed_tensors_w8a8_int8.py, and the CUTLASS kernel's
    ``process_weights_after_loading``, kernels/scaled_mm/cutlass.py, v0.11.0): an int8 weight,
    an fp32 scale per output channel (the tensor strategy's per-partition scales are expanded
    to one per channel on fused layers by ``convert_to_channelwise``; this sizes every layer
    so, 4·(out − 1) B more than an unfused one keeps), a static fp32 input scale (plus an int32
    input zero point when asymmetric), and for asymmetric inputs an int32 ``azp_adj`` per
    output channel."""
    total = out * inn + 4 * out
    parts = [f"{out}×{inn}×1B", f"{out} fp32 scales"]
    if static_input:
        total += 4 if input_symmetric else 8
        parts.append("input scale" + ("" if input_symmetric else " + zero point"))
    if not input_symmetric:
        total += 4 * out
        parts.append(f"{out} int32 azp_adj")
    del channel  # both strategies end with a scale per output channel (see above)
    return total, " + ".join(parts)


def linear_bytes(
    out: int, inn: int, quant: QuantConfig | None, dtype_bytes: int, arch: str = "sm90",
    marlin_cc: int = 80,
) -> tuple[int, str]:
    """Bytes of a linear weight, quantised with ``quant`` (``None``: the model dtype);
    ``marlin_cc``: the smallest compute capability of GPTQ on Marlin (:func:`marlin_blocks`)."""
    if quant is None or quant.method == "none":
        return dense_bytes(out, inn, dtype_bytes)
    m = quant.method
    if m == "fp8" and fp8_on_marlin(quant, arch):
        return fp8_block_marlin(out, inn, quant.block or (128, 128), dtype_bytes)
    if m == "fp8":
        return fp8_block(out, inn, quant.block or (128, 128), arch)
    if m in ("fp8_per_tensor", "fp8_per_channel") and _ct_fp8_on_marlin(quant, arch):
        return fp8_marlin(out, inn, dtype_bytes, quant.static_input)
    if m in ("fp8_per_tensor", "fp8_per_channel") and fp8_on_marlin(quant, arch):
        # Fp8LinearMethod deletes the input scale on Marlin ("Activations not quantized")
        return fp8_marlin(out, inn, dtype_bytes, False)
    if m in ("fp8_per_tensor", "fp8_per_channel"):
        n, f = fp8_per_tensor(out, inn) if m == "fp8_per_tensor" else fp8_per_channel(out, inn)
        # a static (calibrated) input scale is reduced to one fp32 at load
        # (CompressedTensorsW8A8Fp8.process_weights_after_loading, v0.11.0)
        return (n + 4, f + " + 1 fp32 input scale") if quant.static_input else (n, f)
    if m == "mxfp4":
        return mxfp4(out, inn)
    if m == "wna16":
        return wna16(out, inn, quant.group_size, quant.bits, dtype_bytes, quant.zero_point,
                     quant.desc_act)
    if m == "int8_w8a8":
        return int8_w8a8(out, inn, quant.strategy == "channel", quant.static_input,
                         quant.input_symmetric)
    if m == "nvfp4":
        return nvfp4(out, inn, quant.group_size or 16)
    if m == "bnb4":
        return bnb4(out, inn, quant.group_size, quant.double_quant)
    if m == "gguf":
        from memprof.core.weights.gguf import gguf_bytes  # GGUF checkpoints only

        return gguf_bytes(out, inn, quant.scheme)
    if m == "gptq" and (quant.source == "config" or quant.marlin):  # or --quantization gptq_marlin
        return gptq(out, inn, quant.group_size, quant.bits or 4, dtype_bytes, quant.desc_act,
                    quant.marlin and _cuda_sm(arch) >= marlin_cc)
    if m in ("awq", "gptq"):
        return int4_grouped(out, inn, quant.group_size, quant.bits or 4, dtype_bytes)
    raise ValueError(f"unknown quantisation method {m}")


# --- the parameter tensors the engine allocates ---------------------------------------------------


class Param(NamedTuple):
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
                  arch: str = "sm90", marlin_cc: int = 80) -> tuple[Param, ...]:
    """The tensors of one linear under each scheme, with the shapes and dtypes of the vLLM
    methods cited in this module's functions; their bytes sum to ``linear_bytes`` (a property
    test holds them together)."""
    if quant is None or quant.method == "none":
        return (Param("weight", (out, inn), dtype),)
    m = quant.method
    if m == "fp8" and fp8_on_marlin(quant, arch):
        bi = (quant.block or (128, 128))[1]
        return (_u8("weight", out * inn, inn // 4 or 1),
                Param("weight_scale", (cdiv(inn, bi), out), dtype))
    if m == "fp8":
        bo, bi = quant.block or (128, 128)
        w = Param("weight", (out, inn), "float8_e4m3fn")
        if arch.startswith("sm10") and out % 64 == 0 and inn % 128 == 0:
            return (w, Param("weight_scale_inv", (round_up(out, 4), cdiv(cdiv(inn, bi), 4)),
                             "int32"))
        return (w, Param("weight_scale_inv", (cdiv(out, bo), cdiv(inn, bi)), "float32"))
    if m in ("fp8_per_tensor", "fp8_per_channel") and _ct_fp8_on_marlin(quant, arch):
        return ((_u8("weight", out * inn, inn // 4 or 1), Param("weight_scale", (1, out), dtype))
                + ((Param("input_scale", (1,), "float32"),) if quant.static_input else ()))
    if m in ("fp8_per_tensor", "fp8_per_channel") and fp8_on_marlin(quant, arch):
        return (_u8("weight", out * inn, inn // 4 or 1), Param("weight_scale", (1, out), dtype))
    if m in ("fp8_per_tensor", "fp8_per_channel"):
        scale = (1,) if m == "fp8_per_tensor" else (out, 1)
        fp8 = (Param("weight", (out, inn), "float8_e4m3fn"), Param("weight_scale", scale,
                                                                    "float32"))
        return fp8 + ((Param("input_scale", (1,), "float32"),) if quant.static_input else ())
    if m == "wna16":
        g = 1 if quant.group_size <= 0 else cdiv(inn, quant.group_size)
        pack = 32 // quant.bits
        ps = [Param("weight_packed", (out, inn // pack), "int32"),
              Param("weight_scale", (out, g), dtype), Param("weight_shape", (2,), "int64")]
        if quant.zero_point:
            ps.append(Param("weight_zero_point", (out // pack, g), "int32"))
        if quant.desc_act:
            ps += [Param("weight_g_idx", (inn,), "int32"),
                   Param("g_idx_sort_indices", (inn,), "int32")]
        return tuple(ps)
    if m == "int8_w8a8":
        ps = [Param("weight", (out, inn), "int8"), Param("weight_scale", (out, 1), "float32")]
        if quant.static_input:
            ps.append(Param("input_scale", (1,), "float32"))
            if not quant.input_symmetric:
                ps.append(Param("input_zero_point", (1,), "int32"))
        if not quant.input_symmetric:
            ps.append(Param("azp_adj", (1, out), "int32"))
        return tuple(ps)
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
    if m == "gguf":
        from memprof.core.weights.gguf import row_bytes

        return (Param("qweight", (out, row_bytes(quant.scheme, inn)), "uint8"),)
    if m == "bnb4":
        blocks = cdiv(out * inn, quant.group_size)
        ps = [Param("weight", (cdiv(out * inn, 2), 1), "uint8")]
        if quant.double_quant:
            ps += [Param("absmax", (blocks,), "uint8"),
                   Param("nested_absmax", (cdiv(blocks, 256),), "float32"),
                   Param("nested_quant_map", (256,), "float32"),
                   Param("nested_offset", (1,), "float32")]
        else:
            ps.append(Param("absmax", (blocks,), "float32"))
        return (*ps, Param("quant_map", (16,), "float32"))
    if m == "gptq" and (quant.source == "config" or quant.marlin):
        g = quant.group_size if quant.group_size > 0 else inn
        groups, bits = cdiv(inn, g), quant.bits or 4
        marlin = quant.marlin and _cuda_sm(arch) >= marlin_cc
        ps = [_u8("qweight", out * inn * bits // 8, inn * bits // 32 or 1),
              Param("scales", (groups, out), dtype)]
        if not marlin:
            ps.append(_u8("qzeros", groups * out * bits // 8, groups))
        if quant.desc_act:
            ps.append(Param("g_idx", (inn,), "int32"))
            if marlin:
                ps.append(Param("g_idx_sort_indices", (inn,), "int32"))
        return tuple(ps)
    if m in ("awq", "gptq"):
        g = quant.group_size if quant.group_size > 0 else inn
        groups, bits = cdiv(inn, g), quant.bits or 4
        return (_u8("qweight", out * inn * bits // 8, inn * bits // 32 or 1),
                Param("scales", (groups, out), dtype),
                _u8("qzeros", groups * out * bits // 8, groups))
    raise ValueError(f"unknown quantisation method {m}")
