"""A demanding user's audit of the CLI, one table per class of mistake found: each row is a
command line that once ran on a guess (a default model, an empty paste), refused a value the
user meant (zero headroom), or told the wrong story; now it is one ``error:`` line and a
``hint:`` (exit 2) before any work, or it runs as the user meant."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import invoke, one_error

# --- an empty value is a mistake (an unset shell variable), never the default -------------

EMPTY = [
    (["estimate", "--model", ""], "--model is empty"),
    (["estimate", "--model", "  "], "--model is empty"),
    (["plan", "--model", "", "--requests", "8", "--context", "32k"], "--model is empty"),
    (["sweep", "--model", "", "--set", "tp=1,2"], "--model is empty"),
    (["estimate", "--gpu", "H200", "--"], "the pasted command is empty"),
    (["estimate", "--gpu", "H200", "--", "vllm", "serve"], "names no model"),
    (["estimate", "--gpu", "H200", "--", "vllm", "serve", "-tp", "2"], "names no model"),
    (["estimate", "--", "python", "-m", "sglang.launch_server", "--tp", "2"], "names no model"),
]


@pytest.mark.parametrize(("argv", "needle"), EMPTY, ids=[" ".join(a) for a, _ in EMPTY])
def test_an_empty_value_is_refused_not_defaulted(argv: list[str], needle: str) -> None:
    code, out, err = invoke(argv)
    assert code == 2 and out == "", err
    one_error(err, needle)


# --- zero is a size where none is a setting ------------------------------------------------

ZERO_OK = [
    ["plan", "--model", "qwen3-8b", "--requests", "1", "--context", "4k", "--headroom", "0"],
    ["plan", "--model", "qwen3-8b", "--requests", "1", "--context", "4k", "--headroom", "0GiB"],
    ["estimate", "--model", "qwen3-8b", "--gpu-memory-in-use", "0B", "-f", "json"],
    ["estimate", "--model", "qwen3-8b", "--gpu-memory-in-use", "0GiB", "-f", "json"],
]


@pytest.mark.parametrize("argv", ZERO_OK, ids=[" ".join(a) for a in ZERO_OK])
def test_zero_is_none_where_none_is_a_setting(argv: list[str]) -> None:
    code, out, err = invoke(argv)
    assert code == 0 and "error:" not in err, err
    assert out


def test_zero_in_use_is_the_same_estimate_whatever_its_unit() -> None:
    outs = {invoke(["estimate", "-m", "qwen3-8b", "--gpu-memory-in-use", z, "-f", "json"])[1]
            for z in ("0", "0B", "0GiB", "0.0MiB")}
    assert len(outs) == 1


ZERO_REFUSED = [
    (["estimate", "-m", "qwen3-8b", "--kv-cache-memory", "0B"], "must be positive"),
    (["estimate", "-m", "qwen3-8b", "--gpu-memory", "0GiB", "--gpu-arch", "sm90"],
     "at least one byte"),
    (["estimate", "-m", "qwen3-8b", "--gpu-memory", "0", "--gpu-arch", "sm90"], "no unit"),
    (["plan", "--model", "qwen3-8b", "--requests", "1", "--context", "4k", "--headroom",
      "0foo"], "unknown unit"),
]


@pytest.mark.parametrize(("argv", "needle"), ZERO_REFUSED,
                         ids=[" ".join(a) for a, _ in ZERO_REFUSED])
def test_zero_is_still_refused_where_a_size_must_be_positive(argv: list[str],
                                                             needle: str) -> None:
    code, out, err = invoke(argv)
    assert code == 2 and out == "", err
    one_error(err, needle)


# --- explain: a flag that contradicts what the log says about itself ----------------------

VLLM_LOG = "tests/data/logs/vllm-v1-qwen3-235b-fp8-tp4-h100.log"
SGLANG_LOG = "tests/data/logs/sglang-qwen3-235b-fp8-tp4-h100.log"


def test_explain_refuses_another_engine_than_the_logs() -> None:
    code, out, err = invoke(["explain", VLLM_LOG, "--gpu", "H100", "--engine", "sglang"])
    assert code == 2 and out == "", err
    one_error(err, "--engine sglang but the log was written by vLLM")


def test_explain_takes_the_logs_own_engine_when_given() -> None:
    plain = invoke(["explain", SGLANG_LOG, "--gpu", "H100", "-f", "json"])
    named = invoke(["explain", SGLANG_LOG, "--gpu", "H100", "-f", "json", "--engine", "sglang"])
    assert plain[0] in (0, 1) and plain == named


# --- SGLang's console script: sglang serve [MODEL] ----------------------------------------

SGLANG_SERVE = [
    ["sglang", "serve", "Qwen/Qwen3-32B", "--tp", "2", "--mem-fraction-static", "0.8"],
    ["sglang", "serve", "--model-path", "Qwen/Qwen3-32B", "--tp", "2",
     "--mem-fraction-static", "0.8"],
    ["/usr/local/bin/sglang", "serve", "Qwen/Qwen3-32B", "--tp-size", "2",
     "--mem-fraction-static", "0.8"],
    ["docker", "run", "--gpus", "all", "lmsysorg/sglang:latest", "sh", "-c",
     "sglang serve Qwen/Qwen3-32B --tp 2 --mem-fraction-static 0.8"],
]


@pytest.mark.parametrize("words", SGLANG_SERVE, ids=[" ".join(w[:3]) for w in SGLANG_SERVE])
def test_sglang_serve_is_launch_server(words: list[str]) -> None:
    launch = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-32B",
              "--tp", "2", "--mem-fraction-static", "0.8"]
    want = invoke(["estimate", "--gpu", "H200", "-f", "json", "--", *launch])
    got = invoke(["estimate", "--gpu", "H200", "-f", "json", "--", *words])
    assert want[0] == 0 and got[:2] == want[:2], got[2]
    assert "model Qwen/Qwen3-32B, tp=2, mem_fraction_static=0.8" in got[2]


def test_sglang_serve_without_a_model_is_refused() -> None:
    code, out, err = invoke(["estimate", "--", "sglang", "serve", "--tp", "2"])
    assert code == 2 and out == ""
    one_error(err, "names no model")


# --- a development or vendor build is read alike by every flag that names a release --------

DEV = "0.7.4.dev12"  # a build after 0.7.3 (setuptools-scm guess-next-dev): modelled at 0.7.3


def _json(argv: list[str]) -> tuple[int, Any, str]:
    code, out, err = invoke(argv)
    return code, json.loads(out) if out else None, err


def test_versions_from_and_to_map_a_build_as_engine_version_does() -> None:
    code, built, err = _json(["versions", "-m", "qwen3-8b", "--from", DEV, "--to", "0.8.5",
                              "-f", "json"])
    assert code == 0 and "modelled at 0.7.3" in err
    _, plain, _ = _json(["versions", "-m", "qwen3-8b", "--from", "0.7.3", "--to", "0.8.5",
                         "-f", "json"])
    assert built == plain and built["from"] == "0.7.3"


@pytest.mark.parametrize(("flag", "other"), [("--from", "--to"), ("--to", "--from")])
def test_versions_names_the_flag_a_bad_release_came_from(flag: str, other: str) -> None:
    code, out, err = invoke(["versions", flag, "latest", other, "0.8.5"])
    assert code == 2 and out == ""
    one_error(err, f"{flag} 'latest' is not a release number")


def test_sweep_axis_maps_a_build_as_engine_version_does() -> None:
    code, out, err = invoke(["sweep", "-m", "qwen2.5-7b-instruct", "-f", "jsonl",
                             "--set", f"engine_version={DEV},0.7.3,0.11.2rc1+rhai0"])
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and "modelled at 0.7.3" in err and "modelled at 0.11.2" in err
    assert [r["engine_version"] for r in rows] == ["0.7.3", "0.11.2"]
    assert all(r["verdict"] != "invalid" for r in rows)


def test_compare_maps_a_build_and_refuses_a_bad_one_before_any_work() -> None:
    code, built, err = _json(["estimate", "-m", "qwen2.5-7b-instruct", "-f", "json",
                              "--compare", f"engine_version={DEV}"])
    _, plain, _ = _json(["estimate", "-m", "qwen2.5-7b-instruct", "-f", "json",
                         "--compare", "engine_version=0.7.3"])
    assert code == 0 and "modelled at 0.7.3" in err
    assert built["compare"].pop("changes") == f"engine_version={DEV}"  # as the user typed it
    plain["compare"].pop("changes")
    assert built == plain
    code, out, err = invoke(["estimate", "-m", "qwen3-8b", "--compare", "engine_version=main"])
    assert code == 2 and out == ""
    one_error(err, "--compare engine_version 'main' is not a release number")


# --- '-' (standard input) names no file -----------------------------------------------------

STDIN = [["explain", "-"], ["estimate", "--from-file", "-"], ["alloc", "replay", "-"]]


@pytest.mark.parametrize("argv", STDIN, ids=[" ".join(a) for a in STDIN])
def test_dash_is_said_to_be_standard_input_not_a_missing_file(argv: list[str]) -> None:
    code, out, err = invoke(argv)
    assert code == 2 and out == ""
    one_error(err, "'-': memprof reads a file, not standard input")


# --- --gpu auto with --gpu-arch is bad input, said before the host is asked ----------------

AUTO_ARCH = [
    ["estimate", "-m", "qwen3-8b", "--gpu", "AUTO", "--gpu-arch", "sm90"],
    ["explain", VLLM_LOG, "--gpu", "auto", "--gpu-arch", "sm90"],
    ["plan", "-m", "qwen3-8b", "--requests", "1", "--context", "4k", "--gpu", "auto",
     "--gpu-arch", "sm90"],
    ["sweep", "-m", "qwen3-8b", "--set", "tp=1,2", "--gpu", "auto", "--gpu-arch", "sm90"],
]


@pytest.mark.parametrize("argv", AUTO_ARCH, ids=[a[0] for a in AUTO_ARCH])
def test_gpu_auto_with_an_arch_is_bad_input_before_the_host_is_asked(
        argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import memprof.probes.devices

    def asked() -> None:
        raise AssertionError("the host was asked before the flags were checked")

    monkeypatch.setattr(memprof.probes.devices, "local_gpu", asked)
    code, out, err = invoke(argv)
    assert code == 2 and out == ""
    one_error(err, "--gpu-arch with --gpu auto")


# --- --quantization on an unquantised config: what vLLM does, or what memprof assumed -------

@pytest.mark.parametrize(("flag", "in_flight", "release"), [
    ("fp8", True, None), ("bitsandbytes", True, None),
    ("awq", False, None), ("awq_marlin", False, None), ("gptq", False, None),
    ("gptq_marlin", False, None), ("modelopt_fp4", False, None),
    # vLLM's online MXFP4 from 0.28.0 (config/quantization.py _ONLINE_SHORTHANDS: 0.28.0 -
    # 0.33.0 name mxfp4, 0.27.0 does not; estimate.MXFP4_ONLINE)
    ("mxfp4", True, None), ("mxfp4", True, "0.28.0"), ("mxfp4", False, "0.27.1"),
])
def test_quantization_flag_says_whether_vllm_quantises_or_memprof_assumed(
        flag: str, in_flight: bool, release: str | None) -> None:
    version = ["--engine-version", release] if release else []
    code, out, err = _json(["estimate", "-m", "qwen3-8b", "--gpu", "B200", "-q", flag,
                            *version, "-f", "json"])
    assert code in (0, 1), err
    notes = [n for n in out["summary"]["notes"] if n.startswith(f"--quantization {flag}")]
    assert len(notes) == 1
    assert ("while loading it" in notes[0]) is in_flight
    assert ("(assumed" in notes[0]) is not in_flight
    if flag == "mxfp4" and in_flight:  # memprof sizes the experts only: said, not hidden
        assert "not modelled: the online linear layers" in notes[0]


# --- an architecture memprof does not know is refused even where its model_type is known ----

def test_an_unknown_architecture_of_a_known_model_type_is_refused() -> None:
    over = json.dumps({"architectures": ["FooForCausalLM"]})
    code, out, err = invoke(["estimate", "-m", "qwen3-8b", "--hf-overrides", over])
    assert code == 2 and out == ""
    one_error(err, "does not know the architecture 'FooForCausalLM' (model_type 'qwen3')")
    code, out, err = invoke(["estimate", "-m", "qwen3-8b", "--hf-overrides", over,
                             "--assume-architecture", "dense-decoder", "-f", "json"])
    assert code in (0, 1), err
    assert any("dense" in n for n in json.loads(out)["summary"]["notes"])


@pytest.mark.parametrize("arch", ["Qwen3ForTokenClassification", "Qwen2ForRewardModel"])
def test_a_score_head_architecture_is_refused_even_as_a_dense_decoder(arch: str) -> None:
    """vLLM serves a token-classification or reward checkpoint on its pooling runner with a
    head of its own (memprof/core/models/score_heads.py; a *ForSequenceClassification is sized,
    tests/test_vllm_pooling.py): no dense-decoder reading sizes that, so the assumption flag
    does not lift the refusal."""
    over = json.dumps({"architectures": [arch]})
    for extra in ([], ["--assume-architecture", "dense-decoder"]):
        code, out, err = invoke(["estimate", "-m", "qwen3-8b", "--hf-overrides", over, *extra])
        assert code == 2 and out == ""
        one_error(err, f"{arch} is a classification or reward checkpoint")


# --- explain: one file holding two different start-ups is refused, not mixed ---------------

def _startup(version: str, model: str, tp: int) -> list[str]:
    return [f"INFO 05-09 22:51:18 [api_server.py:1043] vLLM API server version {version}",
            f"INFO 05-09 22:51:18 [api_server.py:1044] non-default args: {{'model_tag': "
            f"'{model}', 'tensor_parallel_size': {tp}}}",
            f"INFO 05-09 22:51:56 [core.py:58] Initializing a V1 LLM engine (v{version}) with "
            f"config: model='{model}', tensor_parallel_size={tp}",
            "INFO 05-09 22:52:30 [gpu_model_runner.py:1347] Model loading took 7.6 GiB",
            "INFO 05-09 22:52:41 [kv_cache_utils.py:634] GPU KV cache size: 300,000 tokens"]


@pytest.mark.parametrize(("second", "what"), [
    (("0.9.0", "Qwen/Qwen3-8B", 1), "vLLM releases"),
    (("0.8.5", "Qwen/Qwen3-8B", 2), "vLLM argument lists"),
])
def test_explain_refuses_a_file_of_two_different_startups(
        tmp_path: Path, second: tuple[str, str, int], what: str) -> None:
    log = tmp_path / "restarts.log"
    log.write_text("\n".join(_startup("0.8.5", "Qwen/Qwen3-8B", 1) + _startup(*second)))
    code, out, err = invoke(["explain", str(log), "--gpu", "H100"])
    assert code == 2 and out == ""
    one_error(err, f"holds more than one start-up: lines 1 and 6 show two {what}"
              if what == "vLLM releases" else
              f"holds more than one start-up: lines 2 and 7 show two {what}")


def test_explain_reads_the_same_startup_logged_twice(tmp_path: Path) -> None:
    once, twice = tmp_path / "once.log", tmp_path / "twice.log"
    lines = _startup("0.8.5", "Qwen/Qwen3-8B", 1)
    once.write_text("\n".join(lines))
    twice.write_text("\n".join(lines + lines))
    a = invoke(["explain", str(once), "-m", "qwen3-8b", "--gpu", "H100", "-f", "json"])
    b = invoke(["explain", str(twice), "-m", "qwen3-8b", "--gpu", "H100", "-f", "json"])
    assert a[0] in (0, 1) and json.loads(a[1])["figures"] == json.loads(b[1])["figures"]


# --- a setting that changes nothing is said to, never dropped silently ---------------------

@pytest.mark.parametrize(("flags", "named"), [
    (["--max-loras", "4"], "--max-loras"),
    (["--fully-sharded-loras", "--max-lora-rank", "64"], "--max-lora-rank, --fully-sharded-loras"),
    (["--lora-dtype", "float16"], "--lora-dtype"),
])
def test_lora_settings_without_enable_lora_are_noted(flags: list[str], named: str) -> None:
    code, out, err = _json(["estimate", "-m", "qwen3-8b", *flags, "-f", "json"])
    _, plain, _ = _json(["estimate", "-m", "qwen3-8b", "-f", "json"])
    assert code == 0, err
    notes = out["summary"]["notes"]
    assert f"{named} without --enable-lora" in notes[0] and "change nothing" in notes[0]
    assert out["ranks"] == plain["ranks"]  # and indeed they change nothing


def test_lora_settings_with_enable_lora_are_not_noted() -> None:
    _, out, _ = _json(["estimate", "-m", "qwen3-8b", "--enable-lora", "--max-loras", "4",
                       "-f", "json"])
    assert not any("without --enable-lora" in n for n in out["summary"]["notes"])


def test_a_refused_choice_names_the_default_release() -> None:
    code, out, err = invoke(["estimate", "-m", "qwen3-8b", "--mamba-cache-mode", "all"])
    assert code == 2 and out == "" and "vLLM None" not in err
    one_error(err, "is not one of vLLM 0.")


# --- plan: a context the engine refuses for the model is bad input, not "no layout" --------

@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_plan_refuses_a_context_beyond_the_model(engine: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", raising=False)
    monkeypatch.delenv("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", raising=False)
    code, out, err = invoke(["plan", "-m", "qwen3-8b", "--requests", "1", "--context", "128k",
                             "--gpu", "H200", "--engine", engine])
    assert code == 2 and out == ""
    one_error(err, "--context 128,000 is longer than qwen3-8b's derived maximum 40,960")
    code, _, err = invoke(["plan", "-m", "qwen3-8b", "--requests", "1", "--context", "40960",
                           "--gpu", "H200", "--engine", engine])
    assert code == 0, err


# --- --from-file: the release an image pins, and one deployment per file ------------------

def _file(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


COMPOSE = """services:
  vllm:
    image: {image}
    command: ["--model", "Qwen/Qwen3-32B", "--tensor-parallel-size", "2"]
"""


@pytest.mark.parametrize(("image", "release"), [
    ("vllm/vllm-openai:v0.10.1", "0.10.1"),   # the compose pins a release
    ("vllm/vllm-openai:latest", None),        # names none: the default, as docker run's
])
def test_a_compose_image_tag_sets_the_release_as_docker_run_does(
        tmp_path: Path, image: str, release: str | None) -> None:
    path = _file(tmp_path, "compose.yml", COMPOSE.format(image=image))
    _, via_file, err = _json(["estimate", "--gpu", "H200", "--from-file", path, "-f", "json"])
    _, via_docker, _ = _json(["estimate", "--gpu", "H200", "-f", "json", "--", "docker", "run",
                              image, "--model", "Qwen/Qwen3-32B", "--tensor-parallel-size", "2"])
    assert via_file["deployment"]["engine_version"] == via_docker["deployment"]["engine_version"]
    if release is not None:
        assert via_file["deployment"]["engine_version"] == release
        assert f"release {release} from the image's tag" in err


def test_another_images_tag_is_no_engine_release() -> None:
    code, out, err = _json(["estimate", "--gpu", "H200", "-f", "json", "--", "docker", "run",
                            "myorg/app:1.2.3", "vllm", "serve", "Qwen/Qwen3-32B", "-tp", "2"])
    assert code == 0 and "1.2.3" not in err, err
    _, plain, _ = _json(["estimate", "--gpu", "H200", "-f", "json", "--", "vllm", "serve",
                         "Qwen/Qwen3-32B", "-tp", "2"])
    assert out["deployment"]["engine_version"] == plain["deployment"]["engine_version"]


@pytest.mark.parametrize(("name", "text"), [
    ("two.yml", "services:\n  a:\n    image: vllm/vllm-openai:latest\n    command: --model "
     "Qwen/Qwen3-8B\n  b:\n    image: vllm/vllm-openai:latest\n    command: --model "
     "Qwen/Qwen3-32B -tp 2\n"),
    ("two.sh", "#!/bin/sh\nCUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-8B &\n"
     "CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen3-32B -tp 2 &\nwait\n"),
])
def test_a_file_of_two_different_servers_is_refused(tmp_path: Path, name: str,
                                                    text: str) -> None:
    code, out, err = invoke(["estimate", "--from-file", _file(tmp_path, name, text)])
    assert code == 2 and out == ""
    one_error(err, "runs 2 different serve commands (vLLM Qwen/Qwen3-8B, vLLM Qwen/Qwen3-32B)")


@pytest.mark.parametrize(("name", "text"), [
    ("replicas.yml", "services:\n  a:\n    image: vllm/vllm-openai:latest\n    command: "
     "--model Qwen/Qwen3-8B\n  b:\n    image: vllm/vllm-openai:latest\n    command: --model "
     "Qwen/Qwen3-8B\n"),
    ("retry.sh", "#!/bin/sh\nwhile true; do\n  vllm serve Qwen/Qwen3-8B\ndone\n"
     "vllm serve Qwen/Qwen3-8B\necho \"vllm serve $UNSET\"\n"),
])
def test_one_server_written_twice_is_one(tmp_path: Path, name: str, text: str) -> None:
    code, _, err = invoke(["estimate", "--from-file", _file(tmp_path, name, text), "-f", "json"])
    assert code == 0 and "model Qwen/Qwen3-8B" in err, err


# --- validate reads its flags as estimate does, and refuses an unknown card before work -----

def test_validate_refuses_an_unknown_gpu_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    import memprof.commands.validate as v

    def ran(*_a: object) -> None:
        raise AssertionError("the validation ran before --gpu was checked")

    monkeypatch.setattr(v, "_validate_all", ran)
    code, out, err = invoke(["validate", "--device", "cpu", "--kernel", "mla", "--gpu", "H10"])
    assert code == 2 and out == ""
    one_error(err, "unknown GPU 'H10'")
    # the hint names what validate takes: it has no --gpu-memory / --gpu-arch
    assert "--gpu-memory" not in err and "memprof gpus" in err


def test_validate_reads_sizes_and_token_counts_as_estimate_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    import memprof.commands.validate as v
    from memprof.validation.registry import Request

    seen: list[Request] = []

    def ran(_chosen: object, req: Request) -> list[object]:
        seen.append(req)
        raise SystemExit(0)

    monkeypatch.setattr(v, "_validate_all", ran)
    invoke(["validate", "--device", "cpu", "--kernel", "dsv4", "--context", "1K",
            "--kv-cache-memory-bytes", "64M"])
    assert [(r.context, r.kv_cache_memory_bytes) for r in seen] == [(1024, 64 << 20)]
    code, _, err = invoke(["validate", "--device", "cpu", "--kernel", "dsv4",
                           "--kv-cache-memory-bytes", "1K"])
    assert code == 2
    one_error(err, "--kv-cache-memory-bytes 1024 is out of range")


# --- --engine-version: PEP 440's leading V, and a build placed by its release ---------------

@pytest.mark.parametrize(("given", "needle"), [
    ("0.30.0.post1", "is not a release among"),   # a post release memprof does not model
    ("0.7.4rc1", "is not a release among"),       # a candidate of a release it does not model
    ("1.2.3beta", "is newer than"),
    ("abc", "is not a release number"),
])
def test_an_unmodelled_build_is_placed_by_its_release(given: str, needle: str) -> None:
    code, out, err = invoke(["estimate", "-m", "qwen3-8b", "--engine-version", given])
    assert code == 2 and out == ""
    one_error(err, f"--engine-version '{given}' {needle}")


def test_a_leading_capital_v_names_the_release() -> None:
    a = _json(["estimate", "-m", "qwen3-8b", "--engine-version", "V0.8.5", "-f", "json"])
    b = _json(["estimate", "-m", "qwen3-8b", "--engine-version", "0.8.5", "-f", "json"])
    assert a[0] == 0 and a[1] == b[1]


@pytest.mark.parametrize(("given", "release"), [
    ("v0.6.1.post1", "0.6.1.post1"),  # the image tag's form of a modelled post release
    ("V0.8.5.post1", "0.8.5.post1"),
])
def test_a_leading_v_names_a_modelled_post_release(given: str, release: str) -> None:
    code, out, _ = _json(["estimate", "-m", "qwen2.5-7b-instruct", "--engine-version", given,
                       "-f", "json"])
    assert code == 0 and out["deployment"]["engine_version"] == release


def test_the_v0_suffix_names_the_v0_engine_not_a_build() -> None:
    # docs/commands/versions.md: "--engine-version 0.8.5+v0 names it too"; "+v0" is memprof's
    # name of the V0 engine at that release, not a local build's tag (+cu124)
    code, out, err = invoke(["estimate", "-m", "qwen2.5-7b-instruct", "--engine-version",
                             "0.8.5+v0", "-f", "json"])
    assert code == 0 and "local or vendor build" not in err
    assert json.loads(out)["deployment"]["engine_version"] == "0.8.5+v0"
    # PEP 440 local labels are case-insensitive: +V0 is the same name, not a vendor build
    code, out, err = invoke(["estimate", "-m", "qwen2.5-7b-instruct", "--engine-version",
                             "0.8.5+V0", "-f", "json"])
    assert code == 0 and "local or vendor build" not in err
    assert json.loads(out)["deployment"]["engine_version"] == "0.8.5+v0"
    code, err = invoke(["estimate", "-m", "qwen2.5-7b-instruct", "--engine-version",
                        "0.20.0+V0"])[::2]
    assert code == 2 and "no V0 engine" in err
    code, out, _ = _json(["estimate", "-m", "qwen2.5-7b-instruct", "--engine-version", "0.8.5",
                       "--vllm-use-v1", "0", "-f", "json"])
    assert code == 0 and out["deployment"]["engine_version"] == "0.8.5+v0"


def test_sweep_gpu_axis_refuses_auto() -> None:
    code, out, err = invoke(["sweep", "-m", "qwen3-8b", "--set", "gpu=auto,H100"])
    assert code == 2 and out == ""
    one_error(err, "auto is this host's card, not a card to sweep over")


def test_dp_engine_cores_config_lines_are_one_startup(tmp_path: Path) -> None:
    lines = _startup("0.11.0", "Qwen/Qwen3-8B", 1)
    core = ("(EngineCore_DP{r} pid=1{r}) INFO 05-09 22:51:56 [core.py:77] Initializing a V1 LLM "
            "engine (v0.11.0) with config: model='Qwen/Qwen3-8B', data_parallel_size=2, "
            "compilation_config={{'local_cache_dir': '/root/.cache/rank_0_{r}'}}")
    log = tmp_path / "dp.log"
    log.write_text("\n".join([*lines, core.format(r=0), core.format(r=1)]))
    code, _, err = invoke(["explain", str(log), "-m", "qwen3-8b", "--gpu", "H100"])
    assert code in (0, 1) and "more than one start-up" not in err, err
