"""vLLM's batch defaults (``max_num_batched_tokens``, ``max_num_seqs`` when the flags are left
out) per release × device × entry point, against what engine/arg_utils.py of each release wheel
sets (``BATCH_DEFAULTS`` and ``BATCH_DEFAULT_BOUNDS`` in memprof/core/engines/vllm.py), and what
the estimate says about the default it applied."""

from __future__ import annotations

import json

import pytest

from memprof.base.errors import BadInput
from memprof.base.units import GiB, MiB
from memprof.cli import run
from memprof.core.engines.vllm import BATCH_DEFAULTS, batch_default, batch_defaults
from memprof.core.gpus import GPU, catalog, resolve_gpu
from memprof.core.models import configs_dir
from memprof.core.releases import VLLM_RELEASES
from memprof.core.versions import value_at


def _gpu(name: str) -> GPU:
    return resolve_gpu(name, None)


# The function that sets the V1 defaults in each release wheel, grouped where its text is the same
# (comments aside), and the scheme memprof must apply there:
#   0.8.0 – 0.8.3 _set_default_args_v1: tokens by "h100"/"h200" in the name, 1024 seqs everywhere
#   0.8.4        the same name test, and default_max_num_seqs 256 off those names
#   0.8.5, 0.8.5.post1: device_memory >= 70 GiB
#   0.9.0 – 0.27.1: >= 70 GiB and "a100" not in the name (0.11.1 on: get_batch_defaults)
#   0.28.0 – 0.32.0: a >= 160 GiB tier first;  0.33.0: and a GB10 stays on the small tier
READ = {
    **dict.fromkeys(("0.8.0", "0.8.1", "0.8.2", "0.8.3"), "v1_name"),
    "0.8.4": "v1_name256",
    **dict.fromkeys(("0.8.5", "0.8.5.post1"), "v1_70g"),
    **dict.fromkeys(VLLM_RELEASES[VLLM_RELEASES.index("0.9.0"):VLLM_RELEASES.index("0.28.0")],
                    "v1_a100"),
    **dict.fromkeys(("0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0"), "v1_160g"),
    "0.33.0": "v1_gb10",
}


def test_every_v1_release_runs_the_scheme_read_in_its_wheel() -> None:
    v1 = [v for v in VLLM_RELEASES if not v.startswith(("0.6.", "0.7."))]
    assert sorted(READ) == sorted(v1)
    assert {v: value_at(BATCH_DEFAULTS, v) for v in v1} == READ
    # V0 (0.7.x, and VLLM_USE_V1=0 up to 0.10.2) keeps its own scheme
    assert [value_at(BATCH_DEFAULTS, v) for v in ("0.7.3", "0.8.4+v0", "0.10.2+v0")] == ["v0"] * 3
    # 0.6.0 – 0.6.4.post1: 512 tokens with chunked prefill (config.py SchedulerConfig)
    assert [value_at(BATCH_DEFAULTS, v) for v in ("0.6.0", "0.6.4.post1", "0.6.5")] \
        == ["v0_512", "v0_512", "v0"]


S, L = "serve", "llm"  # OPENAI_API_SERVER, LLM_CLASS


@pytest.mark.parametrize(("version", "gpu", "entry", "expected"), [
    # 0.8.0 – 0.8.3: tokens by name (H100/H200: LLM 16384, serve 8192; else 8192 / 2048); 1024
    ("0.8.0", "H100-80GB", S, (8192, 1024)), ("0.8.3", "H200", L, (16384, 1024)),
    ("0.8.2", "RTX-3090", S, (2048, 1024)), ("0.8.3", "RTX-3090", L, (8192, 1024)),
    ("0.8.1", "A100-80GB", S, (2048, 1024)), ("0.8.0", "B200", L, (8192, 1024)),
    # "NVIDIA GH200 480GB" has "h200" in it; "NVIDIA H800" has neither name
    ("0.8.3", "GH200", S, (8192, 1024)), ("0.8.3", "H800", S, (2048, 1024)),
    # 0.8.4: 256 sequences unless the name has "h100" / "h200"
    ("0.8.4", "RTX-3090", S, (2048, 256)), ("0.8.4", "RTX-3090", L, (8192, 256)),
    ("0.8.4", "H100-80GB", S, (8192, 1024)), ("0.8.4", "H100-PCIe", L, (16384, 1024)),
    ("0.8.4", "H200-NVL", S, (8192, 1024)), ("0.8.4", "H800", S, (2048, 256)),
    ("0.8.4", "A100-80GB", L, (8192, 256)), ("0.8.4", "MI300X", S, (2048, 256)),
    ("0.8.4", "B200", S, (2048, 256)),
    # 0.8.5: >= 70 GiB (an A100-80GB, an H800, an MI300X are large; a 48 GB L40S is not)
    ("0.8.5", "A100-80GB", S, (8192, 1024)), ("0.8.5.post1", "H800", L, (16384, 1024)),
    ("0.8.5", "MI300X", S, (8192, 1024)), ("0.8.5", "L40S", S, (2048, 256)),
    ("0.8.5", "RTX-3090", L, (8192, 256)),
    # 0.9.0 on: an A100 stays small whatever its memory
    ("0.9.0", "A100-80GB", S, (2048, 256)), ("0.14.1", "A100-PCIe-80GB", L, (8192, 256)),
    ("0.9.0", "H100-80GB", S, (8192, 1024)), ("0.27.1", "B200", S, (8192, 1024)),
    ("0.27.1", "B200", L, (16384, 1024)),
    # a GB10's NVML has no memory query: device_memory = 0, the small tier (NVML_TOTAL_UNCAUGHT)
    ("0.27.1", "GB10", S, (2048, 256)),
    # 0.28.0 on: >= 160 GiB → 16384 for both entry points
    ("0.28.0", "B200", S, (16384, 1024)), ("0.32.0", "MI300X", S, (16384, 1024)),
    ("0.28.0", "H200", S, (8192, 1024)), ("0.32.0", "GB10", L, (8192, 256)),
    # 0.33.0: a GB10 (compute capability 12.1, 121 GiB) on the small tier
    ("0.33.0", "GB10", S, (2048, 256)), ("0.33.0", "GB10", L, (8192, 256)),
    ("0.33.0", "RTX-PRO-6000", S, (8192, 1024)), ("0.33.0", "B300", L, (16384, 1024)),
])
def test_defaults_per_release_device_and_entrypoint(version: str, gpu: str, entry: str,
                                                    expected: tuple[int, int]) -> None:
    assert batch_defaults(_gpu(gpu), version, entry, max_model_len=32768) == expected


def test_the_name_test_reads_the_driver_name() -> None:
    # vLLM reads current_platform.get_device_name() (NVML's nvmlDeviceGetName on CUDA); every
    # catalog card has one, and where the catalog lists several spellings of one card they agree
    # on each substring a rule tests
    data = json.loads((configs_dir() / "gpus.json").read_text())
    for row in data["gpus"]:
        names = [a.lower() for a in row.get("aliases", [])
                 if a.startswith(("NVIDIA ", "Tesla ", "AMD "))]
        assert names, row["name"]
        for sub in ("h100", "h200", "a100"):
            assert len({sub in n for n in names}) == 1, (row["name"], sub)
    by_name = {g.name: g for g in catalog()}
    assert by_name["RTX-3090"].device_name == "NVIDIA GeForce RTX 3090"
    assert by_name["H100-80GB"].device_name == "NVIDIA H100 80GB HBM3"
    assert by_name["A100-80GB"].device_name == "NVIDIA A100-SXM4-80GB"


def test_memory_tiers_agree_with_nvmls_total() -> None:
    # from 0.8.5 vLLM compares get_device_total_memory (NVML's total on CUDA, platforms/cuda.py
    # NvmlCudaPlatform) with 70 and 160 GiB; the catalog holds torch's total. No card lies
    # between the two, so either gives the same tier.
    data = json.loads((configs_dir() / "gpus.json").read_text())
    for row in data["gpus"]:
        smi = row.get("smi_total_mib")
        if smi is None:
            continue
        for tier in (70 * GiB, 160 * GiB):
            assert (row["total_bytes"] >= tier) == (smi * MiB >= tier), row["name"]


@pytest.mark.parametrize(("version", "given", "expected"), [
    # before 0.10.1 nothing bounds the defaults (and vLLM refuses tokens < seqs)
    ("0.10.0", (128, None), (128, 1024)),
    # 0.10.1 – 0.11.0: max_num_seqs' default is min(default, max_num_batched_tokens)
    ("0.10.1", (128, None), (128, 128)), ("0.11.0", (512, None), (512, 512)),
    ("0.10.1", (128, 64), (128, 64)),
    # 0.11.1 on: and max_num_batched_tokens' default is min(max_num_seqs × max_model_len, default)
    ("0.11.1", (None, 2), (4, 2)), ("0.33.0", (None, None), (2048, 1024)),
    ("0.11.0", (None, 2), (8192, 2)),
])
def test_defaults_bounded_by_each_other(version: str, given: tuple[int | None, int | None],
                                        expected: tuple[int, int]) -> None:
    # an H100, vllm serve: 8192 tokens and 1024 sequences before the bounds; max_model_len 2
    tokens, seqs = batch_defaults(_gpu("H100-80GB"), version, "serve", max_model_len=2,
                                  given=given)
    assert (given[0] or tokens, given[1] or seqs) == expected


def test_tokens_below_the_default_seqs_are_refused_only_before_0_10_1() -> None:
    from memprof.core.deployment import Deployment
    from memprof.core.estimate import estimate

    dep = Deployment(max_num_batched_tokens=512, max_model_len=4096, engine_version="0.10.0")
    with pytest.raises(BadInput, match="smaller than --max-num-seqs"):
        estimate("qwen3-0.6b", dep, gpu_name="H100")
    e = estimate("qwen3-0.6b", dep.with_(engine_version="0.10.1"), gpu_name="H100")
    assert (e.deployment.max_num_batched_tokens, e.deployment.max_num_seqs) == (512, 512)


def _notes(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, object],
                                                                           list[str]]:
    assert run(["estimate", *argv, "--format", "json"]) in (0, 1)
    out = json.loads(capsys.readouterr().out)
    return out["deployment"], [n for n in out["summary"]["notes"] if "defaults) on" in n]


def test_the_estimate_says_which_default_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["-m", "qwen2.5-7b-instruct", "--gpu", "RTX-3090", "--engine-version", "0.8.4"]
    dep, notes = _notes(argv, capsys)
    assert dep["max_num_seqs"] == 256 and dep["max_num_batched_tokens"] == 2048
    assert notes == ["vLLM 0.8.4: max_num_batched_tokens 2048, max_num_seqs 256 "
                     "(OPENAI_API_SERVER defaults) on a device named 'NVIDIA GeForce RTX 3090' "
                     "(has no 'h100' or 'h200' in its name); 0.8.4 engine/arg_utils.py "
                     "_set_default_args_v1"]
    # a flag given is not a default: only the other is stated
    dep, notes = _notes([*argv, "--max-num-seqs", "64"], capsys)
    assert dep["max_num_seqs"] == 64 and len(notes) == 1
    assert "max_num_batched_tokens 2048 (" in notes[0] and "max_num_seqs" not in notes[0]
    _dep, notes = _notes([*argv, "--max-num-seqs", "64", "--max-num-batched-tokens", "4096"],
                         capsys)
    assert notes == []
    # 0.9.0 on: the name keeps an 80 GB A100 on the small tier
    dep, notes = _notes(["-m", "qwen3-0.6b", "--gpu", "A100-80GB", "--engine-version",
                         "0.19.1"], capsys)
    assert dep["max_num_seqs"] == 256
    assert len(notes) == 1 and "'NVIDIA A100-SXM4-80GB' ('a100' in its name" in notes[0]
    # where the memory alone decides (an H100 at 0.33.0) nothing is added
    _dep, notes = _notes(["-m", "qwen3-0.6b", "--gpu", "H100"], capsys)
    assert notes == []


def test_the_name_decides_only_where_a_rule_reads_it() -> None:
    # GB10 at 0.33.0 is decided by its compute capability, and says so
    d = batch_default(_gpu("GB10"), "0.33.0")
    assert (d.tokens, d.seqs) == (2048, 256) and "compute capability 12.1" in d.why
    assert "NVML" in batch_default(_gpu("GB10"), "0.32.0").why  # NVML_TOTAL_UNCAUGHT
    assert batch_default(_gpu("H100-80GB"), "0.8.5").why == ""


@pytest.mark.parametrize(("version", "gpu", "facts", "mml", "expected"), [
    # V0 above 32768 tokens: chunked prefill on by default → 2048 tokens ...
    ("0.7.3", "H100-80GB", set(), 40960, (2048, 256)),
    ("0.8.5+v0", "H100-80GB", set(), 40960, (2048, 256)),
    # ... except a multimodal model (0.7.3 create_engine_config, 0.8.0 on _set_default_args_v0):
    # max(max_model_len, 2048), and at least 5120 (SchedulerConfig's multimodal floor)
    ("0.7.3", "H100-80GB", {"multimodal"}, 40960, (40960, 256)),
    ("0.10.2+v0", "H100-80GB", {"multimodal"}, 40960, (40960, 256)),
    ("0.7.3", "H100-80GB", {"multimodal"}, 4096, (5120, 256)),
    # MLA: off from 0.8.0 (_set_default_args_v0 'or model_config.use_mla'); in 0.7.x only
    # VllmConfig turns it off, after SchedulerConfig sized 2048 tokens
    ("0.8.5+v0", "H100-80GB", {"mla"}, 163840, (163840, 256)),
    ("0.7.3", "H100-80GB", {"mla"}, 163840, (2048, 256)),
    # not CUDA: off from 0.8.0 (is_gpu = current_platform.is_cuda()); in 0.6.5 - 0.7.3
    # device_type is "cuda" on ROCm too, but the long-context test ends 'and not
    # current_platform.is_rocm()' (0.7.2 engine/arg_utils.py create_engine_config, l.1129-1133)
    ("0.8.4+v0", "MI300X", set(), 40960, (40960, 256)),
    ("0.7.2", "MI300X", set(), 40960, (40960, 256)),
    # V1 reads none of these
    ("0.8.5", "H100-80GB", {"multimodal", "mla"}, 163840, (8192, 1024)),
])
def test_v0_chunked_prefill_default(version: str, gpu: str, facts: set[str], mml: int,
                                    expected: tuple[int, int]) -> None:
    assert batch_defaults(_gpu(gpu), version, "serve", mml,
                          model_facts=frozenset(facts)) == expected


def test_model_facts_read_the_config() -> None:
    from memprof.core.engine_defaults import model_facts
    from memprof.core.models import load_model

    assert model_facts(load_model("qwen2.5-vl-7b-instruct")) == {"multimodal"}
    assert model_facts(load_model("deepseek-v3")) == {"mla"}
    assert model_facts(load_model("qwen3-32b")) == frozenset()


def test_performance_mode_is_listed_not_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # 0.17.0 – 0.33.0 engine/arg_utils.py: performance_mode "throughput" doubles the defaults
    # left out; memprof has no such setting, so a pasted command names it instead of failing
    assert run(["estimate", "--gpu", "H100", "--", "vllm", "serve", "Qwen/Qwen3-32B",
                "--performance-mode", "throughput"]) in (0, 1)
    err = capsys.readouterr().err
    assert "not modelled" in err and "--performance-mode ('throughput' doubles" in err


def test_a_card_without_a_driver_name_says_the_name_is_assumed() -> None:
    custom = GPU(name="custom sm90", total_bytes=80 * GiB, arch="sm90")
    d = batch_default(custom, "0.8.4")
    assert (d.tokens, d.seqs) == (2048, 256)
    assert "'custom sm90'" in d.why and "name is assumed" in d.why


@pytest.mark.parametrize(("version", "lora", "expected"), [
    ("0.7.3", False, 2048), ("0.7.3", True, 131072), ("0.6.5", True, 131072),
    ("0.8.5+v0", True, 131072), ("0.8.5", True, 8192)])
def test_v0_long_context_keeps_chunked_prefill_off_with_lora(version: str, lora: bool,
                                                             expected: int) -> None:
    """V0's long-context default turns chunked prefill on only 'and not self.enable_lora'
    (create_engine_config in 0.6.0 - 0.7.3, _set_default_args_v0 in 0.8.0 - 0.10.2): with LoRA
    a 131,072-token Llama-3.1-8B profiles max_model_len tokens; V1 reads none of it."""
    from memprof.core.deployment import Deployment
    from memprof.core.engine_defaults import resolve
    from memprof.core.models import load_model

    dep = Deployment(engine_version=version, enable_lora=lora)
    got = resolve(dep, load_model("llama-3.1-8b"), _gpu("H100-80GB"))
    assert got.max_num_batched_tokens == expected
