"""The V1 sampler's cached Triton top-k/top-p row buffer, sized by the card's compute units
(``sampler_triton_buffer_rows`` in memprof/core/terms/activation.py).

vLLM 0.17.0 – 0.19.0 ``v1/sample/ops/topk_topp_triton.py`` ``apply_top_k_top_p_triton``:
``num_sm = num_compute_units(device)`` (``multi_processor_count``), ``NUM_PROGRAMS =
min(num_sm, batch_size)``, the buffer ``min(next_power_of_2(NUM_PROGRAMS), num_sm)`` rows of the
vocabulary in fp32. The hand counts below follow those three lines."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import resolve_gpu
from memprof.core.terms.activation import sampler_triton_buffer_rows

V = 128_256  # llama-3.1-8b's vocabulary
LLAMA = dict(engine_version="0.17.1", max_model_len=8192, max_num_seqs=256,
             max_num_batched_tokens=2048)


@pytest.mark.parametrize(("gpu", "rows", "want"), [
    ("H100", 256, 132),      # min(256, 132) = 132 programs; next_power_of_2 256, capped at 132
    ("RTX-3090", 256, 82),   # 82 SMs
    ("L4", 256, 58),         # 58 SMs
    ("A100-80GB", 256, 108),  # 108 SMs
    ("H100-PCIe", 256, 114),  # 114 SMs
    ("RTX-3090", 40, 64),    # 40 programs: next_power_of_2 64 ≤ 82
    ("RTX-3090", 70, 82),    # next_power_of_2(70) = 128, capped at 82
    ("H100", 100, 128),      # next_power_of_2(100) = 128 ≤ 132
    ("H100", 8, 8),          # a power of two stays
])
def test_rows_are_the_kernels_hand_count(gpu: str, rows: int, want: int) -> None:
    assert sampler_triton_buffer_rows(resolve_gpu(gpu, None), rows)[0] == want


def test_a_card_without_a_compute_unit_count_keeps_the_h100s_and_says_so() -> None:
    # every catalog row states its count; a card described by --gpu-memory has none
    for arch in ("gfx942", "sm100"):
        gpu = resolve_gpu(None, 100 << 30, arch)
        assert gpu.sm_count is None
        rows, how = sampler_triton_buffer_rows(gpu, 256)
        assert rows == 132
        assert "assumed" in how and gpu.name in how


def _peak(gpu: str) -> tuple[int, str]:
    e = estimate("llama-3.1-8b", Deployment(**LLAMA), gpu_name=gpu)  # type: ignore[arg-type]
    (peak,) = [c for c in e.ranks[0].components if c.name == "activation peak (profile run)"]
    return peak.bytes, peak.formula


def test_the_activation_peak_moves_by_the_buffer_rows_only() -> None:
    h100, formula = _peak("H100")
    assert "[132,V] fp32 64.58 MiB" in formula  # 132 × 128,256 × 4 B
    for gpu, sms in (("RTX-3090", 82), ("L4", 58), ("A100-80GB", 108)):
        got, formula = _peak(gpu)
        assert f"[{sms},V] fp32 ({sms} SMs)" in formula
        assert h100 - got == (132 - sms) * V * 4, gpu  # RTX 3090: 25,651,200 B (24.5 MiB)


def _traced_peak(gpu: str) -> tuple[int, int]:
    import contextlib
    import io
    import json

    from memprof.cli import run

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = run(["trace", "-m", "qwen3-0.6b", "--gpu", gpu, "--engine-version", "0.17.1",
                    "--max-model-len", "4096", "--max-num-seqs", "256",
                    "--max-num-batched-tokens", "2048", "--device", "fake", "-f", "json"])
    assert code == 0
    (peak,) = [c for c in json.loads(out.getvalue())["components"]
               if c["name"] == "activation peak (profile run)"]
    return peak["estimated_bytes"], peak["traced_bytes"]


def test_the_replica_allocates_the_same_rows_as_the_estimate() -> None:
    pytest.importorskip("torch")
    h100, rtx = _traced_peak("H100"), _traced_peak("RTX-3090")
    # (132 − 82) rows × qwen3-0.6b's 151,936 vocab × 4 B, in the estimate and in the trace
    assert h100[0] - rtx[0] == (132 - 82) * 151_936 * 4 == 30_387_200
    assert h100[1] - rtx[1] == 30_387_200
