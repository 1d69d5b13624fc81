"""The V0 driver's sampler in the profile run on the chunked-prefill path (vLLM 0.7.x, V0, a
max_model_len above 32K: ``V0_DRIVER_SAMPLER`` in memprof/core/terms/activation.py).

vLLM 0.7.1 turns chunked prefill on for a text model whose max_model_len exceeds 32,768
(engine/arg_utils.py ``create_engine_config``: ``use_long_context``), which makes
``max_num_batched_tokens`` 2048 (config.py ``SchedulerConfig.__post_init__``). The profile run
(worker/model_runner.py ``_dummy_run``) then builds ``max_num_seqs`` = 256 dummy prompts of
2048 // 256 = 8 tokens, each with ``SamplingParams(top_p=0.99, top_k=vocab_size - 1)`` and
``do_sample`` True (model_executor/sampling_metadata.py ``_prepare_seq_groups``: one sampled row
per prompt), so the driver samples 256 rows and ``Sampler.forward`` sorts them
(``_apply_top_k_top_p``; the FlashInfer sampler only with ``VLLM_USE_FLASHINFER_SAMPLER=1``,
whose default in 0.7.1 envs.py is None).

Published row 48 (vLLM 0.7.2, DeepSeek-R1-Distill-Qwen-14B, TP 2 on two RTX 4090s, max_model_len
131072) shows it: its memory line is a non-driver worker's (activation peak 0.19 GiB, KV 8.69 GiB)
while its token count (81,536) is the engine's minimum over the ranks, i.e. the driver's; the
difference between the two is the driver's sampler. Published row 801 (an OCI container of vLLM
0.7.1 on an A10, same path) logs a 0.22 GiB peak on its only rank, which stock 0.7.1 cannot give
at 256 rows (see that row's notes)."""

from __future__ import annotations

import json
from pathlib import Path

from memprof.base.units import GiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate

PUBLISHED = Path(__file__).parent / "data" / "published.json"
T, R = 2048, 256  # max_num_batched_tokens (chunked prefill), max_num_seqs


def _peak(model: str, dep: Deployment, gpu: str) -> tuple[int, str]:
    e = estimate(model, dep, gpu_name=gpu)
    (peak,) = [c for c in e.ranks[0].components if c.name == "activation peak (profile run)"]
    return peak.bytes, peak.formula


def _row(row_id: int) -> dict[str, object]:
    rows = json.loads(PUBLISHED.read_text())
    rows = rows if isinstance(rows, list) else rows["rows"]
    (row,) = [r for r in rows if r["id"] == row_id]
    return dict(row)


def test_the_long_context_profile_run_samples_256_rows_with_the_sort() -> None:
    # Llama-3.1-8B at 0.7.1, max_model_len 131072: T = 2048, R = 256; the sampler stage holds
    # the last hidden [T, H] bf16, the logits [R, V] bf16 and, at the sort, the fp32 copy (4),
    # the sorted values (4) and int64 indices (8) and the sort's temporaries (20 a element at
    # 128 rows or more): 36·R·V
    h, v = 4096, 128_256
    want = T * h * 2 + R * v * 2 + 36 * R * v
    assert want == 1_264_451_584  # 1.18 GiB
    got, formula = _peak("llama-3.1-8b", Deployment(engine_version="0.7.1",
                                                     max_model_len=131072), "A10G")
    assert (got, formula.split(";")[0]) == (want, f"T={T}, R={R}")
    # at a 16K context chunked prefill stays off: T = 16384 and the dense MLP outgrows the sampler
    got16, formula16 = _peak("llama-3.1-8b", Deployment(engine_version="0.7.1",
                                                         max_model_len=16384), "A10G")
    assert formula16.startswith("T=16384, R=256") and "dense MLP" in formula16
    assert got16 > want


def test_row_48_driver_peak_is_the_sorting_sampler() -> None:
    row = _row(48)
    obs = row["observed"]
    assert isinstance(obs, dict)
    # per-token KV bytes of a rank: 48 layers × 8 KV heads / TP 2 × 128 × (K + V) × 2 B
    per_token = 48 * (8 // 2) * 128 * 2 * 2
    driver_kv = obs["kv_tokens"] * per_token
    # the driver's peak = the worker's logged peak + what the driver's KV lacks beside the
    # worker's logged KV (both ranks load the same weights and build the same communicator)
    driver_peak = (obs["activation_peak_gib"] + obs["kv_cache_gib"]) * GiB - driver_kv
    assert 1.40 * GiB < driver_peak < 1.43 * GiB  # the log's two-decimal GiB figures
    got, formula = _peak("deepseek-r1-distill-qwen-14b",
                         Deployment(engine_version="0.7.2", tp=2, max_model_len=131072,
                                    gpu_memory_utilization=0.98), "RTX-4090")
    assert "sampler (V0 driver)" in formula
    # memprof's activation peak plus the cuBLAS workspace (8 MiB + 128 KiB on sm89), both in
    # the torch peak the driver logs; within the log's rounding (±0.01 GiB) and one block
    cublas = 8 * 2**20 + 128 * 2**10
    assert abs(got + cublas - driver_peak) < 0.02 * GiB
