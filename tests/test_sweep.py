"""``memprof sweep`` and ``memprof plan``: every point is the estimate, the plan is the best of a
brute-force sweep, and the shared allocator replay is the allocator term."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from memprof.base.errors import BadInput
from memprof.base.units import GiB
from memprof.batch.plan import plan
from memprof.batch.sweep import Evaluator, parse_axis, points, record, sweep
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import resolve_gpu


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


def test_axes() -> None:
    assert parse_axis("tp=1,2,4,8").values == (1, 2, 4, 8)
    a = parse_axis("max-model-len=8k,32K,131072")
    assert (a.field, a.values) == ("max_model_len", (8000, 32768, 131072))
    assert parse_axis("tensor_parallel_size=2").field == "tp"
    assert parse_axis("kv_cache_dtype=auto,fp8").values == ("auto", "fp8")
    assert parse_axis("gpu=H100,H200").field == "gpu"
    for bad in ("tp", "=1", "colour=red", "tp=1,,2", "tp=x", "engine=vllm"):
        with pytest.raises(BadInput):
            parse_axis(bad)


@pytest.mark.parametrize(("model", "gpu", "base"), [
    ("qwen3-32b", "H200", Deployment()),
    ("deepseek-r1", "B200", Deployment(enable_expert_parallel=True)),
    ("gpt-oss-120b", "H100", Deployment(engine="sglang")),
    ("qwen3-0.6b", "L40S", Deployment(pp=2)),
    ("qwen3-32b", "H200", Deployment(kv_cache_dtype="turboquant_k8v4", scratch="per-layer")),
    ("deepseek-r1", "B200", Deployment(attention_backend="cutlass_mla", scratch="per-layer")),
    ("deepseek-v4-flash", "H200", Deployment()),
    ("deepseek-v3", "H200", Deployment(engine="sglang", enable_dp_attention=True, dp=2)),
])
def test_every_point_is_the_estimate(model: str, gpu: str, base: Deployment) -> None:
    kv = "kv_cache_dtype=auto,fp8" if base.kv_cache_dtype == "auto" else "block_size=16,32"
    axes = [parse_axis("tp=1,2,8"), parse_axis("max_model_len=4K,32K"), parse_axis(kv),
            parse_axis("max_num_seqs=16,256")]
    rows = sweep(model, base, gpu, None, axes)
    assert len(rows) == 24
    g = resolve_gpu(gpu, None)
    for row in rows:
        key = "kv_cache_dtype" if "kv_cache_dtype" in row else "block_size"
        dep = base.with_(tp=row["tp"], max_model_len=row["max_model_len"],
                         max_num_seqs=row["max_num_seqs"], **{key: row[key]})
        try:
            want = record(estimate(model, dep, gpu=g))
        except BadInput as exc:
            assert row["verdict"] == "invalid" and row["error"] == exc.message
            continue
        assert {k: row[k] for k in want} == want


def test_shared_replay_is_the_allocator_term() -> None:
    ev = Evaluator()
    g = resolve_gpu("H200", None)
    for util, mml, tp in itertools.product((0.8, 0.9, 0.95), (8192, 32768), (1, 2)):
        dep = Deployment(tp=tp, gpu_memory_utilization=util, max_model_len=mml)
        a = estimate("qwen3-32b", dep, gpu=g)
        b = ev.estimate("qwen3-32b", dep, g)
        assert a == b  # every component, formula text included


def test_one_evaluator_across_engine_versions_is_the_estimate() -> None:
    """The shared caches are keyed by the release too: gpt-oss-120b on H100 has other expert
    weights before 0.25.0 (raw MXFP4 scales kept, ``MXFP4_TRITON_RAW_SCALES``), so its allocator
    replay differs; either order of the releases gives each release's own estimate."""
    g = resolve_gpu("H100", None)
    for order in (("0.33.0", "0.24.0", "0.11.0"), ("0.11.0", "0.24.0", "0.33.0")):
        ev = Evaluator()
        for version in order:
            dep = Deployment(engine_version=version)
            assert ev.estimate("gpt-oss-120b", dep, g) == estimate("gpt-oss-120b", dep, gpu=g)


def test_plan_qwen3_32b_64x32k_h100_matches_brute_force() -> None:
    g = resolve_gpu("H100", None)
    requests, context = 64, 32768
    rows = plan("qwen3-32b", g, requests=requests, context=context, headroom=GiB)
    assert rows
    # brute force: every layout, estimated from scratch, no shared work
    fits = []
    for tp, pp, dp, kv in itertools.product((1, 2, 4, 8), (1, 2, 4), (1, 2, 4, 8),
                                            ("auto", "fp8")):
        if tp * pp * dp > 64:
            continue
        seqs = math.ceil(requests / dp)
        try:
            e = estimate("qwen3-32b", Deployment(tp=tp, pp=pp, dp=dp, kv_cache_dtype=kv,
                                                 max_model_len=context, max_num_seqs=seqs),
                         gpu=g)
        except BadInput:
            continue
        head = min(r.headroom_bytes for r in e.ranks)
        if e.verdict == "fits" and head >= GiB and e.max_concurrency >= seqs:
            fits.append((tp * pp * dp, -e.kv_cache_tokens * dp, pp, tp, kv))
    fits.sort()
    assert len(rows) == len(fits)
    best = rows[0]
    assert (best.gpus, -best.total_kv_tokens, best.candidate.pp, best.candidate.tp,
            best.candidate.kv_cache_dtype) == fits[0]
    assert best.gpus == min(f[0] for f in fits) == 8  # the smallest layout that holds it
    assert [(r.gpus, -r.total_kv_tokens) for r in rows] == [f[:2] for f in fits]


def test_plan_cli(tmp_path: Path) -> None:
    code, out, err = invoke(["plan", "--model", "qwen3-32b", "--gpu", "H100", "--requests",
                             "64", "--context", "32K"])
    assert code == 0, err
    assert max(len(x) for x in out.splitlines()) <= 100
    assert "best: vllm serve Qwen/Qwen3-32B -tp 8" in out  # the HF id, to paste
    code, out, _ = invoke(["plan", "--model", "qwen3-32b", "--gpu", "H100", "--requests",
                           "64", "--context", "32K", "-f", "json", "--top", "3"])
    d = json.loads(out)
    assert code == 0 and len(d["plans"]) == 3 and d["plans"][0]["gpus"] == 8
    code, out, _ = invoke(["plan", "--model", "qwen3-32b", "--gpu", "H100", "--requests",
                           "64", "--context", "32K", "--max-gpus", "2"])
    assert code == 1 and "no layout holds it" in out
    code, _, err = invoke(["plan", "--model", "qwen3-32b", "--requests", "1", "--context",
                           "lots"])
    assert code == 2 and err.startswith("error: --context")


def test_sweep_cli_files(tmp_path: Path) -> None:
    base = ["sweep", "--model", "qwen3-32b", "--gpu", "H200", "--set", "tp=1,2,3",
            "--set", "max_model_len=8K,32K"]
    for suffix in ("csv", "parquet", "jsonl"):
        path = tmp_path / f"s.{suffix}"
        code, out, err = invoke([*base, "-o", str(path)])
        assert code == 0, err
        df = {"csv": pd.read_csv, "parquet": pd.read_parquet,
              "jsonl": lambda p: pd.read_json(p, lines=True)}[suffix](path)
        assert len(df) == 6 and set(df["verdict"]) == {"fits", "invalid"}
        assert f"wrote 6 rows to {path}" in err
    assert max(len(x) for x in out.splitlines()) <= 80 and "invalid" in out
    code, out, _ = invoke([*base, "-f", "csv"])
    assert code == 0 and out.startswith("tp,max_model_len,gpus,verdict")
    code, _, err = invoke(["sweep", "--set", "tp=1", "-o", str(tmp_path / "x.xlsx")])
    assert code == 2 and "suffix" in err
    code, _, err = invoke(["sweep"])
    assert code == 2 and "nothing to sweep" in err


@pytest.mark.parametrize(("model", "gpu", "sets"), [
    # KV-pool-sized scratch (AITER DeepSeek-V4 dequant buffers read the block count)
    ("deepseek-v4-flash", "MI300X", ["tp=4,8", "scratch=per-layer,shared",
                                      "gpu_memory_utilization=0.85,0.9,0.95"]),
    ("qwen3-32b", "H200", ["kv_cache_dtype=turboquant_k8v4,auto", "pp=1,2",
                           "max_num_seqs=128,1024", "gpu_memory_utilization=0.85,0.95"]),
    ("llama-3.1-8b", "H100", ["tp=1,2", "max_model_len=4K,128K",
                              "gpu_memory_utilization=0.8,0.9,0.95"]),
])
def test_shared_work_changes_no_figure(model: str, gpu: str, sets: list[str]) -> None:
    """Every cache the evaluator and the scratch evaluation keep (per class of ranks, per
    settings a computation reads, the KV block count where a buffer reads it) gives what a cold
    estimate gives: every component, the estimated maximum length, the sharing report."""
    from memprof.core import kvcache
    from memprof.core.terms import load_rounding
    from memprof.core.weights import rank

    ev, g = Evaluator(), resolve_gpu(gpu, None)
    for p in points([parse_axis(s) for s in sets]):
        dep = Deployment().with_(**p)
        got = ev.estimate(model, dep, g)
        load_rounding._BY_LOAD.clear()
        rank._IN_ORDER.clear()
        kvcache._stage_layer_kinds.cache_clear()
        want = estimate(model, dep, gpu=g)
        assert got == want, p
        assert [(r.estimated_max_model_len, r.scratch_savings) for r in got.ranks] == \
            [(r.estimated_max_model_len, r.scratch_savings) for r in want.ranks], p


def test_invalid_points_fail_as_the_estimate_fails() -> None:
    """A point with a bad setting gets the error a cold estimate raises, in validate's order,
    whether or not its valid neighbours were evaluated first."""
    ev, g = Evaluator(), resolve_gpu("H100", None)
    for tp, util, kv in itertools.product((1, 3), (0.9, 1.5, None), ("auto", "fp7")):
        dep = Deployment(tp=tp, gpu_memory_utilization=util, kv_cache_dtype=kv)
        outcomes = []
        for evaluator in (ev, None):
            try:
                e = (evaluator.estimate("qwen3-32b", dep, g) if evaluator
                     else estimate("qwen3-32b", dep, gpu=g))
                outcomes.append(("ok", record(e)))
            except BadInput as exc:
                outcomes.append(("error", exc.message))
        assert outcomes[0] == outcomes[1], (tp, util, kv)
