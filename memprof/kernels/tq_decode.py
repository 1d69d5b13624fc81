# mypy: disable-error-code="no-untyped-def"
"""TurboQuant ``turboquant_k8v4`` KV cache: vLLM's layout, a quantiser, and split-KV decode.

Read (algorithm and layout only; no code copied) from vllm-project/vllm:

- ``vllm/model_executor/layers/quantization/turboquant/config.py`` @1471680b
  (``TQ_PRESETS``, ``TurboQuantConfig.key_packed_size / value_packed_size / slot_size_aligned``):
  k8v4 = FP8 keys (``key_quant_bits=8``: "no rotation/MSE"), 4-bit uniform values,
  no norm correction. For k8v4 there is no Hadamard rotation and no centroid lookup on the key
  path: the key is cast to FP8 as is.
- ``vllm/v1/attention/ops/triton_turboquant_store.py`` @0135d081 (``_tq_fused_store_fp8``,
  ``_store_quantized_value``): per (token, KV head) slot of ``slot_aligned`` bytes::

      [0, D)              key, float8 e4m3 (``float8e4nv``; e4b15 on SM < 8.9), no scale
      [D, D + D/2)        value codes, 4 bit, element 2j in the low nibble, 2j+1 in the high one
      [D + D/2, +2)       value scale, fp16 little-endian: (max - min) / 15, at least 1e-8
      [D + D/2 + 2, +2)   value zero,  fp16 little-endian: min
      padding to an even byte count

  code = clamp(int((v - min) / scale + 0.5), 0, 15) computed with the fp32 scale; dequantised
  v = code · fp16(scale) + fp16(min).
- ``vllm/v1/attention/ops/triton_turboquant_decode.py`` @055e47c2 (``_tq_decode_stage1`` + the
  shared ``_fwd_kernel_stage2``): split-KV decode; ``mid_o (B, Hq, S, D+1)`` fp32 holds each
  split's normalised output and, in its last column, its log-sum-exp; stage 2 merges into
  ``output (B, Hq, D)`` and ``lse (B, Hq)``. vLLM runs one program per (request, *query* head,
  split); here one program per (request, KV head, split) handles the whole GQA group (8 query heads
  for Qwen3-32B) with tensor-core dots, so each packed row is read once.
- Cache shape: ``(num_blocks, block_size, Hkv, slot_aligned)`` uint8, K and V interleaved, no
  leading 2 (``turboquant_attn.py::get_kv_cache_shape`` at vLLM@52a31cc). Newer
  vLLM (``turboquant_attn.py`` @0135d081) declares ``(num_blocks, Hkv, block_size, slot)``; the
  kernels take strides, so either works with ``layout="head_major"``.

Decode buffers (vLLM #38479 / #40655): per layer as ``register_buffer`` at model construction
with ``B = max_num_seqs`` (vLLM #38479, ``Attention._init_turboquant_buffers``), or one set from
the ``WorkspaceManager`` (#40655 / #40941, ``TurboQuantAttentionImpl._decode_attention``).
``output`` is fp32 here as in #40655 (the catalog's ``tq_decode`` entry); #40941 writes it in the
query dtype.
"""

import math

import torch

from memprof.core.kvcache import tq_slot_bytes
from memprof.core.scratch import TQ_MAX_KV_SPLITS
from memprof.kernels._triton import can_run_triton, interpreted, next_pow2
from memprof.kernels.fp8 import e4m3_to_float, lookup
from memprof.kernels.paged import gather_pages, request_groups
from memprof.kernels.workspace import Workspace

PRESET = "turboquant_k8v4"
POLICIES = ("per-layer", "shared")
_MIN_SCALE = 1e-8


def k8v4_layout(head_dim: int) -> dict[str, int]:
    """Byte offsets inside one k8v4 slot of ``head_dim``."""
    vdata = head_dim // 2
    return {"key": 0, "value": head_dim, "scale": head_dim + vdata, "zero": head_dim + vdata + 2,
            "slot": tq_slot_bytes(PRESET, head_dim)}


def tq_cache_shape(num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int,
                   layout: str = "token_major") -> tuple[int, int, int, int]:
    """``(NB, PAGE, Hkv, slot)`` (vLLM@52a31cc) or ``(NB, Hkv, PAGE, slot)`` (``head_major``)."""
    slot = tq_slot_bytes(PRESET, head_dim)
    if layout == "head_major":
        return (num_blocks, num_kv_heads, block_size, slot)
    return (num_blocks, block_size, num_kv_heads, slot)


def _strides(kv_cache: torch.Tensor, layout: str) -> tuple[int, int, int]:
    """(block, token, head) strides in bytes of a uint8 cache."""
    if layout == "head_major":
        return kv_cache.stride(0), kv_cache.stride(2), kv_cache.stride(1)
    return kv_cache.stride(0), kv_cache.stride(1), kv_cache.stride(2)


def _slot_view(kv_cache: torch.Tensor, layout: str) -> torch.Tensor:
    """``(NB, PAGE, Hkv, slot)`` view of either layout."""
    return kv_cache.transpose(1, 2) if layout == "head_major" else kv_cache


# --- quantiser and dequantiser (torch, any device) -----------------------------------------------


def quantize_values_k8v4(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """4-bit uniform codes of ``v (..., D)`` as vLLM stores them: ``(codes uint8 (..., D/2),
    scale fp16 (...), zero fp16 (...))``."""
    vf = v.float()  # (..., D)
    vmin = vf.amin(-1)  # (...)
    vmax = vf.amax(-1)  # (...)
    scale = (vmax - vmin) / 15.0  # (...)
    scale = torch.where(scale > _MIN_SCALE, scale, torch.full_like(scale, _MIN_SCALE))
    codes = ((vf - vmin[..., None]) / scale[..., None] + 0.5).to(torch.int32).clamp(0, 15)
    pairs = codes.view(*codes.shape[:-1], -1, 2)  # (..., D/2, 2)
    packed = (pairs[..., 0] | (pairs[..., 1] << 4)).to(torch.uint8)  # (..., D/2)
    return packed, scale.half(), vmin.half()


def tq_store_k8v4(key: torch.Tensor, value: torch.Tensor, kv_cache: torch.Tensor,
                  slot_mapping: torch.Tensor, *, layout: str = "token_major") -> None:
    """Write ``key, value (N, Hkv, D)`` into ``kv_cache`` at ``slot_mapping (N,)`` (block · PAGE +
    offset; negative = skip), as ``_tq_fused_store_fp8`` does."""
    _, Hkv, D = key.shape
    lay = k8v4_layout(D)
    cache = _slot_view(kv_cache, layout)  # (NB, PAGE, Hkv, slot)
    page = cache.shape[1]
    keep = slot_mapping >= 0  # (N,)
    slots = slot_mapping[keep].long()  # (n,)
    blk, off = slots // page, slots % page  # (n,), (n,)
    k8 = key[keep].float().to(torch.float8_e4m3fn).view(torch.uint8)  # (n, Hkv, D)
    codes, scale, zero = quantize_values_k8v4(value[keep])  # (n, Hkv, D/2), (n, Hkv), (n, Hkv)
    row = torch.zeros((k8.shape[0], Hkv, lay["slot"]), dtype=torch.uint8,
                      device=key.device)  # (n, Hkv, slot)
    row[..., lay["key"]:lay["value"]] = k8
    row[..., lay["value"]:lay["scale"]] = codes
    row[..., lay["scale"]:lay["scale"] + 2] = scale[..., None].view(torch.uint8)
    row[..., lay["zero"]:lay["zero"] + 2] = zero[..., None].view(torch.uint8)
    cache[blk, off] = row


def tq_dequant_k8v4(slots: torch.Tensor, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """K and V (fp32, ``(..., D)``) from packed slots ``(..., slot)``."""
    lay = k8v4_layout(head_dim)
    s = slots.contiguous()
    k = s[..., :head_dim].view(torch.float8_e4m3fn).float()  # (..., D)
    codes = s[..., lay["value"]:lay["scale"]].to(torch.int32)  # (..., D/2)
    q = torch.stack((codes & 0xF, codes >> 4), dim=-1).flatten(-2).float()  # (..., D)
    scale = s[..., lay["scale"]:lay["scale"] + 2].contiguous().view(torch.float16).float()
    zero = s[..., lay["zero"]:lay["zero"] + 2].contiguous().view(torch.float16).float()
    return k, q * scale + zero  # (..., D), (..., D)


def _nibble_table(device: torch.device) -> torch.Tensor:
    """``(256, 2)`` fp32: the two 4-bit codes of every byte, low nibble first."""
    b = torch.arange(256, device=device)  # (256,)
    return torch.stack((b & 0xF, b >> 4), dim=-1).float()  # (256, 2)


def tq_dequant_k8v4_fast(slots: torch.Tensor, head_dim: int
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`tq_dequant_k8v4` bit for bit, by table lookups (``memprof.kernels.fp8``: several
    times faster on a CPU than torch's fp8 cast and the nibble arithmetic) and an in-place
    multiply then add (the same two fp32 roundings as ``code · scale + zero``)."""
    lay = k8v4_layout(head_dim)
    k = e4m3_to_float(slots[..., :head_dim])  # (..., D)
    v = lookup(_nibble_table(slots.device),
               slots[..., lay["value"]:lay["scale"]]).flatten(-2)  # (..., D) codes
    scale = slots[..., lay["scale"]:lay["scale"] + 2].contiguous().view(torch.float16).float()
    zero = slots[..., lay["zero"]:lay["zero"] + 2].contiguous().view(torch.float16).float()
    return k, v.mul_(scale).add_(zero)  # (..., D), (..., D)


def tq_gather_dequant(kv_cache: torch.Tensor, block_table: torch.Tensor, b: int, n: int,
                      head_dim: int, *, layout: str = "token_major"
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Dequantised K, V ``(Hkv, n, D)`` fp32 of request ``b``'s first ``n`` tokens."""
    cache = _slot_view(kv_cache, layout)  # (NB, PAGE, Hkv, slot)
    page = cache.shape[1]
    pages = block_table[b, :math.ceil(n / page)].long()  # (P,)
    rows = cache[pages].reshape(-1, cache.shape[2], cache.shape[3])[:n]  # (n, Hkv, slot)
    k, v = tq_dequant_k8v4(rows, head_dim)  # (n, Hkv, D) each
    return k.transpose(0, 1), v.transpose(0, 1)


def tq_decode_reference(q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor,
                        seq_lens: torch.Tensor, scale: float, *, layout: str = "token_major",
                        compute_dtype: torch.dtype = torch.float32
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention over the dequantised cache: ``output (B, Hq, D)``, natural-log ``lse (B, Hq)``.

    The function of :func:`tq_decode_reference_loop`, computed for a group of requests at a time
    (ordered by length, padded to the group's longest; padded tokens are zero bytes, masked to
    −inf before the softmax, so they add exact zeros) with the GQA group as a matrix dimension
    instead of repeated KV heads. The dequantised values are the same bits; the dot products and
    the softmax sums are the same sums taken in another order, so the results agree with the
    per-request form to float rounding (``tests/kernels/test_reference_vectorised.py``).
    A request of length 0 gives ``output 0``, ``lse −inf``."""
    B, Hq, D = q.shape  # q: (B, Hq, D)
    cache = _slot_view(kv_cache, layout)  # (NB, PAGE, Hkv, slot)
    page, Hkv, slot = cache.shape[1], cache.shape[2], cache.shape[3]
    G = Hq // Hkv
    out = torch.zeros((B, Hq, D), dtype=compute_dtype, device=q.device)  # (B, Hq, D)
    lse = torch.full((B, Hq), float("-inf"), dtype=compute_dtype, device=q.device)  # (B, Hq)
    lens_l = [int(n) for n in seq_lens.tolist()]
    bt = block_table.to(q.device)
    for group in request_groups(lens_l, Hkv * D):
        c = len(group)
        idx = torch.tensor(group, dtype=torch.long, device=q.device)  # (c,)
        lens = seq_lens.to(q.device)[idx].long()  # (c,)
        pages, tok = gather_pages(bt, idx, lens, lens_l[group[-1]], page)  # (c, P), (c, N)
        n = tok.shape[1]  # P·PAGE: the group's longest, rounded up to a page
        rows = cache.index_select(0, pages.reshape(-1))  # (c·P, PAGE, Hkv, slot) a copy
        rows = rows.view(c, -1, page, Hkv, slot).permute(0, 3, 1, 2, 4).reshape(
            c, Hkv, n, slot)  # (c, Hkv, N, slot)
        rows.mul_(tok[:, None, :, None])  # padding: zero bytes, so K = V = 0
        k, v = tq_dequant_k8v4_fast(rows, D)  # (c, Hkv, N, D) each
        qg = q[idx].to(compute_dtype).view(c, Hkv, G, D)  # (c, Hkv, G, D)
        s = torch.matmul(qg, k.to(compute_dtype).transpose(-1, -2)) * scale  # (c, Hkv, G, N)
        s.masked_fill_(~tok[:, None, None, :], float("-inf"))
        lse[idx] = torch.logsumexp(s, -1).view(c, Hq)
        out[idx] = torch.matmul(torch.softmax(s, -1), v.to(compute_dtype)).view(c, Hq, D)
    return out, lse


def tq_decode_reference_loop(q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor,
                             seq_lens: torch.Tensor, scale: float, *, layout: str = "token_major",
                             compute_dtype: torch.dtype = torch.float32
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-request form of :func:`tq_decode_reference` (one request at a time, the KV heads
    repeated to the query heads): the slow reference the vectorised one is tested against."""
    B, Hq, D = q.shape  # q: (B, Hq, D)
    Hkv = _slot_view(kv_cache, layout).shape[2]
    G = Hq // Hkv
    out = torch.zeros((B, Hq, D), dtype=compute_dtype, device=q.device)  # (B, Hq, D)
    lse = torch.full((B, Hq), float("-inf"), dtype=compute_dtype, device=q.device)  # (B, Hq)
    for b, n in enumerate(seq_lens.tolist()):
        if n == 0:
            continue
        k, v = tq_gather_dequant(kv_cache, block_table, b, int(n), D, layout=layout)  # (Hkv, n, D)
        k = k.to(compute_dtype).repeat_interleave(G, 0)  # (Hq, n, D)
        v = v.to(compute_dtype).repeat_interleave(G, 0)  # (Hq, n, D)
        s = torch.einsum("hd,hnd->hn", q[b].to(compute_dtype), k) * scale  # (Hq, n)
        lse[b] = torch.logsumexp(s, -1)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)  # (Hq, D)
    return out, lse


# --- Triton kernels -----------------------------------------------------------------------------

try:
    import triton
    import triton.language as tl

    _HAS_TRITON = True
except ImportError:  # pragma: no cover
    _HAS_TRITON = False

if _HAS_TRITON:

    @triton.jit  # type: ignore[untyped-decorator]
    def _tq_split_kernel(
        Q,  # (B, Hq, D) bf16/fp16
        KV,  # uint8 cache; a slot at blk·sb + tok·st + kvh·sh
        BT,  # (B, MAXB) int32
        SEQ,  # (B,) int32
        MID,  # (B, Hq, S, D+1) fp32: normalised split output | natural-log lse
        qk_scale,  # scale × log2(e)
        stride_qb, stride_qh,
        stride_kb, stride_kt, stride_kh,
        stride_btb,
        stride_mb, stride_mh, stride_ms,
        G: tl.constexpr,  # query heads per KV head
        NUM_SPLITS: tl.constexpr,
        PAGE: tl.constexpr,
        D: tl.constexpr,
        BLOCK_G: tl.constexpr,  # ≥ 16 for tl.dot
        BLOCK_N: tl.constexpr,  # divides PAGE
        INTERPRET: tl.constexpr,
    ):
        b = tl.program_id(0)
        kvh = tl.program_id(1)
        s = tl.program_id(2)
        seq_len = tl.load(SEQ + b)
        n_tiles = tl.cdiv(seq_len, BLOCK_N)
        per_split = tl.cdiv(n_tiles, NUM_SPLITS)
        t_lo = s * per_split
        t_hi = tl.minimum(t_lo + per_split, n_tiles)

        offs_g = tl.arange(0, BLOCK_G)  # (BG,)
        mask_g = offs_g < G
        heads = kvh * G + offs_g  # (BG,) query heads of this group
        offs_d = tl.arange(0, D)  # (D,)
        offs_n = tl.arange(0, BLOCK_N)  # (BN,)
        q = tl.load(Q + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
                    mask=mask_g[:, None], other=0.0)  # (BG, D)
        if INTERPRET:  # noqa: SIM108 - bf16 tl.dot is broken in triton 3.9's interpreter
            q = q.to(tl.float32)
        else:
            q = q.to(tl.bfloat16)
        v_byte = D + offs_d // 2  # (D,) byte of each value code
        v_shift = (offs_d % 2) * 4  # (D,) low nibble for even d

        m_i = tl.full([BLOCK_G], float("-inf"), dtype=tl.float32)  # (BG,)
        l_i = tl.zeros([BLOCK_G], dtype=tl.float32)  # (BG,)
        acc = tl.zeros([BLOCK_G, D], dtype=tl.float32)  # (BG, D)
        bt_row = BT + b.to(tl.int64) * stride_btb
        for t in range(t_lo, t_hi):
            tok0 = t * BLOCK_N
            blk = tl.load(bt_row + tok0 // PAGE).to(tl.int64)
            rows = (tok0 % PAGE) + offs_n  # (BN,)
            mask_n = (tok0 + offs_n) < seq_len  # (BN,)
            slot = KV + blk * stride_kb + rows.to(tl.int64) * stride_kt + kvh * stride_kh  # (BN,)
            k8 = tl.load(slot[:, None] + offs_d[None, :], mask=mask_n[:, None], other=0)  # (BN, D)
            k = k8.to(tl.float8e4nv, bitcast=True).to(tl.float32)  # (BN, D)
            if not INTERPRET:
                k = k.to(tl.bfloat16)  # e4m3 is exact in bf16
            qk = tl.dot(q, tl.trans(k))  # (BG, BN) fp32
            qk = tl.where(mask_n[None, :], qk * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))  # (BG,)
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(qk - m_new[:, None])  # (BG, BN)
            l_i = l_i * alpha + tl.sum(p, 1)

            codes = tl.load(slot[:, None] + v_byte[None, :], mask=mask_n[:, None], other=0)
            codes = (codes.to(tl.int32) >> v_shift[None, :]) & 0xF  # (BN, D)
            sc_lo = tl.load(slot + D + D // 2, mask=mask_n, other=0).to(tl.uint16)
            sc_hi = tl.load(slot + D + D // 2 + 1, mask=mask_n, other=0).to(tl.uint16)
            zr_lo = tl.load(slot + D + D // 2 + 2, mask=mask_n, other=0).to(tl.uint16)
            zr_hi = tl.load(slot + D + D // 2 + 3, mask=mask_n, other=0).to(tl.uint16)
            v_sc = (sc_lo | (sc_hi << 8)).to(tl.float16, bitcast=True).to(tl.float32)  # (BN,)
            v_zr = (zr_lo | (zr_hi << 8)).to(tl.float16, bitcast=True).to(tl.float32)  # (BN,)
            v = codes.to(tl.float32) * v_sc[:, None] + v_zr[:, None]  # (BN, D)
            if INTERPRET:
                acc = acc * alpha[:, None] + tl.dot(p, v)  # (BG, D)
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v.to(tl.float16))
            m_i = m_new

        has = l_i > 0.0
        o = acc / tl.where(has, l_i, 1.0)[:, None]  # (BG, D)
        lse = tl.where(has, (m_i + tl.log2(tl.where(has, l_i, 1.0))) * 0.6931471805599453,
                       float("-inf"))  # (BG,) natural log
        mid = MID + b.to(tl.int64) * stride_mb + heads * stride_mh + s * stride_ms  # (BG,)
        tl.store(mid[:, None] + offs_d[None, :], o, mask=mask_g[:, None])
        tl.store(mid + D, lse, mask=mask_g)

    @triton.jit  # type: ignore[untyped-decorator]
    def _tq_combine_kernel(
        MID,  # (B, Hq, S, D+1) fp32
        OUT,  # (B, Hq, D)
        LSE,  # (B, Hq) fp32
        stride_mb, stride_mh, stride_ms,
        stride_ob, stride_oh,
        stride_lb,
        NUM_SPLITS: tl.constexpr,
        BLOCK_S: tl.constexpr,
        D: tl.constexpr,
    ):
        b = tl.program_id(0)
        h = tl.program_id(1)
        offs_s = tl.arange(0, BLOCK_S)  # (BS,)
        mask_s = offs_s < NUM_SPLITS
        mid = MID + b.to(tl.int64) * stride_mb + h * stride_mh + offs_s * stride_ms  # (BS,)
        lse = tl.load(mid + D, mask=mask_s, other=float("-inf"))  # (BS,)
        m = tl.max(lse, 0)
        m = tl.where(m == float("-inf"), 0.0, m)
        w = tl.exp(lse - m)  # (BS,)
        denom = tl.sum(w, 0)
        offs_d = tl.arange(0, D)
        parts = tl.load(mid[:, None] + offs_d[None, :], mask=mask_s[:, None], other=0.0)  # (BS, D)
        o = tl.sum(parts * w[:, None], 0) / tl.where(denom > 0.0, denom, 1.0)  # (D,)
        tl.store(OUT + b.to(tl.int64) * stride_ob + h * stride_oh + offs_d,
                 o.to(OUT.dtype.element_ty))
        tot = tl.where(denom > 0.0, m + tl.log(tl.where(denom > 0.0, denom, 1.0)), float("-inf"))
        tl.store(LSE + b.to(tl.int64) * stride_lb + h, tot)


def tq_buffer_specs(batch: int, num_q_heads: int, head_dim: int,
                    num_splits: int = TQ_MAX_KV_SPLITS,
                    out_dtype: torch.dtype = torch.float32
                    ) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
    """``(shape, dtype)`` of mid_o, output, lse, in ``get_simultaneous`` order."""
    return (((batch, num_q_heads, num_splits, head_dim + 1), torch.float32),
            ((batch, num_q_heads, head_dim), out_dtype),
            ((batch, num_q_heads), torch.float32))


def tq_decode(q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor,
              seq_lens: torch.Tensor, scale: float, *,
              num_kv_splits: int = TQ_MAX_KV_SPLITS,
              buffers: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
              layout: str = "token_major", block_n: int = 16, num_warps: int = 4,
              num_stages: int = 2, use_triton: bool | None = None
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """Two-stage split-KV decode over a k8v4 cache; returns ``(output (B, Hq, D), lse (B, Hq))``.

    ``buffers`` = ``(mid_o (B, Hq, S, D+1) fp32, output (B, Hq, D), lse (B, Hq) fp32)`` from a
    ``TQDecodeBuffers`` policy (per layer or shared), else fresh ones. Off CUDA (and without the
    interpreter) the torch reference fills ``output`` and ``lse``; ``mid_o`` is left alone.
    """
    B, Hq, D = q.shape  # q: (B, Hq, D)
    cache = _slot_view(kv_cache, layout)  # (NB, PAGE, Hkv, slot)
    page, Hkv = cache.shape[1], cache.shape[2]
    if Hq % Hkv:
        raise ValueError(f"query heads {Hq} not a multiple of KV heads {Hkv}")
    if D & (D - 1):
        raise ValueError(f"head_dim {D} must be a power of two")
    if buffers is None:
        specs = tq_buffer_specs(B, Hq, D, num_kv_splits)
        buffers = (torch.empty(specs[0][0], dtype=torch.float32, device=q.device),  # mid_o
                   torch.empty(specs[1][0], dtype=torch.float32, device=q.device),  # output
                   torch.empty(specs[2][0], dtype=torch.float32, device=q.device))  # lse
    mid_o, output, lse = buffers
    if mid_o.shape != (B, Hq, num_kv_splits, D + 1) or output.shape != (B, Hq, D):
        raise ValueError(f"buffers {tuple(mid_o.shape)}, {tuple(output.shape)} do not match "
                         f"B={B}, Hq={Hq}, S={num_kv_splits}, D={D}")
    run_triton = can_run_triton(q) if use_triton is None else use_triton
    if not run_triton:
        ref_o, ref_lse = tq_decode_reference(q, kv_cache, block_table, seq_lens, scale,
                                             layout=layout)
        output.copy_(ref_o)
        lse.copy_(ref_lse)
        return output, lse
    bn = min(block_n, page)
    if page % bn:
        raise ValueError(f"block_n {bn} must divide the KV block size {page}")
    G = Hq // Hkv
    sb, st, sh = _strides(kv_cache, layout)
    if B == 0:
        return output, lse
    _tq_split_kernel[(B, Hkv, num_kv_splits)](
        q, kv_cache, block_table, seq_lens, mid_o,
        scale * 1.4426950408889634,
        q.stride(0), q.stride(1),
        sb, st, sh,
        block_table.stride(0),
        mid_o.stride(0), mid_o.stride(1), mid_o.stride(2),
        G=G, NUM_SPLITS=num_kv_splits, PAGE=page, D=D,
        BLOCK_G=max(16, next_pow2(G)), BLOCK_N=bn, INTERPRET=interpreted(),
        num_warps=num_warps, num_stages=num_stages,
    )
    _tq_combine_kernel[(B, Hq)](
        mid_o, output, lse,
        mid_o.stride(0), mid_o.stride(1), mid_o.stride(2),
        output.stride(0), output.stride(1),
        lse.stride(0),
        NUM_SPLITS=num_kv_splits, BLOCK_S=next_pow2(num_kv_splits), D=D,
        num_warps=4,
    )
    return output, lse


class TQDecodeBuffers:
    """mid_o + output + lse of every TurboQuant layer: per layer (#38479) or shared (#40655).

    ``per-layer``: every layer registers its own set at model construction, sized for
    ``max_batch`` (``max_num_seqs``), so L layers hold L sets from the start. ``shared``: one
    ``Workspace`` reserved for ``max_batch`` (as ``TurboQuantMetadataBuilder._reserve_workspace``
    in #40941) and handed out to every layer with one ``get_simultaneous`` call.
    """

    def __init__(self, policy: str, *, num_layers: int, max_batch: int, num_q_heads: int,
                 head_dim: int, num_splits: int = TQ_MAX_KV_SPLITS,
                 out_dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
                 workspace: Workspace | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        self.policy = policy
        self.max_batch = max_batch
        self.num_q_heads = num_q_heads
        self.head_dim = head_dim
        self.num_splits = num_splits
        self.out_dtype = out_dtype
        self.device = torch.device(device)
        self._layers: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self._ws = workspace if workspace is not None else Workspace(self.device,
                                                                     name="tq_decode")
        specs = tq_buffer_specs(max_batch, num_q_heads, head_dim, num_splits, out_dtype)
        if policy == "per-layer":
            for _ in range(num_layers):
                mid_o, out, lse = (torch.empty(shape, dtype=dt, device=self.device)
                                   for shape, dt in specs)
                self._layers.append((mid_o, out, lse))
        else:
            self._ws.get_simultaneous(*specs)  # reserve the largest call up front

    def get(self, layer: int, batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(mid_o, output, lse) for ``batch`` rows of ``layer``."""
        if batch > self.max_batch:
            raise ValueError(f"batch {batch} > max_batch {self.max_batch}")
        if self.policy == "per-layer":
            mid_o, out, lse = self._layers[layer]
            return mid_o[:batch], out[:batch], lse[:batch]
        mid_o, out, lse = self._ws.get_simultaneous(
            *tq_buffer_specs(batch, self.num_q_heads, self.head_dim, self.num_splits,
                             self.out_dtype))
        return mid_o, out, lse

    @property
    def num_sets(self) -> int:
        return len(self._layers) if self.policy == "per-layer" else 1

    @property
    def held_bytes(self) -> int:
        if self.policy == "per-layer":
            return sum(t.numel() * t.element_size() for s in self._layers for t in s)
        return self._ws.size_bytes

    @property
    def workspace(self) -> Workspace:
        return self._ws

    def release(self) -> None:
        self._layers.clear()
        self._ws = Workspace(self.device, name="tq_decode")
