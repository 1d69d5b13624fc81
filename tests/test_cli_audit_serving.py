"""A demanding user's audit of the newest serving settings (n-gram speculation, the pooling
runner, LoRA, --dtype, --language-model-only), one table per class of mistake found: each row is
a command line that once ran on a guess, told two stories at once, or refused what the engine
takes; now it is one ``error:`` line and a ``hint:`` (exit 2) before any work, or it runs as the
engine would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.core.speculative import method_of, vllm_method
from memprof.core.versions import resolve_version
from memprof.probes.serve_flags import ENGINE_VERSION_ASSUMED
from tests.cli_helpers import invoke, one_error

NEWEST = resolve_version(None, "vllm")  # what an estimate without --engine-version models
PUBLISHED = Path(__file__).parent / "data" / "published.json"


def _quote(row_id: int) -> str:
    row = next(r for r in json.loads(PUBLISHED.read_text())["rows"] if r["id"] == row_id)
    quote = row["quote"]
    return "\n".join(quote) if isinstance(quote, list) else str(quote)


def _paste(conf: str) -> list[str]:
    return ["estimate", "--gpu", "H200", "--", "vllm", "serve", "Qwen/Qwen3-8B",
            "--speculative-config", conf]


# --- a pasted --speculative-config vLLM refuses is refused, never estimated without it -------
# (vLLM config/speculative.py SpeculativeConfig: __post_init__ and _verify_args)

SPEC_REFUSED = [
    ('{"method": "ngram", "num_speculative_tokens": 0}', "must be a positive integer, got 0"),
    ('{"method": "ngram", "num_speculative_tokens": -2}', "must be a positive integer, got -2"),
    ('{"method": "ngram", "num_speculative_tokens": 4.5}', "got 4.5"),
    ('{"method": "ngram", "num_speculative_tokens": "4"}', 'got "4"'),
    ('{"method": "ngram", "num_speculative_tokens": true}', "got true"),
    ('{"method": "eagle3", "model": "x/head", "num_speculative_tokens": 0}', "got 0"),
    ('{"method": "ngram"}', "'ngram' without num_speculative_tokens"),
    ('{"method": "deepseek_mtp"}', "'deepseek_mtp' without num_speculative_tokens"),
    ('{"num_speculative_tokens": 3}', "names no method and no draft model"),
    ("{}", "names no method and no draft model"),
    ('{"method": null, "num_speculative_tokens": 3}', "names no method and no draft model"),
    ("[1, 2]", "is JSON but not an object"),
    ("null", "is JSON but not an object"),
    ('"ngram"', "is JSON but not an object"),
    ('{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, '
     '"prompt_lookup_max": 2}', "prompt_lookup_min 5 is above prompt_lookup_max 2"),
]


@pytest.mark.parametrize(("conf", "needle"), SPEC_REFUSED, ids=[c for c, _ in SPEC_REFUSED])
def test_a_speculative_config_vllm_refuses_is_refused(conf: str, needle: str) -> None:
    code, out, err = invoke(_paste(conf))
    assert code == 2 and out == "", err
    one_error(err, needle)


SPEC_TAKEN = [
    ('{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}', "ngram"),
    ('{"model": "[ngram]", "num_speculative_tokens": 3}', "ngram"),
    ('{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, '
     '"prompt_lookup_max": 2}', "ngram"),
]


@pytest.mark.parametrize(("conf", "method"), SPEC_TAKEN, ids=[c for c, _ in SPEC_TAKEN])
def test_a_speculative_config_vllm_takes_is_estimated(conf: str, method: str) -> None:
    code, out, err = invoke([*_paste(conf)[:3], "-f", "json", *_paste(conf)[3:]])
    assert code == 0, err
    dep = json.loads(out)["deployment"]
    assert dep["speculative_method"] == method
    assert dep["num_speculative_tokens"] == json.loads(conf)["num_speculative_tokens"]


_ODD = st.one_of(st.none(), st.booleans(), st.floats(-2, 6), st.sampled_from(["4", ""]),
                 st.lists(st.integers(0, 3), max_size=2))
_CONFIGS = st.one_of(
    st.fixed_dictionaries({"method": st.just("ngram"),
                           "num_speculative_tokens": st.integers(-1, 6)},
                          optional={"prompt_lookup_min": st.integers(1, 6),
                                    "prompt_lookup_max": st.integers(1, 6)}),
    st.fixed_dictionaries({}, optional={
        "method": st.one_of(st.sampled_from(["ngram", "deepseek_mtp", "mtp", "eagle3", "medusa",
                                             "suffix", "ngram_gpu", "ngramz", "NGRAM"]), _ODD),
        "model": st.sampled_from(["ngram", "[ngram]", "x/head"]),
        "num_speculative_tokens": st.one_of(st.integers(-2, 6), _ODD),
        "prompt_lookup_min": st.integers(0, 6),
        "prompt_lookup_max": st.integers(0, 6),
        "bogus": _ODD}),
    _ODD, st.integers(-1, 3))


@given(_CONFIGS)
@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_any_speculative_config_is_one_error_or_what_vllm_runs(conf: object) -> None:
    """Whatever JSON a --speculative-config holds: one error: line (exit 2, after the lines
    saying what was read where the command parsed), or an estimate whose draft tokens are the
    positive integer an n-gram config gives, or, for a method memprof does not model only, none
    at all with the method listed as not modelled; never an internal error."""
    code, out, err = invoke(["estimate", "--gpu", "H200", "-f", "json", "--", "vllm", "serve",
                             "Qwen/Qwen3-8B", "--speculative-config", json.dumps(conf)])
    assert code in (0, 1, 2) and "Traceback" not in err, err
    if code == 2:
        lines = err.strip().splitlines()
        one_error("\n".join(lines[-2:]), "")
        assert all(ln.startswith(("read as", "warning:", "ignored")) for ln in lines[:-2]), err
        return
    assert isinstance(conf, dict)
    k = json.loads(out)["deployment"]["num_speculative_tokens"]
    if k:
        assert k == conf["num_speculative_tokens"] and isinstance(k, int) and k > 0
    else:  # only a method memprof does not model is left out, and said so
        assert method_of(vllm_method(conf)) is None, conf
        assert "not modelled" in err and "--speculative-config" in err


# --- explain: a LoRA flag the user gives wrong is refused, not dropped with the log's LoRA ----


@pytest.fixture
def lora_log(tmp_path: Path) -> Path:
    """Row 1607's log (vLLM 0.27.1, Qwen3-4B with LoRA shown by its Punica line only)."""
    p = tmp_path / "lora.log"
    p.write_text(_quote(1607))
    return p


def _explain(log: Path, *flags: str) -> tuple[int, str, str]:
    return invoke(["explain", str(log), "-m", "qwen3-4b", "--gpu", "RTX-4090", *flags])


@pytest.mark.parametrize(("flags", "needle"), [
    (["--max-lora-rank", "7"], "--max-lora-rank 7 is not one vLLM 0.27.1 accepts"),
    (["--max-loras", "0"], "--max-loras must be at least 1"),
    (["--lora-extra-vocab-size", "512"], "--lora-extra-vocab-size: vLLM 0.27.1 has no such"),
])
def test_explain_refuses_a_lora_flag_vllm_refuses(lora_log: Path, flags: list[str],
                                                   needle: str) -> None:
    code, out, err = _explain(lora_log, *flags)
    assert code == 2 and out == "", err
    one_error(err, needle)


def _notes(log: Path, *flags: str) -> list[str]:
    code, out, err = _explain(log, "-f", "json", *flags)
    assert code in (0, 1), err
    notes: list[str] = json.loads(out)["log"]["notes"]
    return notes


@pytest.mark.parametrize(("flags", "assumed"), [
    ([], "(max_loras 1, max_lora_rank 16)"),
    (["--max-lora-rank", "32"], "(max_loras 1)"),
    (["--max-loras", "2"], "(max_lora_rank 16)"),
    (["--max-loras", "2", "--max-lora-rank", "32"], None),
])
def test_explain_says_only_the_lora_sizes_it_assumes(lora_log: Path, flags: list[str],
                                                      assumed: str | None) -> None:
    sizes = [n for n in _notes(lora_log, *flags) if "LoRA's sizes" in n]
    if assumed is None:
        assert sizes == []
    else:
        assert len(sizes) == 1 and assumed in sizes[0], sizes




# --- the pooling runner's refusals name the release and what vLLM says ------------------------

POOLING_REFUSED = [
    # the newest release named, never an empty one ("vLLM  has no --task")
    (["--task", "embed"], f"vLLM {NEWEST} has no --task (removed in 0.13.0)"),
    (["--runner", "pooling", "--convert", "reward"], f"vLLM {NEWEST} has no --convert reward"),
    # a *ForCausalLM kept without a conversion: vLLM's config/model.py refuses the runner
    (["--runner", "pooling", "--convert", "none"],
     "--runner pooling --convert none: Qwen3ForCausalLM is no pooling model"),
    (["--runner", "pooling", "--convert", "none", "--engine-version", "0.12.0"],
     "Qwen3ForCausalLM is no pooling model"),
]


@pytest.mark.parametrize(("flags", "needle"), POOLING_REFUSED,
                         ids=[" ".join(f) for f, _ in POOLING_REFUSED])
def test_a_pooling_refusal_names_the_release(flags: list[str], needle: str) -> None:
    code, out, err = invoke(["estimate", "-m", "qwen3-8b", *flags])
    assert code == 2 and out == "", err
    one_error(err, needle)
    assert "vLLM  " not in err


@pytest.mark.parametrize(("flags", "drop"), [
    (["--task", "embed", "--engine-version", "0.9.2"], "drop --task embed"),
    (["--runner", "pooling", "--engine-version", "0.10.2"], "drop --runner pooling"),
])
def test_a_pooling_release_refusal_hints_the_flag_given(flags: list[str], drop: str) -> None:
    code, _, err = invoke(["estimate", "-m", "qwen3-8b", *flags])
    assert code == 2
    assert err.strip().splitlines()[-1].endswith(drop), err


def test_the_read_as_line_names_the_release_engine_version_gives() -> None:
    code, _, err = invoke(["estimate", "--gpu", "H200", "--engine-version", "0.12.0", "--",
                           "vllm", "serve", "Qwen/Qwen3-8B"])
    assert code == 0
    first = err.splitlines()[0]
    assert first.startswith("read as vLLM (release 0.12.0 from --engine-version; flags as vLLM")
    code, _, err = invoke(["estimate", "--gpu", "H200", "--", "vllm", "serve", "Qwen/Qwen3-8B"])
    assert err.splitlines()[0].startswith(f"read as vLLM {ENGINE_VERSION_ASSUMED['vllm']}: ")


# --- --dtype: what the engines take is taken, what they refuse in a pasted command refused -----
# (vLLM config/model.py ModelDType / _STR_DTYPE_TO_TORCH_DTYPE; SGLang's --dtype choices)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize(("spelling", "dtype"), [("float", "float32"), ("half", "float16")])
def test_an_engine_spelling_of_dtype_is_that_dtype(engine: str, spelling: str,
                                                     dtype: str) -> None:
    def weights(d: str) -> int:
        code, out, err = invoke(["estimate", "-m", "qwen3-8b", "--engine", engine, "--dtype", d,
                                 "-f", "json"])
        assert code == 0, err
        return int(json.loads(out)["ranks"][0]["weights_bytes"])

    assert weights(spelling) == weights(dtype)


@pytest.mark.parametrize(("launch", "spelling"), [
    (["vllm", "serve", "Qwen/Qwen3-8B"], "bf16"),
    (["vllm", "serve", "Qwen/Qwen3-8B"], "fp16"),
    (["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"], "bf16"),
])
def test_a_pasted_dtype_the_engine_refuses_is_refused(launch: list[str], spelling: str) -> None:
    code, out, err = invoke(["estimate", "--gpu", "H200", "--", *launch, "--dtype", spelling])
    assert code == 2 and out == "", err
    one_error(err, f"--dtype {spelling} is memprof's own spelling")


@pytest.mark.parametrize(("launch", "spelling"), [
    (["vllm", "serve", "Qwen/Qwen3-8B"], "float8"),
    (["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"], "int8"),
])
def test_a_pasted_dtype_no_engine_has_names_the_engines_choices(launch: list[str],
                                                                 spelling: str) -> None:
    code, out, err = invoke(["estimate", "--gpu", "H200", "--", *launch, "--dtype", spelling])
    assert code == 2 and out == "", err
    one_error(err, "argparse refuses (choices: auto, half, float16, bfloat16, float, float32)")
    assert "bf16" not in err


@pytest.mark.parametrize("spelling", ["float", "half", "float32", "bfloat16"])
def test_a_pasted_dtype_the_engine_takes_is_read(spelling: str) -> None:
    code, _, err = invoke(["estimate", "--gpu", "H200", "--", "vllm", "serve", "Qwen/Qwen3-8B",
                           "--dtype", spelling])
    assert code == 0 and f"dtype={spelling}" in err.splitlines()[0], err


def test_float_is_float32_where_vllm_v1_refuses_float32() -> None:
    """0.8.5's V1 oracle takes fp16 / bf16 only: --dtype float falls back to V0 as float32."""
    code, out, err = invoke(["estimate", "-m", "qwen3-8b", "--engine-version", "0.8.5",
                             "--dtype", "float", "-f", "json"])
    assert code in (0, 1), err
    notes = " ".join(json.loads(out)["summary"]["notes"])
    assert "falls back to the V0 engine for --dtype float" in notes


# --- a pasted --language-model-only is read as vLLM reads it, never an unknown flag ------------
# (vllm/config/multimodal.py MultiModalConfig.get_limit_per_prompt: 0 for every modality)


def _paste_json(*words: str) -> tuple[dict[str, Any], str]:
    code, out, err = invoke(["estimate", "--gpu", "H200", "-f", "json", "--", "vllm", "serve",
                             *words])
    assert code in (0, 1), err
    parsed: dict[str, Any] = json.loads(out)
    return parsed, err


@pytest.mark.parametrize("beside", [[], ["--limit-mm-per-prompt", '{"image": 2}']])
def test_language_model_only_zeroes_every_modality(beside: list[str]) -> None:
    only, _ = _paste_json("Qwen/Qwen3-VL-4B-Instruct", *beside, "--language-model-only")
    zeros, _ = _paste_json("Qwen/Qwen3-VL-4B-Instruct", "--limit-mm-per-prompt",
                           '{"image": 0, "video": 0}')
    full, _ = _paste_json("Qwen/Qwen3-VL-4B-Instruct")
    assert json.loads(only["deployment"]["limit_mm_per_prompt"]) == {"image": 0, "video": 0}
    assert only["ranks"][0]["weights_bytes"] == zeros["ranks"][0]["weights_bytes"]
    assert only["ranks"][0]["weights_bytes"] < full["ranks"][0]["weights_bytes"]  # no tower


def test_language_model_only_on_a_text_model_changes_nothing() -> None:
    only, err = _paste_json("Qwen/Qwen3-8B", "--language-model-only")
    plain, _ = _paste_json("Qwen/Qwen3-8B")
    assert "error" not in err and only["ranks"] == plain["ranks"]


# vLLM 0.17.0 is the first release with the flag (0.16.0 engine/arg_utils.py has none): before
# it the pasted flag is refused as vLLM's argparse refuses it, text-only model or not
@pytest.mark.parametrize("model", ["Qwen/Qwen3-VL-4B-Instruct", "Qwen/Qwen3-8B"])
@pytest.mark.parametrize(("release", "refused"), [("0.16.0", True), ("0.15.1", True),
                                                   ("0.17.0", False), ("0.27.1", False)])
def test_language_model_only_before_its_release_is_refused(model: str, release: str,
                                                           refused: bool) -> None:
    code, _, err = invoke(["estimate", "--gpu", "H200", "--engine-version", release, "-f",
                           "json", "--", "vllm", "serve", model, "--language-model-only"])
    if refused:
        assert code == 2
        assert f"error: --language-model-only is not in vLLM {release}" in err
        assert "hint:" in err and "0.17.0" in err and "Traceback" not in err
    else:
        assert code in (0, 1), err


def test_language_model_only_at_the_images_release() -> None:
    code, _, err = invoke(["estimate", "--gpu", "H200", "-f", "json", "--", "docker", "run",
                           "vllm/vllm-openai:v0.16.0", "Qwen/Qwen3-VL-4B-Instruct",
                           "--language-model-only"])
    assert code == 2 and "not in vLLM 0.16.0" in err


# --- a sweep axis no point reads is refused before any work, not a column of equal rows --------


@pytest.mark.parametrize("axes", [
    ["--set", "max_lora_rank=8,16"],
    ["--set", "max_loras=1,4"],
    ["--set", "lora_dtype=float16,bfloat16"],
    ["--set", "max_loras=1,2", "--set", "enable_lora=false"],
])
def test_a_lora_axis_without_lora_is_refused(axes: list[str]) -> None:
    code, out, err = invoke(["sweep", "-m", "qwen3-8b", *axes])
    assert code == 2 and out == "", err
    one_error(err, "without --enable-lora")


@pytest.mark.parametrize("extra", [["--enable-lora"], ["--set", "enable_lora=false,true"]])
def test_a_lora_axis_with_lora_sweeps(extra: list[str]) -> None:
    code, out, err = invoke(["sweep", "-m", "qwen3-8b", "--set", "max_lora_rank=8,64", *extra,
                             "-f", "json"])
    assert code == 0, err
    rows = [r for r in json.loads(out) if r.get("enable_lora", True)]
    assert len({r["kv_cache_tokens"] for r in rows}) == 2  # rank 64's buffers cost KV


# --- speculative decoding on the pooling runner is refused, not estimated as one or the other --


@pytest.mark.parametrize("argv", [
    ["-m", "qwen3-8b", "--runner", "pooling", "--speculative-method", "ngram",
     "--num-speculative-tokens", "3"],
    ["-m", "qwen3-8b", "--task", "embed", "--engine-version", "0.12.0",
     "--speculative-method", "ngram", "--num-speculative-tokens", "2"],
    ["-m", "deepseek-r1", "--gpu", "H200", "-tp", "8", "--runner", "pooling",
     "--num-speculative-tokens", "1"],
])
def test_speculation_on_the_pooling_runner_is_refused(argv: list[str]) -> None:
    code, out, err = invoke(["estimate", *argv])
    assert code == 2 and out == "", err
    one_error(err, "--num-speculative-tokens with --runner pooling")


def test_task_generate_keeps_speculation() -> None:
    """--task wins over --runner, as vLLM's ModelConfig sets both from it (0.12.0)."""
    code, out, err = invoke(["estimate", "-m", "qwen3-8b", "--task", "generate", "--runner",
                             "pooling", "--engine-version", "0.12.0", "--speculative-method",
                             "ngram", "--num-speculative-tokens", "2", "-f", "json"])
    assert code == 0, err
    assert json.loads(out)["deployment"]["speculative_method"] == "ngram"


# --- explain --num-speculative-tokens 0 turns a log's n-gram speculation off -------------------


def test_explain_turns_a_logs_ngram_off_with_zero_draft_tokens(tmp_path: Path) -> None:
    """Row 2512's log with an n-gram speculative_config in its non-default args."""
    log = tmp_path / "ngram.log"
    log.write_text(_quote(2512).replace(
        "'language_model_only': True",
        "'language_model_only': True, 'speculative_config': {'method': 'ngram', "
        "'num_speculative_tokens': 3}"))

    def deployment(*flags: str) -> dict[str, Any]:
        code, out, err = invoke(["explain", str(log), "--gpu", "H100-80GB", "-f", "json", *flags])
        assert code in (0, 1), err
        dep: dict[str, Any] = json.loads(out)["deployment"]
        return dep

    assert deployment()["speculative_method"] == "ngram"
    assert deployment()["num_speculative_tokens"] == 3
    off = deployment("--num-speculative-tokens", "0")
    assert "num_speculative_tokens" not in off and "speculative_method" not in off


def test_explain_json_names_the_logs_lora(lora_log: Path) -> None:
    code, out, err = _explain(lora_log, "-f", "json", "--max-lora-rank", "32")
    assert code in (0, 1), err
    dep = json.loads(out)["deployment"]
    assert dep["enable_lora"] is True and dep["max_lora_rank"] == 32 and dep["max_loras"] is None


# --- SGLang's own flags for these features are SGLang's, never 'unknown' -----------------------
# (ServerArgs fields: configs/sglang_server_args.json)

SGLANG = ["estimate", "--gpu", "H200", "--", "python", "-m", "sglang.launch_server",
          "--model-path", "Qwen/Qwen3-8B"]


def test_sglang_is_embedding_is_refused_as_not_modelled() -> None:
    code, out, err = invoke([*SGLANG, "--is-embedding"])
    assert code == 2 and out == "", err
    one_error(err, "--is-embedding: SGLang's embedding server is not modelled")


@pytest.mark.parametrize("flags", [
    ["--enable-lora", "--max-lora-rank", "64"],
    ["--lora-target-modules", "q_proj", "v_proj", "--max-loaded-loras", "4"],
    ["--lora-backend", "triton"],
    ["--language-model-only"],
])
def test_sglang_lora_flags_are_listed_not_modelled(flags: list[str]) -> None:
    code, _, err = invoke([*SGLANG, *flags])
    assert code == 0, err
    warning = next(ln for ln in err.splitlines() if ln.startswith("warning: not modelled"))
    assert all(f in warning for f in flags if f.startswith("--"))


@pytest.mark.parametrize(("flags", "listed"), [
    (["--lora-target-modules", "q_proj", "v_proj"], "warning: not modelled"),
    (["--enable-tower-connector-lora"], "warning: not modelled"),
    (["--default-mm-loras", '{"image": "x/y"}'], "ignored (no effect on GPU memory)"),
])
def test_vllm_lora_group_flags_are_known(flags: list[str], listed: str) -> None:
    """vLLM's engine/arg_utils.py LoRA group (LoRAConfig), pasted beside --enable-lora."""
    code, _, err = invoke(["estimate", "--gpu", "H200", "--", "vllm", "serve",
                           "Qwen/Qwen3-VL-4B-Instruct", "--enable-lora", *flags])
    assert code == 0, err
    line = next(ln for ln in err.splitlines() if ln.startswith(listed))
    assert flags[0] in line


def test_lora_on_the_older_task_spelling_names_it() -> None:
    code, out, err = invoke(["estimate", "-m", "qwen3-8b", "--engine-version", "0.12.0",
                             "--task", "embed", "--enable-lora"])
    assert code == 2 and out == "", err
    one_error(err, "--enable-lora with --task embed is not modelled")


@pytest.mark.parametrize(("flags", "code"), [
    (["--enable-lora", "--max-loras", "4", "--max-cpu-loras", "2"], 2),
    (["--enable-lora", "--max-cpu-loras", "0"], 2),
    (["--enable-lora", "--max-loras", "4", "--max-cpu-loras", "4"], 0),
    (["--enable-lora", "--max-cpu-loras", "8"], 0),
    (["--max-loras", "4", "--max-cpu-loras", "2"], 0),  # no LoRAConfig without --enable-lora
])
def test_a_cpu_lora_cache_below_max_loras_is_refused(flags: list[str], code: int) -> None:
    """vLLM's LoRAConfig: 'max_cpu_loras (N) must be >= max_loras (M)'."""
    got, _, err = invoke(["estimate", "--gpu", "H200", "--", "vllm", "serve", "Qwen/Qwen3-8B",
                          *flags])
    assert got == code, err
    if code == 2:
        one_error(err, "must be >= max_loras")


# --- the driver a CUDA 12.x wheel implies is said where it moves the graphs' figure ------------


def _notes_of(*argv: str) -> list[str]:
    code, out, err = invoke(["estimate", "-m", "qwen3-8b", *argv, "-f", "json"])
    assert code in (0, 1), err
    notes: list[str] = json.loads(out)["summary"]["notes"]
    return notes


@pytest.mark.parametrize(("argv", "said"), [
    (["--engine-version", "0.19.1"], True),  # a CUDA 12.x wheel, an sm90 card
    (["--engine-version", "0.19.1", "--nvidia-driver", "535.104.05"], False),  # stated
    (["--engine-version", "0.19.1", "--enforce-eager"], False),  # no graph
    (["--engine-version", "0.19.1", "--gpu", "A100-80GB"], False),  # ~10 KiB at every driver
    (["--engine-version", "0.20.0"], False),  # a CUDA 13 wheel needs R580
    (["--engine", "sglang"], False),
])
def test_the_assumed_driver_is_said(argv: list[str], said: bool) -> None:
    assert any(n.startswith("no --nvidia-driver") for n in _notes_of(*argv)) == said


# --- "none" is a value where the engine has one by that name, not "unset" ----------------------
# (vLLM's ConvertOption and MambaCacheMode both have "none")


@pytest.mark.parametrize("argv", [
    ["estimate", "--gpu", "H200", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--runner", "pooling",
     "--convert", "none"],
    ["estimate", "-m", "qwen3-8b", "--runner", "pooling", "--compare", "convert=none"],
])
def test_convert_none_is_vllms_none_not_the_default(argv: list[str]) -> None:
    code, out, err = invoke(argv)
    assert code == 2 and out == "", err
    one_error("\n".join(err.strip().splitlines()[-2:]), "--convert none")


def test_a_sweep_of_convert_none_is_an_invalid_point() -> None:
    code, out, err = invoke(["sweep", "-m", "qwen3-8b", "--runner", "pooling",
                             "--set", "convert=embed,none", "-f", "json"])
    assert code == 0, err
    rows = {r["convert"]: r for r in json.loads(out)}
    assert rows["embed"]["verdict"] == "fits" and rows["none"]["verdict"] == "invalid"


@pytest.mark.parametrize("argv", [
    ["--", "vllm", "serve", "nvidia/Nemotron-H-8B-Base-8K", "--mamba-cache-mode", "none"],
    ["-m", "nemotron-h-8b-base-8k", "--mamba-cache-mode", "none"],
])
def test_mamba_cache_mode_none_is_kept(argv: list[str]) -> None:
    code, out, err = invoke(["estimate", "--gpu", "H200", "-f", "json", *argv])
    assert code == 0, err
    assert json.loads(out)["deployment"]["mamba_cache_mode"] == "none"


# --- trace refuses what its replica does not build, rather than tracing something else ---------


@pytest.mark.parametrize(("flags", "needle"), [
    (["--runner", "pooling"], "not vLLM's pooling runner"),
    (["--task", "embed", "--engine-version", "0.12.0"], "not vLLM's pooling runner"),
    (["--speculative-method", "ngram", "--num-speculative-tokens", "2"],
     "trace runs no speculative decoding"),
    (["--enable-lora"], "not vLLM's LoRA buffers"),
])
def test_trace_refuses_what_its_replica_does_not_build(flags: list[str], needle: str) -> None:
    code, out, err = invoke(["trace", "--device", "fake", "-m", "qwen3-0.6b", *flags])
    assert code == 2 and out == "", err
    one_error(err, needle)


@pytest.mark.parametrize("command", [
    "$ vllm serve Qwen/Qwen3-VL-4B-Instruct --language-model-only --max-model-len 8192",
    "$ vllm serve Qwen/Qwen3-VL-4B-Instruct --limit-mm-per-prompt '{\"image\": 4}' "
    "--language-model-only --max-model-len 8192",
])
def test_explain_says_a_logged_commands_language_model_only(tmp_path: Path, command: str) -> None:
    """The logged command's flag is read (not 'not read'), wins over its --limit-mm-per-prompt
    as in vLLM, and the note says how it was read."""
    log = tmp_path / "lmo.log"
    log.write_text(command + "\n" + "\n".join(_quote(1607).splitlines()[-8:]))
    code, out, err = invoke(["explain", str(log), "--gpu", "H100-80GB", "--engine-version",
                             "0.30.0", "-f", "json"])
    assert code in (0, 1), err
    doc = json.loads(out)
    notes = " ".join(doc["log"]["notes"])
    assert "the log runs --language-model-only" in notes and "not read" not in notes


@pytest.mark.parametrize("argv", [["estimate", "-m", "qwen3-8b"],
                                  ["sweep", "-m", "qwen3-8b", "--set", "tp=1,2"],
                                  ["versions"]])
def test_json_as_other_tools_spell_it_points_at_format_json(argv: list[str]) -> None:
    code, out, err = invoke([*argv, "--json"])
    assert code == 2 and out == "", err
    one_error(err, "no such option: --json")
    assert "--format json" in err.splitlines()[1]


def test_a_sweep_does_not_say_the_engine_refuses_what_memprof_does_not_model() -> None:
    """vLLM runs --convert classify; memprof does not model it."""
    code, out, err = invoke(["sweep", "-m", "qwen3-8b", "--runner", "pooling",
                             "--set", "convert=embed,classify"])
    assert code == 0, err
    assert "the engine would refuse" not in out and "memprof does not model them" in out


@pytest.mark.parametrize(("runner", "needle"), [("POOLING", "unknown --runner 'POOLING'"),
                                                ("draft", "--runner 'draft' is not modelled")])
def test_a_runner_vllm_lacks_is_unknown_not_unmodelled(runner: str, needle: str) -> None:
    code, out, err = invoke(["estimate", "-m", "qwen3-8b", "--runner", runner])
    assert code == 2 and out == "", err
    one_error(err, needle)
