# mypy: disable-error-code="no-untyped-def"
"""DeepSeek-V4 sparse MLA decode over the compressed / SWA cache, and the buffers it needs.

Facts used (no code copied):

- V4's attention head is one 512-wide latent (448 NoPE + 64 RoPE) that is both K and V, one KV
  head shared by all query heads; each query attends to ``topk`` gathered cache rows
  (deepseek-ai/DeepSeek-V4-Flash and -Pro ``config.json``: head_dim 512, qk_rope_head_dim 64,
  index_topk 512 Flash / 1024 Pro, sliding window 128);
- the ``fp8_ds_mla`` slot (vLLM ``DeepseekSparseSWABackend.get_kv_cache_shape`` →
  ``(num_blocks, block_size, 584)``, ``_dequantize_blocked_k_cache``): per token 448 B fp8
  NoPE, 128 B bf16 RoPE, 8 B of UE8M0 scales (one per 64 NoPE dims, 7 + 1 pad); inside a page first
  ``block_size × 576`` bytes of [nope|rope] per token, then ``block_size × 8`` scale bytes;
- the ROCm AITER decode of vLLM #40889 (per layer, per step: dequantise the whole cache view to
  bf16, cast it to fp8, allocate fresh ``qo_indptr, kv_indptr, kv_indices, kv_last_page_lens,
  q_scale, kv_scale, q_fp8``, the bf16 output and boolean masks) and its fixes #40892
  (``AiterSparseScratch`` owns every per-step buffer, rewritten in place: ``torch.lt(out=)``,
  ``copy_``, ``masked_fill_``, ``cumsum(out=)``) and #40909 (the dequant bf16 / fp8 buffers from
  the ``WorkspaceManager``, shared by all layers) — seed 003.

``sparse_mla_decode`` is the attention of one scope: ``out[b, h] = softmax_j(q[b, h]·k_j·scale)
· k_j`` over the valid entries ``j`` of ``indices[b, :lens[b]]`` (``-1`` = padding), with the
natural-log ``lse[b, h]`` so two scopes (SWA window + compressed top-k) merge exactly. The Triton
kernel gathers the rows by index and dequantises only those rows, in registers: fp8 bits are
decoded with integer arithmetic (so the same kernel runs under Triton's CPU interpreter) and
scaled by ``2^(e − 127)``. Empty rows give ``out = 0``, ``lse = −inf``. V4's per-head attention
sink is not modelled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from memprof.kernels._triton import can_run_triton, interpreted, next_pow2
from memprof.kernels.fp8 import e4m3_to_float

D_HEAD = 512  # V4 head_dim: K = V = the latent
D_NOPE = 448  # fp8 part
D_ROPE = D_HEAD - D_NOPE  # 64, bf16 in the cache
NOPE_GROUP = 64  # one UE8M0 scale per 64 NoPE dims
N_SCALES = D_NOPE // NOPE_GROUP  # 7 (+1 pad byte)
SLOT_DATA = D_NOPE + 2 * D_ROPE  # 576 B
SLOT_SCALES = 8
SLOT_BYTES = SLOT_DATA + SLOT_SCALES  # 584 B (fp8_ds_mla)
LAYOUTS = ("fp8_ds_mla", "fp8", "bf16")


def cache_layout(kv_cache: torch.Tensor) -> str:
    """``fp8_ds_mla`` for a ``(NB, PAGE, 584)`` uint8 cache, ``fp8`` for ``(NB, PAGE, 512)``
    float8_e4m3fn (one per-tensor ``kv_scale``), ``bf16`` for ``(NB, PAGE, 512)`` bf16."""
    if kv_cache.dim() != 3:
        raise ValueError(f"kv_cache must be (num_blocks, block_size, width), got "
                         f"{tuple(kv_cache.shape)}")
    w = kv_cache.shape[-1]
    if kv_cache.dtype == torch.uint8 and w == SLOT_BYTES:
        return "fp8_ds_mla"
    if kv_cache.dtype == torch.float8_e4m3fn and w == D_HEAD:
        return "fp8"
    if kv_cache.dtype == torch.bfloat16 and w == D_HEAD:
        return "bf16"
    raise ValueError(f"kv_cache {kv_cache.dtype} (…, {w}) is not a DeepSeek-V4 cache: uint8 "
                     f"(…, {SLOT_BYTES}) fp8_ds_mla, float8_e4m3fn (…, 512) or bf16 (…, 512)")


# --- the fp8_ds_mla page: pack (for tests and validation) and dequantise (torch) ------------------


def _page_parts(kv_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of a ``(NB, PAGE, 584)`` uint8 cache: data ``(NB, PAGE, 576)`` and scales
    ``(NB, PAGE, 8)``, in the page's physical order (all data, then all scales)."""
    nb, page, _ = kv_cache.shape
    flat = kv_cache.view(nb, page * SLOT_BYTES)  # (NB, PAGE·584)
    data = flat[:, :page * SLOT_DATA].view(nb, page, SLOT_DATA)  # (NB, PAGE, 576)
    scales = flat[:, page * SLOT_DATA:].view(nb, page, SLOT_SCALES)  # (NB, PAGE, 8)
    return data, scales


def pack_fp8_ds_mla(rows: torch.Tensor, page: int) -> torch.Tensor:
    """Quantise ``(N, 512)`` rows (N a multiple of ``page``) into a ``(N/page, page, 584)`` cache:
    NoPE to e4m3 with one power-of-two (UE8M0) scale per 64 dims, RoPE kept in bf16."""
    n = rows.shape[0]
    if n % page:
        raise ValueError(f"{n} rows do not fill pages of {page}")
    nb = n // page
    x = rows.float()
    nope = x[:, :D_NOPE].reshape(n, N_SCALES, NOPE_GROUP)  # (N, 7, 64)
    amax = nope.abs().amax(-1).clamp_min(1e-30)  # (N, 7)
    e = torch.ceil(torch.log2(amax / 448.0)).clamp(-127, 127)  # (N, 7) power-of-two scale
    q = (nope / torch.exp2(e)[..., None]).to(torch.float8_e4m3fn)  # (N, 7, 64)
    cache = torch.zeros((nb, page, SLOT_BYTES), dtype=torch.uint8, device=rows.device)
    data, scales = _page_parts(cache)
    data[..., :D_NOPE] = q.reshape(nb, page, D_NOPE).view(torch.uint8)
    data[..., D_NOPE:] = rows[:, D_NOPE:].to(torch.bfloat16).reshape(nb, page, D_ROPE).view(
        torch.uint8).reshape(nb, page, 2 * D_ROPE)
    scales[..., :N_SCALES] = (e + 127).to(torch.uint8).reshape(nb, page, N_SCALES)
    return cache


def _dequant_slots(data: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype,
                   out: torch.Tensor | None = None) -> torch.Tensor:
    """fp8_ds_mla rows ``data (..., 576)``, ``scales (..., 8)`` uint8 → ``(..., 512)`` in ``dtype``:
    NoPE ``e4m3 · 2^(e − 127)`` per 64 dims, RoPE bf16, both through fp32 (the e4m3 bytes by
    table lookup: torch's cast, bit for bit, faster on a CPU)."""
    nope = e4m3_to_float(data[..., :D_NOPE])  # (..., 448)
    mult = torch.exp2(scales[..., :N_SCALES].float() - 127.0)  # (..., 7)
    nope = nope.view(*nope.shape[:-1], N_SCALES, NOPE_GROUP).mul_(mult[..., None])
    if out is None:
        out = torch.empty((*data.shape[:-1], D_HEAD), dtype=dtype, device=data.device)
    out[..., :D_NOPE] = nope.flatten(-2)  # cast to dtype on the copy, as .to(dtype)
    out[..., D_NOPE:] = data[..., D_NOPE:].contiguous().view(torch.bfloat16)  # (..., 64)
    return out  # (..., 512)


def dequantize_reference(kv_cache: torch.Tensor, kv_scale: torch.Tensor | float | None = None,
                         dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The whole cache as ``(NB, PAGE, 512)`` values in ``dtype`` (torch ops; temporaries)."""
    layout = cache_layout(kv_cache)
    if layout == "bf16":
        return kv_cache.to(dtype)
    if layout == "fp8":
        s = 1.0 if kv_scale is None else kv_scale
        return (kv_cache.float() * (s if isinstance(s, float) else s.float())).to(dtype)
    data, scales = _page_parts(kv_cache)
    return _dequant_slots(data, scales, dtype)  # (NB, PAGE, 512)


def gather_rows(kv_cache: torch.Tensor, slots: torch.Tensor,
                kv_scale: torch.Tensor | float | None = None) -> torch.Tensor:
    """Rows ``slots`` (any shape, flat ``block·PAGE + row``, all valid) of the cache as fp32
    ``(*slots.shape, 512)``: ``dequantize_reference(kv_cache).reshape(-1, 512)[slots]`` bit for
    bit (each value is dequantised by the same elementwise ops), dequantising only those rows."""
    layout = cache_layout(kv_cache)
    nb, page, width = kv_cache.shape
    flat = slots.reshape(-1).long()  # (n,)
    if layout != "fp8_ds_mla":  # one row is one slot
        rows = kv_cache.reshape(nb * page, width).index_select(0, flat)  # (n, 512)
        return dequantize_reference(rows[None], kv_scale).view(*slots.shape, D_HEAD)
    data, scales = _page_parts(kv_cache)  # (NB, PAGE, 576), (NB, PAGE, 8)
    blk, row = flat // page, flat % page
    out = _dequant_slots(data[blk, row], scales[blk, row], torch.float32)  # (n, 512)
    return out.view(*slots.shape, D_HEAD)


# --- torch reference (any device) ---------------------------------------------------------------


def sparse_mla_decode_reference(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor,
                                lens: torch.Tensor, scale: float, *,
                                kv_scale: torch.Tensor | float | None = None
                                ) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 attention over the gathered rows: ``(B, H, 512)`` fp32 and ``(B, H)`` natural lse."""
    k = indices.shape[1]
    col = torch.arange(k, device=q.device)  # (K,)
    valid = (col[None, :] < lens.to(q.device).long()[:, None]) & (indices >= 0)  # (B, K)
    kv = torch.zeros((*indices.shape, D_HEAD), dtype=torch.float32, device=q.device)
    kv[valid] = gather_rows(kv_cache, indices[valid], kv_scale)  # (B, K, 512): rows read, else 0
    s = torch.einsum("bhd,bkd->bhk", q.float(), kv) * scale  # (B, H, K)
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(s, -1)  # (B, H), -inf when empty
    p = torch.exp(s - torch.where(torch.isfinite(lse), lse, 0.0)[..., None])  # (B, H, K)
    out = torch.einsum("bhk,bkd->bhd", p, kv)  # (B, H, 512)
    return out, lse


def merge_scopes_reference(o1: torch.Tensor, l1: torch.Tensor, o2: torch.Tensor,
                           l2: torch.Tensor) -> torch.Tensor:
    """Exact merge of two softmax scopes by their natural lse; ``(B, H, 512)`` fp32."""
    m = torch.maximum(l1, l2)
    m = torch.where(torch.isfinite(m), m, 0.0)
    w1, w2 = torch.exp(l1 - m), torch.exp(l2 - m)  # (B, H)
    den = (w1 + w2).clamp_min(1e-30)
    return (o1.float() * w1[..., None] + o2.float() * w2[..., None]) / den[..., None]


# --- Triton kernels -------------------------------------------------------------------------------

try:  # kernels are defined only where triton is installed; TRITON_INTERPRET is read here
    import triton
    import triton.language as tl

    _HAS_TRITON = True
except ImportError:  # pragma: no cover - exercised where triton is absent
    _HAS_TRITON = False

LAYOUT_CODE = {"bf16": 0, "fp8": 1, "fp8_ds_mla": 2}

if _HAS_TRITON:

    @triton.jit  # type: ignore[untyped-decorator,unused-ignore]
    def _e4m3_to_f32(b):
        """e4m3fn bits (int32 0..255) → fp32 by integer arithmetic (no fp8 dtype needed)."""
        sign = tl.where((b & 0x80) != 0, -1.0, 1.0)
        e = (b >> 3) & 0xF
        m = (b & 0x7).to(tl.float32)
        normal = (1.0 + m * 0.125) * tl.exp2((e - 7).to(tl.float32))
        sub = m * 0.001953125  # 2^-9
        return sign * tl.where(e == 0, sub, normal)

    @triton.jit  # type: ignore[untyped-decorator]
    def _load_rows(KV_U8, KV_BF16, KV_SCALE, idx, valid, PAGE: tl.constexpr,
                   LAYOUT: tl.constexpr, D: tl.constexpr, DN: tl.constexpr):
        """Rows ``idx`` (BN,) of the cache as (BN, D) fp32, zero where not ``valid``."""
        offs_d = tl.arange(0, D)  # (D,)
        slot = tl.where(valid, idx, 0).to(tl.int64)  # (BN,)
        if LAYOUT == 0:  # bf16 (NB, PAGE, 512): KV_BF16 is the cache
            ptr = KV_BF16 + slot[:, None] * D + offs_d[None, :]
            x = tl.load(ptr, mask=valid[:, None], other=0.0).to(tl.float32)
        elif LAYOUT == 1:  # fp8 (NB, PAGE, 512), one per-tensor scale
            b = tl.load(KV_U8 + slot[:, None] * D + offs_d[None, :], mask=valid[:, None],
                        other=0).to(tl.int32)
            x = _e4m3_to_f32(b) * tl.load(KV_SCALE)
        else:  # fp8_ds_mla: (NB, PAGE·584) bytes, data rows of 576 then 8-B scale rows
            blk = slot // PAGE
            r = slot % PAGE
            base = blk * (PAGE * 584) + r * 576  # (BN,) byte offset of the row's data
            is_nope = offs_d < DN  # (D,)
            b = tl.load(KV_U8 + base[:, None] + offs_d[None, :],
                        mask=valid[:, None] & is_nope[None, :], other=0).to(tl.int32)
            sc = tl.load(KV_U8 + (blk * (PAGE * 584) + PAGE * 576 + r * 8)[:, None]
                         + (offs_d // 64)[None, :], mask=valid[:, None] & is_nope[None, :],
                         other=127).to(tl.int32)
            nope = _e4m3_to_f32(b) * tl.exp2((sc - 127).to(tl.float32))
            rope_i = (base // 2 + DN // 2)[:, None] + (offs_d - DN)[None, :]  # bf16 elements
            rope = tl.load(KV_BF16 + rope_i, mask=valid[:, None] & (offs_d >= DN)[None, :],
                           other=0.0).to(tl.float32)
            x = tl.where(is_nope[None, :], nope, rope)
        return x

    @triton.jit  # type: ignore[untyped-decorator]
    def _sparse_mla_kernel(
        Q,  # (B, H, 512) bf16
        KV_U8, KV_BF16, KV_SCALE,  # the cache as bytes / as bf16 elements; (1,) fp32 scale
        IDX,  # (B, K) int32 slots, -1 = padding
        LENS,  # (B,) int32: entries of IDX to read
        OUT,  # (B, H, 512)
        LSE,  # (B, H) fp32, natural log
        qk_scale,  # softmax scale × log2(e)
        H,
        stride_qb, stride_qh, stride_ib, stride_ob, stride_oh, stride_lb,
        PAGE: tl.constexpr, LAYOUT: tl.constexpr, D: tl.constexpr, DN: tl.constexpr,
        BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, INTERPRET: tl.constexpr,
    ):
        b = tl.program_id(0)
        hg = tl.program_id(1)
        offs_h = hg * BLOCK_H + tl.arange(0, BLOCK_H)  # (BH,)
        mask_h = offs_h < H
        offs_d = tl.arange(0, D)
        offs_n = tl.arange(0, BLOCK_N)
        q = tl.load(Q + b.to(tl.int64) * stride_qb + offs_h[:, None] * stride_qh
                    + offs_d[None, :], mask=mask_h[:, None], other=0.0)  # (BH, 512)
        if INTERPRET:  # triton 3.9's interpreter returns garbage for bf16 tl.dot
            q = q.to(tl.float32)
        n = tl.load(LENS + b)
        m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
        acc = tl.zeros([BLOCK_H, D], dtype=tl.float32)
        for t in range(0, tl.cdiv(n, BLOCK_N)):
            j = t * BLOCK_N + offs_n  # (BN,)
            idx = tl.load(IDX + b.to(tl.int64) * stride_ib + j, mask=j < n, other=-1)
            valid = idx >= 0
            kv = _load_rows(KV_U8, KV_BF16, KV_SCALE, idx, valid, PAGE, LAYOUT, D, DN)
            if not INTERPRET:
                kv = kv.to(tl.bfloat16)  # exact: e4m3 × 2^k and bf16 RoPE fit in bf16
            qk = tl.dot(q, tl.trans(kv))  # (BH, BN) fp32
            qk = tl.where(valid[None, :], qk * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp2(m_i - m_safe)
            p = tl.exp2(qk - m_safe[:, None])  # (BH, BN), 0 where invalid
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(kv.dtype), kv)  # V = the same rows
            m_i = m_new
        has = l_i > 0.0
        o = acc / tl.where(has, l_i, 1.0)[:, None]
        lse = tl.where(has, (m_i + tl.log2(tl.where(has, l_i, 1.0))) * 0.6931471805599453,
                       float("-inf"))
        tl.store(OUT + b.to(tl.int64) * stride_ob + offs_h[:, None] * stride_oh
                 + offs_d[None, :], o.to(OUT.dtype.element_ty), mask=mask_h[:, None])
        tl.store(LSE + b.to(tl.int64) * stride_lb + offs_h, lse, mask=mask_h)

    @triton.jit  # type: ignore[untyped-decorator]
    def _dequant_pool_kernel(KV_U8, KV_BF16, OUT, n_rows, PAGE: tl.constexpr,
                             D: tl.constexpr, DN: tl.constexpr, BLOCK_R: tl.constexpr):
        """fp8_ds_mla rows → bf16 ``(rows, 512)`` in place of ``OUT`` (no temporaries)."""
        pid = tl.program_id(0)
        rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
        ok = rows < n_rows
        x = _load_rows(KV_U8, KV_BF16, KV_U8, rows, ok, PAGE, 2, D, DN)  # (BR, 512) fp32
        offs_d = tl.arange(0, D)
        tl.store(OUT + rows.to(tl.int64)[:, None] * D + offs_d[None, :], x.to(tl.bfloat16),
                 mask=ok[:, None])

    @triton.jit  # type: ignore[untyped-decorator]
    def _merge_kernel(O1, L1, O2, L2, OUT, stride_o1, stride_o2, stride_out, D: tl.constexpr):
        """One (b, h) row: out = (o1·e^(l1−m) + o2·e^(l2−m)) / (e^(l1−m) + e^(l2−m))."""
        r = tl.program_id(0).to(tl.int64)  # flat b·H + h
        offs = tl.arange(0, D)
        l1 = tl.load(L1 + r)
        l2 = tl.load(L2 + r)
        m = tl.maximum(l1, l2)
        m = tl.where(m == float("-inf"), 0.0, m)
        w1 = tl.exp(l1 - m)
        w2 = tl.exp(l2 - m)
        den = tl.where(w1 + w2 > 0.0, w1 + w2, 1.0)
        o1 = tl.load(O1 + r * stride_o1 + offs).to(tl.float32)
        o2 = tl.load(O2 + r * stride_o2 + offs).to(tl.float32)
        tl.store(OUT + r * stride_out + offs, ((o1 * w1 + o2 * w2) / den).to(
            OUT.dtype.element_ty))


@dataclass(frozen=True, slots=True)
class SparseConfig:
    block_n: int = 32
    block_h: int = 16  # ≥ 16 for tl.dot; H > block_h adds head groups
    num_warps: int = 4
    num_stages: int = 1


def _check(q: torch.Tensor, indices: torch.Tensor, lens: torch.Tensor) -> None:
    if q.dim() != 3 or q.shape[-1] != D_HEAD:
        raise ValueError(f"q must be (B, H, {D_HEAD}), got {tuple(q.shape)}")
    B = q.shape[0]
    if indices.dim() != 2 or indices.shape[0] != B or indices.dtype != torch.int32:
        raise ValueError(f"indices must be (B={B}, topk) int32, got {tuple(indices.shape)} "
                         f"{indices.dtype}")
    if tuple(lens.shape) != (B,) or lens.dtype != torch.int32:
        raise ValueError(f"lens must be (B={B},) int32, got {tuple(lens.shape)} {lens.dtype}")


def sparse_mla_decode(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor,
                      lens: torch.Tensor, scale: float, *,
                      kv_scale: torch.Tensor | None = None, scratch: ScopeScratch | None = None,
                      config: SparseConfig | None = None, use_triton: bool | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek-V4 sparse MLA decode of one scope: ``(out (B, H, 512) bf16, lse (B, H) fp32)``.

    ``q``: ``(B, H, 512)`` bf16; ``kv_cache``: fp8_ds_mla ``(NB, PAGE, 584)`` uint8, fp8
    ``(NB, PAGE, 512)`` with ``kv_scale`` (a ``(1,)`` fp32 tensor, 1.0 when None) or bf16
    ``(NB, PAGE, 512)``; ``indices``: ``(B, topk)`` int32 flat slots ``block·PAGE + row``, ``-1``
    = padding; ``lens``: ``(B,)`` int32, entries of ``indices`` to read. With ``scratch`` (a
    ``ScopeScratch``) the indices are sanitised into its buffers in place and the results land in
    its ``out_buf`` / ``lse``; nothing is allocated. Triton on CUDA (and under the interpreter),
    else the fp32 torch reference.
    """
    _check(q, indices, lens)
    layout = cache_layout(kv_cache)
    if layout != "fp8" and kv_scale is not None:
        raise ValueError(f"kv_scale applies to a plain fp8 cache, not {layout}")
    B, H, _ = q.shape
    if scratch is not None:
        indices = scratch.prepare(q, indices, lens)  # (B, K) view, sanitised in place
        out, lse = scratch.out_buf, scratch.lse
    else:
        out = torch.empty((B, H, D_HEAD), dtype=torch.bfloat16, device=q.device)
        lse = torch.empty((B, H), dtype=torch.float32, device=q.device)
    run_triton = can_run_triton(q) if use_triton is None else use_triton
    if not run_triton:
        ro, rl = sparse_mla_decode_reference(q, kv_cache, indices, lens, scale,
                                             kv_scale=kv_scale)
        out.copy_(ro)
        lse.copy_(rl)
        return out, lse
    if B == 0:
        return out, lse
    cfg = config or SparseConfig()
    block_h = max(16, min(cfg.block_h, next_pow2(H)))
    u8 = kv_cache.view(torch.uint8)
    as_bf16 = kv_cache if layout == "bf16" else u8.view(torch.bfloat16)
    if layout == "fp8":
        ks = kv_scale if kv_scale is not None else torch.ones(1, dtype=torch.float32,
                                                              device=q.device)
    else:
        ks = lens  # unused placeholder pointer
    assert q.stride(2) == 1 and out.stride(2) == 1 and indices.stride(1) == 1
    _sparse_mla_kernel[(B, math.ceil(H / block_h))](
        q, u8, as_bf16, ks, indices, lens, out, lse, scale * 1.4426950408889634, H,
        q.stride(0), q.stride(1), indices.stride(0), out.stride(0), out.stride(1),
        lse.stride(0),
        PAGE=kv_cache.shape[1], LAYOUT=LAYOUT_CODE[layout], D=D_HEAD, DN=D_NOPE,
        BLOCK_H=block_h, BLOCK_N=cfg.block_n, INTERPRET=interpreted(),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return out, lse


def dequantize_pool(kv_cache: torch.Tensor, out: torch.Tensor | None = None, *,
                    use_triton: bool | None = None) -> torch.Tensor:
    """The whole fp8_ds_mla cache as bf16 ``(NB, PAGE, 1, 512)`` (#40889's
    ``_dequantize_blocked_k_cache``), written into ``out`` when given (#40909's ``out=``)."""
    if cache_layout(kv_cache) != "fp8_ds_mla":
        raise ValueError("dequantize_pool reads an fp8_ds_mla cache")
    nb, page, _ = kv_cache.shape
    if out is None:
        out = torch.empty((nb, page, 1, D_HEAD), dtype=torch.bfloat16, device=kv_cache.device)
    run_triton = can_run_triton(kv_cache) if use_triton is None else use_triton
    if not run_triton:
        data, scales = _page_parts(kv_cache)  # written straight into out, no temporary pool
        _dequant_slots(data, scales, torch.bfloat16, out=out[:, :, 0, :])
        return out
    n_rows = nb * page
    block_r = 16
    u8 = kv_cache.view(torch.uint8)
    _dequant_pool_kernel[(triton.cdiv(n_rows, block_r),)](
        u8, u8.view(torch.bfloat16), out, n_rows, PAGE=page, D=D_HEAD, DN=D_NOPE,
        BLOCK_R=block_r, num_warps=4)
    return out


def merge_scopes(o1: torch.Tensor, l1: torch.Tensor, o2: torch.Tensor, l2: torch.Tensor,
                 out: torch.Tensor, *, use_triton: bool | None = None) -> torch.Tensor:
    """Merge the SWA and the compressed scope into ``out`` ``(B, H, 512)`` (no temporaries on
    the Triton path)."""
    run_triton = can_run_triton(o1) if use_triton is None else use_triton
    if not run_triton:
        out.copy_(merge_scopes_reference(o1, l1, o2, l2))
        return out
    B, H, _ = o1.shape
    if B * H == 0:
        return out
    assert o1.stride(1) == D_HEAD and o2.stride(1) == D_HEAD and out.stride(1) == D_HEAD
    assert l1.is_contiguous() and l2.is_contiguous()
    _merge_kernel[(B * H,)](o1, l1, o2, l2, out, D_HEAD, D_HEAD, D_HEAD, D=D_HEAD,
                            num_warps=4)
    return out


# --- the buffers of one scope (#40892's AiterSparseScratch, less the AITER work plan) ------------


class ScopeScratch:
    """Every per-step buffer of one attention scope, allocated once, rewritten in place.

    The catalog's parts (``memprof.core.scratch.dsv4._aiter_parts``), same shapes and dtypes:
    ``q_fp8 (T, H, 512) fp8``, ``out_buf (T, H, 512) bf16``, ``kv_indices (T, K) int32``,
    ``valid_mask (T, K) bool``, ``qo_indptr+kv_indptr (2, T+1) int32``, ``kv_last_page_lens (T,)
    int32``, ``q_scale+kv_scale (2,) fp32``, ``valid_lens (T,) int32``, ``col_arange (K,) int32``;
    plus ``lse (T, H) fp32``, which the catalog does not list (``extra_bytes``). ``topk`` is the
    widest call; ``prepare`` works on the ``[:, :k]`` part for a narrower one (a C128 layer under
    a C4-sized scratch). ``alloc`` (``fn(shape, dtype) -> tensor``) lets a per-step caller count
    what is allocated.
    """

    PARTS = ("q_fp8", "out_buf", "kv_indices", "valid_mask", "indptr", "kv_last_page_lens",
             "scales", "valid_lens", "col_arange")

    def __init__(self, tokens: int, heads: int, topk: int, device: torch.device | str, *,
                 alloc=None) -> None:
        dev = torch.device(device)
        mk = alloc or (lambda shape, dtype: torch.empty(shape, dtype=dtype, device=dev))
        self.tokens, self.heads, self.topk = tokens, heads, topk
        self.q_fp8 = mk((tokens, heads, D_HEAD), torch.float8_e4m3fn)
        self.out_buf = mk((tokens, heads, D_HEAD), torch.bfloat16)
        self.kv_indices = mk((tokens, topk), torch.int32)
        self.valid_mask = mk((tokens, topk), torch.bool)
        self.indptr = mk((2, tokens + 1), torch.int32)  # [qo_indptr; kv_indptr]
        self.kv_last_page_lens = mk((tokens,), torch.int32)
        self.scales = mk((2,), torch.float32)  # [q_scale, kv_scale]
        self.valid_lens = mk((tokens,), torch.int32)
        self.col_arange = mk((topk,), torch.int32)
        self.lse = mk((tokens, heads), torch.float32)  # not in the catalog
        # static contents (written once; a per-step caller writes them every call)
        torch.arange(tokens + 1, out=self.indptr[0])  # qo_indptr: one query per request
        self.indptr[1, :1].zero_()  # a kernel, not a host copy: this may run inside a capture
        self.kv_last_page_lens.fill_(1)  # page size 1 in AITER's view
        self.scales.fill_(1.0)
        torch.arange(topk, out=self.col_arange)

    def tensors(self) -> dict[str, torch.Tensor]:
        return {p: getattr(self, p) for p in (*self.PARTS, "lse")}

    @property
    def catalog_bytes(self) -> int:
        return sum(getattr(self, p).numel() * getattr(self, p).element_size()
                   for p in self.PARTS)

    @property
    def extra_bytes(self) -> int:
        return self.lse.numel() * self.lse.element_size()

    def prepare(self, q: torch.Tensor, indices: torch.Tensor, lens: torch.Tensor
                ) -> torch.Tensor:
        """Rewrite the metadata for this step in place; returns the sanitised ``(T, k)``
        indices (``-1`` outside ``lens`` and where the caller had ``-1``)."""
        T, k = indices.shape
        if self.tokens != T or k > self.topk or tuple(q.shape) != tuple(self.q_fp8.shape):
            raise ValueError(f"scratch for T={self.tokens}, H={self.heads}, topk≤{self.topk}; "
                             f"got q {tuple(q.shape)}, indices {tuple(indices.shape)}")
        kv = self.kv_indices[:, :k]
        vm = self.valid_mask[:, :k]
        self.q_fp8.copy_(q)  # AITER's a8w8 input (the Triton kernel reads the bf16 q)
        torch.lt(self.col_arange[None, :k], lens[:, None], out=vm)  # j < lens
        kv.copy_(indices)
        kv.add_(1).mul_(vm)  # -1 → 0, outside lens → 0
        torch.gt(kv, 0, out=vm)  # valid = inside lens and not padding
        kv.sub_(1)
        torch.sum(vm, dim=1, dtype=torch.int32, out=self.valid_lens)
        torch.cumsum(self.valid_lens, 0, dtype=torch.int32, out=self.indptr[1, 1:])
        return kv
