"""vLLM V0's eager profile run keeps the layer loop's input alive through the MLP, and a
family's MLP holds or frees gate_up by how its forward names it
(memprof/core/terms/v0_eager_forward.py, ``Family.v0_mlp_gate_up``).

Hand calculations of the MLP stage of a rank that does not sample (TP rank 1: V0 samples on the
driver only), checked against the peak the engine logged where a published row prints one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memprof.base.units import GiB
from memprof.core.components import Component
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import gpu_from_total
from memprof.core.models.families import ROWS
from memprof.core.terms.activation import CUBLAS_WORKSPACE_HOPPER_PLUS, CUBLAS_WORKSPACE_OLDER
from memprof.core.terms.v0_eager_forward import V0_EAGER_LAYER_INPUT
from memprof.core.version_diff import RULEBOOK

PUBLISHED = Path(__file__).parent / "data" / "published.json"


def _row(row_id: int) -> dict[str, Any]:
    rows = json.loads(PUBLISHED.read_text())
    rows = rows if isinstance(rows, list) else rows["rows"]
    (row,) = [r for r in rows if r["id"] == row_id]
    return dict(row)


def _peak(comps: tuple[Component, ...] | list[Component]) -> Component:
    (peak,) = [c for c in comps if c.name == "activation peak (profile run)"]
    return peak


def test_row_1203_worker_peak_is_five_hidden_states_and_the_kept_gate_up() -> None:
    # Qwen2.5-32B-Instruct, TP 2, vLLM 0.7.1 V0, max_model_len 10000 (chunked prefill off:
    # T = 10,000). The non-driver worker runs no sampler; its peak is the MLP stage: residual,
    # the loop's layer input, the MLP input, down_proj out and the all-reduce's out-of-place
    # output, 5 × [T, 5120] bf16, + Qwen2MLP's gate_up [T, 2·27648/2] and act [T, 27648/2]
    row = _row(1203)
    t, h, i_l = 10_000, 5120, 27_648 // 2
    want = 5 * t * h * 2 + t * 2 * i_l * 2 + t * i_l * 2
    assert want == 1_341_440_000
    dep = Deployment(engine_version="0.7.1", tp=2, max_model_len=10_000)
    e = estimate("Qwen/Qwen2.5-32B-Instruct", dep,
                 gpu=gpu_from_total(row["observed"]["total_gpu_memory_gib"] * GiB))
    worker = e.ranks[1]
    peak = _peak(worker.components)
    assert peak.bytes == want
    assert "V0 eager, gate_up kept" in peak.formula
    # with the sm89 cuBLAS workspace it prints as the log's worker line; two [T, H] fewer (no
    # held input, no kept down_proj out) would print 1.16
    logged = row["observed"]["activation_peak_gib"]
    assert round((want + CUBLAS_WORKSPACE_OLDER) / GiB, 2) == logged == 1.26
    assert round((want - 1 * t * h * 2 + CUBLAS_WORKSPACE_OLDER) / GiB, 2) == 1.16


def test_llama_mlp_frees_gate_up_from_0_6_4_and_keeps_it_before() -> None:
    # Llama-3.1-8B, TP 2, T = 16,384: H = 4096, I/tp = 7168
    t, h, i_l = 16_384, 4096, 14_336 // 2
    held = 3 * t * h * 2  # residual, the loop's layer input, the MLP input
    rebound = held + max(t * 3 * i_l * 2, t * i_l * 2 + 2 * t * h * 2)
    kept = held + t * 3 * i_l * 2 + 2 * t * h * 2
    for version, want, form in (("0.7.1", rebound, "rebound"), ("0.6.3", kept, "kept")):
        dep = Deployment(engine_version=version, tp=2, max_model_len=16_384)
        peak = _peak(estimate("llama-3.1-8b", dep, gpu_name="H100-80GB").ranks[1].components)
        assert (peak.bytes, f"gate_up {form}" in peak.formula) == (want, True), version


def test_v1_profile_run_is_unchanged() -> None:
    # V1 (0.8.0 on, by default) runs the compiled model: no held layer input, memprof's V1
    # dense stage (residual + MLP input + gate_up + act + down out + all-reduce out)
    t, h, i_l = 16_384, 4096, 14_336 // 2
    # (one row sampled, so that the MLP stage is the peak on every rank, all of which sample)
    dep = Deployment(engine_version="0.8.5", tp=2, max_model_len=16_384,
                     max_num_batched_tokens=16_384, max_num_seqs=1)
    e = estimate("llama-3.1-8b", dep, gpu_name="H100-80GB")
    assert not any(r.holds("0.8.5") for r in V0_EAGER_LAYER_INPUT)
    peak = _peak(e.ranks[0].components)
    assert "dense MLP:" in peak.formula and "held" not in peak.formula
    assert peak.bytes == 2 * t * h * 2 + t * 3 * i_l * 2 + 2 * t * h * 2


def test_row_1304_moe_stage_holds_the_layer_input() -> None:
    # DeepSeek-R1, TP 8, vLLM 0.7.3 V0, max_num_batched_tokens 32,000: the MoE stage holds the
    # loop's layer input [T, 7168] bf16 beside the residual and the MoE input; the peak with the
    # H200's cuBLAS workspace lands within 0.05 GiB of the logged 6.37 GiB (0.38 GiB below it
    # without the held input)
    row = _row(1304)
    t, h = 32_000, 7168
    dep = Deployment(engine_version="0.7.3", tp=8, max_model_len=128_000,
                     max_num_batched_tokens=32_000, max_num_seqs=1024,
                     gpu_memory_utilization=0.85)
    e = estimate("deepseek-r1", dep,
                 gpu=gpu_from_total(row["observed"]["total_gpu_memory_gib"] * GiB))
    peak = _peak(e.ranks[1].components)
    assert peak.formula.split("= ")[1].startswith("MoE")
    assert f"layer input held by the layer loop [T,H] {t * h * 2 / 2**20:.2f} MiB" in peak.formula
    got = (peak.bytes + CUBLAS_WORKSPACE_HOPPER_PLUS) / GiB
    logged = row["observed"]["activation_peak_gib"]
    assert abs(got - logged) < 0.05
    assert got - t * h * 2 / GiB < logged - 0.3


def test_rows_are_in_the_rulebook_and_v0_only() -> None:
    family_rows = [f.v0_mlp_gate_up for f in ROWS if f.v0_mlp_gate_up]
    assert len(family_rows) >= 8
    for rows in (V0_EAGER_LAYER_INPUT, *family_rows):
        assert rows in RULEBOOK
        assert all(r.generation == "v0" for r in rows)
