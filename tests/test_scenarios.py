"""Gate scenarios as data: loading, validation against Deployment, evaluation of the bundled set."""

from __future__ import annotations

import time
from dataclasses import fields
from pathlib import Path

import pytest

from memprof.base.errors import BadInput, LayoutError
from memprof.base.units import GiB
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate
from memprof.core.flags import ALIASES
from memprof.core.scenarios import (
    Scenario,
    deployment_keys,
    evaluate_scenario,
    load_scenario,
    load_scenarios,
    request_from_mapping,
)

SCENARIOS = Path(__file__).resolve().parents[1] / "configs" / "scenarios"


@pytest.fixture(scope="module")
def bundled() -> dict[str, Scenario]:
    return {s.name: s for s in load_scenarios(SCENARIOS)}


@pytest.fixture(scope="module")
def evaluated(bundled: dict[str, Scenario]) -> dict[str, tuple[Estimate, float]]:
    out = {}
    for name, s in bundled.items():
        t0 = time.perf_counter()
        e = evaluate_scenario(s)
        out[name] = (e, time.perf_counter() - t0)
    return out


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# --- the bundled scenarios -----------------------------------------------------------------------


def test_every_bundled_scenario_evaluates_quickly(
        evaluated: dict[str, tuple[Estimate, float]]) -> None:
    assert len(evaluated) >= 11
    for name, (e, seconds) in evaluated.items():
        assert e.ranks, name
        assert seconds < 1.0, f"{name} took {seconds:.2f}s"


@pytest.mark.parametrize(("name", "model", "gpu", "expected"), [
    ("deepseek-r1-tp8-b200-cutlass-mla", "deepseek-r1", "B200",
     {"tp": 8, "attention_backend": "cutlass_mla"}),
    ("deepseek-r1-tp8-h200", "deepseek-r1", "H200", {"tp": 8}),
    ("qwen3-32b-tq-k8v4-h200", "qwen3-32b", "H200",
     {"kv_cache_dtype": "turboquant_k8v4", "gpu_memory_utilization": 0.9, "max_num_seqs": 256,
      "pp": 1}),
    ("qwen3-32b-tq-k8v4-pp2-h200", "qwen3-32b", "H200",
     {"kv_cache_dtype": "turboquant_k8v4", "gpu_memory_utilization": 0.9, "max_num_seqs": 256,
      "pp": 2}),
    ("deepseek-v3-sglang-dp-attention-h200", "deepseek-v3", "H200",
     {"engine": "sglang", "tp": 8, "dp": 8, "enable_dp_attention": True}),
    ("deepseek-v4-pro-dp8-ep8-h200", "deepseek-v4-pro", "H200",
     {"dp": 8, "enable_expert_parallel": True, "max_model_len": 200000}),
    ("deepseek-v4-flash-tp2-ep-h200", "deepseek-v4-flash", "H200",
     {"tp": 2, "enable_expert_parallel": True}),
    ("llama-3.1-8b-h100", "llama-3.1-8b", "H100", {}),
    ("llama-3.1-70b-tp4-h100", "llama-3.1-70b", "H100", {"tp": 4}),
    ("qwen3-235b-a22b-fp8-tp4-h100", "qwen3-235b-a22b", "H100",
     {"tp": 4, "quantization": "fp8"}),
    ("gpt-oss-120b-h100", "gpt-oss-120b", "H100", {}),
])
def test_the_issue_s_reference_deployments_are_there(
        bundled: dict[str, Scenario], name: str, model: str, gpu: str,
        expected: dict[str, object]) -> None:
    s = bundled[name]
    assert (s.request.model, s.request.gpu) == (model, gpu)
    assert s.description
    for key, value in expected.items():
        assert getattr(s.request.deployment, key) == value, key


def test_pp2_scenario_has_a_rank_per_stage(evaluated: dict[str, tuple[Estimate, float]]) -> None:
    e, _ = evaluated["qwen3-32b-tq-k8v4-pp2-h200"]
    assert {r.coord.pp_stage for r in e.ranks} == {0, 1}


def test_scenario_keys_are_the_deployment_fields_plus_the_engine_flag_names() -> None:
    names = {f.name for f in fields(Deployment)}
    assert set(deployment_keys()) == names | set(ALIASES)
    assert set(ALIASES.values()) <= names
    # vLLM's and SGLang's spellings of one setting name the same field
    assert ALIASES["tensor_parallel_size"] == ALIASES["tp_size"] == "tp"
    assert ALIASES["kv_cache_memory"] == ALIASES["kv_cache_memory_bytes"]


# --- validation ----------------------------------------------------------------------------------


def test_a_scenario_file_becomes_a_request(tmp_path: Path) -> None:
    p = write(tmp_path, '''
description = "tiny"
model = "llama-3.1-8b"
gpu = "H100"
gpu_memory = "70GiB"
tensor_parallel_size = 2
pp = 1
kv_cache_memory = "16GiB"
gpu_memory_utilization = 1   # an integer is a valid float
enforce_eager = true
''', name="tiny-one.toml")
    s = load_scenario(p)
    assert (s.name, s.description, s.source) == ("tiny-one", "tiny", str(p))
    d = s.request.deployment
    assert (d.tp, d.pp, d.kv_cache_memory_bytes, d.enforce_eager) == (2, 1, 16 * GiB, True)
    assert d.gpu_memory_utilization == 1.0 and isinstance(d.gpu_memory_utilization, float)
    assert s.request.gpu_memory_bytes == 70 * GiB
    assert s.inputs["tensor_parallel_size"] == 2


def test_unknown_key_is_named_with_a_suggestion(tmp_path: Path) -> None:
    p = write(tmp_path, 'model = "llama-3.1-8b"\nmax_num_seq = 8\n')
    with pytest.raises(BadInput) as info:
        load_scenario(p)
    assert str(p) in info.value.message and "'max_num_seq'" in info.value.message
    assert "did you mean 'max_num_seqs'" in info.value.hint


@pytest.mark.parametrize(("line", "message"), [
    ('tensor_parallel_size = "8"', "tensor_parallel_size must be int"),
    ("tp = 2.0", "tp must be int"),
    ("enable_expert_parallel = 1", "enable_expert_parallel must be bool"),
    ("gpu_memory_utilization = true", "gpu_memory_utilization must be float"),
    ("kv_cache_dtype = 8", "kv_cache_dtype must be str"),
    ('kv_cache_memory = "lots"', "cannot read the size 'lots'"),
    ("gpu_memory = -3", "gpu_memory must be a size"),
    ("gpu = 100", "gpu must be a string"),
    ("tp = 2\ntensor_parallel_size = 2", "'tp' and 'tensor_parallel_size' set the same field"),
    ("[extra]\nx = 1", "tables are not scenario keys"),
    ("tp = ", "not valid TOML"),
])
def test_bad_values_are_bad_input(tmp_path: Path, line: str, message: str) -> None:
    p = write(tmp_path, f'model = "llama-3.1-8b"\n{line}\n')
    with pytest.raises(BadInput, match=message) as info:
        load_scenario(p)
    assert "\n" not in info.value.message and info.value.hint


def test_a_scenario_needs_a_model(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no model"):
        load_scenario(write(tmp_path, 'gpu = "H100"\n'))


def test_missing_or_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="does not exist"):
        load_scenarios(tmp_path / "nope")
    with pytest.raises(BadInput, match=r"no scenarios \(\*\.toml\)"):
        load_scenarios(tmp_path)


def test_an_estimator_refusal_names_the_scenario(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, 'model = "llama-3.1-8b"\ntp = 3\n', name="odd-tp.toml"))
    with pytest.raises(LayoutError, match=r"^scenario odd-tp: tensor parallel size 3"):
        evaluate_scenario(s)


def test_a_relative_model_path_is_read_next_to_the_scenario(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parents[1] / "configs" / "models" / "qwen3-0.6b.json"
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine.json").write_text(src.read_text())
    s = load_scenario(write(tmp_path, 'model = "models/mine.json"\ngpu = "H100"\n'))
    assert s.request.model == str(tmp_path / "models" / "mine.json")
    assert evaluate_scenario(s).ranks


def test_request_from_mapping_ignores_extra_keys_only_when_told() -> None:
    values = {"model": "llama-3.1-8b", "min_kv_tokens": 5}
    with pytest.raises(BadInput, match="unknown key 'min_kv_tokens'"):
        request_from_mapping(values, where="x")
    r = request_from_mapping(values, where="x", extra_keys=("min_kv_tokens",))
    assert r.deployment == Deployment()


def test_gate_exits_2_on_an_unknown_key(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, 'model = "llama-3.1-8b"\nfoo = 1\n')
    assert run(["gate", "--scenarios", str(tmp_path), "--baseline",
                      str(tmp_path / "b.json")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: ") and "unknown key 'foo'" in err[0]
    assert err[1].startswith("hint: ")
    assert not (tmp_path / "b.json").exists()
