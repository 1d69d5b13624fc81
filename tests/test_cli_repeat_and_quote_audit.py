"""A second user's audit of the CLI, one table per class of mistake found. Each row once ran on
a guess (the last of two values, a flag read by nothing, a grid point marked as the engine's
refusal) or told the wrong story (a file called a missing folder, a hint naming a flag that is
refused alone); now it is one ``error:`` line and a ``hint:`` (exit 2) before any work, or it
runs as the user meant."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.base.files import read_capped_text
from memprof.commands.options import deployment_options
from memprof.probes.log_deployment import resolve_model
from tests.cli_helpers import invoke, one_error

# --- a flag given twice with two values: argparse kept the last without a word -------------

TWICE = [
    (["estimate", "-m", "qwen3-8b", "-tp", "2", "-tp", "1"], "--tensor-parallel-size"),
    (["estimate", "-m", "qwen3-8b", "-tp", "2", "--tensor-parallel-size=1"],
     "--tensor-parallel-size"),
    (["estimate", "-m", "qwen3-8b", "--gpu", "H100", "--gpu", "A100-80GB"], "--gpu"),
    (["estimate", "-m", "qwen3-8b", "--enable-prefix-caching", "--no-enable-prefix-caching"],
     "--enable-prefix-caching"),
    (["plan", "-m", "qwen3-8b", "--requests", "8", "--context", "8k", "--context", "32k"],
     "--context"),
    (["sweep", "-m", "qwen3-8b", "-m", "qwen3-32b", "--set", "tp=1,2"], "--model"),
    (["explain", "log.txt", "--gpu", "H100", "--gpu", "H200"], "--gpu"),
    (["gate", "--tolerance", "1", "--tolerance", "2"], "--tolerance"),
]


@pytest.mark.parametrize(("argv", "flag"), TWICE, ids=[" ".join(a) for a, _ in TWICE])
def test_a_flag_given_twice_with_two_values_is_refused(argv: list[str], flag: str) -> None:
    code, out, err = invoke(argv)
    assert code == 2 and out == ""
    one_error(err, f"{flag} is given twice with different values")


VALUE_FLAGS = [o for o in deployment_options() if o.kind in ("int", "tokens") and o.names]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VALUE_FLAGS), st.integers(1, 10**6), st.integers(1, 10**6),
       st.booleans())
def test_any_value_flag_twice(option: object, a: int, b: int, eq: bool) -> None:
    """Every int or token-count deployment flag, under any two of its spellings: two values are
    refused (never the last kept), one value twice is the same as once."""
    names = option.names  # type: ignore[attr-defined]
    first, second = names[0], names[-1]
    twice = [f"{second}={b}"] if eq else [second, str(b)]
    code, out, err = invoke(["estimate", "-m", "no-such-model", first, str(a), *twice])
    assert code == 2 and out == ""
    if a != b:
        one_error(err, "is given twice with different values")
    else:  # the flag is fine; what fails is the model, after the flags are read
        assert "given twice" not in err


@pytest.mark.parametrize("twice", [
    ["-tp", "2", "--tensor-parallel-size", "02"],
    ["--max-model-len", "32768", "--max-model-len", "32K"],
    ["--gpu-memory-utilization", "0.9", "--gpu-memory-utilization=.9"],
])
def test_one_value_in_two_spellings_is_no_conflict(twice: list[str]) -> None:
    # the values are compared as the flag reads them (32K = 32,768; .9 = 0.9), not as text
    code, _, err = invoke(["estimate", "-m", "qwen3-8b", "--gpu", "H100", "-f", "json", *twice])
    assert code in (0, 1) and "given twice" not in err


def test_a_pasted_command_may_repeat_a_flag_as_the_engine_allows() -> None:
    """After ``--`` the engine's own argparse rules (the last value wins in vLLM and SGLang)."""
    code, _, err = invoke(["estimate", "--gpu", "H100", "-f", "json", "--", "vllm", "serve",
                           "Qwen/Qwen3-8B", "-tp", "2", "-tp", "1"])
    assert code in (0, 1) and "given twice" not in err


# --- versions: deployment flags that nothing read ------------------------------------------

VERSIONS = [
    (["versions", "--engine-version", "0.40.0"], "--engine-version is read only with --from"),
    (["versions", "--engine-version", "latest"], "--engine-version is read only with --from"),
    (["versions", "--engine", "sglang"], "--engine is read only with --from"),
    (["versions", "-m", "qwen3-8b", "-tp", "2"], "--model is read only with --from"),
    (["versions", "--gpu", "H200", "-f", "json"], "--gpu is read only with --from"),
    (["versions", "--from", "0.10.1", "--to", "0.11.0", "--engine-version", "0.9.2"],
     "--engine-version with --from/--to"),
]


@pytest.mark.parametrize(("argv", "needle"), VERSIONS, ids=[" ".join(a) for a, _ in VERSIONS])
def test_versions_refuses_a_flag_it_would_not_read(argv: list[str], needle: str) -> None:
    code, out, err = invoke(argv)
    assert code == 2 and out == ""
    one_error(err, needle)


def test_versions_still_lists_and_diffs() -> None:
    assert invoke(["versions", "-f", "json"])[0] == 0
    assert invoke(["versions", "--from", "0.10.1", "--to", "0.11.0", "-m", "qwen3-8b",
                   "-f", "json"])[0] == 0


# --- sweep: an engine_version axis is read as --engine-version, before any work -------------

SWEEP_VERSIONS = [("0.40.0,0.10.1", "newer than the vLLM releases"),
                  ("latest", "is not a release number"),
                  ("main", "is not a release number"),
                  ("0.10.1,0.5.0", "older than the vLLM releases")]


@pytest.mark.parametrize(("values", "needle"), SWEEP_VERSIONS)
def test_sweep_refuses_an_unmodelled_release_before_any_work(values: str, needle: str,
                                                             tmp_path: Path) -> None:
    out_file = tmp_path / "grid.csv"
    code, out, err = invoke(["sweep", "-m", "qwen3-8b", "--set", f"engine_version={values}",
                             "-o", str(out_file)])
    assert code == 2 and out == "" and not out_file.exists()
    one_error(err, "--set engine_version '")
    assert needle in err


def test_sweep_sglang_axis_is_checked_against_sglang() -> None:
    code, _, err = invoke(["sweep", "-m", "qwen3-8b", "--engine", "sglang",
                           "--set", "engine_version=0.10.1"])
    assert code == 2
    one_error(err, "newer than the SGLang releases")


# --- a pasted command inside one pair of quotes -------------------------------------------


@pytest.mark.parametrize("quoted", ["vllm serve Qwen/Qwen3-8B -tp 2 --max-model-len 8k",
                                    "  vllm serve Qwen/Qwen3-8B -tp 2 --max-model-len 8k  ",
                                    "vllm\tserve Qwen/Qwen3-8B -tp 2 --max-model-len 8k # mine"])
def test_a_quoted_paste_reads_as_the_unquoted_one(quoted: str) -> None:
    plain = invoke(["estimate", "--gpu", "H100", "-f", "json", "--", "vllm", "serve",
                    "Qwen/Qwen3-8B", "-tp", "2", "--max-model-len", "8k"])
    one = invoke(["estimate", "--gpu", "H100", "-f", "json", "--", quoted])
    assert plain[0] in (0, 1) and one == plain


@pytest.mark.parametrize(("word", "needle"), [("   ", "the pasted command is empty"),
                                              ("# vllm serve x", "the pasted command is empty"),
                                              ("vllm serve 'Qwen", "cannot split it")])
def test_a_quoted_paste_that_reads_as_nothing(word: str, needle: str) -> None:
    code, out, err = invoke(["estimate", "--gpu", "H100", "--", word])
    assert code == 2 and out == ""
    one_error(err, needle)


# --- a byte-order mark (Windows editors) hid a script's first line -------------------------


def test_a_byte_order_mark_is_no_part_of_the_text(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_bytes(b"\xef\xbb\xbfvllm serve Qwen/Qwen3-8B -tp 2\n")
    assert read_capped_text(script, what="f", cap=1 << 20, hint="h").startswith("vllm serve")
    code, _, err = invoke(["estimate", "--gpu", "H100", "-f", "json",
                           "--from-file", str(script)])
    assert code in (0, 1) and "model Qwen/Qwen3-8B, tp=2" in err


# --- hints that named what is refused, or read wrong ---------------------------------------


def test_a_gate_scenario_path_that_is_a_file_is_called_a_file(tmp_path: Path) -> None:
    f = tmp_path / "a.toml"
    f.write_text("model = 'qwen3-8b'\n")
    code, _, err = invoke(["gate", "--scenarios", str(f)])
    assert code == 2
    one_error(err, "is a file, not a folder")
    code, _, err = invoke(["gate", "--scenarios", str(tmp_path / "none")])
    one_error(err, "does not exist")


def test_a_log_without_a_total_names_gpu_memory_with_its_arch() -> None:
    log = Path(__file__).parent / "data" / "logs" / "sglang-qwq-32b-tp4-l4-0.4.3.post4.log"
    code, _, err = invoke(["explain", str(log)])
    assert code == 2
    one_error(err, "the log does not show the GPU's total memory")
    assert "--gpu-memory with --gpu-arch" in err.splitlines()[-1]


def test_an_unbundled_log_model_hint_names_each_candidate_once() -> None:
    with pytest.raises(Exception) as info:
        resolve_model("qwen/qwen2.5-0.5b-instruct")
    hint = getattr(info.value, "hint", "")
    assert hint.startswith("if it is one of ") and ", pass it with --model" in hint
    assert hint.count("Qwen/Qwen2.5-0.5B") == 1


@pytest.mark.parametrize(("argv", "fraction"), [
    (["estimate", "--gpu-memory-utilization", "90%"], "0.9 for 90%"),
    (["estimate", "--engine", "sglang", "--mem-fraction-static", "85.5%"], "0.855 for 85.5%"),
])
def test_a_percent_says_the_fraction(argv: list[str], fraction: str) -> None:
    code, out, err = invoke(argv)
    assert code == 2 and out == ""
    one_error(err, "without the % sign")
    assert fraction in err


# --- plan: a way out it had already taken ------------------------------------------------


@pytest.mark.parametrize(("kv", "says_fp8"), [([], False), (["--kv-cache-dtype", "auto"], True),
                                              (["--kv-cache-dtype", "auto,fp8"], False)])
def test_plan_hint_offers_fp8_only_where_it_was_not_tried(kv: list[str], says_fp8: bool) -> None:
    code, out, _ = invoke(["plan", "-m", "qwen3-32b", "--requests", "99999999999",
                           "--context", "32k", "--max-gpus", "2", *kv])
    assert code == 1
    assert "99,999,999,999 requests" in out
    assert ("add --kv-cache-dtype fp8" in out) is says_fp8


# --- the JSON carries only what docs/json.md documents -----------------------------------


@pytest.mark.parametrize("argv", [["-m", "qwen3-8b", "--gpu", "H100"],
                                  ["-m", "qwen3-8b", "--gpu", "H100", "--engine", "sglang"]])
def test_every_rank_and_summary_key_is_documented(argv: list[str]) -> None:
    import json
    import re

    doc = (Path(__file__).resolve().parents[1] / "docs" / "json.md").read_text()
    words = set(re.findall(r"[a-z_]+", doc))
    code, out, _ = invoke(["estimate", *argv, "-f", "json"])
    assert code in (0, 1)
    d = json.loads(out)
    for part in (d["ranks"][0], d["summary"], d["ranks"][0]["components"][0]):
        assert set(part) <= words, sorted(set(part) - words)
    for c in d["ranks"][0]["components"]:  # bytes is exact, bytes_each its floor share
        assert c["bytes_each"] == c["bytes"] // max(c["count"], 1)


# --- a bundled name beside its own HF id is one model, not a conflict --------------------


@pytest.mark.parametrize(("mine", "pasted", "conflict"), [
    ("qwen3-8b", "Qwen/Qwen3-8B", False), ("Qwen/Qwen3-8B", "qwen/qwen3-8b", False),
    ("qwen3-8b", "Qwen/Qwen3-32B", True), ("qwen3-8b", "Org/Qwen3-8B-Finetune", True)])
def test_model_given_twice(mine: str, pasted: str, conflict: bool) -> None:
    code, _, err = invoke(["estimate", "-m", mine, "--gpu", "H100", "-f", "json", "--", "vllm",
                           "serve", pasted])
    if conflict:
        assert code == 2
        one_error(err, "but the pasted command serves")
    else:
        assert code in (0, 1) and "error:" not in err


# --- explain: another engine's flag on a log; its hint offered --engine, which explain refuses


LOGS = Path(__file__).parent / "data" / "logs"


@pytest.mark.parametrize(("log", "flag", "value", "engine"), [
    ("sglang-qwen2.5-0.5b-docs-0.4.7.log", "--gpu-memory-utilization", "0.5", "SGLang"),
    ("sglang-qwen2.5-0.5b-docs-0.4.7.log", "--max-num-batched-tokens", "4096", "SGLang"),
    ("vllm-v1-qwen3-235b-fp8-tp4-h100.log", "--mem-fraction-static", "0.5", "vLLM"),
])
def test_explain_names_the_log_engine_for_a_foreign_flag(log: str, flag: str, value: str,
                                                         engine: str) -> None:
    code, out, err = invoke(["explain", str(LOGS / log), "-m", "qwen3-8b", "--gpu", "H100",
                             flag, value])
    assert code == 2 and out == ""
    one_error(err, f"the log was written by {engine}")
    assert "--engine" not in err.splitlines()[-1]


# --- validate: a backend the engine refuses on --gpu read as a failed kernel (exit 1) -------


@pytest.mark.parametrize(("argv", "needle"), [
    (["--gpu", "H100"], "cutlass_mla needs Blackwell"),
    (["--gpu", "H100", "--kernel", "mla", "--attention-backend", "flashinfer_mla"],
     "flashinfer_mla needs Blackwell"),
    (["--gpu", "MI300X", "--kernel", "mla"], "is an NVIDIA backend"),
])
def test_validate_refuses_a_backend_the_gpu_cannot_run(argv: list[str], needle: str) -> None:
    code, out, err = invoke(["validate", "--device", "cpu", *argv])
    assert code == 2 and out == ""
    one_error(err, needle)
    assert "B200" in err.splitlines()[-1]


# --- an --hf-overrides key the config lacks: said, with the key it may have meant ----------


@pytest.mark.parametrize(("over", "said"), [
    ('{"num_hidden_layer": 4}', "(did you mean num_hidden_layers?)"),
    ('{"foo": 1}', "foo is not a key of qwen3-8b's config.json"),
    ('{"num_hidden_layers": 4}', None),
])
def test_an_added_override_key_is_said(over: str, said: str | None) -> None:
    import json

    code, out, _ = invoke(["estimate", "-m", "qwen3-8b", "--gpu", "H100", "-f", "json",
                           "--hf-overrides", over])
    assert code in (0, 1)
    notes = [n for n in json.loads(out)["summary"]["notes"] if "is not a key of" in n]
    assert (notes == []) if said is None else (len(notes) == 1 and said in notes[0])


# --- vLLM's --max-model-len auto / -1 (auto-fit) is read as vLLM reads it ------------------


@pytest.mark.parametrize("argv", [
    ["--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "auto"],
    ["--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len=-1"],
    ["--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "AUTO"],
    ["-m", "qwen3-8b", "--max-model-len", "auto"],
    ["-m", "qwen3-8b", "--max-model-len", "-1"],
])
def test_max_model_len_auto_is_read_as_vllm_reads_it(argv: list[str]) -> None:
    import json

    code, out, err = invoke(["estimate", "--gpu", "RTX-4090", "-f", "json", *argv])
    assert code == 0, err
    dep = json.loads(out)["deployment"]
    assert dep["max_model_len_auto_fit_from"] == 40960  # Qwen3-8B's derived length
    assert 0 < dep["max_model_len"] < 40960  # fitted to the 24 GB card's KV cache


# --- a log's model path in a hub's download folder names its repo --------------------------


@pytest.mark.parametrize(("path", "resolved"), [
    ("/home/x/qwen/Qwen2___5-7B", "qwen2.5-7b"),
    ("/root/.cache/huggingface/hub/models--Qwen--Qwen3-8B", "qwen3-8b"),
    ("/data/models--Qwen--Qwen2___5-7B/", "qwen2.5-7b"),
])
def test_a_hub_download_folder_resolves_to_its_repo(path: str, resolved: str) -> None:
    assert resolve_model(path) == resolved


def test_a_path_of_no_bundled_repo_is_still_refused() -> None:
    with pytest.raises(Exception, match="is not a bundled model"):
        resolve_model("/root/.cache/huggingface/hub/models--org--NoSuchModel-7B")


# --- a release of the other engine: the hint says whose it is ------------------------------


@pytest.mark.parametrize(("argv", "said"), [
    (["--engine-version", "0.5.3"], "0.5.3 is an SGLang release, not a vLLM one"),
    (["--engine", "sglang", "--engine-version", "v0.10.1"],
     "0.10.1 is a vLLM release, not an SGLang one"),
    (["--engine-version", "0.5.0"], None),
])
def test_a_release_of_the_other_engine_is_named(argv: list[str], said: str | None) -> None:
    code, out, err = invoke(["estimate", "-m", "qwen3-8b", *argv])
    assert code == 2 and out == ""
    one_error(err, "releases memprof models")
    assert (said in err) if said is not None else ("release, not" not in err)


# --- a container's environment and variables in compose files and manifests -------------

K8S = """apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.10.1
        env:
        - name: VLLM_USE_V1
          value: "0"
        - name: TP
          value: "2"
        args: ["--model", "Qwen/Qwen3-8B", "--tensor-parallel-size", "ARG"]
"""
COMPOSE = """services:
  vllm:
    image: vllm/vllm-openai:v0.10.1
    environment:
      - VLLM_USE_V1=0
    command: --model Qwen/Qwen3-8B --tensor-parallel-size ARG
"""


@pytest.mark.parametrize(("text", "arg", "needle"), [
    (K8S, "$(TP)", None), (K8S, "$(TPX)", "use $(TPX), which its env: gives no value"),
    # Kubernetes' $$ escape: $$(TP) is the literal text $(TP), a bad value, not a variable
    (K8S, "$$(TP)", "'$(TP)'"),
    (COMPOSE, "2", None), (COMPOSE, "${TP:-2}", "docker compose fills from the shell"),
    (COMPOSE, "$TP", "docker compose fills from the shell"),
])
def test_a_container_environment_is_read(text: str, arg: str, needle: str | None,
                                         tmp_path: Path) -> None:
    f = tmp_path / "deploy.yaml"
    f.write_text(text.replace("ARG", arg))
    code, _, err = invoke(["estimate", "--gpu", "H100", "-f", "json", "--from-file", str(f)])
    if needle is None:
        assert code in (0, 1) and "vllm_use_v1=0, tp=2" in err
    else:
        assert code == 2
        one_error(err, needle)


SIDECARS = {
    "compose": COMPOSE.replace("ARG", "2") + """  cache:
    image: redis:7
    command: redis-server --requirepass ${REDIS_PASSWORD}
""",
    "k8s": K8S.replace("ARG", "$(TP)") + """      - name: proxy
        image: envoyproxy/envoy:v1.30
        args: ["--service-node", "$(POD_NAME)"]
        env:
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
""",
}


@pytest.mark.parametrize("kind", sorted(SIDECARS))
def test_another_container_s_variables_are_not_read(kind: str, tmp_path: Path) -> None:
    # a service or container that runs no engine is skipped before its variables are filled:
    # a compose ${REDIS_PASSWORD} or a manifest's valueFrom variable beside the server is not
    # a reason to refuse the file
    f = tmp_path / "deploy.yaml"
    f.write_text(SIDECARS[kind])
    code, _, err = invoke(["estimate", "--gpu", "H100", "-f", "json", "--from-file", str(f)])
    assert code in (0, 1) and "vllm_use_v1=0, tp=2" in err


# --- sweep: a base flag its axis replaces at every point -----------------------------------


@pytest.mark.parametrize(("argv", "flag"), [
    (["-m", "qwen3-8b", "-tp", "2", "--set", "tp=1,4"], "--tensor-parallel-size"),
    (["-m", "qwen3-8b", "--gpu", "H100", "--set", "gpu=H200,B200"], "--gpu"),
    (["-m", "qwen3-8b", "--set", "model=qwen3-8b,qwen3-4b"], "--model"),
    (["-m", "qwen3-8b", "--max-model-len", "4k", "--set", "max_model_len=8k,16k"],
     "--max-model-len"),
])
def test_sweep_refuses_a_base_flag_its_axis_replaces(argv: list[str], flag: str) -> None:
    code, out, err = invoke(["sweep", *argv])
    assert code == 2 and out == ""
    one_error(err, f"{flag} is given and swept by --set")
