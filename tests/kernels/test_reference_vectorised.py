"""The vectorised torch references compute the function of the per-request ones they replaced.

- TurboQuant (``tq_decode_reference`` vs ``tq_decode_reference_loop``) and MLA
  (``mla_decode_reference`` vs ``mla_decode_reference_loop``): the same values (the dequantised
  K/V bit for bit) in the same formula, but the dot products and the softmax sums are taken in
  another order (a GQA group or a group of requests as one matrix product; padded columns that
  add exact zeros), so the results agree to float rounding, not bit for bit (``TOL``: torch's
  float32 closeness; 1e-12 in float64).
- The DeepSeek-V4 sparse reference now dequantises only the rows it reads: the same elementwise
  ops on the same bytes, so it equals the old whole-pool form (kept below) bit for bit.
- The table lookups (``memprof.kernels.fp8``, ``tq_dequant_k8v4_fast``) equal torch's casts bit
  for bit on every byte value, NaN codes included.

Inputs: random, several shapes, ragged lengths with 0, 1 and page boundaries, both TurboQuant
cache layouts, garbage block ids past a request's last page and NaN bytes in cache rows no
request reads (the per-request forms never read them; the vectorised ones must not either).
"""

from __future__ import annotations

import importlib
import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from memprof.kernels.fp8 import e4m3_to_float  # noqa: E402
from memprof.kernels.sparse_mla_decode import (  # noqa: E402
    D_HEAD,
    D_NOPE,
    N_SCALES,
    NOPE_GROUP,
    _page_parts,
    cache_layout,
    dequantize_pool,
    dequantize_reference,
    pack_fp8_ds_mla,
    sparse_mla_decode_reference,
)
from memprof.kernels.tq_decode import (  # noqa: E402
    tq_cache_shape,
    tq_decode_reference,
    tq_decode_reference_loop,
    tq_dequant_k8v4,
    tq_dequant_k8v4_fast,
    tq_store_k8v4,
)

mla = importlib.import_module("memprof.kernels.mla_decode")
paged = importlib.import_module("memprof.kernels.paged")
vmt = importlib.import_module("memprof.validation.mla_tq")

# float rounding: torch's default float32 closeness (1.3e-6 relative, i.e. ~10 ulps, 1e-5 absolute
# for outputs near 0, where cancellation leaves no relative scale); float64 far tighter
TOL: dict[Any, dict[str, float]] = {torch.float32: {"rtol": 1.3e-6, "atol": 1e-5},
                                    torch.float64: {"rtol": 1e-12, "atol": 1e-12}}
# ragged lengths for a page of 16: empty, one token, page − 1, page, page + 1, several pages
LENS = [
    [37],
    [0, 1, 15, 16, 17, 64],
    [0, 0],
    [200, 3, 129, 48, 0, 96, 31, 160],
]


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


def _paged(lens: list[int], page: int, g: torch.Generator, spare: int = 3
           ) -> tuple[torch.Tensor, int, list[int]]:
    """A shuffled block table: garbage ids (−1, huge) past each request's pages; ``spare``
    blocks no request uses. Returns it, the block count and the blocks no request reads."""
    per = [math.ceil(n / page) for n in lens]
    nb = sum(per) + spare
    perm = torch.randperm(nb, generator=g).to(torch.int32)
    width = max(1, max(per, default=1)) + 1
    bt = torch.empty((len(lens), width), dtype=torch.int32)
    pos = 0
    for b, n in enumerate(per):
        bt[b, :n] = perm[pos:pos + n]
        bt[b, n:] = -1 if b % 2 else 1 << 30  # never a valid block
        pos += n
    return bt, nb, perm[pos:].tolist()


def _tq_case(lens: list[int], hq: int, hkv: int, d: int, page: int, layout: str, seed: int
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    bt, nb, unused = _paged(lens, page, g)
    k = (torch.randn((nb * page, hkv, d), generator=g) * 2).to(torch.bfloat16)
    v = (torch.randn((nb * page, hkv, d), generator=g) * 3).to(torch.bfloat16)
    cache = torch.zeros(tq_cache_shape(nb, page, hkv, d, layout), dtype=torch.uint8)
    tq_store_k8v4(k, v, cache, torch.arange(nb * page), layout=layout)
    view = cache.transpose(1, 2) if layout == "head_major" else cache  # (NB, PAGE, Hkv, slot)
    view[unused] = 0xFF  # NaN keys and NaN scales in blocks no request reads
    for b, n in enumerate(lens):  # and in the rows past a request's last token in its last page
        if n % page:
            view[int(bt[b, n // page]), n % page:] = 0xFF
    q = torch.randn((len(lens), hq, d), generator=g).to(torch.bfloat16)
    return q, cache, bt, torch.tensor(lens, dtype=torch.int32)


@pytest.mark.parametrize("lens", LENS)
@pytest.mark.parametrize(("hq", "hkv", "d", "layout"), [
    (8, 2, 64, "token_major"),
    (8, 8, 64, "head_major"),  # G = 1
    (16, 2, 128, "head_major"),
    (64, 8, 128, "token_major"),  # Qwen3-32B's rank: G = 8
])
def test_tq_vectorised_equals_per_request(lens: list[int], hq: int, hkv: int, d: int,
                                          layout: str) -> None:
    q, cache, bt, lens_t = _tq_case(lens, hq, hkv, d, 16, layout, seed=len(lens) + hq + d)
    for dtype, tol in TOL.items():
        o, lse = tq_decode_reference(q, cache, bt, lens_t, d ** -0.5, layout=layout,
                                     compute_dtype=dtype)
        ro, rl = tq_decode_reference_loop(q, cache, bt, lens_t, d ** -0.5, layout=layout,
                                          compute_dtype=dtype)
        assert o.dtype == dtype and lse.dtype == dtype
        assert bool(torch.isfinite(o).all()), "a padded row leaked into the result"
        torch.testing.assert_close(o, ro, **tol)
        empty = lens_t == 0
        assert bool((o[empty] == 0).all()) and bool(torch.isneginf(lse[empty]).all())
        torch.testing.assert_close(lse[~empty], rl[~empty], **tol)


@pytest.mark.parametrize("chunk", [1, 4096, 1 << 26])  # one request a group … all in one
def test_tq_grouping_does_not_change_the_result(monkeypatch: pytest.MonkeyPatch,
                                                chunk: int) -> None:
    q, cache, bt, lens_t = _tq_case(LENS[3], 16, 4, 64, 16, "token_major", seed=5)
    ro, rl = tq_decode_reference_loop(q, cache, bt, lens_t, 0.125)
    monkeypatch.setattr(paged, "CHUNK_ELEMS", chunk)
    groups = paged.request_groups(LENS[3], 4 * 64)
    assert sorted(b for grp in groups for b in grp) == [b for b, n in enumerate(LENS[3]) if n]
    if chunk in (1, 1 << 26):
        assert len(groups) == (7 if chunk == 1 else 1)
    o, lse = tq_decode_reference(q, cache, bt, lens_t, 0.125)
    torch.testing.assert_close(o, ro, **TOL[torch.float32])
    torch.testing.assert_close(lse[lens_t > 0], rl[lens_t > 0], **TOL[torch.float32])


def test_tq_narrow_block_table_is_an_error() -> None:
    q, cache, bt, lens_t = _tq_case([40], 8, 2, 64, 16, "token_major", seed=1)
    with pytest.raises(ValueError, match="pages a request"):
        tq_decode_reference(q, cache, bt[:, :2], lens_t, 0.125)  # 40 tokens need 3 pages


def test_tq_fast_dequant_is_the_cast_bit_for_bit() -> None:
    d = 64
    g = torch.Generator().manual_seed(3)
    slots = torch.randint(0, 256, (4096, 2, d + d // 2 + 4), generator=g, dtype=torch.uint8)
    slots[:256, 0, :d] = torch.arange(256, dtype=torch.uint8)[:, None]  # every key byte
    slots[:256, 1, d:d + d // 2] = torch.arange(256, dtype=torch.uint8)[:, None]  # every code
    k, v = tq_dequant_k8v4(slots, d)
    kf, vf = tq_dequant_k8v4_fast(slots, d)
    assert torch.equal(_bits(k), _bits(kf)) and torch.equal(_bits(v), _bits(vf))
    strided = slots.transpose(0, 1)  # a permuted view, as the vectorised reference passes
    assert torch.equal(_bits(tq_dequant_k8v4_fast(strided, d)[1]), _bits(v.transpose(0, 1)))


def test_e4m3_table_is_the_cast_bit_for_bit() -> None:
    b = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(2, 8, 16)
    cast = b.view(torch.float8_e4m3fn).float()
    assert torch.equal(_bits(e4m3_to_float(b)), _bits(cast))
    assert torch.equal(_bits(e4m3_to_float(b.view(torch.float8_e4m3fn))), _bits(cast))
    assert int(torch.isnan(e4m3_to_float(b)).sum()) == 2  # 0x7F and 0xFF


# --- MLA ------------------------------------------------------------------------------------------


def _mla_case(lens: list[int], heads: int, page: int, seed: int
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    bt, nb, unused = _paged(lens, page, g)
    kv = torch.randn((nb, page, 576), generator=g).to(torch.bfloat16)
    kv[unused] = float("nan")
    for b, n in enumerate(lens):
        if n % page:
            kv[int(bt[b, n // page]), n % page:] = float("nan")
    q = torch.randn((len(lens), heads, 576), generator=g).to(torch.bfloat16)
    return q, kv, bt, torch.tensor(lens, dtype=torch.int32)


@pytest.mark.parametrize("lens", LENS)
@pytest.mark.parametrize(("heads", "page"), [(16, 16), (4, 64), (128, 16)])
def test_mla_vectorised_equals_per_request(lens: list[int], heads: int, page: int) -> None:
    q, kv, bt, lens_t = _mla_case(lens, heads, page, seed=heads + page + len(lens))
    for dtype, tol in TOL.items():
        o = mla.mla_decode_reference(q, kv, bt, lens_t, 192 ** -0.5, compute_dtype=dtype)
        ref = mla.mla_decode_reference_loop(q, kv, bt, lens_t, 192 ** -0.5,
                                            compute_dtype=dtype)
        assert o.dtype == dtype and bool(torch.isfinite(o).all())
        torch.testing.assert_close(o, ref, **tol)
        assert bool((o[lens_t == 0] == 0).all())


# --- DeepSeek-V4 sparse MLA: the old whole-pool form, as it was -----------------------------------


def _dequantize_whole_pool(kv_cache: torch.Tensor, kv_scale: Any = None) -> torch.Tensor:
    """``dequantize_reference`` before this change (fp32; repeat_interleave of the scales)."""
    layout = cache_layout(kv_cache)
    if layout == "bf16":
        return kv_cache.float()
    if layout == "fp8":
        s = 1.0 if kv_scale is None else kv_scale
        return kv_cache.float() * (s if isinstance(s, float) else s.float())
    data, scales = _page_parts(kv_cache)
    nope = data[..., :D_NOPE].contiguous().view(torch.float8_e4m3fn).float()
    mult = torch.exp2(scales[..., :N_SCALES].float() - 127.0)
    nope = nope * mult.repeat_interleave(NOPE_GROUP, -1)
    rope = data[..., D_NOPE:].contiguous().view(torch.bfloat16).float()
    return torch.cat([nope, rope], -1)


def _sparse_whole_pool(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor,
                       lens: torch.Tensor, scale: float, kv_scale: Any = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """``sparse_mla_decode_reference`` before this change: the whole pool dequantised."""
    rows = _dequantize_whole_pool(kv_cache, kv_scale).reshape(-1, D_HEAD)
    col = torch.arange(indices.shape[1])
    valid = (col[None, :] < lens.long()[:, None]) & (indices >= 0)
    safe = torch.where(valid, indices.long(), torch.zeros_like(indices, dtype=torch.long))
    kv = rows[safe]
    s = torch.einsum("bhd,bkd->bhk", q.float(), kv) * scale
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - torch.where(torch.isfinite(lse), lse, 0.0)[..., None])
    return torch.einsum("bhk,bkd->bhd", p, kv), lse


@pytest.mark.parametrize("layout", ["fp8_ds_mla", "bf16", "fp8"])
@pytest.mark.parametrize(("B", "K", "page", "nb"), [(3, 20, 4, 6), (8, 128, 64, 5),
                                                     (2, 512, 2, 40)])
def test_sparse_gather_first_equals_whole_pool(layout: str, B: int, K: int, page: int,
                                               nb: int) -> None:
    g = torch.Generator().manual_seed(B * K)
    cache = pack_fp8_ds_mla(torch.randn((nb * page, 512), generator=g) * 4, page)
    ks: torch.Tensor | None = None
    if layout == "bf16":
        cache = dequantize_reference(cache, dtype=torch.bfloat16)
    elif layout == "fp8":
        cache = (dequantize_reference(cache) / 2).to(torch.float8_e4m3fn)
        ks = torch.tensor([2.0])
    q = torch.randn((B, 8, 512), generator=g).to(torch.bfloat16)
    idx = torch.randint(0, nb * page, (B, K), generator=g, dtype=torch.int32)
    idx[torch.rand((B, K), generator=g) < 0.1] = -1  # holes
    lens = torch.randint(0, K + 1, (B,), generator=g, dtype=torch.int32)
    lens[0], lens[-1] = 0, K  # an empty request and a full one
    o, lse = sparse_mla_decode_reference(q, cache, idx, lens, 0.05, kv_scale=ks)
    ro, rl = _sparse_whole_pool(q, cache, idx, lens, 0.05, ks)
    assert torch.equal(o, ro) and torch.equal(lse, rl)
    if layout == "fp8_ds_mla":
        whole = _dequantize_whole_pool(cache)
        assert torch.equal(dequantize_reference(cache), whole)
        assert torch.equal(dequantize_reference(cache, dtype=torch.bfloat16),
                           whole.to(torch.bfloat16))
        pool = torch.full((nb, page, 1, 512), float("nan"), dtype=torch.bfloat16)
        assert dequantize_pool(cache, out=pool, use_triton=False) is pool  # written in place
        assert torch.equal(pool[:, :, 0], whole.to(torch.bfloat16))


# --- what validate reports stays the same -------------------------------------------------------


def _figures(v: Any) -> list[tuple[Any, ...]]:
    return [(r.policy, r.held_bytes, r.scaled_bytes, r.estimate_bytes, r.estimate_match,
             tuple((p.name, p.passed) for p in r.parity)) for r in v.runs]


def test_validate_reports_the_same_with_the_per_request_references(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``validate_tq`` / ``validate_mla`` on the CPU with the per-request references swapped
    back in: the same bytes and checks, the same errors to float rounding."""
    tq_kw: dict[str, Any] = {"batch": 6, "context_len": 40, "layers": 2, "device": "cpu"}
    mla_kw: dict[str, Any] = {"batch": 5, "context_len": 100, "layers": 2, "device": "cpu"}
    new_tq, new_mla = vmt.validate_tq(**tq_kw), vmt.validate_mla(**mla_kw)
    tqd = importlib.import_module("memprof.kernels.tq_decode")
    for mod in (tqd, vmt):
        monkeypatch.setattr(mod, "tq_decode_reference", tq_decode_reference_loop)
    for mod in (mla, vmt):
        monkeypatch.setattr(mod, "mla_decode_reference", mla.mla_decode_reference_loop)
    old_tq, old_mla = vmt.validate_tq(**tq_kw), vmt.validate_mla(**mla_kw)
    for new, old in ((new_tq, old_tq), (new_mla, old_mla)):
        assert new.passed and old.passed
        assert _figures(new) == _figures(old)
        for rn, ro in zip(new.runs, old.runs, strict=True):
            for pn, po in zip(rn.parity, ro.parity, strict=True):
                assert pn.rel == pytest.approx(po.rel, rel=1e-5, abs=1e-9)
                assert pn.max_abs == pytest.approx(po.max_abs, rel=1e-5, abs=1e-9)


@pytest.mark.parametrize("shape", [(10_000, 8, 128), (4097, 2, 24), (8193, 1, 5), (3, 1, 5)])
def test_chunked_random_kv_is_the_same_draw(shape: tuple[int, ...]) -> None:
    """The TurboQuant validation draws its unquantised K/V in chunks (less memory): the same
    numbers as one ``randn`` of the whole, and the generator left in the same state."""
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    whole = torch.randn(shape, generator=g1).to(torch.bfloat16)
    assert torch.equal(vmt._randn_bf16(shape, g2), whole)
    assert torch.equal(torch.randn(33, generator=g1), torch.randn(33, generator=g2))
