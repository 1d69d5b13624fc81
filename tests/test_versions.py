"""Engine versions: parsing ``--engine-version``, the rule rows' ranges, the CLI's refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.gpus import GPU
from memprof.core.releases import VLLM_RELEASES
from memprof.core.versions import Rule, resolve_version, value_at, version_key


def test_default_is_the_newest_release() -> None:
    assert resolve_version(None) == VLLM_RELEASES[-1] == "0.33.0"
    assert resolve_version("v0.7.1") == "0.7.1"
    assert resolve_version("0.8") == "0.8.0"
    assert resolve_version("0.8.5.post1") == "0.8.5.post1"


def test_releases_are_in_order() -> None:
    keys = [version_key(v) for v in VLLM_RELEASES]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


@pytest.mark.parametrize("text", ["0.5.5", "0.6.7", "0.34.0", "0.8.7", "banana", "1", "",
                                  "0.7.1rc1", "0" * 60])
def test_unknown_or_malformed_versions_are_refused(text: str) -> None:
    with pytest.raises(BadInput) as exc:
        resolve_version(text)
    assert "0.6.0" in exc.value.hint and "0.33.0" in exc.value.hint


def test_rule_ranges_are_half_open() -> None:
    rows = (Rule(name="x", changes="t", since=None, until="0.7.3", introduced_by="a",
                 source="s", value=1),
            Rule(name="x", changes="t", since="0.7.3", until="0.8.0", introduced_by="b",
                 source="s", value=2))
    assert [value_at(rows, v, 0) for v in ("0.7.1", "0.7.2", "0.7.3", "0.8.0")] == [1, 1, 2, 0]


def test_cli_unknown_version_exits_2_naming_the_versions(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    assert run(["estimate", "-m", "qwen3-32b", "--engine-version", "0.5.4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "memprof models vLLM 0.6.0 to 0.33.0" in err
    # 0.5.4 is a release of the other engine: the hint says so before the list
    assert "hint: 0.5.4 is an SGLang release, not a vLLM one; memprof models" in err


@given(st.text(max_size=30))
def test_fuzz_engine_version_never_crashes(text: str) -> None:
    try:
        got = resolve_version(text)
    except BadInput as exc:
        assert exc.exit_code == 2
    else:
        assert got in VLLM_RELEASES


def test_versions_lists_releases_and_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["versions"]) == 0
    out = capsys.readouterr().out
    for name in ("pp_split_remainder", "deepseek_lm_head_every_pp_stage",
                 "mla_matrix_absorption", "dsv4_mtp_hidden_buffer", "0.7.1", "0.33.0"):
        assert name in out


def test_versions_diff_names_the_rules_for_the_deployment(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    assert run(["versions", "-m", "deepseek-r1", "--gpu", "H200", "-tp", "8", "--from", "0.7.3",
                "--to", "0.8.0"]) == 0
    out = capsys.readouterr().out
    assert "mla_matrix_absorption" in out.split("but not for this deployment")[0]
    assert "attention (MLA)" in out
    assert run(["versions", "-m", "qwen3-32b", "--from", "0.25.0", "--to", "0.25.1"]) == 0
    out = capsys.readouterr().out
    assert "no rule that differs applies" in out and "no component differs" in out
    # 0.26.0 sizes FlashInfer's workspace at least at the prefill footprint; on an H100 the
    # attention runs FlashAttention 3, so the listed rule moves nothing
    assert run(["versions", "-m", "qwen3-32b", "--from", "0.25.0", "--to", "0.26.0"]) == 0
    out = capsys.readouterr().out
    listed = out.split("but not for this deployment")[0]
    assert "attn_capture_flashinfer_workspace_prefill_footprint" in listed
    assert "no component differs" in out
    # 0.27.0's budget line charges Model Runner V2's sampler state (output_bin_counts [1024, V]
    # int32 and the rest, 631 MiB here, and its logit-bias / bad-words / logprob-token-id
    # tensors, 17.5 MiB at 1,024 requests), which a cold start charges with V2's own terms since
    # the cold compile's example arguments are sized (memprof/core/terms/cold_compile.py); and
    # the load's allocator holes its total_consumed holds (terms/reserved_charge.py, 8.08 MiB)
    assert run(["versions", "-m", "qwen3-32b", "--from", "0.26.0", "--to", "0.27.0"]) == 0
    out = capsys.readouterr().out
    assert "model_runner_v2_sampler_state" in out.split("but not for this deployment")[0]
    assert "KV cache [kv_cache]: 10.03 GiB → 9.39 GiB" in out  # with V2's output-copy stream pool
    assert ("allocator holes after empty_cache (charged as non-torch) [allocator]: 0 B → 8.08 MiB"
            in out)
    assert run(["versions", "--from", "0.5.4"]) == 2


# --- defaults by release (memprof/core/engine_defaults.py, terms/cudagraph.py) -----------------


def _gpu(name: str) -> GPU:
    from memprof.core.gpus import resolve_gpu

    return resolve_gpu(name, None)


def test_versions_diff_leaves_out_a_rule_whose_value_is_the_same() -> None:
    """Two rows of one value across the releases (a range split where a later release was
    read) change nothing: 0.6.6.post1 and 0.7.1 both keep V0's chunked prefill off for
    multimodal models and on ROCm, while the NCCL budget placement and MLA rows do change."""
    from memprof.core.deployment import Deployment
    from memprof.core.version_diff import version_diff

    d = version_diff("llama-3.1-8b", Deployment(), "0.6.6.post1", "0.7.1")
    names = {c.name for c in d.rules}
    assert "v0_chunked_prefill_off" not in names and "nccl_in_budget" not in names
    assert "budget_log_lines" in names
    for c in d.rules:
        assert c.a is None or c.b is None or c.a.value != c.b.value, c.name


def test_gpu_memory_utilization_default_by_release() -> None:
    # 0.19.1 config/cache.py CacheConfig ``Field(default=0.9, gt=0, le=1)``; 0.20.0 and 0.33.0
    # ``Field(default=0.92, ...)`` (#38284); 0.7.2 arg_utils.py ``gpu_memory_utilization: float
    # = 0.90``.
    from memprof.core.engine_defaults import default_utilization

    assert [default_utilization(v) for v in ("0.7.2", "0.19.1", "0.20.0", "0.33.0")] == [
        0.9, 0.9, 0.92, 0.92]


@pytest.mark.parametrize(("version", "gpu", "entry", "expected"), [
    # 0.8.0 arg_utils.py _set_default_args_v1: H100/H200 by name → LLM 16384 / serve 8192,
    # else 8192 / 2048; default_max_num_seqs = 1024 on every GPU (0.8.0 – 0.8.3); 0.8.4: 256
    # unless the name has "h100" / "h200"
    ("0.8.0", "H100", "serve", (8192, 1024)), ("0.8.0", "H100", "llm", (16384, 1024)),
    ("0.8.0", "A100-80GB", "serve", (2048, 1024)), ("0.8.4", "L40S", "llm", (8192, 256)),
    # 0.8.5: device_memory >= 70 GiB → 16384 / 8192 and 1024 seqs; else 8192 / 2048 and 256
    ("0.8.5", "A100-80GB", "serve", (8192, 1024)), ("0.8.5", "L40S", "serve", (2048, 256)),
    # 0.9.0 (#17885): "a100" not in device_name → an A100 stays on the small tier
    ("0.9.0", "A100-80GB", "serve", (2048, 256)), ("0.9.0", "A100-80GB", "llm", (8192, 256)),
    # 0.27.0 get_batch_defaults: no 160 GiB tier → a B200 gets 8192 (serve) / 16384 (LLM)
    ("0.27.0", "B200", "serve", (8192, 1024)), ("0.27.0", "B200", "llm", (16384, 1024)),
    # 0.28.0 get_batch_defaults: device_memory >= 160 GiB → 16384 for both usage contexts
    ("0.28.0", "B200", "serve", (16384, 1024)), ("0.33.0", "B200", "serve", (16384, 1024)),
    ("0.33.0", "H200", "serve", (8192, 1024)), ("0.33.0", "H200", "llm", (16384, 1024)),
])
def test_batch_defaults_by_release_and_entrypoint(version: str, gpu: str, entry: str,
                                                  expected: tuple[int, int]) -> None:
    from memprof.core.engine_defaults import batch_defaults

    assert batch_defaults(_gpu(gpu), version, entry) == expected


def test_batch_defaults_v0() -> None:
    # 0.7.2 config.py SchedulerConfig.__post_init__: with chunked prefill 2048, else
    # max(max_model_len, 2048); arg_utils.py create_engine_config turns chunked prefill on for
    # max_model_len > 32768; EngineArgs.__post_init__: max_num_seqs 256 when not VLLM_USE_V1.
    # The entry point does not matter in V0.
    from memprof.core.engine_defaults import batch_defaults

    h100 = _gpu("H100")
    assert batch_defaults(h100, "0.7.2", "serve", 8192) == (8192, 256)  # max(8192, 2048)
    assert batch_defaults(h100, "0.7.2", "llm", 1024) == (2048, 256)  # max(1024, 2048)
    assert batch_defaults(h100, "0.7.3", "serve", 32768) == (32768, 256)  # not > 32768
    assert batch_defaults(h100, "0.7.3", "serve", 40960) == (2048, 256)  # chunked prefill
    assert batch_defaults(h100, "0.7.3", "serve", 40960, v0_chunked_prefill=False) == (
        40960, 256)  # sliding window or speculative decoding: no chunked prefill


@pytest.mark.parametrize(("version", "subtracted"), [
    ("0.17.0", False), ("0.18.0", False), ("0.19.1", False), ("0.20.0", True), ("0.33.0", True)])
def test_cudagraph_estimate_subtracted_from_0_20_0(version: str, subtracted: bool) -> None:
    # 0.18.0 / 0.19.1 envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default "0" and
    # gpu_worker.py ``cudagraph_memory_estimate_applied = ... if envs.VLLM_MEMORY_PROFILER_
    # ESTIMATE_CUDAGRAPHS else 0``; 0.20.0 envs.py default "1" (the 0.20.0 log line says
    # "default since v0.21.0", but the 0.20.0 wheel defaults it on); 0.17.0 has no
    # profile_cudagraph_memory. Same deployment, same gpu_memory_utilization: the budget
    # differs by exactly the estimate.
    from memprof.core.deployment import Deployment
    from memprof.core.estimate import estimate

    dep = Deployment(gpu_memory_utilization=0.9, max_num_seqs=256, max_num_batched_tokens=8192,
                     engine_version=version)
    r = estimate("qwen3-32b", dep, gpu_name="H100").ranks[0]
    graph = {c.name: c for c in r.components if c.category == "cudagraph"}
    est = graph["CUDA-graph estimate"].bytes
    pool_rt = graph["CUDA-graph pool above the estimate"].bytes
    assert (est > 0) is subtracted
    if not subtracted:
        assert pool_rt > 0 and "nothing subtracted" in graph["CUDA-graph estimate"].formula
    budget = sum(c.bytes for c in r.components
                 if c.where == "budget" and c.category != "kv_cache")
    assert r.available_kv_bytes == r.requested_bytes - budget


def test_entrypoint_changes_the_defaults_and_is_shown(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    import json

    assert run(["estimate", "-m", "qwen3-32b", "--gpu", "H200", "--entrypoint", "llm",
                "--format", "json"]) in (0, 1)
    d = json.loads(capsys.readouterr().out)["deployment"]
    # 0.33.0 get_batch_defaults: H200 (139.8 GiB, below 160) LLM_CLASS 16384 / 1024 seqs
    assert d["entrypoint"] == "llm" and d["max_num_batched_tokens"] == 16384
    assert run(["estimate", "-m", "qwen3-32b", "--gpu", "H200"]) in (0, 1)
    assert "vllm 0.33.0 (vllm serve)" in capsys.readouterr().out.replace("\n", " ")
    assert run(["estimate", "-m", "qwen3-32b", "--entrypoint", "server"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown --entrypoint") and "hint: serve" in err
    assert "Traceback" not in err


# --- V0 layout and log (memprof/core/kvcache.py, memprof/core/engine_log.py) -----------------


@pytest.mark.parametrize(("version", "block", "entry"), [
    # 0.7.1: V0, 16-token blocks, the latent unpadded: (512 + 64) × 2 B = 1152 B per layer
    ("0.7.1", 16, 1152),
    # 0.7.2 / 0.7.3 worker/cache_engine.py get_cache_block_size: align_to_256bytes(576, bf16)
    # = round_up(576, 256 // 2 = 128 elements) = 640 elements = 1280 B (VLLM_CUDA_MEM_ALIGN_KV_
    # CACHE default "1", envs.py 0.7.2); platforms/cuda.py: block_size None → 16
    ("0.7.2", 16, 1280), ("0.7.3", 16, 1280),
    # 0.8.0 (V1): FlashMLA's 64-token blocks on Hopper, MLAAttentionSpec pages unpadded
    ("0.8.0", 64, 1152),
])
def test_v0_mla_entry_and_block(version: str, block: int, entry: int) -> None:
    from memprof.core.deployment import Deployment
    from memprof.core.estimate import estimate

    e = estimate("deepseek-r1", Deployment(tp=8, max_model_len=8192, engine_version=version),
                 gpu_name="H200")
    r = e.ranks[0]
    assert r.plan.block_size == block
    assert e.kv_cache_bytes_per_token == 61 * entry  # 61 layers, one latent entry each
    assert r.plan.block_bytes == 61 * entry * block


def test_v0_fp8_mla_entry_is_padded_to_256_bytes() -> None:
    # align_to_256bytes(576, fp8): round_up(576, 256 elements) = 768 elements = 768 B
    from memprof.core.deployment import Deployment
    from memprof.core.estimate import estimate

    e = estimate("deepseek-r1", Deployment(tp=8, max_model_len=8192, kv_cache_dtype="fp8",
                                           engine_version="0.7.3"), gpu_name="H200")
    assert e.kv_cache_bytes_per_token == 61 * 768


def test_v0_budget_line_is_printed_as_v0_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    # 0.7.2 worker/worker.py determine_num_available_blocks: "model weights take %.2fGiB;
    # non_torch_memory takes …; PyTorch activation peak memory takes …; the rest of the memory
    # reserved for KV Cache is …"; executor_base.py initialize_cache: "# cuda blocks: %d, # CPU
    # blocks: %d" with num_cpu_blocks = swap_space (4 GiB) // cache block bytes, "Maximum
    # concurrency … = num_gpu_blocks × block_size / max_model_len".
    import json

    from memprof.core.deployment import Deployment
    from memprof.core.engine_log import engine_log
    from memprof.core.estimate import estimate

    e = estimate("deepseek-r1-distill-qwen-14b",
                 Deployment(tp=2, max_model_len=8192, gpu_memory_utilization=0.98,
                            engine_version="0.7.2"), gpu_name="RTX-4090")
    r = e.ranks[0]
    log = engine_log(e, r)
    w = sum(c.bytes for c in r.components if c.category == "weights")
    assert log[1].startswith(f"model weights take {w / 2**30:.2f}GiB; non_torch_memory takes ")
    assert log[1].endswith(f"reserved for KV Cache is {r.available_kv_bytes / 2**30:.2f}GiB.")
    # 48 layers × 16 tokens × 8 KV heads / TP2 × (128 + 128) × 2 B = 1.5 MiB per block
    assert r.plan.block_bytes == 48 * 16 * 4 * 256 * 2
    # 4 GiB swap space // 1.5 MiB = 2730 CPU blocks
    assert log[2] == f"# cuda blocks: {r.kv.num_gpu_blocks}, # CPU blocks: 2730"
    assert log[3] == ("Maximum concurrency for 8192 tokens per request: "
                      f"{r.kv.num_gpu_blocks * 16 / 8192:.2f}x")
    assert run(["estimate", "-m", "deepseek-r1-distill-qwen-14b", "--gpu", "RTX-4090", "-tp", "2",
                "--max-model-len", "8192", "--engine-version", "0.7.2"]) in (0, 1)
    out = capsys.readouterr().out.replace("\n", " ")
    assert "vLLM 0.7.2 (V0) logs:" in out and "GPU KV cache size" not in out
    # (Qwen2.5: vLLM 0.8.0's registry has no Qwen3ForCausalLM, first in 0.8.4's)
    assert run(["estimate", "-m", "qwen2.5-32b-instruct", "--engine-version", "0.8.0",
                "--format", "json"]) in (0, 1)
    log8 = json.loads(capsys.readouterr().out)["ranks"][0]["engine_log"]
    # 0.8.0 V1 logs no budget line (gpu_worker.py), only kv_cache_utils.py's two lines;
    # 0.9.1 adds "Available KV cache memory: %.2f GiB"
    assert log8[0].startswith("GPU KV cache size:") and len(log8) == 2
    assert run(["estimate", "-m", "qwen3-32b", "--engine-version", "0.9.1",
                "--format", "json"]) in (0, 1)
    log9 = json.loads(capsys.readouterr().out)["ranks"][0]["engine_log"]
    assert log9[0].startswith("Available KV cache memory: ") and log9[0].endswith(" GiB")
