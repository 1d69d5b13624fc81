"""SGLang's launcher flags (configs/sglang_cli_flags.json, read from ServerArgs.add_cli_args in
the wheels it names): every ServerArgs field of every release in configs/sglang_server_args.json
is read, ignored or not modelled; a pasted command of any of those flags is read, never refused
as unknown; a flag the release asked does not have is an error with the nearest flag."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.models import configs_dir
from memprof.probes.serve_command import _TABLES, check_release, parse_tokens
from memprof.probes.serve_flags import SGLANG_CLI, sglang_flag_at
from memprof.probes.sglang_log import release_fields

FIELDS = SGLANG_CLI["fields"]
FLAGGED = sorted((name, e) for name, e in FIELDS.items() if e["flags"])


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


def test_every_field_of_every_release_is_read_ignored_or_not_modelled() -> None:
    server_args = json.loads((configs_dir() / "sglang_server_args.json").read_text())
    for row in server_args["releases"]:
        for name in row["added"]:
            assert name in FIELDS, f"{row['release']}: ServerArgs.{name} is not classified"
            assert FIELDS[name]["kind"] in ("read", "ignored", "not_modelled"), name
    for name, entry in FIELDS.items():
        if entry["kind"] == "not_modelled":
            assert "note" in entry, name
        assert entry["arity"] in (("flag", "value", "optional", "many") if entry["flags"]
                                  else (None,)), name


def test_read_fields_are_applied_and_the_others_listed() -> None:
    table = _TABLES["sglang"]
    for name, entry in FLAGGED:
        looked = [table.get(f) for f in entry["flags"]]
        assert all(x is not None for x in looked), (name, entry["flags"])
        applied = [x for x in looked if x is not None and (x[1] is None
                                                           or x[1].kind == "special")]
        if entry["kind"] == "read":
            assert applied, name
        elif not applied:  # a spelling shared with a read field is applied as that field
            assert {x[1].kind for x in looked if x is not None and x[1]} == {entry["kind"]}, name


def test_commands_from_sglang_docs() -> None:
    # README / docs/basic_usage forms: DeepSeek-V3 with DP attention, EAGLE speculative
    # decoding, the OpenAI server's options, a LoRA server
    c = parse_tokens(shlex.split(
        "python3 -m sglang.launch_server --model deepseek-ai/DeepSeek-V3 --tp 8 "
        "--trust-remote-code --enable-dp-attention --dp 8 --host 0.0.0.0 --port 30000 "
        "--enable-metrics --log-level warning --reasoning-parser deepseek-r1 "
        "--tool-call-parser deepseekv3 --chat-template ./tool_chat_template.jinja "
        "--watchdog-timeout 600 --enable-cache-report --api-key sk-123"))
    assert c.settings == {"tp": 8, "dp": 8, "enable_dp_attention": True}
    assert c.not_modelled == ()
    assert c.ignored == ("--trust-remote-code", "--host", "--port", "--enable-metrics",
                         "--log-level", "--reasoning-parser", "--tool-call-parser",
                         "--chat-template", "--watchdog-timeout", "--enable-cache-report",
                         "--api-key")
    c = parse_tokens(shlex.split(
        "python -m sglang.launch_server --model meta-llama/Llama-2-7b-chat-hf "
        "--speculative-algorithm EAGLE --speculative-draft-model-path "
        "lmsys/sglang-EAGLE-llama2-chat-7B --speculative-num-steps 3 "
        "--speculative-eagle-topk 4 --speculative-num-draft-tokens 16 "
        "--mem-fraction-static 0.7 --cuda-graph-max-bs 8 --dtype float16"))
    assert c.settings == {"mem_fraction_static": 0.7, "cuda_graph_max_bs": 8,
                          "dtype": "float16"}
    assert [f for f, _ in c.not_modelled] == [
        "--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-steps",
        "--speculative-eagle-topk", "--speculative-num-draft-tokens"]
    c = parse_tokens(shlex.split(
        "python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B-Instruct "
        "--enable-lora --lora-paths lora0=algoprog/fact-generation-llama-3.1-8b-instruct-lora "
        "lora1=Nutanix/Meta-Llama-3.1-8B-Instruct_lora_4_alpha_16 --max-loras-per-batch 2 "
        "--lora-backend triton --disable-radix-cache --hybrid-kvcache-ratio --page-size 16"))
    assert c.settings == {"block_size": 16}
    assert [f for f, _ in c.not_modelled] == ["--enable-lora", "--lora-paths",
                                              "--max-loras-per-batch", "--lora-backend",
                                              "--disable-radix-cache",
                                              "--hybrid-kvcache-ratio"]
    assert c.ignored == ()
    assert "--hybrid-kvcache-ratio" in c.describe()[1]


def _value(arity: str) -> list[str]:
    return {"flag": [], "value": ["1"], "optional": [], "many": ["a", "b"]}[arity]


FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


@FUZZ
@given(st.lists(st.sampled_from(FLAGGED), min_size=1, max_size=6))
def test_any_sglang_flag_is_read_ignored_or_not_modelled(picked: list) -> None:
    words = ["python", "-m", "sglang.launch_server", "--model-path", "m"]
    for _name, entry in picked:
        if entry["kind"] == "read":
            continue  # applied with a value of its own kind (the tests of the settings)
        flag = next(iter(entry["flags"]))
        words += [flag, *_value(entry["arity"])]
    c = parse_tokens(words)
    listed = set(c.ignored) | {f for f, _ in c.not_modelled}
    for name, entry in picked:
        if entry["kind"] != "read":
            assert any(
                f in listed for f in entry["flags"]), name


@FUZZ
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=3, max_size=30))
def test_a_flag_no_release_has_is_an_error_with_a_hint(word: str) -> None:
    flag = "--" + word.strip("-")
    spelled = {f for _, e in FLAGGED for f in e["flags"]}
    if (any(f.startswith(flag) for f in spelled | set(_TABLES["sglang"]))
            or flag.startswith("--no-") or flag == "--"):
        return  # a flag, or a prefix argparse reads as one (the test below)
    with pytest.raises(BadInput) as exc:
        parse_tokens(["python", "-m", "sglang.launch_server", "--model-path", "m", flag, "1"])
    assert "unknown SGLang flag" in exc.value.message and exc.value.hint


def test_flag_at_the_release_asked() -> None:
    # enable_lora: a ServerArgs field from 0.4.10 (configs/sglang_server_args.json)
    assert sglang_flag_at("--enable-lora", "0.4.9") is False
    assert sglang_flag_at("--enable-lora", "0.5.23") is True
    assert sglang_flag_at("--enable-lora", "0.4.10") is True
    # --cuda-graph-max-bs: cuda_graph_max_bs to 0.5.13, cuda_graph_max_bs_decode's spelling in
    # 0.5.16 and 0.5.19; 0.5.23 spells it --cuda-graph-max-bs-decode
    assert sglang_flag_at("--cuda-graph-max-bs", "0.5.13") is True
    assert sglang_flag_at("--cuda-graph-max-bs", "0.5.19") is True
    assert sglang_flag_at("--cuda-graph-max-bs", "0.5.23") is False
    assert sglang_flag_at("--cuda-graph-max-bs-decode", "0.5.13") is False
    assert sglang_flag_at("--tp", "0.5.23") is None  # memprof's own short form
    # hybrid_kvcache_ratio leaves ServerArgs in 0.5.8, but its flag stays registered (a
    # deprecated no-op) to 0.5.13 in the wheels read
    for release in ("0.4.9", "0.5.9", "0.5.10", "0.5.13"):
        assert sglang_flag_at("--hybrid-kvcache-ratio", release) is True, release
    for release in ("0.4.8", "0.5.16", "0.5.23"):
        assert sglang_flag_at("--hybrid-kvcache-ratio", release) is False, release
    for release in release_fields():
        assert sglang_flag_at("--model-path", release) is True, release
    # --enable-ep-moe: read to 0.4.9; 0.5.3 and 0.5.4 register it to raise (DeprecatedAction)
    assert sglang_flag_at("--enable-ep-moe", "0.4.9") is True
    assert sglang_flag_at("--enable-ep-moe", "0.5.3") is False
    ep = parse_tokens(["python", "-m", "sglang.launch_server", "--model-path", "m",
                       "--enable-ep-moe", "--tp", "2"])
    with pytest.raises(BadInput) as exc:
        check_release(ep, "0.5.4")
    assert "SGLang 0.5.4 refuses --enable-ep-moe" in exc.value.message
    # the hint is SGLang's own message, which names the flag that replaces it
    assert exc.value.hint is not None and "--ep-size" in exc.value.hint
    check_release(ep, "0.4.9")
    c = parse_tokens(["python", "-m", "sglang.launch_server", "--model-path", "m",
                      "--enable-lora", "--log-level", "info"])
    check_release(c, "0.5.3")
    check_release(c, None)
    with pytest.raises(BadInput) as exc:
        check_release(c, "0.4.9")
    assert "SGLang 0.4.9 has no flag --enable-lora" in exc.value.message
    assert "0.4.10 - " in exc.value.message and exc.value.hint
    with pytest.raises(BadInput):  # a post release: its numbered release's ServerArgs
        check_release(c, "0.4.9.post5")
    check_release(c, "main@d315eb7")  # a source snapshot: no ServerArgs table, not checked
    assert "and its flags" in c.describe("0.5.3")[0]
    assert "spell them" in c.describe("main@d315eb7")[0]


def test_cli_refuses_a_flag_of_a_later_release_and_lists_ignored_ones() -> None:
    code, _, err = invoke(["estimate", "--engine-version", "0.5.23", "--gpu", "H100", "--",
                           "python", "-m", "sglang.launch_server", "--model-path",
                           "qwen3-0.6b", "--cuda-graph-max-bs", "8"])
    assert code == 2
    assert "SGLang 0.5.23 has no flag --cuda-graph-max-bs" in err
    assert "did you mean --cuda-graph-max-bs-decode?" in err
    code, out, err = invoke(["estimate", "-f", "json", "--engine-version", "0.5.23", "--gpu",
                             "H100", "--", "python", "-m", "sglang.launch_server",
                             "--model-path", "qwen3-0.6b", "--cuda-graph-max-bs-decode", "8",
                             "--grpc-mode", "--enable-return-routed-experts"])
    assert code == 0, err
    assert "ignored (no effect on GPU memory): --grpc-mode" in err
    assert "--enable-return-routed-experts (the routed-experts capture buffer)" in err
    assert json.loads(out)["serve_command"] == {
        "ignored": ["--grpc-mode"],
        "not_modelled": [{"flag": "--enable-return-routed-experts",
                          "note": "the routed-experts capture buffer"}]}


def test_markdown_lists_the_flags_not_applied(tmp_path: Path) -> None:
    md = tmp_path / "e.md"
    code, _, err = invoke(["estimate", "--gpu", "H100", "--markdown", str(md), "--",
                           "sglang", "serve", "qwen3-0.6b", "--port", "30000", "--host",
                           "0.0.0.0", "--speculative-algorithm", "NGRAM"])
    assert code == 0, err
    text = md.read_text()
    assert "- ignored (no effect on GPU memory): `--port` `--host`" in text
    assert "- not modelled (may change GPU memory): `--speculative-algorithm` (" in text
    code, out, _ = invoke(["estimate", "-f", "json", "--gpu", "H100", "--model", "qwen3-0.6b",
                           "--engine", "sglang"])
    assert code == 0 and "serve_command" not in json.loads(out)


def test_a_unique_prefix_is_the_flag_it_begins() -> None:
    # argparse's allow_abbrev, on in SGLang's prepare_server_args
    c = parse_tokens(["python", "-m", "sglang.launch_server", "--model-path", "m",
                      "--mem-fraction", "0.7", "--served-model", "x", "--disable-custom-all"])
    assert c.settings == {"mem_fraction_static": 0.7, "disable_custom_all_reduce": True}
    assert c.ignored == ("--served-model-name",)
    with pytest.raises(BadInput) as exc:
        parse_tokens(["python", "-m", "sglang.launch_server", "--model-path", "m",
                      "--enable-dp", "1"])
    assert "ambiguous" in exc.value.message and exc.value.hint


# ServerArgs fields that pick a kernel, a backend, a buffer or a load path: read in the source
# of 0.4.9 and 0.5.23 (the note names the file), so listed as not modelled, never ignored
MEMORY_FLAGS = {
    "--disable-overlap-schedule": "pool_configurator.py",
    "--moe-runner-backend": "layers/moe/utils.py",
    "--sampling-backend": "layers/sampler.py",
    "--load-format": "bitsandbytes",
    "--decode-attention-backend": "--attention-backend",
    "--prefill-attention-backend": "--attention-backend",
    "--enable-deterministic-inference": "batch-invariant",
    "--enable-return-hidden-states": "CUDA graphs",
    "--disable-radix-cache": "SWA pool",
    "--disable-shared-experts-fusion": "extra experts",
    "--enable-eplb": "expert-distribution recorder",
}


@pytest.mark.parametrize("flag", sorted(MEMORY_FLAGS))
def test_a_flag_that_changes_memory_is_not_modelled_with_its_source(flag: str) -> None:
    value = [] if flag.startswith(("--enable-", "--disable-")) else ["x"]
    c = parse_tokens(["python", "-m", "sglang.launch_server", "--model-path", "m", flag,
                      *value])
    assert c.ignored == ()
    [(name, note)] = c.not_modelled
    assert name == flag and MEMORY_FLAGS[flag] in note
    assert "0.5.23" in note or "0.4.9" in note


def test_no_x_only_for_a_boolean_optional_action_switch() -> None:
    # --disable-radix-cache is a store_true switch in every release read: argparse has no
    # --no-disable-radix-cache, and memprof refuses it as SGLang would
    with pytest.raises(BadInput) as exc:
        parse_tokens(["python", "-m", "sglang.launch_server", "--model-path", "m",
                      "--no-disable-radix-cache"])
    assert "SGLang has no flag --no-disable-radix-cache" in str(exc.value)
    assert exc.value.hint == "leave --disable-radix-cache out for its default"
    code, _, err = invoke(["estimate", "--gpu", "H100", "--", "python", "-m",
                           "sglang.launch_server", "--model-path", "qwen3-0.6b",
                           "--no-enable-eplb"])
    assert code == 2 and err.startswith("error:") and "hint:" in err
    assert "Traceback" not in err
    # --lora-strict-loading: BooleanOptionalAction from 0.5.11 (arg_groups/fields/lora.py)
    assert FIELDS["lora_strict_loading"]["no_flag"] == [["0.5.11", "0.5.23"]]
    c = parse_tokens(["python", "-m", "sglang.launch_server", "--model-path", "m",
                      "--no-lora-strict-loading"])
    assert c.ignored == ("--no-lora-strict-loading",)
    check_release(c, "0.5.23")
    with pytest.raises(BadInput) as exc:
        check_release(c, "0.5.9")
    assert ("SGLang 0.5.9 has no flag --no-lora-strict-loading (of the releases read, 0.5.11 - "
            "0.5.23 register") in str(exc.value)
    # every switch with a no_flag run is a switch
    assert all(e["arity"] == "flag" for e in FIELDS.values() if e.get("no_flag"))


def test_every_refused_flag_carries_sglang_s_message() -> None:
    """Each spelling SGLang registers only to refuse has the message its DeprecatedAction
    prints, naming the flag to use instead (the hint of memprof's refusal)."""
    for name, entry in FIELDS.items():
        if entry.get("refused"):
            said = entry.get("refused_message", "")
            assert any(flag in said for flag in entry["refused"]), name
            assert "--" in said.replace(next(iter(entry["refused"])), ""), name
