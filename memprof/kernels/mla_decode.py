# mypy: disable-error-code="no-untyped-def"
"""MLA decode over a paged latent cache (DeepSeek-V3/R1, absorbed), and where its output lives.

What vLLM runs here (read for the algorithm and the buffer shapes, no code copied):

- ``vllm/v1/attention/backends/mla/cutlass_mla.py`` ``CutlassMLAImpl._sm100_cutlass_mla_decode``
  (vLLM #37442, commit ef2c4f77; reverted by #38359): the decode output is
  ``(B_q, MAX_HEADS=128, 512)`` — heads padded to 128 whatever the TP — kept per layer
  (``self._decode_out``, zero-filled, regrown when ``B_q`` grows);
- ``vllm/v1/attention/backends/mla/flashinfer_mla.py`` ``FlashInferMLAImpl.forward_mqa``: the same
  buffer unpadded, ``(B, local heads, kv_lora_rank)``;
- #37805 (closed, seed 000): one module-level buffer shared by all layers.
(vLLM #37442 / #37805, vllm/v1/attention/backends/mla/cutlass_mla.py.)

The attention itself: per request ``b`` and head ``h``, with the cached row ``c_t`` of 576 values
(512 latent + 64 rope), ``o[b, h] = softmax_t(q[b, h] · c_t · scale) · c_t[:512]`` — the latent
doubles as V (absorbed MLA). The Triton version is split-KV: one program per (request, KV split,
head group) holds ALL heads of its group (16 on an R1 TP8 rank) so each cached row is read once;
the 576-wide dot is two power-of-two dots (512 + 64); the loaded 512-wide latent tile is reused
as V; bf16 tensor-core dots accumulate in fp32. A second kernel merges the splits by their
log-sum-exp.
"""

import math
from dataclasses import dataclass

import torch

from memprof.core.scratch import CUTLASS_MLA_LATENT, CUTLASS_MLA_MAX_HEADS
from memprof.kernels._triton import can_run_triton, interpreted, next_pow2, num_sms
from memprof.kernels.paged import gather_pages, request_groups
from memprof.kernels.workspace import Workspace

D_LATENT = CUTLASS_MLA_LATENT  # 512: kv_lora_rank of DeepSeek-V3/R1 (also V's width)
D_ROPE = 64  # qk_rope_head_dim of DeepSeek-V3/R1
D_QK = D_LATENT + D_ROPE  # 576
MLA_BACKENDS = ("cutlass_mla", "flashinfer_mla")
POLICIES = ("per-layer", "shared")

# --- torch reference (any device) ---------------------------------------------------------------


def mla_decode_reference(q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor,
                         seq_lens: torch.Tensor, scale: float, *,
                         compute_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Plain softmax attention per request in ``compute_dtype``; ``(B, H, 512)`` in that dtype.

    The function of :func:`mla_decode_reference_loop`, for a group of requests at a time
    (ordered by length, padded to the group's longest page; padded rows are zeroed and their
    scores masked to −inf, so they add exact zeros): the same products, summed in another order,
    so the two agree to float rounding (``tests/kernels/test_reference_vectorised.py``)."""
    B, H, _ = q.shape  # q: (B, H, 576)
    page, width = kv_cache.shape[1], kv_cache.shape[2]  # kv_cache: (NB, PAGE, 576)
    out = torch.zeros((B, H, D_LATENT), dtype=compute_dtype, device=q.device)  # (B, H, 512)
    lens_l = [int(n) for n in seq_lens.tolist()]
    bt = block_table.to(q.device)
    for group in request_groups(lens_l, width):
        c = len(group)
        idx = torch.tensor(group, dtype=torch.long, device=q.device)  # (c,)
        lens = seq_lens.to(q.device)[idx].long()  # (c,)
        pages, tok = gather_pages(bt, idx, lens, lens_l[group[-1]], page)  # (c, P), (c, N)
        rows = kv_cache.index_select(0, pages.reshape(-1)).view(c, -1, width).to(
            compute_dtype)  # (c, N, 576)
        rows.masked_fill_(~tok[:, :, None], 0)  # padding: zero rows
        s = torch.matmul(q[idx].to(compute_dtype), rows.transpose(1, 2)) * scale  # (c, H, N)
        s.masked_fill_(~tok[:, None, :], float("-inf"))
        out[idx] = torch.matmul(torch.softmax(s, dim=-1), rows[:, :, :D_LATENT])  # (c, H, 512)
    return out


def mla_decode_reference_loop(q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor,
                              seq_lens: torch.Tensor, scale: float, *,
                              compute_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The per-request form of :func:`mla_decode_reference`, one request at a time: the slow
    reference the vectorised one is tested against."""
    B, H, _ = q.shape  # q: (B, H, 576)
    page = kv_cache.shape[1]  # kv_cache: (NB, PAGE, 576)
    out = torch.zeros((B, H, D_LATENT), dtype=compute_dtype, device=q.device)  # (B, H, 512)
    lens = seq_lens.tolist()
    for b in range(B):
        n = int(lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / page)].long()  # (P,)
        rows = kv_cache[pages].reshape(-1, kv_cache.shape[-1])[:n].to(compute_dtype)  # (n, 576)
        s = (q[b].to(compute_dtype) @ rows.T) * scale  # (H, n)
        p = torch.softmax(s, dim=-1)  # (H, n)
        out[b] = p @ rows[:, :D_LATENT]  # (H, 512)
    return out


# --- Triton kernels -------------------------------------------------------------------------------

try:  # kernels are defined only where triton is installed; TRITON_INTERPRET is read here
    import triton
    import triton.language as tl

    _HAS_TRITON = True
except ImportError:  # pragma: no cover - exercised where triton is absent
    _HAS_TRITON = False

if _HAS_TRITON:

    @triton.jit  # type: ignore[untyped-decorator]
    def _mla_split_kernel(
        Q,  # (B, H, 576) bf16
        KV,  # (NB, PAGE, 576) bf16
        BT,  # (B, MAXB) int32
        SEQ,  # (B,) int32
        MID_O,  # (B, S, H, 512) fp32: this split's normalised output
        MID_LSE,  # (B, S, H) fp32: this split's log2-sum-exp2 (-inf when empty)
        qk_scale,  # softmax scale × log2(e)
        H,
        stride_qb, stride_qh,
        stride_kvb, stride_kvt,
        stride_btb,
        stride_mob, stride_mos, stride_moh,
        stride_mlb, stride_mls,
        NUM_SPLITS: tl.constexpr,
        PAGE: tl.constexpr,
        DL: tl.constexpr,  # 512
        DR: tl.constexpr,  # 64
        BLOCK_H: tl.constexpr,
        BLOCK_N: tl.constexpr,  # divides PAGE, so a tile never straddles a page
        INTERPRET: tl.constexpr,
    ):
        b = tl.program_id(0)
        s = tl.program_id(1)
        hg = tl.program_id(2)
        seq_len = tl.load(SEQ + b)
        n_tiles = tl.cdiv(seq_len, BLOCK_N)
        per_split = tl.cdiv(n_tiles, NUM_SPLITS)
        t_lo = s * per_split
        t_hi = tl.minimum(t_lo + per_split, n_tiles)

        offs_h = hg * BLOCK_H + tl.arange(0, BLOCK_H)  # (BH,)
        mask_h = offs_h < H
        offs_l = tl.arange(0, DL)  # (512,)
        offs_r = tl.arange(0, DR)  # (64,)
        offs_n = tl.arange(0, BLOCK_N)  # (BN,)
        q_row = Q + b.to(tl.int64) * stride_qb + offs_h[:, None] * stride_qh  # (BH, 1)
        q_lat = tl.load(q_row + offs_l[None, :], mask=mask_h[:, None], other=0.0)  # (BH, 512)
        q_rope = tl.load(q_row + DL + offs_r[None, :], mask=mask_h[:, None], other=0.0)  # (BH, 64)
        if INTERPRET:  # triton 3.9's interpreter returns garbage for bf16 tl.dot
            q_lat = q_lat.to(tl.float32)
            q_rope = q_rope.to(tl.float32)

        m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)  # (BH,) running max (log2)
        l_i = tl.zeros([BLOCK_H], dtype=tl.float32)  # (BH,) running sum
        acc = tl.zeros([BLOCK_H, DL], dtype=tl.float32)  # (BH, 512)
        bt_row = BT + b.to(tl.int64) * stride_btb
        for t in range(t_lo, t_hi):
            tok0 = t * BLOCK_N
            blk = tl.load(bt_row + tok0 // PAGE).to(tl.int64)
            rows = (tok0 % PAGE) + offs_n  # (BN,) rows inside the page
            mask_n = (tok0 + offs_n) < seq_len  # (BN,)
            kv_row = KV + blk * stride_kvb + rows[:, None].to(tl.int64) * stride_kvt  # (BN, 1)
            c_lat = tl.load(kv_row + offs_l[None, :], mask=mask_n[:, None], other=0.0)  # (BN, 512)
            c_rope = tl.load(kv_row + DL + offs_r[None, :], mask=mask_n[:, None],
                             other=0.0)  # (BN, 64)
            if INTERPRET:
                c_lat = c_lat.to(tl.float32)
                c_rope = c_rope.to(tl.float32)
            qk = tl.dot(q_lat, tl.trans(c_lat))  # (BH, BN) fp32
            qk += tl.dot(q_rope, tl.trans(c_rope))  # (BH, BN)
            qk = tl.where(mask_n[None, :], qk * qk_scale, float("-inf"))  # (BH, BN)
            m_new = tl.maximum(m_i, tl.max(qk, 1))  # (BH,)
            alpha = tl.exp2(m_i - m_new)  # (BH,)
            p = tl.exp2(qk - m_new[:, None])  # (BH, BN)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(c_lat.dtype), c_lat)  # (BH, 512), latent = V
            m_i = m_new

        has = l_i > 0.0  # (BH,) empty split: o = 0, lse = -inf
        o = acc / tl.where(has, l_i, 1.0)[:, None]  # (BH, 512)
        lse = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))  # (BH,)
        mo = MID_O + b.to(tl.int64) * stride_mob + s * stride_mos + offs_h[:, None] * stride_moh
        tl.store(mo + offs_l[None, :], o, mask=mask_h[:, None])
        tl.store(MID_LSE + b.to(tl.int64) * stride_mlb + s * stride_mls + offs_h, lse, mask=mask_h)

    @triton.jit  # type: ignore[untyped-decorator]
    def _mla_combine_kernel(
        MID_O,  # (B, S, H, 512) fp32
        MID_LSE,  # (B, S, H) fp32
        OUT,  # (B, H, 512) out dtype (a view: heads may be padded beyond H)
        stride_mob, stride_mos, stride_moh,
        stride_mlb, stride_mls,
        stride_ob, stride_oh,
        NUM_SPLITS: tl.constexpr,
        BLOCK_S: tl.constexpr,
        DL: tl.constexpr,
    ):
        b = tl.program_id(0)
        h = tl.program_id(1)
        offs_s = tl.arange(0, BLOCK_S)  # (BS,)
        mask_s = offs_s < NUM_SPLITS
        lse = tl.load(MID_LSE + b.to(tl.int64) * stride_mlb + offs_s * stride_mls + h,
                      mask=mask_s, other=float("-inf"))  # (BS,)
        m = tl.max(lse, 0)
        m = tl.where(m == float("-inf"), 0.0, m)
        w = tl.exp2(lse - m)  # (BS,) 0 for empty splits
        denom = tl.sum(w, 0)
        offs_l = tl.arange(0, DL)
        mo = MID_O + b.to(tl.int64) * stride_mob + offs_s[:, None] * stride_mos + h * stride_moh
        parts = tl.load(mo + offs_l[None, :], mask=mask_s[:, None], other=0.0)  # (BS, 512)
        o = tl.sum(parts * w[:, None], 0) / tl.where(denom > 0.0, denom, 1.0)  # (512,)
        optr = OUT + b.to(tl.int64) * stride_ob + h * stride_oh + offs_l
        tl.store(optr, o.to(OUT.dtype.element_ty))


@dataclass(frozen=True, slots=True)
class MLAConfig:
    """Tile sizes of the split kernel (the GPU script sweeps a few)."""

    block_n: int = 32
    block_h: int = 16  # heads per program (≥ 16 for tl.dot); H > block_h adds head groups
    num_warps: int = 4
    num_stages: int = 2


def default_num_splits(batch: int, head_groups: int, max_seq_len: int, block_n: int,
                       sms: int) -> int:
    """Splits per request: about eight programs per SM (so the last wave's tail is short and
    enough loads are in flight), each split at least 4 tiles long, at most 64.

    Measured on an H200 (reports/gpu/kernels): at B=64, 16 heads, equal 16k contexts, 9 splits
    (four per SM) reached 59 % of copy bandwidth and 16 splits 71 %
    (bench_kernels_mla-sweep-h200.json); with uneven contexts (validate's, 1/2 to 1× of the
    longest) every count from 8 to 32 lands within a few points (mla-split-sweep.json).
    Timed as the GPU runs it (CUDA-graph replay, mla-graph-sweep.json) this default reaches 72 %,
    79 % and 82 % of copy bandwidth at B=64 with 8k, 16k and 32k contexts; the best split count
    and tile config there are 3, 3 and 5 points better (the combine kernel is 10 µs of
    150-540)."""
    want = math.ceil(8 * sms / max(1, batch * head_groups))
    most = max(1, math.ceil(max_seq_len / (4 * block_n)))
    return int(max(1, min(want, most, 64)))


def mla_mid_shapes(batch: int, heads: int,
                   num_splits: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shapes of the split kernel's partial outputs and log-sum-exps."""
    return (batch, num_splits, heads, D_LATENT), (batch, num_splits, heads)


def mla_decode(q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor,
               seq_lens: torch.Tensor, scale: float, *, out: torch.Tensor | None = None,
               workspace: Workspace | None = None, num_splits: int | None = None,
               config: MLAConfig | None = None, max_seq_len: int | None = None,
               use_triton: bool | None = None) -> torch.Tensor:
    """Absorbed-MLA decode: ``(B, H, 576)`` queries over a paged ``(NB, PAGE, 576)`` bf16 cache.

    Returns ``(B, H, 512)`` (written into ``out`` when given: any ``(B, H, 512)`` view, e.g. the
    first ``H`` heads of a 128-head padded CUTLASS buffer). The split kernel's partials come from
    ``workspace`` (one ``get_simultaneous`` call) or a fresh allocation. Triton runs on CUDA (and
    under ``TRITON_INTERPRET=1``); elsewhere the fp32 torch reference runs. ``max_seq_len`` (a host
    int) avoids a device sync when choosing the number of splits.
    """
    B, H, dqk = q.shape  # q: (B, H, 576)
    if dqk != D_QK or kv_cache.shape[-1] != D_QK:
        raise ValueError(f"MLA decode expects 576-wide q and cache rows, got {dqk}, "
                         f"{kv_cache.shape[-1]}")
    if out is not None and tuple(out.shape) != (B, H, D_LATENT):
        raise ValueError(f"out must be (B, H, 512) = {(B, H, D_LATENT)}, got {tuple(out.shape)}")
    run_triton = can_run_triton(q) if use_triton is None else use_triton
    if not run_triton:
        ref = mla_decode_reference(q, kv_cache, block_table, seq_lens, scale)  # (B, H, 512) fp32
        if out is None:
            return ref.to(q.dtype)
        out.copy_(ref)
        return out

    cfg = config or MLAConfig()
    page = kv_cache.shape[1]
    block_n = min(cfg.block_n, page)
    if page % block_n:
        raise ValueError(f"block_n {block_n} must divide the KV block size {page}")
    block_h = max(16, min(cfg.block_h, next_pow2(H)))
    head_groups = math.ceil(H / block_h)
    if num_splits is None:
        longest = max_seq_len if max_seq_len is not None else int(seq_lens.max().item())
        num_splits = default_num_splits(B, head_groups, longest, block_n, num_sms(q.device))
    mid_o_shape, mid_lse_shape = mla_mid_shapes(B, H, num_splits)
    if workspace is not None:
        mid_o, mid_lse = workspace.get_simultaneous((mid_o_shape, torch.float32),
                                                    (mid_lse_shape, torch.float32))
    else:
        mid_o = torch.empty(mid_o_shape, dtype=torch.float32, device=q.device)  # (B, S, H, 512)
        mid_lse = torch.empty(mid_lse_shape, dtype=torch.float32, device=q.device)  # (B, S, H)
    if out is None:
        out = torch.empty((B, H, D_LATENT), dtype=q.dtype, device=q.device)  # (B, H, 512)
    if B == 0:
        return out
    assert q.stride(2) == 1 and kv_cache.stride(2) == 1 and out.stride(2) == 1
    _mla_split_kernel[(B, num_splits, head_groups)](
        q, kv_cache, block_table, seq_lens, mid_o, mid_lse,
        scale * 1.4426950408889634, H,
        q.stride(0), q.stride(1),
        kv_cache.stride(0), kv_cache.stride(1),
        block_table.stride(0),
        mid_o.stride(0), mid_o.stride(1), mid_o.stride(2),
        mid_lse.stride(0), mid_lse.stride(1),
        NUM_SPLITS=num_splits, PAGE=page, DL=D_LATENT, DR=D_ROPE,
        BLOCK_H=block_h, BLOCK_N=block_n, INTERPRET=interpreted(),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    _mla_combine_kernel[(B, H)](
        mid_o, mid_lse, out,
        mid_o.stride(0), mid_o.stride(1), mid_o.stride(2),
        mid_lse.stride(0), mid_lse.stride(1),
        out.stride(0), out.stride(1),
        NUM_SPLITS=num_splits, BLOCK_S=next_pow2(num_splits), DL=D_LATENT,
        num_warps=4,
    )
    return out


# --- where the decode output lives: per layer (#37442) or shared (#37805) ------------------------


def decode_out_heads(backend: str, num_heads: int) -> int:
    """Heads of the output buffer as the backend allocates it (CUTLASS pads to 128)."""
    if backend == "cutlass_mla":
        return max(CUTLASS_MLA_MAX_HEADS, num_heads)
    if backend == "flashinfer_mla":
        return num_heads
    raise ValueError(f"unknown MLA backend {backend!r}; expected one of {MLA_BACKENDS}")


class DecodeOutPolicy:
    """The MLA decode output buffer of every layer, per layer or shared.

    ``per-layer`` (vLLM #37442): each layer allocates its own zero-filled buffer lazily at its first
    decode and reallocates it when the batch grows, so L layers hold L buffers. ``shared`` (#37805):
    one buffer for all layers, handed out by a ``Workspace`` (zero-filled when it grows, as
    #37805's ``torch.zeros``), so L layers hold one. ``get`` returns the buffer shaped as the
    backend allocates it, ``(B, 128, 512)`` for CUTLASS; ``heads_view`` is the ``(B, H, 512)`` part
    the kernel writes.
    """

    def __init__(self, policy: str, *, backend: str = "cutlass_mla", num_heads: int,
                 dtype: torch.dtype = torch.bfloat16, device: torch.device | str = "cpu",
                 workspace: Workspace | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        self.policy = policy
        self.backend = backend
        self.num_heads = num_heads
        self.padded_heads = decode_out_heads(backend, num_heads)
        self.dtype = dtype
        self.device = torch.device(device)
        self._per_layer: dict[int, torch.Tensor] = {}  # layer -> (B_max, Hpad, 512)
        self._ws = workspace if workspace is not None else Workspace(self.device,
                                                                     name="mla_decode_out")
        self._zeroed_at_grow = -1

    def shape(self, batch: int) -> tuple[int, int, int]:
        return (batch, self.padded_heads, D_LATENT)

    def bytes_for(self, batch: int) -> int:
        return batch * self.padded_heads * D_LATENT * self.dtype.itemsize

    def get(self, layer: int, batch: int) -> torch.Tensor:
        """The ``(B, Hpad, 512)`` output buffer of ``layer`` for a batch of ``batch`` requests."""
        if self.policy == "per-layer":
            buf = self._per_layer.get(layer)
            if buf is None or buf.shape[0] < batch:
                self._per_layer.pop(layer, None)
                buf = torch.zeros(self.shape(batch), dtype=self.dtype,
                                  device=self.device)  # (B, Hpad, 512)
                self._per_layer[layer] = buf
            return buf[:batch]
        (buf,) = self._ws.get_simultaneous((self.shape(batch), self.dtype))  # (B, Hpad, 512)
        if self._ws.num_grows != self._zeroed_at_grow:
            buf.zero_()
            self._zeroed_at_grow = self._ws.num_grows
        return buf

    def heads_view(self, buf: torch.Tensor) -> torch.Tensor:
        """The ``(B, H, 512)`` real-head part of a padded buffer."""
        return buf[:, :self.num_heads]

    @property
    def num_buffers(self) -> int:
        return len(self._per_layer) if self.policy == "per-layer" else int(self._ws.size_bytes > 0)

    @property
    def held_bytes(self) -> int:
        """Bytes of output buffers this policy keeps alive between decode steps."""
        if self.policy == "per-layer":
            return sum(t.numel() * t.element_size() for t in self._per_layer.values())
        return self._ws.size_bytes

    @property
    def workspace(self) -> Workspace:
        return self._ws

    def release(self) -> None:
        self._per_layer.clear()
        self._ws = Workspace(self.device, name="mla_decode_out")
        self._zeroed_at_grow = -1
