"""Property-based fuzzing of what users type: CLI flags and config.json mutations (issue 7).

Every case runs the real CLI in process and checks the contract: the exit code is in the
documented set (0 fits, 1 predicted OOM, 2 bad input — never 70, memprof's own bug), nothing
looks like a traceback, a bad input is exactly one ``error:`` line and one ``hint:`` line, the
JSON parses, and a ``fits`` verdict is consistent with the bytes (every component of every rank,
and weights + KV, within the GPU). Seeds are fixed (``derandomize``), so CI is reproducible; the
budget is set by ``MEMPROF_FUZZ_EXAMPLES`` (default 800 per test, 2,400 in all).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.cli import run

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = int(os.environ.get("MEMPROF_FUZZ_EXAMPLES", "800"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))

MODELS = sorted(p.stem for p in (ROOT / "configs/models").glob("*.json"))
GPUS = ["H100", "H200", "B200", "A100-40GB", "L40S", "MI300X", "RTX-4090", "GB200"]


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


def check_contract(argv: list[str], code: int, out: str, err: str) -> None:
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in out + err and "internal error" not in err, (argv, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 2 and lines[0].startswith("error: "), (argv, err)
        assert lines[1].startswith("hint: "), (argv, err)
        return
    d = json.loads(out)
    total = d["gpu"]["total_bytes"]
    assert (code == 0) == (d["summary"]["verdict"] == "fits"), (argv, d["summary"])
    for r in d["ranks"]:
        held = sum(c["bytes"] for c in r["components"])
        if r["verdict"] == "fits":
            assert held <= total, (argv, r["rank"], held, total)
            assert r["weights_bytes"] + r["kv_cache_bytes"] <= total, argv
            assert r["headroom_bytes"] >= 0, argv
        if r["weights_bytes"] > total:
            assert r["verdict"] == "startup_oom" and r["headroom_bytes"] < 0, argv


ints = st.one_of(st.integers(-3, 9), st.sampled_from([16, 64, 128, 256, 1024, 4096, 32768,
                                                      131072, 10**6, 2**40, 10**30]))
sizes = st.one_of(
    st.sampled_from(["80GiB", "23.58GiB", "512MiB", "141GB", "16G", "16g", "23,58GiB", "80",
                     "0GiB", "-1GiB", "1TiB", "1e9", "GiB", "9" * 60 + "GiB", "2EiB", "1.5K"]),
    st.text(max_size=12))


def opt(flag: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[str]]:
    return st.one_of(st.just([]), values.map(lambda v: [flag, str(v)]))


def flag(name: str) -> st.SearchStrategy[list[str]]:
    return st.sampled_from([[], [name]])


cli_args = st.tuples(
    st.one_of(st.sampled_from(MODELS), st.sampled_from(["Qwen/Qwen3-32B", "nope/none",
                                                         "no-such-model", "configs/models"]),
              st.text(max_size=8)).map(lambda m: ["-m", m]),
    opt("--gpu", st.one_of(st.sampled_from(GPUS), st.text(max_size=6))),
    opt("--gpu-memory", sizes),
    opt("-tp", ints), opt("-pp", ints), opt("-dp", ints),
    flag("--enable-expert-parallel"),
    opt("--kv-cache-dtype", st.sampled_from(["auto", "fp8", "fp8_ds_mla", "turboquant_k8v4",
                                             "bfloat16", "int3"])),
    opt("--max-model-len", ints), opt("--max-num-seqs", ints),
    opt("--max-num-batched-tokens", ints), opt("--block-size", ints),
    opt("--gpu-memory-utilization", st.sampled_from(["0.5", "0.9", "0.92", "1.0", "0", "1.5",
                                                     "nan", "inf", "-0.1"])),
    opt("--kv-cache-memory-bytes", sizes),
    flag("--enforce-eager"), opt("--num-speculative-tokens", st.integers(-1, 3)),
    opt("--attention-backend", st.sampled_from(["cutlass_mla", "flashmla", "flash_attn",
                                                "turboquant", "aiter_mla", "bogus"])),
    opt("--scratch", st.sampled_from(["per-layer", "shared", "both"])),
    st.sampled_from([[], ["--engine", "sglang"], ["--engine", "trt"]]),
    opt("--mem-fraction-static", st.sampled_from(["0.8", "0.95", "1.2", "0"])),
    flag("--enable-dp-attention"),
    opt("--chunked-prefill-size", st.sampled_from(["-1", "0", "4096", "-5"])),
    opt("--cuda-graph-max-bs", st.sampled_from(["8", "512", "100000"])),
    opt("--quantization", st.sampled_from(["fp8", "mxfp4", "awq", "none", "bogus"])),
    opt("--compare", st.sampled_from(["scratch=shared", "tp=2", "max_num_seqs=x", "bogus=1",
                                      "kv_cache_dtype=fp8,enforce_eager=true", "="])),
)


@FUZZ
@given(cli_args)
def test_fuzz_cli_flags(parts: tuple[list[str], ...]) -> None:
    argv = ["estimate", *(x for p in parts for x in p), "-f", "json"]
    check_contract(argv, *invoke(argv))


def _json_values() -> st.SearchStrategy[Any]:
    leaf = st.one_of(st.none(), st.booleans(), st.integers(-(10**40), 10**40),
                     st.sampled_from([0, -1, 1, 2, 64, 4096, 10**30]),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
    return st.recursive(leaf, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                     st.dictionaries(st.text(max_size=5), kids,
                                                                     max_size=3)),
                        max_leaves=6)


@st.composite
def mutated_config(draw: st.DrawFn) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((ROOT / "configs/models" /
                                      f"{draw(st.sampled_from(MODELS))}.json").read_text())
    for _ in range(draw(st.integers(1, 3))):
        target = cfg
        q = cfg.get("quantization_config")
        if isinstance(q, dict) and draw(st.booleans()):
            target = q
        keys = sorted(target)
        key = draw(st.sampled_from(keys)) if keys and draw(st.integers(0, 4)) else draw(
            st.text(max_size=10))
        if draw(st.integers(0, 3)) == 0:
            target.pop(key, None)
        else:
            target[key] = draw(_json_values())
    return cfg


@FUZZ
@given(mutated_config(), st.sampled_from([[], ["--max-model-len", "4096"], ["-tp", "2"],
                                          ["--engine", "sglang", "--tp", "2"]]))
def test_fuzz_config_mutations(cfg: dict[str, Any], extra: list[str]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.json"
        path.write_text(json.dumps(cfg))
        argv = ["estimate", "-m", str(path), "--gpu", "H200", *extra, "-f", "json"]
        check_contract(argv, *invoke(argv))


valid_args = st.tuples(
    st.sampled_from(MODELS).map(lambda m: ["-m", m]),
    st.sampled_from(GPUS).map(lambda g: ["--gpu", g]),
    st.sampled_from([[], ["-tp", "2"], ["-tp", "4"], ["-tp", "8"], ["-pp", "2"],
                     ["-tp", "8", "-dp", "2", "--enable-expert-parallel"]]),
    st.sampled_from([[], ["--kv-cache-dtype", "fp8"]]),
    opt("--max-model-len", st.sampled_from([1024, 8192, 32768, 131072, 1048576])),
    opt("--max-num-seqs", st.sampled_from([1, 16, 256, 2048])),
    opt("--gpu-memory-utilization", st.sampled_from(["0.5", "0.8", "0.95", "1.0"])),
    opt("--kv-cache-memory-bytes", st.sampled_from(["1GiB", "16GiB", "200GiB", "1TiB"])),
    opt("--scratch", st.sampled_from(["per-layer", "shared"])),
    flag("--enforce-eager"),
)


@FUZZ
@given(valid_args)
def test_fuzz_valid_deployments(parts: tuple[list[str], ...]) -> None:
    """Well-formed flags only, so most cases reach a verdict and its bytes are checked."""
    argv = ["estimate", *(x for p in parts for x in p), "-f", "json"]
    check_contract(argv, *invoke(argv))


def test_a_modelopt_nvfp4_group_size_that_is_no_integer_is_bad_input(tmp_path: Path) -> None:
    # found by test_fuzz_config_mutations: group_size null was an internal error (exit 70)
    cfg = json.loads((ROOT / "configs/models/deepseek-r1-nvfp4.json").read_text())
    for bad in (None, "16", 0, True):
        cfg["quantization_config"]["group_size"] = bad
        path = tmp_path / "config.json"
        path.write_text(json.dumps(cfg))
        argv = ["estimate", "-m", str(path), "--gpu", "B200", "-tp", "8"]
        code, _out, err = invoke(argv)
        assert code == 2 and "group_size" in err and "hint:" in err, (bad, code, err)
