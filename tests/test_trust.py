"""Issue 7: answers a user can trust — each class of input has a case written here.

No impossible verdict, no traceback (exit 2 for bad input, 70 for memprof's own bugs, 1 only for
a predicted OOM), no silent guess, the engines' own flag names, scale, remedies, the gate.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from memprof.base.units import GiB, MiB
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.remedies import remedies
from memprof.core.verdict import held_bytes

ROOT = Path(__file__).resolve().parents[1]


def call(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_error(code: int, out: str, err: str, needle: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert needle.lower() in lines[0].lower(), lines[0]
    assert "Traceback" not in err and out == ""


# --- 1. no impossible verdict --------------------------------------------------------------------


def test_a_1_tib_kv_cache_on_one_h100_does_not_fit() -> None:
    e = estimate("qwen3-0.6b", Deployment(kv_cache_memory_bytes=1 << 40), gpu_name="H100")
    assert e.verdict == "startup_oom" and "does not fit" in e.reasons[0]
    r = e.ranks[0]
    assert r.headroom_bytes < 0 and held_bytes(r.components) > e.gpu.total_bytes


def test_deepseek_v3_weights_on_one_h200_with_16_gib_of_kv_is_a_model_load_oom() -> None:
    e = estimate("deepseek-v3", Deployment(kv_cache_memory_bytes=16 * GiB), gpu_name="H200")
    assert e.verdict == "startup_oom" and e.reasons[0].startswith("model load OOM")
    assert e.weights_bytes_max > e.gpu.total_bytes
    assert all(r.headroom_bytes < 0 for r in e.ranks)  # never positive beside 600+ GiB


def test_startup_oom_never_shows_positive_headroom_beside_weights_larger_than_the_gpu() -> None:
    for model, gpu in (("llama-3.1-70b", "H100"), ("deepseek-r1", "H200"),
                       ("qwen3-235b-a22b", "H100")):
        e = estimate(model, Deployment(), gpu_name=gpu)
        assert e.weights_bytes_max > e.gpu.total_bytes
        assert e.verdict == "startup_oom" and all(r.headroom_bytes < 0 for r in e.ranks)


def test_a_block_too_large_for_the_budget_says_what_it_needs() -> None:
    # vLLM's --block-size is one of its CLI choices: a 20 MiB KV budget under one 256-token
    # block (256 × 128 KiB = 32 MiB); the largest choice that fits is 128
    small = 20 * 1024 * 1024
    e = estimate("llama-3.1-8b", Deployment(block_size=256, kv_cache_memory_bytes=small),
                 gpu_name="H100")
    assert e.verdict == "startup_oom"
    reason = e.reasons[0]
    assert "one KV block of 256 tokens needs" in reason and "fits" in reason
    fit = int(reason.rsplit("at most ", 1)[1].split(" ")[0].replace(",", ""))
    assert fit == 128
    ok = estimate("llama-3.1-8b", Deployment(block_size=fit, max_model_len=fit,
                                             kv_cache_memory_bytes=small), gpu_name="H100")
    assert ok.ranks[0].kv.num_gpu_blocks >= 1


def test_fits_means_every_component_fits_the_gpu() -> None:
    e = estimate("deepseek-r1", Deployment(tp=8), gpu_name="H200")
    assert e.verdict == "fits"
    for r in e.ranks:
        assert held_bytes(r.components) <= e.gpu.total_bytes
        assert r.headroom_bytes <= e.gpu.total_bytes - held_bytes(r.components)


# --- 2. no traceback; exit 1 only for an OOM ------------------------------------------------------


def _write(tmp: Path, name: str, cfg: object) -> str:
    d = tmp / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg) if not isinstance(cfg, str) else cfg)
    return str(d)


def _llama() -> dict[str, object]:
    cfg: dict[str, object] = json.loads((ROOT / "configs/models/llama-3.1-8b.json").read_text())
    return cfg


MALFORMED = [
    ("hidden_size", "4096", "must be an integer"),  # a string where an integer belongs
    ("num_hidden_layers", [32], "must be an integer"),  # a list where an integer belongs
    ("model_type", ["llama"], "must be a string"),  # a list where a string belongs
    ("architectures", "LlamaForCausalLM", "list of strings"),
    ("torch_dtype", 16, "must be a string"),
    ("tie_word_embeddings", "yes", "true or false"),
    ("vocab_size", 0, "outside"),  # zero size
    ("num_attention_heads", -32, "outside"),  # negative size
    ("intermediate_size", 14336.5, "must be an integer"),
    ("num_hidden_layers", 10**30, "outside"),  # 10^30 layers
    ("num_hidden_layers", int("9" * 3000), "3000-digit"),  # thousands of digits
    ("max_position_embeddings", True, "must be an integer"),
    ("rope_scaling", [1, 2], "must be an object"),
    ("quantization_config", "fp8", "must be an object"),
]


@pytest.mark.parametrize(("field", "value", "needle"), MALFORMED)
def test_malformed_config_fields_exit_2_from_validation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object,
        needle: str) -> None:
    cfg = _llama()
    cfg[field] = value
    one_error(*call(capsys, "estimate", "-m", _write(tmp_path, "m", cfg)), needle)


@pytest.mark.parametrize(("block", "needle"), [([128], "two integers"), ([128, 128, 1], "two"),
                                               (["128", 128], "must be an integer"),
                                               ([0, 128], "outside")])
def test_block_sizes_of_the_wrong_length_or_type(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], block: object, needle: str) -> None:
    cfg = json.loads((ROOT / "configs/models/deepseek-r1.json").read_text())
    cfg["quantization_config"]["weight_block_size"] = block
    one_error(*call(capsys, "estimate", "-m", _write(tmp_path, "m", cfg)), needle)


def test_files_that_are_not_configs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = _write(tmp_path, "empty", "")
    one_error(*call(capsys, "estimate", "-m", empty), "is empty")
    deep = _write(tmp_path, "deep", "[" * 100_000 + "]" * 100_000)
    one_error(*call(capsys, "estimate", "-m", deep), "nests JSON too deeply")
    binary = tmp_path / "binary.json"
    binary.write_bytes(bytes(range(256)))
    one_error(*call(capsys, "estimate", "-m", str(binary)), "not UTF-8")
    folder = tmp_path / "folder"
    folder.mkdir()
    one_error(*call(capsys, "estimate", "-m", str(folder)), "no config.json")
    as_dir = tmp_path / "x.json"
    as_dir.mkdir()
    (as_dir / "config.json").mkdir()  # a directory where the file should be
    one_error(*call(capsys, "estimate", "-m", str(as_dir)), "no config.json")


@pytest.mark.parametrize(("args", "needle"), [
    (["-m", "x" * 100_000], "not a name, a path"),
    (["-m", "/" + "a" * 300 + "/config.json"], "no such file"),  # too long to exist
    (["--gpu-memory", "9" * 5000 + "GiB"], "characters long"),
    (["-tp", "9" * 400], "digit number"),
    (["--max-model-len", "9" * 400], "digit number"),
    (["--compare", "max_num_seqs=" + "9" * 100], "bad value"),
    (["--gpu", "H" * 10_000], "unknown GPU"),
])
def test_over_long_arguments(capsys: pytest.CaptureFixture[str], args: list[str],
                             needle: str) -> None:
    one_error(*call(capsys, "estimate", *args), needle)


@pytest.fixture
def scenarios(tmp_path: Path) -> Path:
    d = tmp_path / "scenarios"
    d.mkdir()
    (d / "small.toml").write_text('model = "qwen3-0.6b"\ngpu = "H100"\n')
    return d


def test_gate_baseline_paths_that_cannot_be_used(
        tmp_path: Path, scenarios: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    one_error(*call(capsys, "gate", "--scenarios", str(scenarios), "--baseline", str(folder)),
              "is a folder, not a file")  # memprof.base.files.read_capped's wording
    one_error(*call(capsys, "gate", "--update", "--scenarios", str(scenarios), "--baseline",
                    str(folder)), "is a folder")
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    under = a_file / "baseline.json"
    one_error(*call(capsys, "gate", "--scenarios", str(scenarios), "--baseline", str(under)),
              "does not exist")
    one_error(*call(capsys, "gate", "--update", "--scenarios", str(scenarios), "--baseline",
                    str(under)), "file.txt is not a folder")  # check_output's wording
    assert a_file.read_text() == "x"


def test_gate_update_into_a_read_only_folder(
        tmp_path: Path, scenarios: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    if os.geteuid() == 0:  # root may write anywhere: make access() answer as for a user
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, m: False if Path(p) == ro else real(p, m))
    try:
        one_error(*call(capsys, "gate", "--update", "--scenarios", str(scenarios),
                        "--baseline", str(ro / "baseline.json")), "not writable")
    finally:
        ro.chmod(stat.S_IRWXU)


def test_a_bug_of_memprofs_own_is_an_internal_error_exit_70(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import memprof.core.estimate as est

    def broken(*_a: object, **_k: object) -> object:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(est, "kv_plan", broken)
    code, out, err = call(capsys, "estimate", "-m", "qwen3-0.6b")
    lines = err.strip().splitlines()
    assert code == 70 and out == "" and "Traceback" not in err
    assert lines[0].startswith("internal error: ZeroDivisionError in ")
    assert lines[1].startswith("hint: this is a bug in memprof") and "report" in lines[1]


# --- 3. no silent guess --------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "needle"), [
    (["--gpu-memory", "23,58GiB"], "comma"),
    (["--gpu-memory", "80"], "has no unit"),
    (["--gpu-memory", "80g"], "ambiguous"),
    (["--kv-cache-memory-bytes", "16,5GiB"], "comma"),
    (["--engine", "sglang", "--gpu-memory-utilization", "0.9"], "--mem-fraction-static"),
    (["--mem-fraction-static", "0.8"], "--gpu-memory-utilization"),
    (["--cuda-graph-max-bs", "256"], "--max-num-seqs"),
    (["--chunked-prefill-size", "4096"], "--max-num-batched-tokens"),
    (["--enable-dp-attention"], "-dp/--data-parallel-size"),
    (["--engine", "sglang", "--kv-cache-memory-bytes", "8GiB"], "--mem-fraction-static"),
    (["--engine", "sglang", "--max-num-batched-tokens", "4096"], "--chunked-prefill-size"),
    (["--engine", "sglang", "--cuda-graph-max-bs", "100000"], "mem_fraction_static would be"),
    (["--engine", "sglang", "--chunked-prefill-size", "-7"], "at least 1"),
])
def test_no_silent_guess(capsys: pytest.CaptureFixture[str], args: list[str],
                         needle: str) -> None:
    one_error(*call(capsys, "estimate", "-m", "qwen3-0.6b", "--gpu", "H100", *args), needle)


def test_sglang_chunked_prefill_off_is_minus_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call(capsys, "estimate", "-m", "qwen3-0.6b", "--gpu", "H100", "--engine",
                          "sglang", "--chunked-prefill-size", "-1", "-f", "json")
    assert code == 0, err
    d = json.loads(out)["deployment"]
    # off: the profile runs --max-prefill-tokens (16384), SGLang's default
    assert d["chunked_prefill_size"] == -1 and d["max_num_batched_tokens"] == 16384


def test_a_config_without_max_position_embeddings_needs_max_model_len(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _llama()
    del cfg["max_position_embeddings"]
    path = _write(tmp_path, "m", cfg)
    one_error(*call(capsys, "estimate", "-m", path), "no max_position_embeddings")
    code, out, _ = call(capsys, "estimate", "-m", path, "--max-model-len", "8192", "-f", "json")
    assert code == 0 and json.loads(out)["deployment"]["max_model_len"] == 8192


# --- 4. the engines' own names --------------------------------------------------------------------


def test_vllm_kv_cache_memory_bytes_reads_as_vllm_reads_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    for value, expected in (("8589934592", 8 * GiB), ("8G", 8 * GiB), ("8g", 8 * 10**9),
                            ("8GiB", 8 * GiB)):
        code, out, err = call(capsys, "estimate", "-m", "qwen3-0.6b", "--gpu", "H100",
                              "--kv-cache-memory-bytes", value, "-f", "json")
        assert code == 0, err
        assert json.loads(out)["deployment"]["kv_cache_memory_bytes"] == expected


def test_sglang_flag_names(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call(capsys, "estimate", "--engine", "sglang", "--model-path",
                          "Qwen/Qwen3-32B", "--gpu", "H200", "--tp-size", "2", "--dp-size", "2",
                          "--enable-dp-attention", "--mem-fraction-static", "0.85",
                          "--context-length", "32768", "--max-running-requests", "64",
                          "-f", "json")
    assert code == 0, err
    d = json.loads(out)
    dep = d["deployment"]
    assert d["model"]["name"] == "qwen3-32b"
    assert (dep["tensor_parallel_size"], dep["data_parallel_size"]) == (2, 2)
    assert dep["mem_fraction_static"] == 0.85 and dep["max_model_len"] == 32768
    assert dep["max_num_seqs"] == 64 and dep["enable_dp_attention"]
    code, out, _ = call(capsys, "estimate", "--engine", "sglang", "-m", "qwen3-32b", "--gpu",
                        "H200", "--tp", "2", "-f", "json")
    assert code == 0 and json.loads(out)["deployment"]["tensor_parallel_size"] == 2


def test_hf_repo_ids(capsys: pytest.CaptureFixture[str]) -> None:
    for repo, name in (("Qwen/Qwen3-32B", "qwen3-32b"), ("deepseek-ai/DeepSeek-R1", "deepseek-r1"),
                       ("meta-llama/Llama-3.1-8B", "llama-3.1-8b")):
        code, out, _ = call(capsys, "estimate", "-m", repo, "--gpu", "H200", "-tp", "8",
                            "-f", "json")
        assert json.loads(out)["model"]["name"] == name and code in (0, 1)
    code, out, err = call(capsys, "estimate", "-m", "Qwen/Qwen9-1T")
    one_error(code, out, err, "not a bundled model")
    # the closest bundled Qwen3 id (Qwen/Qwen3-14B since more Qwen3 checkpoints are bundled)
    assert "did you mean Qwen/Qwen3-" in err and "local model folder or its config.json" in err


# --- 5. scale ------------------------------------------------------------------------------------


def test_identical_ranks_are_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import memprof.core.estimate as est

    calls: list[int] = []
    real = est.group_weights

    def counting(*a: object, **k: object) -> object:
        calls.append(1)
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(est, "group_weights", counting)
    e = estimate("llama-3.1-8b", Deployment(dp=100_000), gpu_name="H100")
    assert len(calls) == 1 and len(e.ranks) == 1 and len(e.ranks[0].same_as) == 100_000
    assert e.ranks[0].same_as == tuple(range(100_000))


def test_a_config_of_100000_layers_is_sized_per_layer_kind(tmp_path: Path) -> None:
    cfg = _llama()
    cfg["num_hidden_layers"] = 100_000
    big = estimate(_write(tmp_path, "big", cfg), Deployment(), gpu_memory_bytes=1 << 50,
                   gpu_arch="sm90")
    small = estimate("llama-3.1-8b", Deployment(), gpu_name="H100")

    def layer_bytes(e: object, group: str) -> tuple[int, int]:
        c = next(c for c in e.ranks[0].components if c.name == group)  # type: ignore[attr-defined]
        return c.count, c.bytes_each

    assert layer_bytes(big, "attention") == (100_000, layer_bytes(small, "attention")[1])
    assert big.ranks[0].plan.bytes_per_token == small.ranks[0].plan.bytes_per_token * 100_000 // 32


# --- 6. remedies a person can act on -------------------------------------------------------------


def test_remedies_fit_with_the_minimum_headroom_cheapest_first() -> None:
    # 40960: Qwen3-32B's derived maximum (vLLM refuses 131072 before any work)
    e = estimate("qwen3-32b", Deployment(max_model_len=40960), gpu_name="H100")
    assert e.verdict == "startup_oom"
    fixes = remedies(e, "qwen3-32b")
    assert fixes and all(f.verdict == "fits" and f.headroom_bytes >= GiB for f in fixes)
    same = [f for f in fixes if f.same_gpus]
    more = [f for f in fixes if not f.same_gpus]
    assert fixes.fitting == (*same, *more)  # same GPUs first
    assert same[0].change.startswith("--max-model-len") and same[0].gpus == 1
    assert [f.gpus for f in more] == sorted(f.gpus for f in more) and more[0].gpus == 2
    assert fixes.summary().startswith("remedies that fit with at least 1.00 GiB")


def test_none_of_these_fit_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = call(capsys, "estimate", "-m", "deepseek-v3", "--gpu-memory", "4GiB",
                        "--gpu-arch", "sm90", "-f", "json")
    d = json.loads(out)
    assert code == 1 and d["summary"]["remedies"] == []
    assert d["summary"]["remedies_note"].startswith("none of these fit with at least 1.00 GiB")


# --- 7. the gate's floor --------------------------------------------------------------------------


def test_gate_floor_keeps_tiny_components_from_flapping() -> None:
    from memprof.core.gate import REGRESSION, WITHIN, compare

    def snap(nbytes: int) -> dict[str, object]:
        rank = {"ranks": [0], "verdict": "fits", "kv_cache_tokens": 1000, "peak_bytes": GiB,
                "runtime_bytes": 0, "weights_bytes": GiB, "scratch_bytes": 0,
                "activation_bytes": 0, "components": {"scratch: tiny": nbytes}}
        return {"ranks": {"rank 0 (tp 0 pp 0 dp 0)": rank}}

    small = compare({"s": snap(2 * MiB)}, {"s": snap(4 * MiB)}, 1.0)  # +100 %, +2 MiB
    assert [f.status for f in small.findings] == [WITHIN] and not small.regressed
    big = compare({"s": snap(2 * MiB)}, {"s": snap(40 * MiB)}, 1.0)
    assert [f.status for f in big.findings] == [REGRESSION]
    assert compare({"s": snap(2 * MiB)}, {"s": snap(4 * MiB)}, 1.0, floor_bytes=0).regressed
