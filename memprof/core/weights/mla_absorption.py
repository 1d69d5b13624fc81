"""MLA matrix absorption of vLLM 0.7.x: the per-layer matrices ``process_weights_after_loading``
keeps next to the raw projections (which stay for prefill), counted in model load.

0.7.1 ``attention/backends/mla/utils.py::MLACommonImpl.process_weights_after_loading`` with
``VLLM_MLA_PERFORM_MATRIX_ABSORPTION`` on (the default, ``envs.py``); N = local heads, L =
kv_lora_rank, P = qk_nope_head_dim, V = v_head_dim, R = qk_rope_head_dim, Lq = q_lora_rank (or
hidden when the model has no q LoRA), H = hidden:

- ``W_QR = q_proj[..., P:]`` → ``[Lq, N·R]`` copied ``.to(act_dtype)`` (model dtype);
- ``W_UK, W_UV`` = views of ``kv_b_proj`` dequantised by ``get_and_maybe_dequant_weights``:
  free on a bf16 checkpoint (a view of the weight), a ``[L, N, P+V]`` copy on an fp8 one — in
  fp32 in 0.7.1-0.7.2 (``scaled_dequantize``'s ``out_dtype=torch.float32``), in the model dtype
  in 0.7.3 (``dtype=act_dtype``);
- ``W_Q_UK = einsum(W_Q, W_UK)`` → ``[Lq, N·L]`` and ``W_UV_O = einsum(W_UV, W_O)`` →
  ``[N·L, H]``: requantised to fp8 with the checkpoint's block scales (fp32, one per 128×128)
  when the checkpoint is fp8 (``scaled_quantize``, ``VLLM_MLA_DISABLE_REQUANTIZATION`` off),
  in the model dtype otherwise.

Removed in 0.8.0 (vLLM PR #14770): from then the backend keeps only ``W_UK_T`` / ``W_UV``, the
dequantised ``kv_b_proj`` (``weights/attention.py``).
"""

from __future__ import annotations

from memprof.base.units import cdiv
from memprof.core.models import Attention, QuantConfig
from memprof.core.versions import Rule, value_at
from memprof.core.weights.formats import Param

# value: the dtype of the dequantised kv_b_proj copy on an fp8 checkpoint ("model": act dtype)
MLA_ABSORPTION: tuple[Rule, ...] = (
    Rule(name="mla_matrix_absorption", changes="weights: MLA absorbed matrices",
         since="0.7.1", until="0.7.3", value="float32",
         introduced_by="MLA for DeepSeek V2/V3 (first released in 0.7.1)",
         source="0.7.1 / 0.7.2 attention/backends/mla/utils.py MLACommonImpl."
         "process_weights_after_loading; quant_utils.py scaled_dequantize out_dtype=float32",
         applies_to="mla"),
    Rule(name="mla_matrix_absorption", changes="weights: MLA absorbed matrices",
         since="0.7.3", until="0.8.0", value="model",
         introduced_by="dequantise to act_dtype (read in 0.7.3)", removed_by="vLLM PR #14770",
         source="0.7.3 attention/backends/mla/utils.py MLACommonImpl."
         "process_weights_after_loading (get_and_maybe_dequant_weights dtype=act_dtype)",
         applies_to="mla"),
)


def absorbed_params(a: Attention, heads: int, hidden: int, quant: QuantConfig | None,
                    dtype: str, version: str | None) -> tuple[Param, ...] | None:
    """The matrices one MLA layer keeps after loading at ``version`` (``None`` when the release
    does not absorb: the caller keeps the current ``W_UK_T``/``W_UV`` rule)."""
    dequant = value_at(MLA_ABSORPTION, version)
    if dequant is None:
        return None
    n, lat = heads, a.kv_lora_rank
    lq = a.q_lora_rank or hidden
    fp8 = quant is not None and quant.method in ("fp8", "fp8_per_tensor", "fp8_per_channel")
    out = [Param("W_QR", (lq, n * a.qk_rope_head_dim), dtype)]
    if fp8:
        assert quant is not None
        out.append(Param("W_UK+W_UV (dequantised kv_b_proj)",
                         (lat, n, a.qk_nope_head_dim + a.v_head_dim),
                         dtype if dequant == "model" else str(dequant)))
        bo, bi = quant.block or (0, 0)

        def scales(rows: int, cols: int) -> tuple[int, ...]:
            return (cdiv(cols, bi), cdiv(rows, bo)) if bo else (1,)

        out += [Param("W_Q_UK", (n * lat, lq), "float8_e4m3fn"),
                Param("W_Q_UK_scales", scales(lq, n * lat), "float32"),
                Param("W_UV_O", (hidden, n * lat), "float8_e4m3fn"),
                Param("W_UV_O_scales", scales(n * lat, hidden), "float32")]
    else:
        out += [Param("W_Q_UK", (lq, n * lat), dtype), Param("W_UV_O", (n * lat, hidden), dtype)]
    return tuple(out)
