"""The validation runner on the CPU reference path: parity, per-layer O(L) vs shared O(1) scratch
scaled to the model, next to the estimate's catalog bytes."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from memprof.validation.mla_tq import validate_mla, validate_tq  # noqa: E402


def test_mla_r1_tp8_cpu() -> None:
    B = 4
    r = validate_mla(batch=B, context_len=96, layers=3, device="cpu")
    assert dataclasses.is_dataclass(r) and r.passed and r.parity_passed and r.memory_passed
    assert (r.heads, r.triton) == (16, False)
    by = {run.policy: run for run in r.runs}
    one = B * 128 * 512 * 2  # cutlass pads heads to 128
    assert by["per-layer"].held_bytes == 3 * one
    assert by["per-layer"].scaled_bytes == 61 * one == by["per-layer"].estimate_bytes
    assert by["shared"].held_bytes == one == by["shared"].estimate_bytes
    assert r.shared_over_per_layer is None and r.bandwidth is None  # no CUDA


def test_mla_flashinfer_unpadded() -> None:
    r = validate_mla(backend="flashinfer_mla", batch=2, context_len=64, layers=2)
    by = {run.policy: run for run in r.runs}
    assert by["shared"].held_bytes == 2 * 16 * 512 * 2
    assert by["per-layer"].estimate_match and by["shared"].estimate_match


def test_tq_qwen3_32b_cpu() -> None:
    B = 2
    r = validate_tq(batch=B, context_len=48, layers=2, device="cpu")
    assert r.passed, r
    assert (r.heads, r.kv_heads, r.num_splits) == (64, 8, 32)
    by = {run.policy: run for run in r.runs}
    one = B * 64 * 32 * 129 * 4 + B * 64 * 128 * 4 + B * 64 * 4
    assert by["per-layer"].held_bytes == 2 * one
    assert by["per-layer"].scaled_bytes == 60 * one == by["per-layer"].estimate_bytes
    assert by["shared"].held_bytes == by["shared"].estimate_bytes
    names = [p.name for p in by["shared"].parity]
    assert any("unquantised" in n for n in names)


@pytest.mark.gpu
@pytest.mark.usefixtures("interpreter")
def test_mla_and_tq_on_cuda() -> None:
    r = validate_mla(batch=8, context_len=2048, layers=2, device="cuda", reps=3, rounds=2)
    assert r.triton and r.parity_passed and r.memory_passed
    t = validate_tq(batch=8, context_len=1024, layers=2, device="cuda", reps=3, rounds=2)
    assert t.triton and t.parity_passed and t.memory_passed
