"""The model runner's persistent buffers that vLLM V1 0.8.0 – 0.9.0.x charges through its
absolute torch peak (memprof/core/terms/runner_buffers.py ``RUNNER_BUFFERS_CHARGED``), against
hand counts of ``GPUModelRunner.__init__`` / ``InputBatch`` / ``BlockTable`` at those releases."""

from __future__ import annotations

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms.runner_buffers import NAME, RUNNER_BUFFERS_CHARGED
from memprof.core.versions import rule_in_force

H = 4096  # Llama-3.1-8B hidden size


def _buffers(version: str, **kw: object) -> int | None:
    dep = Deployment(engine_version=version, max_num_seqs=1024, max_num_batched_tokens=2048,
                     max_model_len=131072, **kw)  # type: ignore[arg-type]
    (rank,) = estimate("llama-3.1-8b", dep, gpu_name="A100-40GB").ranks
    got = [c for c in rank.components if c.name == NAME]
    assert all(c.where == "budget" and c.profiled for c in got)
    return got[0].bytes if got else None


def test_08_by_hand() -> None:
    """N = 2048 tokens, R = 1024 rows, B = 131072 / 16 = 8192 blocks a request: input_ids 8 KiB,
    positions 16 KiB, inputs_embeds [2048, 4096] bf16 16 MiB, block_table int32 [1024, 8192]
    32 MiB, seven [1024] sampling vectors of 4 B: 48.05 MiB (row 951's deployment shape)."""
    want = 2048 * 4 + 2048 * 8 + 2048 * H * 2 + 1024 * 8192 * 4 + 7 * 1024 * 4
    assert want == 50_384_896
    for version in ("0.8.0", "0.8.2", "0.8.5.post1"):
        assert _buffers(version) == want, version


def test_090_adds_the_runners_metadata_buffers() -> None:
    """0.9.0: query_start_loc int32 [R + 1] (4,100 B, rounded to 4,608), seq_lens int32 [R],
    the runner's and the block table's slot_mapping int64 [N]."""
    base = 50_384_896
    assert _buffers("0.9.0") == base + 4608 + 1024 * 4 + 2 * 2048 * 8


def test_gone_from_091_and_under_v0() -> None:
    """0.9.1's memory_profiling charges the torch peak's increase: the buffers drop out; V0's
    runner (0.7.3, or 0.8.2 with --vllm-use-v1 0) is not this code."""
    assert _buffers("0.9.1") is None
    assert _buffers("0.10.1.1") is None
    assert _buffers("0.7.3") is None
    assert _buffers("0.8.2", vllm_use_v1=0) is None
    assert rule_in_force(RUNNER_BUFFERS_CHARGED, "0.9.1", "vllm") is None


def test_the_buffers_take_kv_memory_at_0_8() -> None:
    """Inside the budget, so the KV memory drops by the buffers (the block count rounds)."""
    dep = Deployment(engine_version="0.8.2", max_num_seqs=1024, max_num_batched_tokens=2048,
                     max_model_len=131072)
    (rank,) = estimate("llama-3.1-8b", dep, gpu_name="A100-40GB").ranks
    comps = {c.name: c.bytes for c in rank.components}
    assert comps[NAME] == 50_384_896
    assert sum(c.bytes for c in rank.components if c.category == "activation"
               and c.where == "budget") >= comps[NAME] + comps["activation peak (profile run)"]
