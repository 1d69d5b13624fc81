"""DeepSeek-V4 sparse MLA decode: the fp8_ds_mla page, the Triton kernel under Triton's
interpreter against the torch reference (fp8_ds_mla, fp8 + kv_scale, bf16; uneven lens, -1
padding), the scope scratch rewritten in place, and the per-step / shared policies' bytes and
graph-clean result against the estimate."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memprof.kernels.dsv4_decode import DSV4DecodeScratch  # noqa: E402
from memprof.kernels.sparse_mla_decode import (  # noqa: E402
    SLOT_BYTES,
    ScopeScratch,
    dequantize_pool,
    dequantize_reference,
    merge_scopes,
    merge_scopes_reference,
    pack_fp8_ds_mla,
    sparse_mla_decode,
    sparse_mla_decode_reference,
)
from memprof.validation.dsv4 import validate_dsv4  # noqa: E402
from memprof.validation.graph_clean import SimulatedRecorder, check_graph_clean  # noqa: E402


def _inputs(B: int = 3, H: int = 8, page: int = 4, nb: int = 6, K: int = 20, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    rows = torch.randn((nb * page, 512), generator=g)
    cache = pack_fp8_ds_mla(rows, page)
    q = torch.randn((B, H, 512), generator=g).to(torch.bfloat16)
    idx = torch.randint(0, nb * page, (B, K), generator=g, dtype=torch.int32)
    lens = torch.tensor([K, 7, 0][:B], dtype=torch.int32)
    idx[1, 7:] = -1
    idx[0, 3] = -1  # a hole inside lens
    return rows, cache, q, idx, lens


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


def test_fp8_ds_mla_page_layout() -> None:
    rows, cache, *_ = _inputs()
    assert cache.shape == (6, 4, SLOT_BYTES) and cache.dtype == torch.uint8
    # the page is data rows (576 B) first, then the 8-B scale rows: byte 4·576 starts the scales
    flat = cache.view(6, -1)
    assert int(flat[0, 4 * 576 + 7]) == 0  # the pad byte
    back = dequantize_reference(cache).reshape(-1, 512)
    assert torch.equal(back[:, 448:], rows[:, 448:].to(torch.bfloat16).float())  # RoPE exact
    assert _rel(back, rows) < 0.05  # e4m3 NoPE


def test_reference_skips_padding_and_empty_rows() -> None:
    _, cache, q, idx, lens = _inputs()
    o, lse = sparse_mla_decode_reference(q, cache, idx, lens, 0.05)
    assert torch.isneginf(lse[2]).all() and (o[2] == 0).all()
    kv = dequantize_reference(cache).reshape(-1, 512)
    sel = idx[1, :7].long()
    s = (q[1].float() @ kv[sel].T) * 0.05
    assert torch.allclose(o[1], torch.softmax(s, -1) @ kv[sel], atol=1e-5)
    assert torch.allclose(lse[1], torch.logsumexp(s, -1), atol=1e-5)


@pytest.mark.usefixtures("interpreter")
@pytest.mark.parametrize("layout", ["fp8_ds_mla", "bf16", "fp8"])
def test_triton_matches_reference(layout: str) -> None:
    _, cache, q, idx, lens = _inputs()
    ks = None
    if layout == "bf16":
        cache = dequantize_reference(cache, dtype=torch.bfloat16)
    elif layout == "fp8":
        cache = (dequantize_reference(cache) / 2).to(torch.float8_e4m3fn)
        ks = torch.tensor([2.0])
    ro, rl = sparse_mla_decode_reference(q, cache, idx, lens, 0.05, kv_scale=ks)
    o, lse = sparse_mla_decode(q, cache, idx, lens, 0.05, kv_scale=ks, use_triton=True)
    assert o.dtype == torch.bfloat16 and lse.dtype == torch.float32
    assert _rel(o, ro) < 1e-2
    assert torch.isneginf(lse[2]).all() and torch.allclose(lse[:2], rl[:2], atol=1e-4)


@pytest.mark.usefixtures("interpreter")
def test_scratch_is_rewritten_in_place() -> None:
    _, cache, q, idx, lens = _inputs()
    s = ScopeScratch(3, 8, 32, "cpu")
    ptrs = {k: t.data_ptr() for k, t in s.tensors().items()}
    o, lse = sparse_mla_decode(q, cache, idx, lens, 0.05, scratch=s, use_triton=True)
    assert o.data_ptr() == s.out_buf.data_ptr() and lse.data_ptr() == s.lse.data_ptr()
    assert s.valid_lens.tolist() == [19, 7, 0]  # the hole and the padding do not count
    assert s.indptr[1].tolist() == [0, 19, 26, 26] and s.indptr[0].tolist() == [0, 1, 2, 3]
    assert (s.kv_indices[1, 7:20] == -1).all()
    lens2 = torch.tensor([5, 20, 1], dtype=torch.int32)
    sparse_mla_decode(q, cache, idx, lens2, 0.05, scratch=s, use_triton=True)
    assert {k: t.data_ptr() for k, t in s.tensors().items()} == ptrs
    ro, _ = sparse_mla_decode_reference(q, cache, idx, lens2, 0.05)
    assert _rel(s.out_buf, ro) < 1e-2
    with pytest.raises(ValueError, match="topk"):
        sparse_mla_decode(q, cache, torch.zeros((3, 40), dtype=torch.int32), lens, 0.05,
                          scratch=s)


@pytest.mark.usefixtures("interpreter")
def test_pool_dequant_and_merge_kernels() -> None:
    _, cache, q, idx, lens = _inputs()
    out = torch.empty((6, 4, 1, 512), dtype=torch.bfloat16)
    dequantize_pool(cache, out=out, use_triton=True)
    assert torch.equal(out[:, :, 0], dequantize_reference(cache, dtype=torch.bfloat16))
    o1, l1 = sparse_mla_decode(q, cache, idx, lens, 0.05, use_triton=True)
    o2, l2 = sparse_mla_decode(q, cache, idx.flip(1).contiguous(), lens, 0.05, use_triton=True)
    m = merge_scopes(o1, l1, o2, l2, torch.empty_like(o1), use_triton=True)
    ref = merge_scopes_reference(o1, l1, o2, l2)
    assert float((m.float() - ref).abs().max()) < 1e-2 and (m[2] == 0).all()


def test_bad_inputs_raise() -> None:
    _, cache, q, idx, lens = _inputs()
    with pytest.raises(ValueError, match="q must be"):
        sparse_mla_decode(q[..., :256], cache, idx, lens, 0.1)
    with pytest.raises(ValueError, match="int32"):
        sparse_mla_decode(q, cache, idx.long(), lens, 0.1)
    with pytest.raises(ValueError, match="not a DeepSeek-V4 cache"):
        sparse_mla_decode(q, cache[..., :500], idx, lens, 0.1)
    with pytest.raises(ValueError, match="kv_scale"):
        sparse_mla_decode(q, cache, idx, lens, 0.1, kv_scale=torch.ones(1))


def _policy_step(policy: str):
    _, swa, q, idx, lens = _inputs(page=64, nb=2, K=16)
    _, c4, *_ = _inputs(page=64, nb=2, K=16, seed=1)
    h = DSV4DecodeScratch(policy, tokens=3, heads=8, swa_topk=16, extra_topk=16,
                          swa_pool=(2, 64), extra_pools={"C4": (2, 64)}, device="cpu")
    out = torch.zeros((3, 8, 512), dtype=torch.bfloat16)

    def step() -> None:
        for layer in range(3):
            h.decode_layer(layer, "C4", q, 0.05, swa, idx, lens, c4, idx, lens, out,
                           use_triton=False)
    return h, step, out, idx, lens


@pytest.mark.parametrize("policy", ["per-step", "shared"])
def test_pointer_stability_with_a_fake_recorder(policy: str) -> None:
    h, step, out, _idx, lens = _policy_step(policy)
    g = torch.Generator().manual_seed(3)

    def set_inputs(i: int) -> None:
        lens.copy_(torch.randint(0, 17, (3,), generator=g, dtype=torch.int32))

    r = check_graph_clean(SimulatedRecorder(h.counter), step, set_inputs, [out], h.tracked, 4)
    assert r.outputs_equal and r.steps == 4
    if policy == "shared":
        assert r.clean and r.replay_allocations == 0 and r.num_pointers_changed == 0
        assert r.pool_bytes == 0 and r.pointers_tracked == 21  # 2 scopes × 10 + workspace
    else:
        assert not r.clean and r.replay_allocations == 4 * 3 * 24  # 4 dequant + 2×10 per layer
        assert r.pool_bytes == 3 * (h.last_call_bytes + h.last_call_extra)
        assert any("allocations" in w for w in r.what_changed)


def test_validate_dsv4_cpu_equals_the_estimate() -> None:
    r = validate_dsv4(batch=2, context_len=256, layers=2)
    assert r.passed and r.parity_passed and r.memory_passed and r.graph_passed
    assert dict(r.layer_kinds) == {"SWA-only": 2, "C4": 21, "C128": 20}
    assert len(r.runs) == 2
    by = {x.policy: x for x in r.runs}
    assert by["per-step"].layers_run == 4  # layers 0-1 plus the first C4 and C128 layers
    assert by["per-step"].measured_bytes == by["per-step"].estimate_bytes
    assert by["shared"].measured_bytes == by["shared"].estimate_bytes
    assert all(p.equal for p in by["shared"].parts)
    assert by["shared"].measured_bytes * 20 < by["per-step"].measured_bytes
    g = by["per-step"].graph
    assert g is not None and not g.clean and "simulated" in g.mode
    assert any("skipped" in n for n in r.notes)  # CUDA-only parts say they did not run


def test_validate_dsv4_pro() -> None:
    r = validate_dsv4(model="deepseek-v4-pro", batch=1, context_len=128, layers=1,
                      check_graph=False)
    assert r.memory_passed and r.parity_passed and r.heads == 16
    assert dict(r.topk)["C4"] == 1024 and "SWA-only" not in dict(r.layer_kinds)
    assert r.graph_passed is None


@pytest.mark.gpu
def test_dsv4_on_cuda() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    r = validate_dsv4(batch=8, context_len=2048, layers=2, device="cuda", graph_steps=100,
                      reps=3, rounds=2)
    assert r.triton and r.parity_passed and r.memory_passed and r.graph_passed
