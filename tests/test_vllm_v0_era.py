"""vLLM's V0 engine after 0.8.0: ``--vllm-use-v1 0`` (VLLM_USE_V1=0) through 0.10.2, the automatic
fallback of ``_is_v1_supported_oracle`` (engines/vllm.py V0_ENGINE, V1_FALLBACK), and the rule
rows of one engine generation (versions.py ``Rule.generation``)."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.engine_log import engine_log
from memprof.core.estimate import estimate
from memprof.core.version_diff import all_rules
from memprof.core.versions import Rule, resolve_version, split_generation, value_at


def test_split_generation() -> None:
    assert split_generation("0.8.5+v0") == ("0.8.5", "v0")
    assert split_generation("0.8.5") == ("0.8.5", "v1")
    assert split_generation("0.7.3") == ("0.7.3", "v0")  # V0 was the default before 0.8.0
    assert split_generation("main@d315eb7") == ("main@d315eb7", "")


def test_rows_of_one_generation_hold_only_for_it() -> None:
    rows = (Rule(name="x", changes="t", since="0.7.1", until="0.11.0", introduced_by="a",
                 source="s", value="v0 row", generation="v0"),
            Rule(name="x", changes="t", since="0.8.0", until=None, introduced_by="b",
                 source="s", value="v1 row", generation="v1"))
    assert value_at(rows, "0.7.3") == "v0 row"
    assert value_at(rows, "0.8.5") == "v1 row"
    assert value_at(rows, "0.8.5+v0") == "v0 row"
    assert value_at(rows, "0.11.0+v0") is None  # past the V0 row's range
    shared = (Rule(name="y", changes="t", since="0.8.0", until=None, introduced_by="c",
                   source="s", value=1),)
    assert value_at(shared, "0.8.5+v0") == 1  # code both engines share holds by release


def test_resolve_version_keeps_the_v0_marker() -> None:
    assert resolve_version("0.8.5+v0") == "0.8.5+v0"
    assert resolve_version("0.7.3+v0") == "0.7.3"  # V0 is 0.7.3's only engine
    with pytest.raises(BadInput):
        resolve_version("0.8.7+v0")


def _est(model: str = "llama-3.1-8b", gpu: str = "H100", **kw: object):  # type: ignore[no-untyped-def]
    return estimate(model, Deployment(**kw), gpu_name=gpu)  # type: ignore[arg-type]


def test_vllm_use_v1_0_runs_v0_rules_at_0_8_5() -> None:
    v1 = _est(engine_version="0.8.5")
    v0 = _est(engine_version="0.8.5", vllm_use_v1=0)
    assert v1.deployment.engine_version == "0.8.5"
    assert v0.deployment.engine_version == "0.8.5+v0"
    # V1 0.8.5 on an 80 GB card: 1024 sequences (_set_default_args_v1); V0: 256
    assert v1.deployment.max_num_seqs == 1024 and v0.deployment.max_num_seqs == 256
    # V0: chunked prefill on above 32768 tokens of context → 2048 batched tokens; without it
    # max(max_model_len, 2048) (_set_default_args_v0)
    assert v0.deployment.max_num_batched_tokens == 2048
    short = _est(engine_version="0.8.5", vllm_use_v1=0, max_model_len=16384)
    assert short.deployment.max_num_batched_tokens == 16384
    # the V0 budget line is the one the V0 worker logs, with its # cuda blocks
    log = engine_log(v0, v0.ranks[0])
    assert log[0].startswith("the current vLLM instance can use total_gpu_memory")
    assert any(x.startswith("# cuda blocks:") for x in log)
    assert not any(x.startswith("# cuda blocks:") for x in engine_log(v1, v1.ranks[0]))
    assert any("VLLM_USE_V1=0" in n for n in v0.notes)


def test_v0_at_0_8_5_matches_0_7_3_where_no_shared_rule_moved() -> None:
    """The V0 worker's budget (worker.py determine_num_available_blocks), sampler and defaults
    are the same code in 0.7.3 and 0.8.5; for a dense Llama at TP1 no shared rule differs."""
    assert _est(engine_version="0.8.5", vllm_use_v1=0).kv_cache_tokens == \
        _est(engine_version="0.7.3").kv_cache_tokens


@pytest.mark.parametrize(("version", "kw", "gpu", "v0"), [
    ("0.8.5", {}, "V100-32GB", True),        # Compute Capability < 8.0
    ("0.10.1", {}, "V100-32GB", True),
    ("0.10.2", {}, "V100-32GB", False),      # the check is gone in 0.10.2
    ("0.8.1", {"kv_cache_dtype": "fp8"}, "H100", True),   # any KV dtype but auto
    ("0.8.5", {"kv_cache_dtype": "fp8"}, "H100", False),  # fp8 with FA3 on sm90
    ("0.8.5", {"kv_cache_dtype": "fp8"}, "A100-80GB", True),
    ("0.8.5", {"pp": 2}, "H100", True),      # PP without Ray
    ("0.9.0", {"pp": 2}, "H100", False),
    ("0.8.5", {"dtype": "float32"}, "H100", True),
    ("0.8.2", {"quantization": "bitsandbytes"}, "H100", True),  # V1_UNSUPPORTED_QUANT
    ("0.8.3", {"quantization": "bitsandbytes"}, "H100", False),  # bitsandbytes left the list
    ("0.8.2", {"enable_lora": True}, "H100", True),  # 'LoRA ... off by default for now'
    ("0.8.3", {"enable_lora": True}, "H100", False),
    ("0.8.2", {"enable_lora": True, "vllm_use_v1": 1}, "H100", False),  # a warning, not a refusal
])
def test_automatic_fallback(version: str, kw: dict[str, object], gpu: str, v0: bool) -> None:
    model = "qwen2.5-7b-instruct"
    if gpu.startswith("V100"):
        kw = {**kw, "dtype": "float16"}
    e = _est(model, gpu, engine_version=version, **kw)
    assert e.deployment.engine_version == (f"{version}+v0" if v0 else version)
    assert any("falls back to the V0 engine" in n for n in e.notes) == v0


@pytest.mark.parametrize(("version", "v0"), [("0.8.2", True), ("0.8.5", True), ("0.9.0", False)])
def test_gguf_falls_back_until_0_9_0(version: str, v0: bool) -> None:
    """vLLM's ``ModelConfig.quantization`` is the checkpoint's method where no flag is given, so
    a GGUF file (its types given as the config's quantization_config) falls back as the flag
    does: 0.8.x engine/arg_utils.py V1_UNSUPPORTED_QUANT, gone in 0.9.0."""
    gguf = '{"quantization_config": {"quant_method": "gguf", "file_type": "Q8_0"}}'
    e = _est("llama-3.2-3b-instruct", "H100", engine_version=version, hf_overrides=gguf,
             quantization="gguf")
    assert e.deployment.engine_version == (f"{version}+v0" if v0 else version)
    assert any("falls back to the V0 engine for --quantization gguf" in n
               for n in e.notes) == v0


def test_a_bnb_checkpoint_falls_back_without_the_flag() -> None:
    """A pre-quantised bitsandbytes checkpoint (its config's quant_method) at 0.8.2: V0, as
    with --quantization bitsandbytes; at 0.8.3 V1."""
    assert _est("llama-3.1-8b-unsloth-bnb-4bit", "H100",
                engine_version="0.8.2").deployment.engine_version == "0.8.2+v0"
    assert _est("llama-3.1-8b-unsloth-bnb-4bit", "H100",
                engine_version="0.8.3").deployment.engine_version == "0.8.3"


def test_vllm_use_v1_refusals() -> None:
    with pytest.raises(BadInput, match="not supported with Compute Capability"):
        _est("qwen2.5-7b-instruct", "V100-32GB", engine_version="0.8.5", vllm_use_v1=1,
             dtype="float16")
    with pytest.raises(BadInput, match="no V0 engine"):
        _est(engine_version="0.11.0", vllm_use_v1=0)
    with pytest.raises(BadInput, match="V0 engine only"):
        _est(engine_version="0.7.3", vllm_use_v1=1)


def test_cli_flag_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["estimate", "--model", "llama-3.1-8b", "--gpu", "H100", "--engine-version",
                "0.8.5", "--vllm-use-v1", "0"]) == 0
    assert "0.8.5+v0" in capsys.readouterr().out
    assert run(["estimate", "--model", "llama-3.1-8b", "--gpu", "H100", "--engine-version",
                "0.11.0", "--vllm-use-v1", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "\nhint:" in err


def test_every_rule_row_has_a_source_and_a_known_generation() -> None:
    for r in all_rules():
        assert r.source and r.generation in ("", "v0", "v1"), r.name
