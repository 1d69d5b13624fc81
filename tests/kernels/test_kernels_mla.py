"""MLA decode: torch reference and the Triton kernels (interpreted on CPU) against a naive
attention written here; the decode-output policies' memory."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from memprof.kernels.mla_decode import (  # noqa: E402
    DecodeOutPolicy,
    MLAConfig,
    mla_decode,
    mla_decode_reference,
)
from memprof.kernels.workspace import Workspace  # noqa: E402

SCALE = 192 ** -0.5


def naive_mla(q, kv, bt, lens, scale):  # type: ignore[no-untyped-def]
    """float64 softmax(q·kᵀ·scale)·v, v = the first 512 columns of each cached row."""
    B, H, _ = q.shape
    page = kv.shape[1]
    out = torch.zeros((B, H, 512), dtype=torch.float64)
    for b in range(B):
        n = int(lens[b])
        if n == 0:
            continue
        rows = torch.stack([kv[int(bt[b, t // page]), t % page] for t in range(n)]).double()
        s = q[b].double() @ rows.T * scale
        w = torch.exp(s - s.max(-1, keepdim=True).values)
        out[b] = (w / w.sum(-1, keepdim=True)) @ rows[:, :512]
    return out


def make(B, H, page, lens, seed=0):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    per = [math.ceil(n / page) for n in lens]
    nb = max(1, sum(per)) + 2
    perm = torch.randperm(nb, generator=g).to(torch.int32)
    bt = torch.zeros((B, max(1, max(per))), dtype=torch.int32)
    pos = 0
    for b, n in enumerate(per):
        bt[b, :n] = perm[pos:pos + n]
        pos += n
    q = torch.randn((B, H, 576), generator=g).to(torch.bfloat16)
    kv = torch.randn((nb, page, 576), generator=g).to(torch.bfloat16)
    return q, kv, bt, torch.tensor(lens, dtype=torch.int32)


def rel(a, b):  # type: ignore[no-untyped-def]
    return float((a.double() - b).norm() / b.norm())


def test_reference_matches_naive() -> None:
    q, kv, bt, lens = make(3, 4, 16, [5, 40, 17])
    ref = mla_decode_reference(q, kv, bt, lens, SCALE, compute_dtype=torch.float64)
    assert rel(ref, naive_mla(q, kv, bt, lens, SCALE)) < 1e-12


def test_cpu_path_without_triton_is_reference() -> None:
    q, kv, bt, lens = make(2, 16, 16, [20, 3])
    out = mla_decode(q, kv, bt, lens, SCALE, use_triton=False)
    assert out.shape == (2, 16, 512) and out.dtype == torch.bfloat16
    assert rel(out, naive_mla(q, kv, bt, lens, SCALE)) < 5e-3


@pytest.mark.parametrize(("H", "lens", "splits", "cfg"), [
    (16, [70, 1, 150], 3, MLAConfig(block_n=32, block_h=16)),
    (20, [33, 64], 2, MLAConfig(block_n=16, block_h=16)),  # head mask + 2 head groups
    (16, [0, 9], 4, MLAConfig(block_n=16)),  # an empty request, empty splits
    (32, [100], 1, MLAConfig(block_n=32, block_h=32)),
])
@pytest.mark.usefixtures("interpreter")
def test_triton_interpreted_matches_naive(H, lens, splits, cfg) -> None:  # type: ignore[no-untyped-def]
    q, kv, bt, lens_t = make(len(lens), H, 32, lens, seed=H)
    out = torch.full((len(lens), H, 512), float("nan"), dtype=torch.bfloat16)  # poisoned
    mla_decode(q, kv, bt, lens_t, SCALE, out=out, num_splits=splits, config=cfg,
               use_triton=True, workspace=Workspace("cpu"))
    assert bool(torch.isfinite(out).all())
    ref = naive_mla(q, kv, bt, lens_t, SCALE)
    nonempty = [b for b, n in enumerate(lens) if n]
    assert rel(out[nonempty], ref[nonempty]) < 1e-2
    for b, n in enumerate(lens):
        if n == 0:
            assert bool((out[b] == 0).all())


@pytest.mark.usefixtures("interpreter")
def test_triton_writes_into_padded_cutlass_buffer() -> None:
    q, kv, bt, lens = make(2, 16, 32, [50, 20])
    pol = DecodeOutPolicy("shared", backend="cutlass_mla", num_heads=16)
    buf = pol.get(0, 2)
    assert buf.shape == (2, 128, 512)
    mla_decode(q, kv, bt, lens, SCALE, out=pol.heads_view(buf), num_splits=2, use_triton=True)
    assert rel(buf[:, :16], naive_mla(q, kv, bt, lens, SCALE)) < 1e-2
    assert bool((buf[:, 16:] == 0).all())


def test_bad_shapes() -> None:
    q, kv, bt, lens = make(1, 16, 16, [4])
    with pytest.raises(ValueError, match="576"):
        mla_decode(q[..., :512], kv, bt, lens, SCALE)
    with pytest.raises(ValueError, match="out must be"):
        mla_decode(q, kv, bt, lens, SCALE, out=torch.empty((1, 8, 512)))


@pytest.mark.parametrize("backend", ["cutlass_mla", "flashinfer_mla"])
def test_policy_memory_per_layer_is_O_L_shared_is_O_1(backend) -> None:  # type: ignore[no-untyped-def]
    L, B, H = 5, 3, 16
    heads = 128 if backend == "cutlass_mla" else H
    one = B * heads * 512 * 2
    per = DecodeOutPolicy("per-layer", backend=backend, num_heads=H)
    shared = DecodeOutPolicy("shared", backend=backend, num_heads=H)
    for layer in range(L):
        assert per.get(layer, B).shape == (B, heads, 512)
        assert shared.get(layer, B).shape == (B, heads, 512)
    assert (per.held_bytes, per.num_buffers) == (L * one, L)
    assert (shared.held_bytes, shared.num_buffers) == (one, 1)
    # per layer: zero-filled at first decode, regrown when the batch grows (#37442)
    assert bool((per.get(0, B) == 0).all())
    per.get(0, B + 1)
    assert per.held_bytes == (L - 1) * one + (B + 1) * heads * 512 * 2
    # shared: a smaller batch reuses the same pointer
    p = shared.get(0, B).data_ptr()
    assert shared.get(1, B - 1).data_ptr() == p


def test_per_layer_buffers_keep_distinct_results() -> None:
    q, kv, bt, lens = make(2, 16, 16, [10, 30])
    q2 = torch.randn_like(q.float()).to(torch.bfloat16)
    per = DecodeOutPolicy("per-layer", backend="flashinfer_mla", num_heads=16)
    for layer, qq in enumerate((q, q2)):
        mla_decode(qq, kv, bt, lens, SCALE, out=per.get(layer, 2), use_triton=False)
    assert rel(per.get(0, 2), naive_mla(q, kv, bt, lens, SCALE)) < 5e-3
    assert rel(per.get(1, 2), naive_mla(q2, kv, bt, lens, SCALE)) < 5e-3
