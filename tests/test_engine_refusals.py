"""Verdicts follow the engines' own refusals; configs are validated, never reinterpreted.

Each reproducer of the review runs the real CLI in process: a setting the engine refuses is one
``error:`` line, one ``hint:`` line and exit 2 before any work; a setting the engine changes is
estimated as the engine runs it, with a note saying so.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.base.errors import BadInput, ConfigError
from memprof.base.units import GiB
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.engines import engine_named
from memprof.core.estimate import estimate
from memprof.core.models import spec_from_config

ROOT = Path(__file__).resolve().parents[1]


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


def refused(argv: list[str], *needles: str) -> str:
    code, out, err = invoke(argv)
    lines = err.strip().splitlines()
    assert code == 2 and out == "", (argv, code, err)
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    for n in needles:
        assert n in err, (n, err)
    return err


def config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "configs/models" / f"{name}.json").read_text())
    return data


def write(tmp_path: Path, cfg: dict[str, Any]) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


# --- 1. max_model_len beyond the model's derived maximum -----------------------------------------


def test_max_model_len_beyond_the_derived_maximum_is_refused_as_vllm_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", raising=False)
    refused(["estimate", "--model", "qwen3-32b", "--gpu", "H200", "--max-model-len", "131072"],
            "derived maximum 40,960", "max_position_embeddings", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
    # the derived maximum itself is accepted
    code, _out, _err = invoke(["estimate", "--model", "qwen3-32b", "--gpu", "H200",
                               "--max-model-len", "40960", "-f", "json"])
    assert code == 0


def test_the_override_variable_is_an_explicit_opt_in_stated_in_the_output(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    code, out, _err = invoke(["estimate", "--model", "qwen3-32b", "--gpu", "H200",
                              "--max-model-len", "131072", "-f", "json"])
    assert code in (0, 1)
    d = json.loads(out)
    assert d["deployment"]["max_model_len"] == 131072
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in json.dumps(d)
    # SGLang reads its own variable, not vLLM's
    refused(["estimate", "--engine", "sglang", "--model", "qwen3-32b", "--gpu", "H200",
             "--context-length", "131072"], "--context-length 131,072", "SGLang refuses",
            "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")


VLLM_LEN = engine_named("vllm").derived_max_model_len
SGLANG_LEN = engine_named("sglang").derived_max_model_len


def test_derived_maximum_follows_each_engines_rope_rules() -> None:
    ds = config("deepseek-r1")  # yarn: vLLM original 4096 × 40; SGLang max_position_embeddings
    assert VLLM_LEN(ds) == (
        163840, "yarn original_max_position_embeddings 4,096 × rope factor 40")
    assert SGLANG_LEN(ds)[0] == 163840  # type: ignore[index]
    llama = config("llama-3.1-8b")  # llama3 scaling: no factor in either engine
    assert VLLM_LEN(llama)[0] == 131072  # type: ignore[index]
    assert SGLANG_LEN(llama)[0] == 131072  # type: ignore[index]
    linear = {**config("qwen3-32b"), "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    assert VLLM_LEN(linear)[0] == 81920  # type: ignore[index]
    assert SGLANG_LEN(linear)[0] == 81920  # type: ignore[index]
    # vLLM takes the smallest length key, model_max_length when set
    assert VLLM_LEN({"max_position_embeddings": 4096, "seq_length": 2048})[0] == 2048  # type: ignore[index]
    assert VLLM_LEN({"max_position_embeddings": 4096,
                                  "model_max_length": 8192})[0] == 8192  # type: ignore[index]
    assert VLLM_LEN({"hidden_size": 8}) is None


def test_a_yarn_override_raises_the_derived_maximum_and_the_default() -> None:
    yarn = ('{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, '
            '"original_max_position_embeddings": 32768}}')
    e = estimate("qwen3-32b", Deployment(hf_overrides=yarn), gpu_name="H200")
    assert e.max_model_len == 131072  # vLLM's default max_model_len is the derived one
    e2 = estimate("qwen3-32b", Deployment(hf_overrides=yarn, engine="sglang"), gpu_name="H200")
    assert e2.max_model_len == 40960  # SGLang: the factor is 1 when original_... is stated


def test_readme_sweep_example_stays_within_the_models_length() -> None:
    text = (ROOT / "README.md").read_text()
    assert "max_model_len=8K,32K,128K" not in text
    assert "--set max_model_len=8K,16K,32K" in text


# --- 2. block sizes ------------------------------------------------------------------------------


def test_block_size_outside_vllms_choices_is_refused() -> None:
    refused(["estimate", "--model", "deepseek-v3", "--gpu", "H200", "-tp", "8",
             "--block-size", "7"], "--block-size 7", "1, 8, 16, 32, 64, 128, 256")
    # 0.7.x had no 1 and no 256
    refused(["estimate", "--model", "llama-3.1-8b", "--gpu", "H100", "--engine-version", "0.7.3",
             "--block-size", "256"], "8, 16, 32, 64, 128")


def test_mla_block_size_is_forced_as_vllm_forces_it() -> None:
    forced = estimate("deepseek-v3", Deployment(tp=8, block_size=16), gpu_name="H200")
    assert forced.ranks[0].plan.block_size == 64
    assert any("vLLM forces 64 for flashmla" in n for n in forced.notes)
    kept = estimate("deepseek-v3", Deployment(tp=8, block_size=128), gpu_name="H200")
    assert kept.ranks[0].plan.block_size == 128 and not any("forces" in n for n in kept.notes)
    cutlass = estimate("deepseek-v3", Deployment(tp=8, block_size=64), gpu_name="B200")
    assert cutlass.ranks[0].plan.block_size == 128
    assert any("forces 128 for cutlass_mla" in n for n in cutlass.notes)


def test_gqa_block_size_the_kernels_cannot_take_is_refused() -> None:
    refused(["estimate", "--model", "qwen3-32b", "--gpu", "H200", "--block-size", "8"],
            "flash_attn", "multiples of 16")
    ok = estimate("qwen3-32b", Deployment(block_size=32), gpu_name="H200")
    assert ok.ranks[0].plan.block_size == 32


# --- 3. KV-cache dtypes against the model kind ---------------------------------------------------


def test_fp8_ds_mla_is_refused_outside_sparse_mla() -> None:
    refused(["estimate", "--model", "qwen3-32b", "--gpu", "H200", "--kv-cache-dtype",
             "fp8_ds_mla"], "fp8_ds_mla", "GQA", "sparse MLA")
    refused(["estimate", "--model", "deepseek-r1", "--gpu", "H200", "-tp", "8",
             "--kv-cache-dtype", "fp8_ds_mla"], "dense MLA")
    # DeepSeek-V4 reads it
    code, _o, _e = invoke(["estimate", "--model", "deepseek-v4-flash", "--gpu", "H200", "-tp",
                           "4", "--kv-cache-dtype", "fp8_ds_mla", "-f", "json"])
    assert code in (0, 1)


def test_turboquant_is_refused_on_mla_and_under_sglang() -> None:
    refused(["estimate", "--model", "deepseek-r1", "--gpu", "H200", "-tp", "8",
             "--kv-cache-dtype", "turboquant_k8v4"], "standard attention only")
    refused(["estimate", "--engine", "sglang", "--model", "qwen3-32b", "--gpu", "H200",
             "--kv-cache-dtype", "turboquant_4bit_nc"], "SGLang has no such")


# --- 4-6. configs validated, never reinterpreted -------------------------------------------------


@pytest.mark.parametrize(("model", "drop", "needle"), [
    ("deepseek-v3", "n_routed_experts", "'n_routed_experts'"),
    ("deepseek-v3", "first_k_dense_replace", "'first_k_dense_replace'"),
    ("deepseek-v3", "n_shared_experts", "'n_shared_experts'"),
    ("deepseek-v3", "kv_lora_rank", "'kv_lora_rank'"),
    ("deepseek-v3", "qk_rope_head_dim", "'qk_rope_head_dim'"),
    ("deepseek-v3", "q_lora_rank", "'q_lora_rank'"),
    ("deepseek-v3", "num_experts_per_tok", "'num_experts_per_tok'"),
    ("deepseek-v3", "moe_intermediate_size", "'moe_intermediate_size'"),
    ("qwen3-235b-a22b", "num_experts", "'num_experts'"),
    ("qwen3-235b-a22b", "num_experts_per_tok", "'num_experts_per_tok'"),
    ("gpt-oss-120b", "layer_types", "'layer_types'"),
    ("gpt-oss-120b", "num_experts_per_tok", "'num_experts_per_tok'"),
    ("deepseek-v4-flash", "n_shared_experts", "'n_shared_experts'"),
])
def test_a_config_missing_a_field_its_architecture_needs_is_refused(
        tmp_path: Path, model: str, drop: str, needle: str) -> None:
    cfg = config(model)
    cfg.pop(drop)
    if drop == "num_experts_per_tok":
        cfg.pop("experts_per_token", None)
    refused(["estimate", "--model", write(tmp_path, cfg), "--gpu", "H200", "-tp", "8"], needle)


def test_deepseek_without_n_routed_experts_is_not_a_dense_model(tmp_path: Path) -> None:
    cfg = config("deepseek-v3")
    del cfg["n_routed_experts"]
    with pytest.raises(ConfigError, match="n_routed_experts"):
        spec_from_config(cfg)


@pytest.mark.parametrize(("model", "field", "value", "needle"), [
    ("qwen3-32b", "intermediate_size", 0, "'intermediate_size' is 0"),
    ("qwen3-235b-a22b", "num_experts", 0, "'num_experts' is 0"),
    ("qwen3-235b-a22b", "moe_intermediate_size", 0, "'moe_intermediate_size' is 0"),
    ("qwen3-235b-a22b", "num_experts_per_tok", 0, "'num_experts_per_tok' is 0"),
    ("qwen3-235b-a22b", "num_experts_per_tok", 129, "more than the 128 experts"),
    ("qwen3-235b-a22b", "decoder_sparse_step", 0, "'decoder_sparse_step' is 0"),
    ("deepseek-v3", "n_routed_experts", 0, "'n_routed_experts' is 0"),
    ("deepseek-v3", "num_experts_per_tok", 257, "more than the 256 experts"),
    ("deepseek-v3", "moe_layer_freq", 0, "'moe_layer_freq' is 0"),
    ("deepseek-v3", "kv_lora_rank", 0, "'kv_lora_rank' is 0"),
    ("gpt-oss-120b", "num_local_experts", 0, "'num_local_experts' is 0"),
    ("qwen3-32b", "head_dim", 0, "'head_dim' is 0"),
])
def test_a_zero_or_inconsistent_size_is_refused(tmp_path: Path, model: str, field: str,
                                                value: int, needle: str) -> None:
    cfg = {**config(model), field: value}
    refused(["estimate", "--model", write(tmp_path, cfg), "--gpu", "H200", "-tp", "8"], needle)


def test_qwen3_without_head_dim_takes_hfs_default_not_hidden_over_heads() -> None:
    cfg = config("qwen3-32b")
    del cfg["head_dim"]
    # Qwen3Config(head_dim=128); hidden 5120 / 64 heads would be 80
    assert spec_from_config(cfg).layers[0].attention.head_dim == 128


@pytest.mark.parametrize(("rope", "needle"), [
    ({"rope_type": "yarn", "factor": -4.0, "original_max_position_embeddings": 4096},
     "'rope_scaling.factor' is -4.0"),
    ({"rope_type": "yarn", "factor": "4", "original_max_position_embeddings": 4096},
     "'rope_scaling.factor' must be a number"),
    ({"rope_type": "warp", "factor": 2.0}, "'rope_scaling.rope_type' is 'warp'"),
    ({"rope_type": "yarn", "factor": 4.0}, "original_max_position_embeddings"),
    ({"rope_type": "linear"}, "has no 'factor'"),
    ({"factor": 2.0}, "'rope_scaling.rope_type' must be a string"),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": "4096"},
     "original_max_position_embeddings' must be an integer"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": [1]}, "low_freq_factor"),
    ({"type": "yarn", "factor": float("nan"), "original_max_position_embeddings": 4096},
     "'rope_scaling.factor' must be a number"),
])
def test_rope_scaling_is_validated_as_the_config_loads(tmp_path: Path, rope: dict[str, Any],
                                                       needle: str) -> None:
    cfg = {**config("qwen3-32b"), "rope_scaling": rope}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg, allow_nan=True))
    refused(["estimate", "--model", str(path), "--gpu", "H200"], needle)


# --- 7. --hf-overrides ---------------------------------------------------------------------------


def test_hf_overrides_change_the_estimate() -> None:
    base = estimate("qwen3-32b", Deployment(), gpu_name="H200")
    four = estimate("qwen3-32b", Deployment(hf_overrides='{"num_hidden_layers": 4}'),
                    gpu_name="H200")
    assert four.spec.num_layers == 4 and base.spec.num_layers == 64
    assert four.ranks[0].weights_bytes < base.ranks[0].weights_bytes / 4
    assert four.kv_cache_tokens > 10 * base.kv_cache_tokens
    assert any("--hf-overrides" in n and "num_hidden_layers" in n for n in four.notes)


def test_hf_overrides_from_a_pasted_command_and_the_flag_agree() -> None:
    code, out, err = invoke(["estimate", "--gpu", "H200", "-f", "json", "--", "vllm", "serve",
                             "Qwen/Qwen3-32B", "--hf-overrides", '{"num_hidden_layers": 4}'])
    assert code == 0 and "ignored" not in err.split("hf_overrides")[0][-40:]
    assert json.loads(out)["model"]["num_layers"] == 4
    code2, out2, _ = invoke(["estimate", "--gpu", "H200", "-f", "json", "--model", "qwen3-32b",
                             "--hf-overrides", '{"num_hidden_layers": 4}'])
    assert code2 == 0 and json.loads(out2)["ranks"] == json.loads(out)["ranks"]
    code3, out3, _ = invoke(["estimate", "--gpu", "H200", "-f", "json", "--", "python", "-m",
                             "sglang.launch_server", "--model-path", "Qwen/Qwen3-32B",
                             "--json-model-override-args", '{"num_hidden_layers": 8}'])
    assert code3 == 0 and json.loads(out3)["model"]["num_layers"] == 8


@pytest.mark.parametrize(("text", "needle"), [
    ("[1]", "must be a JSON object"), ("{num_hidden_layers: 4}", "is not JSON"),
    ('{"num_hidden_layers": 0}', "'num_hidden_layers' is 0"),
    ('{"num_experts": 0}', None),  # a dense model ignores it
    ('{"rope_scaling": {"rope_type": "yarn", "factor": -1, '
     '"original_max_position_embeddings": 1}}', "'rope_scaling.factor' is -1"),
])
def test_hf_overrides_are_validated_with_the_config(text: str, needle: str | None) -> None:
    argv = ["estimate", "--model", "qwen3-32b", "--gpu", "H200", "--hf-overrides", text]
    if needle is None:
        assert invoke(argv)[0] == 0
    else:
        refused(argv, needle)


def test_overrides_are_merged_before_validation_never_after() -> None:
    with pytest.raises(BadInput, match="num_attention_heads"):
        estimate("qwen3-32b", Deployment(hf_overrides='{"num_attention_heads": 0}'),
                 gpu_name="H200")


# --- 8. vLLM on a small GPU ----------------------------------------------------------------------


def test_vllm_on_a_3gib_gpu_is_judged_as_vllm_not_sglang() -> None:
    code, out, err = invoke(["estimate", "--gpu-memory", "3GiB", "--gpu-arch", "sm90",
                             "--model", "qwen3-0.6b", "-f", "json"])
    assert "mem_fraction_static" not in err and code in (0, 1), err
    d = json.loads(out)
    assert d["deployment"]["engine"] == "vllm" and d["gpu"]["total_bytes"] == 3 * GiB
    # SGLang on the same GPU still refuses its own heuristic, naming it
    refused(["estimate", "--engine", "sglang", "--gpu-memory", "3GiB", "--gpu-arch", "sm90",
             "--model", "qwen3-0.6b"],
            "mem_fraction_static")


# --- fuzzing: config mutations the checks above cover --------------------------------------------

MUTATED_FIELDS = ("n_routed_experts", "num_experts", "num_local_experts", "num_experts_per_tok",
                  "experts_per_token", "moe_intermediate_size", "intermediate_size",
                  "first_k_dense_replace", "n_shared_experts", "moe_layer_freq",
                  "decoder_sparse_step", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
                  "v_head_dim", "q_lora_rank", "head_dim", "sliding_window", "layer_types",
                  "shared_expert_intermediate_size", "max_position_embeddings", "rope_scaling",
                  "use_sliding_window", "max_window_layers")
values = st.one_of(st.none(), st.integers(-2, 300), st.sampled_from([2**40, 1.5, "8", True, []]),
                   st.fixed_dictionaries({}, optional={
                       "rope_type": st.sampled_from(["yarn", "linear", "llama3", "x", 3]),
                       "type": st.sampled_from(["yarn", "dynamic"]),
                       "factor": st.one_of(st.floats(allow_nan=True), st.integers(-3, 64),
                                           st.just("2")),
                       "original_max_position_embeddings": st.integers(-1, 70000)}))
MODELS = ("deepseek-v3", "qwen3-235b-a22b", "gpt-oss-120b", "qwen3-32b", "deepseek-v4-flash",
          "qwen2.5-7b-instruct")


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(MODELS),
       edits=st.lists(st.tuples(st.sampled_from(MUTATED_FIELDS), st.one_of(st.just(...), values)),
                      min_size=1, max_size=3),
       mml=st.sampled_from([None, 4096, 40960, 40961, 131072, 2**20]))
def test_config_mutations_give_an_answer_or_one_named_refusal(
        model: str, edits: list[tuple[str, object]], mml: int | None) -> None:
    cfg = copy.deepcopy(config(model))
    for key, value in edits:
        if value is ...:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    dep = Deployment(tp=8 if "deepseek" in model or "235b" in model or "oss" in model else 1,
                     max_model_len=mml)
    try:
        spec = spec_from_config(cfg, name=model)
        e = estimate(spec, dep, gpu_name="H200")
    except BadInput as exc:
        assert exc.hint and "\n" not in exc.message
        return
    # an answer: every MoE layer has experts and a top-k within them, and the context length is
    # within what the engine derives (no override variable in the test's environment)
    for layer in e.spec.layers:
        if layer.mlp.kind == "moe":
            assert 1 <= layer.mlp.top_k <= layer.mlp.num_experts
            assert layer.mlp.moe_intermediate_size >= 1
        else:
            assert layer.mlp.intermediate_size >= 1
    derived = VLLM_LEN(cfg)
    assert derived is None or e.max_model_len <= derived[0]


@pytest.mark.parametrize("value", ["half", -0.5, 0, 2.0, True])
def test_partial_rotary_factor_is_a_number_in_0_1(tmp_path: Path, value: object) -> None:
    cfg = {**config("qwen3-32b"), "partial_rotary_factor": value}
    refused(["estimate", "--model", write(tmp_path, cfg), "--gpu", "H200"],
            "'partial_rotary_factor' must be a number in (0, 1]")


@pytest.mark.parametrize(("method", "quant", "needle"), [
    ("awq", {"quant_method": "awq", "group_size": 128}, "'w_bit' or 'bits'"),
    ("gptq", {"quant_method": "gptq", "bits": 4}, "'group_size'"),
    ("awq", {"quant_method": "awq", "bits": 4, "q_group_size": "128"}, "q_group_size"),
])
def test_weight_only_checkpoints_state_their_bits_and_group(tmp_path: Path, method: str,
                                                            quant: dict[str, Any],
                                                            needle: str) -> None:
    assert quant["quant_method"] == method
    cfg = {**config("qwen3-32b"), "quantization_config": quant}
    refused(["estimate", "--model", write(tmp_path, cfg), "--gpu", "H200"], needle)
    ok = {**config("qwen3-32b"), "quantization_config": {**quant, "bits": 4, "group_size": 128,
                                                          "q_group_size": 128}}
    assert invoke(["estimate", "--model", write(tmp_path, ok), "--gpu", "H200"])[0] in (0, 1)
