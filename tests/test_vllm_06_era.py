"""vLLM 0.6.0 – 0.6.6.post1 as a modelled era (V0 only): each rule row that differs from 0.7.1,
checked against a count made by hand from the release wheels' source (the file and function
named in each test)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from memprof.base.errors import BadInput
from memprof.base.units import GiB, MiB
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.engine_log import engine_log
from memprof.core.engines.vllm import batch_default
from memprof.core.estimate import Estimate, estimate
from memprof.core.gpus import resolve_gpu
from memprof.core.release_names import MappedRelease, map_release
from memprof.core.releases import VLLM_RELEASES
from memprof.core.terms.nccl_nvls import nccl_version, nvls_bytes
from memprof.core.versions import resolve_version

V06 = ("0.6.0", "0.6.1", "0.6.1.post1", "0.6.1.post2", "0.6.2", "0.6.3", "0.6.3.post1",
       "0.6.4", "0.6.4.post1", "0.6.5", "0.6.6", "0.6.6.post1")
LLAMA_VOCAB, LLAMA_HIDDEN = 128256, 4096  # configs/models/llama-3.1-8b.json


def _est(version: str, gpu: str = "H100", **kw: object) -> Estimate:
    return estimate("llama-3.1-8b", Deployment(engine_version=version, **kw),  # type: ignore[arg-type]
                    gpu_name=gpu)


def _comp(e: Estimate, prefix: str) -> list[tuple[str, str, int]]:
    return [(c.name, c.where, c.bytes) for c in e.ranks[0].components
            if c.name.startswith(prefix)]


def test_the_releases_are_modelled_oldest_first() -> None:
    assert VLLM_RELEASES[:len(V06)] == V06 and VLLM_RELEASES[len(V06)] == "0.7.0"
    assert [resolve_version(v) for v in ("0.6.4.post1", "v0.6.0", "0.6")] \
        == ["0.6.4.post1", "0.6.0", "0.6.0"]
    with pytest.raises(BadInput):
        resolve_version("0.5.4")
    # a post release memprof does not list keeps its base; 0.7.0 is modelled as itself
    got = map_release("0.6.2.post1")
    assert got is not None and got.release == "0.6.2"
    assert map_release("0.7.0") == MappedRelease("0.7.0", None)


def test_v1_is_refused_before_0_8() -> None:
    """0.6.5 – 0.6.6.post1 envs.py: VLLM_USE_V1 an opt-in alpha (default "0")."""
    with pytest.raises(BadInput, match="opt-in alpha"):
        _est("0.6.5", vllm_use_v1=1)


@pytest.mark.parametrize(("version", "mml", "tokens"), [
    # config.py SchedulerConfig: chunked prefill (on by default above 32768, arg_utils.py
    # create_engine_config) → 512 tokens before 0.6.5, 2048 from it; else max(mml, 2048)
    ("0.6.0", 35000, 512), ("0.6.4.post1", 35000, 512), ("0.6.5", 35000, 2048),
    ("0.6.4.post1", 20000, 20000), ("0.6.6.post1", 1024, 2048), ("0.6.3", 32768, 32768),
])
def test_batch_defaults(version: str, mml: int, tokens: int) -> None:
    d = batch_default(resolve_gpu("RTX-3090", None), version, "serve", mml)
    assert (d.tokens, d.seqs) == (tokens, 256)


def test_chunked_prefill_default_and_multimodal_floor() -> None:
    """A multimodal model keeps chunked prefill off above 32768 from 0.6.2 (arg_utils.py 'and
    not model_config.is_multimodal_model'), and its tokens are at least
    _MULTIMODAL_MODEL_MAX_NUM_BATCHED_TOKENS: 4096 before 0.6.3, 5120 from it (config.py)."""
    gpu = resolve_gpu("H100", None)
    mm = frozenset({"multimodal"})
    assert batch_default(gpu, "0.6.1", "serve", 40000, model_facts=mm).tokens == 4096  # 512 → floor
    assert batch_default(gpu, "0.6.2", "serve", 40000, model_facts=mm).tokens == 40000
    assert batch_default(gpu, "0.6.2", "serve", 2048, model_facts=mm).tokens == 4096
    assert batch_default(gpu, "0.6.3", "serve", 2048, model_facts=mm).tokens == 5120
    # ROCm keeps it off from 0.6.5 (platforms: 'not current_platform.is_rocm()')
    mi = resolve_gpu("MI300X", None)
    assert batch_default(mi, "0.6.4.post1", "serve", 40000).tokens == 512
    assert batch_default(mi, "0.6.5", "serve", 40000).tokens == 40000


def test_prefix_caching_keeps_chunked_prefill_off_in_0_6_0() -> None:
    """0.6.0 engine/arg_utils.py create_engine_config: '... and not self.enable_prefix_caching'
    (gone in 0.6.1): max_num_batched_tokens = max(max_model_len, 2048) = 131072."""
    got = {v: _est(v, enable_prefix_caching=True).deployment.max_num_batched_tokens
           for v in ("0.6.0", "0.6.1")}
    assert got == {"0.6.0": 131072, "0.6.1": 512}


def test_block_size_choices() -> None:
    """engine/arg_utils.py --block-size choices: [8, 16, 32] to 0.6.3.post1, + 64, 128 from
    0.6.4."""
    assert run(["estimate", "-m", "llama-3.1-8b", "--gpu", "H100", "--engine-version",
                "0.6.3.post1", "--block-size", "64"]) == 2
    assert run(["estimate", "-m", "llama-3.1-8b", "--gpu", "H100", "--engine-version",
                "0.6.4", "--block-size", "64", "-f", "json"]) in (0, 1)


def test_budget_placement_by_release() -> None:
    """worker/worker.py determine_num_available_blocks: the CUDA context is charged only in
    0.6.4.x (peak = torch peak + (total − free) − allocated); the load's allocator holes in every
    0.6.x (free-memory drop / that formula / memory_profiling on allocated bytes), never in
    0.7.1 (MemorySnapshot's reserved bytes)."""
    where = {v: _comp(_est(v), "CUDA context")[0][1]
             for v in ("0.6.3.post1", "0.6.4", "0.6.4.post1", "0.6.5", "0.7.1")}
    assert where == {"0.6.3.post1": "baseline", "0.6.4": "budget", "0.6.4.post1": "budget",
                     "0.6.5": "baseline", "0.7.1": "baseline"}
    holes = "allocator holes after empty_cache"
    for v in ("0.6.0", "0.6.4.post1", "0.6.6.post1"):
        got = _comp(_est(v), holes)
        assert len(got) == 1 and got[0][1] == "budget" and got[0][2] > 0, v
    assert _comp(_est("0.7.1"), holes) == []
    # the context moves the KV budget by its own bytes, nothing else changes at 0.6.4
    a, b = _est("0.6.3.post1"), _est("0.6.4")
    context = _comp(a, "CUDA context")[0][2]
    assert a.ranks[0].available_kv_bytes - b.ranks[0].available_kv_bytes == context


def test_sampler_resort_before_0_6_2() -> None:
    """model_executor/layers/sampler.py _apply_top_k_top_p, 0.6.0 – 0.6.1.post2: the inverse
    index (int64) and the gathered logits (fp32) beside the fp32 copy, sorted values, int64
    indices, top-k mask, softmax, cumsum and top-p mask: 38 B per logit. At max_model_len 35000
    (chunked prefill, 512 tokens, 256 dummy rows) that moment is the peak: last hidden
    [512, 4096] bf16 + logits [256, V] bf16 + 38·256·V."""
    e = _est("0.6.1", max_model_len=35000)
    act = _comp(e, "activation peak")[0][2]
    rows = 256
    want = (512 * LLAMA_HIDDEN * 2 + rows * LLAMA_VOCAB * 2 + 38 * rows * LLAMA_VOCAB)
    assert act == want == 1_317_535_744
    # from 0.6.2 the scatter moment is 30 B per logit, below the sort's: the peak drops
    assert _comp(_est("0.6.2", max_model_len=35000), "activation peak")[0][2] < act


def test_budget_log_lines() -> None:
    """What each release logs (worker/worker.py, executor/gpu_executor.py)."""
    kw = {"max_model_len": 20000}
    e0 = _est("0.6.0", **kw)
    assert engine_log(e0, e0.ranks[0]) == [
        f"# GPU blocks: {e0.ranks[0].kv.num_gpu_blocks}, # CPU blocks: 2048"]
    e3 = _est("0.6.3", **kw)
    assert engine_log(e3, e3.ranks[0])[1].startswith("Maximum concurrency for 20000 tokens")
    e4 = _est("0.6.4.post1", **kw)
    line = engine_log(e4, e4.ranks[0])[0]
    r = e4.ranks[0]
    weights = sum(c.bytes for c in r.components if c.category == "weights" and c.in_budget)
    act = sum(c.bytes for c in r.components if c.category == "activation" and c.in_budget)
    assert line.startswith("Memory profiling results: total_gpu_memory=")
    assert f"peak_torch_memory={(weights + act) / GiB:.2f}GiB" in line
    assert f"kv_cache_size={r.available_kv_bytes / GiB:.2f}GiB" in line
    e5 = _est("0.6.5", **kw)
    assert engine_log(e5, e5.ranks[0])[2].startswith("# GPU blocks: ")
    e7 = _est("0.7.1", **kw)
    assert engine_log(e7, e7.ranks[0])[2].startswith("# cuda blocks: ")


def test_nccl_2_20_nvls_buffers() -> None:
    """torch 2.4.0 (vLLM 0.6.0 – 0.6.3.post1) pins NCCL 2.20.5, whose ncclNvlsSetup
    (v2.20.5-1 src/transport/nvls.cc) sizes each channel's buffer as
    comm->buffSizes[NCCL_PROTO_SIMPLE] = 4 MiB: 24 channels × 2 × (4 + 2) MiB × 8 heads, rounded
    up to the 512 MiB recommended multicast granularity (memprof.core.terms.nvls_granularity)."""
    assert nccl_version(Deployment(engine_version="0.6.3.post1")) == "2.20.5"
    assert nccl_version(Deployment(engine_version="0.6.4")) == "2.21.5"
    h100 = resolve_gpu("H100", None)
    assert 24 * 2 * 6 * MiB * 8 == 2304 * MiB and 24 * 2 * 3 * MiB * 8 == 1152 * MiB
    assert nvls_bytes("2.20.5", h100, 8, False)[0] == 5 * 512 * MiB
    assert nvls_bytes("2.21.5", h100, 8, False)[0] == 3 * 512 * MiB


def test_mla_is_refused_before_0_7_1(capsys: pytest.CaptureFixture[str]) -> None:
    """0.6.x has no MLA backend (model_executor/models/deepseek_v2.py: multi-head attention,
    head size padded to 256)."""
    assert run(["estimate", "-m", "deepseek-v3", "--gpu", "H200", "-tp", "8",
                "--engine-version", "0.6.6.post1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "padded to 256" in err and "hint: " in err
    assert run(["estimate", "-m", "deepseek-v3", "--gpu", "H200", "-tp", "8",
                "--engine-version", "0.7.1", "-f", "json"]) in (0, 1)


def test_versions_lists_each_change(capsys: pytest.CaptureFixture[str]) -> None:
    """``memprof versions --from 0.6.0 --to 0.7.1`` (the default model, deepseek-r1, refused at
    0.6.0: its rules are still listed)."""
    assert run(["versions", "--from", "0.6.0", "--to", "0.7.1"]) == 0
    out = capsys.readouterr().out
    for rule in ("batch_defaults", "v0_chunked_prefill_off", "budget_log_lines",
                 "v0_sampler_resort", "reserved_not_allocated_charged",
                 "mla_latent_kv_cache", "nccl_version", "v0_multimodal_min_tokens"):
        assert rule in out, rule
    # the context and NCCL sit where they sat at 0.6.0 again from 0.6.5: one value at both ends
    assert "nccl_in_budget" not in out
    assert "components not compared: memprof refuses this deployment at 0.6.0" in out
    assert run(["versions", "-m", "llama-3.1-8b", "--gpu", "H100", "--from", "0.6.4.post1",
                "--to", "0.6.5"]) == 0
    out = capsys.readouterr().out
    assert "CUDA context" in out and "refused" not in out and "nccl_in_budget" in out


def test_the_model_registry_of_each_0_6_release() -> None:
    """configs/vllm_architectures.json (tools/vllm_architectures.py on each wheel): Llama is in
    every 0.6.x registry, DeepSeek-V3 from 0.6.6 (models/registry.py), Qwen3 in none of 0.6 / 0.7
    (its first registry is 0.8.4's)."""
    from memprof.core.engines.vllm_registry import check_registered, registered

    for v in V06:
        got = registered(v)
        assert got is not None and "LlamaForCausalLM" in got, v
    for v in ("0.7.0", "0.7.1", "0.7.2"):  # read from those wheels too: Qwen2.5-VL from 0.7.2
        got = registered(v)
        assert got is not None and "Qwen3ForCausalLM" not in got, v
        assert ("Qwen2_5_VLForConditionalGeneration" in got) == (v == "0.7.2"), v
    with pytest.raises(BadInput) as later:  # every release is read: Qwen3 from 0.8.4
        check_registered("0.8.3", "Qwen3ForCausalLM", "qwen3-32b")
    assert later.value.hint == "use --engine-version 0.8.4 or later"
    check_registered("0.8.4", "Qwen3ForCausalLM", "qwen3-32b")
    with pytest.raises(BadInput) as exc:
        check_registered("0.6.5", "DeepseekV3ForCausalLM", "deepseek-v3")
    assert exc.value.hint == "use --engine-version 0.6.6 or later"
    assert run(["estimate", "-m", "qwen3-32b", "--gpu", "H100", "--engine-version",
                "0.6.6.post1"]) == 2


def test_the_registry_tool_reads_dict_literals(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "vllm_architectures", Path(__file__).parents[1] / "tools" / "vllm_architectures.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    root = tmp_path / "0.6.9" / "vllm" / "model_executor" / "models"
    root.mkdir(parents=True)
    (root / "registry.py").write_text(
        '_TEXT_GENERATION_MODELS = {"LlamaForCausalLM": ("llama", "X"), **_OTHER}\n'
        '_MULTIMODAL_MODELS: dict = {"LlavaForConditionalGeneration": ("llava", "Y")}\n'
        '_ROCM_PARTIALLY_SUPPORTED_MODELS = {"Qwen2ForCausalLM": "note"}\n', encoding="utf-8")
    assert tool.architectures(tool.registry_file(root.parents[2])) == [
        "LlamaForCausalLM", "LlavaForConditionalGeneration"]
