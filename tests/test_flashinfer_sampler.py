"""The V1 sampler warm-up through FlashInfer (``--vllm-use-flashinfer-sampler 1``,
``V1_FLASHINFER_SAMPLER`` in memprof/core/terms/activation.py): vLLM 0.9.0 – 0.11.0 sample the
profile run's dummy requests with ``flashinfer.sampling.top_k_top_p_sampling_from_logits`` when
FlashInfer is installed, with no torch sort; 0.8.x (FlashInfer < 0.2.3) samples fp32 probs by
rejection with ``top_k_top_p_sampling_from_probs``, which FlashInfer 0.2.0–0.2.2 runs top-k first
(``top_k_renorm_probs``: a new fp32 [R, V]) before sampling.

The calibration case is published row 521 (vLLM 0.10.1.1, Qwen2-7B-Instruct on an A100 80GB,
utilisation 0.25; the log prints "Using FlashInfer for top-p & top-k sampling."): the log's
non-KV charge is 0.25 × total − 14.25 − 5.01 ≈ 0.57 GiB; with the torch sort memprof charged
1.55 GiB."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.probes.serve_command import parse_tokens

QWEN = dict(engine_version="0.10.1.1", max_model_len=16384, gpu_memory_utilization=0.25)
R, V, H, T = 256, 152_064, 3584, 2048  # max_num_seqs, vocab, hidden, max_num_batched_tokens


def _activation(**kw: object) -> int:
    e = estimate("qwen2.5-7b-instruct", Deployment(**{**QWEN, **kw}),  # type: ignore[arg-type]
                 gpu_name="A100-80GB")
    (peak,) = [c for c in e.ranks[0].components if c.name == "activation peak (profile run)"]
    return peak.bytes


def test_the_flashinfer_stage_is_a_hand_count() -> None:
    # hidden [T, H] bf16 + the last rows [R, H] and their rand_like (V1_SAMPLER_HIDDEN from
    # 0.9.2) + logits [R, V] bf16 + fp32 logits, top-k-masked logits and probs (3 × 4 B per
    # element)
    want = T * H * 2 + 2 * R * H * 2 + R * V * 2 + 12 * R * V
    assert want == 563_347_456  # 537.25 MiB
    assert _activation(vllm_use_flashinfer_sampler=1) == want
    # TP 2: the same; the local shard [R, V/2] is freed once the all-gather returns
    # (activation.LOGITS_SHARD_FREED)
    assert _activation(vllm_use_flashinfer_sampler=1, tp=2) == want
    for v in ("0.10.2", "0.11.0"):  # the rule's other releases read
        assert _activation(vllm_use_flashinfer_sampler=1, engine_version=v) == want, v
    # 0.9.0: _dummy_run returns only the last rows [R, H]; the sampler adds their rand_like
    assert (_activation(vllm_use_flashinfer_sampler=1, engine_version="0.9.0")
            == want - T * H * 2)


def test_the_08_path_samples_the_probs_by_rejection() -> None:
    """0.8.0–0.8.5.post1 (FlashInfer < 0.2.3): fp32 logits and fp32 probs (``flashinfer_sample``
    on the probs ``forward_cuda`` made), and the top-k-renormed probs FlashInfer 0.2.0–0.2.2's
    ``top_k_top_p_sampling_from_probs`` makes first (``filter_apply_order="top_k_first"``):
    12 B per element, not the 8 B of a fused kernel."""
    # 0.8.x holds only the last rows [R, H] of the hidden states (V1_SAMPLER_HIDDEN)
    want = R * H * 2 + R * V * 2 + 12 * R * V
    for v in ("0.8.0", "0.8.2", "0.8.5.post1"):
        got = _activation(vllm_use_flashinfer_sampler=1, engine_version=v, max_num_seqs=R,
                          max_num_batched_tokens=T)
        assert got == want, v


def test_the_torch_sort_stays_the_default_and_costs_more() -> None:
    torch_sort = _activation()
    assert _activation(vllm_use_flashinfer_sampler=0) == torch_sort
    assert torch_sort > _activation(vllm_use_flashinfer_sampler=1) + 800 * 2**20


def test_row_521_moves_to_the_log() -> None:
    e = estimate("qwen2.5-7b-instruct", Deployment(**QWEN, vllm_use_flashinfer_sampler=1),  # type: ignore[arg-type]
                 gpu_name="A100-80GB")
    logged = 93_872
    assert abs(e.kv_cache_tokens - logged) / logged < 0.03  # -19.7% with the torch sort


def test_refusals() -> None:
    with pytest.raises(BadInput, match=r"0\.8\.0 to 0\.11\.0"):
        _activation(vllm_use_flashinfer_sampler=1, engine_version="0.11.1")
    with pytest.raises(BadInput, match=r"0\.8\.0 to 0\.11\.0"):
        _activation(vllm_use_flashinfer_sampler=1, engine_version="0.7.3")
    with pytest.raises(BadInput, match="0 or 1"):
        _activation(vllm_use_flashinfer_sampler=2)
    with pytest.raises(BadInput, match="V0"):
        _activation(vllm_use_flashinfer_sampler=1, vllm_use_v1=0)
    assert run(["estimate", "--model", "qwen2.5-7b-instruct", "--gpu", "A100-80GB",
                "--vllm-use-flashinfer-sampler", "1"]) == 2  # the newest release
    assert run(["estimate", "--engine", "sglang", "--model", "qwen2.5-7b-instruct",
                "--vllm-use-flashinfer-sampler", "1"]) == 2


def test_a_pasted_command_sets_it_from_the_environment() -> None:
    cmd = parse_tokens(["VLLM_USE_FLASHINFER_SAMPLER=1", "vllm", "serve", "Qwen/Qwen2-7B-Instruct"])
    assert cmd.settings["vllm_use_flashinfer_sampler"] == 1
