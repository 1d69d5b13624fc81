"""TurboQuant k8v4: slot layout, quantiser, reference and Triton decode (interpreted on CPU)
against a naive attention written here; per-layer vs shared decode buffers."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from memprof.core.kvcache import tq_slot_bytes  # noqa: E402
from memprof.kernels.tq_decode import (  # noqa: E402
    TQDecodeBuffers,
    k8v4_layout,
    tq_buffer_specs,
    tq_cache_shape,
    tq_decode,
    tq_decode_reference,
    tq_dequant_k8v4,
    tq_store_k8v4,
)
from memprof.kernels.workspace import aligned_layout  # noqa: E402
from memprof.validation.mla_tq import tq_shared_bytes  # noqa: E402


def test_slot_layout_k8v4_d128() -> None:
    lay = k8v4_layout(128)
    assert lay == {"key": 0, "value": 128, "scale": 192, "zero": 194, "slot": 196}
    assert tq_slot_bytes("turboquant_k8v4", 128) == 196
    assert tq_cache_shape(10, 16, 8, 128) == (10, 16, 8, 196)
    assert tq_cache_shape(10, 16, 8, 128, "head_major") == (10, 8, 16, 196)


def test_store_bytes_are_vllm_layout() -> None:
    k = torch.randn((1, 1, 128)).to(torch.bfloat16)
    v = torch.linspace(-1.0, 2.0, 128).view(1, 1, 128)
    cache = torch.zeros(tq_cache_shape(1, 4, 1, 128), dtype=torch.uint8)
    tq_store_k8v4(k, v, cache, torch.tensor([2]))
    slot = cache[0, 2, 0]
    assert torch.equal(slot[:128], k[0, 0].float().to(torch.float8_e4m3fn).view(torch.uint8))
    scale = slot[192:194].clone().view(torch.float16).item()
    zero = slot[194:196].clone().view(torch.float16).item()
    assert scale == pytest.approx(3.0 / 15, rel=1e-3) and zero == pytest.approx(-1.0, rel=1e-3)
    assert int(slot[128]) & 0xF == 0 and int(slot[128 + 63]) >> 4 == 15  # first/last codes
    assert bool((cache[0, [0, 1, 3]] == 0).all())  # other slots untouched


def test_dequant_error_within_half_a_step() -> None:
    g = torch.Generator().manual_seed(1)
    k = torch.randn((6, 2, 64), generator=g)
    v = torch.randn((6, 2, 64), generator=g) * 3
    cache = torch.zeros(tq_cache_shape(2, 4, 2, 64), dtype=torch.uint8)
    tq_store_k8v4(k, v, cache, torch.tensor([0, 1, 2, 3, 4, -1]))
    kd, vd = tq_dequant_k8v4(cache.view(-1, 2, cache.shape[-1])[:5], 64)
    step = (v[:5].amax(-1) - v[:5].amin(-1)) / 15
    assert bool(((vd - v[:5]).abs() <= step[..., None] / 2 + 2e-2).all())
    assert float((kd - k[:5]).abs().max()) < 0.15 * float(k.abs().max())


def naive_gqa(q, k, v, scale):  # type: ignore[no-untyped-def]
    """q (Hq, D), k/v (n, Hkv, D) -> (Hq, D) in float64."""
    hq, hkv = q.shape[0], k.shape[1]
    g = hq // hkv
    out = torch.empty((hq, q.shape[1]), dtype=torch.float64)
    for h in range(hq):
        s = k[:, h // g].double() @ q[h].double() * scale
        out[h] = torch.softmax(s, 0) @ v[:, h // g].double()
    return out


def build(B, hq, hkv, d, page, lens, layout="token_major", seed=0):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    per = [max(1, math.ceil(n / page)) for n in lens]
    nb = sum(per) + 1
    perm = torch.randperm(nb, generator=g).to(torch.int32)
    bt = torch.zeros((B, max(per)), dtype=torch.int32)
    pos = 0
    for b, n in enumerate(per):
        bt[b, :n] = perm[pos:pos + n]
        pos += n
    k = torch.randn((nb * page, hkv, d), generator=g).to(torch.bfloat16)
    v = torch.randn((nb * page, hkv, d), generator=g).to(torch.bfloat16)
    cache = torch.zeros(tq_cache_shape(nb, page, hkv, d, layout), dtype=torch.uint8)
    tq_store_k8v4(k, v, cache, torch.arange(nb * page), layout=layout)
    q = torch.randn((B, hq, d), generator=g).to(torch.bfloat16)
    return q, cache, bt, torch.tensor(lens, dtype=torch.int32), k, v


def rows_of(bt, b, n, page):  # type: ignore[no-untyped-def]
    pos = torch.arange(n)
    return bt[b, pos // page].long() * page + pos % page


@pytest.mark.parametrize("layout", ["token_major", "head_major"])
def test_reference_matches_naive_over_dequantised(layout) -> None:  # type: ignore[no-untyped-def]
    q, cache, bt, lens, _, _ = build(2, 8, 2, 64, 16, [20, 37], layout)
    out, lse = tq_decode_reference(q, cache, bt, lens, 0.125, layout=layout,
                                   compute_dtype=torch.float64)
    flat = cache if layout == "token_major" else cache.transpose(1, 2)
    flat = flat.reshape(-1, 2, cache.shape[-1])
    for b, n in enumerate(lens.tolist()):
        kd, vd = tq_dequant_k8v4(flat[rows_of(bt, b, n, 16)], 64)
        exp = naive_gqa(q[b], kd, vd, 0.125)
        assert float((out[b] - exp).abs().max()) < 1e-10
    assert lse.shape == (2, 8)


@pytest.mark.parametrize(("lens", "splits", "layout", "block_n"), [
    ([40, 1, 90], 4, "token_major", 16),
    ([0, 33], 8, "head_major", 8),  # empty request, empty splits
    ([64], 1, "token_major", 16),
])
@pytest.mark.usefixtures("interpreter")
def test_triton_interpreted_matches_naive(lens, splits, layout, block_n) -> None:  # type: ignore[no-untyped-def]
    B, hq, hkv, d, page = len(lens), 8, 2, 64, 16
    q, cache, bt, lens_t, k, v = build(B, hq, hkv, d, page, lens, layout)
    bufs = tuple(torch.full(shape, float("nan"), dtype=dt)
                 for shape, dt in tq_buffer_specs(B, hq, d, splits))
    out, lse = tq_decode(q, cache, bt, lens_t, d ** -0.5, num_kv_splits=splits,
                         buffers=bufs, layout=layout, block_n=block_n, use_triton=True)
    assert out.data_ptr() == bufs[1].data_ptr()
    ref_o, ref_lse = tq_decode_reference(q, cache, bt, lens_t, d ** -0.5, layout=layout,
                                         compute_dtype=torch.float64)
    for b, n in enumerate(lens):
        if n == 0:
            assert bool((out[b] == 0).all()) and bool(torch.isinf(lse[b]).all())
            continue
        assert float((out[b] - ref_o[b]).norm() / ref_o[b].norm()) < 1e-5
        assert float((lse[b] - ref_lse[b]).abs().max()) < 1e-4
        rows = rows_of(bt, b, n, page)
        plain = naive_gqa(q[b], k[rows], v[rows], d ** -0.5)  # unquantised K/V
        assert float((out[b] - plain).norm() / plain.norm()) < 0.3


def test_buffers_per_layer_O_L_shared_O_1() -> None:
    L, B, hq, d, S = 4, 3, 8, 64, 32
    one = sum(math.prod(s) * dt.itemsize for s, dt in tq_buffer_specs(B, hq, d, S))
    per = TQDecodeBuffers("per-layer", num_layers=L, max_batch=B, num_q_heads=hq, head_dim=d)
    sh = TQDecodeBuffers("shared", num_layers=L, max_batch=B, num_q_heads=hq, head_dim=d)
    assert (per.held_bytes, per.num_sets) == (L * one, L)  # registered at construction
    assert sh.held_bytes == aligned_layout(tq_buffer_specs(B, hq, d, S))[1]
    assert sh.num_sets == 1 and sh.workspace.num_grows == 1
    p = sh.get(0, B)[0].data_ptr()
    assert sh.get(3, B - 1)[0].data_ptr() == p and sh.workspace.num_grows == 1
    assert per.get(0, B)[0].data_ptr() != per.get(1, B)[0].data_ptr()
    with pytest.raises(ValueError, match="max_batch"):
        sh.get(0, B + 1)


def test_qwen3_32b_set_matches_catalog() -> None:
    """One TurboQuant decode set for Qwen3-32B, --max-num-seqs 256 (seed 001)."""
    assert tq_shared_bytes(256, 64, 128) == 278_986_752
