"""memprof gate: the pure comparison (memprof.core.gate), the renderers, and the command."""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.commands.gate import read_baseline, write_atomic
from memprof.core.contract import SCHEMA_VERSION
from memprof.core.gate import (
    BASELINE_KIND,
    EDITED,
    IMPROVEMENT,
    NEW,
    REGRESSION,
    REMOVED,
    WITHIN,
    Finding,
    baseline_doc,
    compare,
    dump_baseline,
    snapshot,
    validate_baseline,
)
from memprof.report.gate import render_markdown, rows, summary_line

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "configs" / "scenarios"
TQ = "qwen3-32b-tq-k8v4-h200"
GiB = 1 << 30


# --- hand-built snapshots ------------------------------------------------------------------------


def rank(ranks: list[int], *, peak: int = 60 * GiB, kv: int = 100_000, verdict: str = "fits",
         weights: int = 30 * GiB, scratch: int = 0, activation: int = 2 * GiB,
         runtime: int = 0, components: dict[str, int] | None = None) -> dict[str, Any]:
    return {"ranks": ranks, "verdict": verdict, "kv_cache_tokens": kv, "peak_bytes": peak,
            "runtime_bytes": runtime, "weights_bytes": weights, "scratch_bytes": scratch,
            "activation_bytes": activation,
            "components": components if components is not None else {"weights: layers": weights}}


def scen(*ranks_: tuple[str, dict[str, Any]], inputs: dict[str, Any] | None = None
         ) -> dict[str, Any]:
    return {"description": "", "inputs": inputs or {"model": "m"}, "verdict": "fits",
            "kv_cache_tokens": 0, "ranks": dict(ranks_)}


R0 = "rank 0 (tp 0 pp 0 dp 0)"
R1 = "rank 1 (tp 1 pp 0 dp 0)"


def only(findings: tuple[Finding, ...], metric: str) -> Finding:
    hits = [f for f in findings if f.metric == metric]
    assert len(hits) == 1, findings
    return hits[0]


# --- the pure comparison -------------------------------------------------------------------------


def test_identical_snapshots_have_no_findings() -> None:
    s = {"a": scen((R0, rank([0])))}
    result = compare(s, copy.deepcopy(s), 1.0)
    assert result.findings == ()
    assert not result.regressed
    assert result.compared == ("a",)


@pytest.mark.parametrize(("tolerance", "status"), [(1.0, REGRESSION), (5.0, WITHIN)])
def test_peak_growth_is_judged_against_the_tolerance(tolerance: float, status: str) -> None:
    base = {"a": scen((R0, rank([0], peak=100 * GiB)))}
    now = {"a": scen((R0, rank([0], peak=102 * GiB)))}
    result = compare(base, now, tolerance)
    f = only(result.findings, "peak_bytes")
    assert (f.status, f.delta, f.scenario, f.rank) == (status, 2 * GiB, "a", R0)
    assert f.pct == pytest.approx(2.0)
    assert result.regressed is (status == REGRESSION)


def test_kv_tokens_shrinking_regresses_and_growing_improves() -> None:
    base = {"a": scen((R0, rank([0], kv=100_000))), "b": scen((R0, rank([0], kv=100_000)))}
    now = {"a": scen((R0, rank([0], kv=97_000))), "b": scen((R0, rank([0], kv=110_000)))}
    result = compare(base, now, 1.0)
    assert [(f.scenario, f.status) for f in result.findings] == [("a", REGRESSION),
                                                                 ("b", IMPROVEMENT)]
    assert result.regressed_scenarios == ("a",)


def test_memory_shrinking_is_an_improvement_not_a_failure() -> None:
    base = {"a": scen((R0, rank([0], weights=40 * GiB, components={"weights: w": 40 * GiB})))}
    now = {"a": scen((R0, rank([0], weights=30 * GiB, components={"weights: w": 30 * GiB})))}
    result = compare(base, now, 1.0)
    assert {f.status for f in result.findings} == {IMPROVEMENT}
    assert not result.regressed


def test_a_verdict_turning_to_oom_regresses_whatever_the_tolerance() -> None:
    base = {"a": scen((R0, rank([0], verdict="fits"))),
            "b": scen((R0, rank([0], verdict="startup_oom")))}
    now = {"a": scen((R0, rank([0], verdict="runtime_oom"))),
           "b": scen((R0, rank([0], verdict="fits")))}
    result = compare(base, now, 99.0)
    va = [f for f in result.findings if f.scenario == "a"]
    vb = [f for f in result.findings if f.scenario == "b"]
    assert [(f.metric, f.baseline, f.now, f.status) for f in va] == [
        ("verdict", "fits", "runtime_oom", REGRESSION)]
    assert [(f.metric, f.status) for f in vb] == [("verdict", IMPROVEMENT)]


def test_a_new_component_is_named_as_the_regression() -> None:
    comp = "scratch: TurboQuant decode mid_o (per layer)"
    base = {"a": scen((R0, rank([0], components={"weights: w": 30 * GiB,
                                                  "scratch: shared workspace": GiB})))}
    now = {"a": scen((R0, rank([0], components={"weights: w": 30 * GiB, comp: 5 * GiB})))}
    result = compare(base, now, 1.0)
    new = only(result.findings, comp)
    assert (new.status, new.baseline, new.now, new.pct) == (REGRESSION, None, 5 * GiB, None)
    gone = only(result.findings, "scratch: shared workspace")
    assert (gone.status, gone.now, gone.delta) == (IMPROVEMENT, None, -GiB)


def test_ranks_are_matched_by_global_rank_when_folding_changes() -> None:
    base = {"a": scen((R0, rank([0, 1], peak=60 * GiB)))}
    now = {"a": scen((R0, rank([0], peak=60 * GiB)), (R1, rank([1], peak=70 * GiB)))}
    result = compare(base, now, 1.0)
    f = only(result.findings, "peak_bytes")
    assert f.rank == f"{R1} (baseline {R0})"
    assert f.status == REGRESSION


def test_new_and_removed_scenarios_and_ranks_are_reported_without_failing() -> None:
    base = {"kept": scen((R0, rank([0]))), "gone": scen((R0, rank([0])))}
    now = {"kept": scen((R0, rank([0])), (R1, rank([1, 2, 3]))), "fresh": scen((R0, rank([0])))}
    result = compare(base, now, 1.0)
    assert (result.new, result.removed, result.regressed) == (("fresh",), ("gone",), False)
    statuses = {(f.scenario, f.metric, f.rank): f.status for f in result.findings}
    assert statuses == {("fresh", "scenario", ""): NEW, ("gone", "scenario", ""): REMOVED,
                        ("kept", "rank", "ranks 1-3"): NEW}


def test_edited_inputs_are_shown() -> None:
    base = {"a": scen((R0, rank([0])), inputs={"model": "m", "tp": 1, "pp": 2})}
    now = {"a": scen((R0, rank([0])), inputs={"model": "m", "tp": 2, "scratch": "per-layer"})}
    f = only(compare(base, now, 1.0).findings, "inputs")
    assert (f.status, f.baseline, f.now) == (EDITED, "tp=1 scratch=— pp=2",
                                             "tp=2 scratch=per-layer pp=—")


@pytest.mark.parametrize("tolerance", [-1.0, 100.0])
def test_tolerance_out_of_range_is_bad_input(tolerance: float) -> None:
    with pytest.raises(BadInput, match="--tolerance"):
        compare({}, {}, tolerance)


def contract_rank(**over: Any) -> dict[str, Any]:
    comps = [
        {"name": "layers", "category": "weights", "bytes": 100, "where": "budget"},
        {"name": "CUDA context", "category": "non_torch", "bytes": 7, "where": "baseline"},
        {"name": "decode out (per layer)", "category": "scratch", "bytes": 30,
         "where": "runtime"},
        {"name": "workspace", "category": "scratch", "bytes": 5, "where": "budget"},
        {"name": "activation peak (profile run)", "category": "activation", "bytes": 11,
         "where": "budget"},
        {"name": "KV cache", "category": "kv_cache", "bytes": 1000, "where": "budget"},
    ]
    r = {"rank": 0, "ranks": [0, 1], "tp_rank": 0, "pp_stage": 0, "dp_rank": 0, "ep_rank": None,
         "components": comps, "weights_bytes": 100, "kv_cache_tokens": 64, "verdict": "fits"}
    r.update(over)
    return r


def test_snapshot_of_the_json_contract() -> None:
    est = {"summary": {"verdict": "fits", "kv_cache_tokens": 64},
           "ranks": [contract_rank(), contract_rank(rank=9, ranks=[9], pp_stage=1, ep_rank=3)]}
    s = snapshot(est, inputs={"model": "m", "description": "d"}, description="d")
    assert list(s["ranks"]) == [R0, "rank 9 (tp 0 pp 1 dp 0 ep 3)"]
    r = s["ranks"][R0]
    # peak: every component, baseline, budget (KV included) and runtime
    assert r["peak_bytes"] == 100 + 7 + 30 + 5 + 11 + 1000
    assert (r["runtime_bytes"], r["scratch_bytes"], r["activation_bytes"]) == (30, 35, 11)
    assert "kv_cache: KV cache" not in r["components"]
    assert r["components"]["scratch: decode out (per layer)"] == 30
    assert s["inputs"] == {"model": "m"}


def test_baseline_document_round_trips_and_validates() -> None:
    doc = baseline_doc({"b": scen((R0, rank([0, 1, 2]))), "a": scen((R0, rank([0])))},
                       tool_version="0", estimate_schema_version=SCHEMA_VERSION)
    text = dump_baseline(doc)
    assert '"ranks": [0, 1, 2]' in text
    parsed = json.loads(text)
    assert list(parsed["scenarios"]) == ["a", "b"]
    assert validate_baseline(parsed, where="x", estimate_schema_version=SCHEMA_VERSION) \
        == parsed["scenarios"]


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.update(kind="other"), "not a memprof gate baseline"),
    (lambda d: d.update(schema_version=99), "schema_version 99"),
    (lambda d: d.update(estimate_schema_version=99), "estimate schema_version 99"),
    (lambda d: d["scenarios"]["a"]["ranks"][R0].pop("peak_bytes"), "peak_bytes"),
    (lambda d: d["scenarios"]["a"]["ranks"][R0].update(verdict="ok"), "verdict"),
    (lambda d: d["scenarios"]["a"]["ranks"][R0]["components"].update(x="1"), "components"),
])
def test_malformed_baselines_are_bad_input(mutate: Any, message: str) -> None:
    doc = baseline_doc({"a": scen((R0, rank([0])))}, tool_version="0",
                       estimate_schema_version=SCHEMA_VERSION)
    mutate(doc)
    with pytest.raises(BadInput, match=message) as info:
        validate_baseline(doc, where="b.json", estimate_schema_version=SCHEMA_VERSION)
    assert "\n" not in info.value.message and info.value.hint


def test_report_rows_put_regressions_first_and_markdown_escapes() -> None:
    base = {"a": scen((R0, rank([0], kv=100))), "b": scen((R0, rank([0], peak=GiB)))}
    now = {"a": scen((R0, rank([0], kv=200))),
           "b": scen((R0, rank([0], peak=2 * GiB, components={"weights: a|b": 1})))}
    result = compare(base, now, 1.0, floor_bytes=0)
    table = rows(result)
    assert table[0][0] == "b" and table[0][-1] == REGRESSION
    assert table[-1][-1] == IMPROVEMENT
    md = render_markdown(result)
    assert "weights: a\\|b" in md
    assert "| b | rank 0 (tp 0 pp 0 dp 0) | peak_bytes | 1.00 GiB | 2.00 GiB | +1.00 GiB | " \
           "+100.00% | **regression** |" in md
    assert summary_line(result).startswith("memprof gate: REGRESSION")


# --- the command ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scenario_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("scenarios") / "scenarios"
    shutil.copytree(SCENARIOS, d)
    return d


@pytest.fixture(scope="module")
def fresh_baseline(tmp_path_factory: pytest.TempPathFactory, scenario_dir: Path) -> bytes:
    """The baseline --update writes for the bundled scenarios (evaluated once per module)."""
    path = tmp_path_factory.mktemp("baseline") / "baseline.json"
    assert run(["gate", "--update", "--scenarios", str(scenario_dir),
                "--baseline", str(path)]) == 0
    return path.read_bytes()


def gate(*args: str | Path) -> int:
    return run(["gate", *(str(a) for a in args)])


def test_fresh_baseline_passes(tmp_path: Path, scenario_dir: Path, fresh_baseline: bytes,
                               capsys: pytest.CaptureFixture[str]) -> None:
    b = tmp_path / "baseline.json"
    b.write_bytes(fresh_baseline)
    capsys.readouterr()
    assert gate("--scenarios", scenario_dir, "--baseline", b) == 0
    out = capsys.readouterr().out
    assert "memprof gate: OK" in out and "regression" not in out
    doc = json.loads(fresh_baseline)
    assert len(doc["scenarios"]) == len(list(SCENARIOS.glob("*.toml")))


def halve(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: v // 2 if k.endswith("_bytes") and isinstance(v, int) else halve(v)
                for k, v in o.items()}
    if isinstance(o, list):
        return [halve(x) for x in o]
    return o


def test_halved_baseline_fails_naming_scenario_rank_and_metric(
        tmp_path: Path, scenario_dir: Path, fresh_baseline: bytes,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    b = tmp_path / "baseline.json"
    b.write_text(json.dumps(halve(json.loads(fresh_baseline))))
    md = tmp_path / "out" / "gate.md"
    md.parent.mkdir()  # memprof never creates folders
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("COLUMNS", raising=False)
    capsys.readouterr()
    assert gate("--scenarios", scenario_dir, "--baseline", b, "--markdown", md) == 1
    out = capsys.readouterr().out
    assert "memprof gate: REGRESSION" in out
    row = "| llama-3.1-8b-h100 | rank 0 (tp 0 pp 0 dp 0) | peak_bytes |"
    # the terminal table: a title per scenario and rank, then its rows; piped, as wide as the
    # one width policy says (memprof.report.output_width: 100 with no $COLUMNS)
    lines = out.splitlines()
    assert max(len(x) for x in lines) <= 100
    title = lines.index(next(x for x in lines
                             if x.startswith("llama-3.1-8b-h100 · rank 0 (tp 0 pp 0 dp 0)")))
    peak = next(x for x in lines[title:] if x.startswith("peak_bytes"))
    assert peak.rstrip().endswith("regression")
    text = md.read_text()
    assert row in text
    lines = [ln for ln in text.splitlines() if ln.startswith(row)]
    assert len(lines) == 1 and lines[0].endswith("| **regression** |")
    assert summary.read_text() == "earlier step\n" + text


@pytest.mark.parametrize("corrupt", [
    lambda good: good[: len(good) // 2],  # truncated
    lambda good: b"this is not JSON\n",
    lambda good: b"",
    lambda good: b"\xff\xfe\x00garbage",
    lambda good: b'{"kind": "memprof-gate-baseline", "schema_version": 99}',
    lambda good: b"[1, 2, 3]",
])
def test_corrupt_baseline_exits_2_with_one_line_and_is_left_alone(
        tmp_path: Path, scenario_dir: Path, fresh_baseline: bytes,
        capsys: pytest.CaptureFixture[str], corrupt: Any) -> None:
    b = tmp_path / "baseline.json"
    bad = corrupt(fresh_baseline)
    b.write_bytes(bad)
    capsys.readouterr()
    assert gate("--scenarios", scenario_dir, "--baseline", b) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert err[0].startswith("error: ") and str(b) in err[0]
    assert err[1].startswith("hint: ") and "--update" in err[1]
    assert b.read_bytes() == bad
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline.json"]


def test_missing_baseline_says_how_to_create_it(
        tmp_path: Path, scenario_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gate("--scenarios", scenario_dir, "--baseline", tmp_path / "none.json") == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "gate --update" in err
    assert not (tmp_path / "none.json").exists()


def test_update_on_a_stale_baseline_then_gate_passes(
        tmp_path: Path, scenario_dir: Path, fresh_baseline: bytes) -> None:
    b = tmp_path / "baseline.json"
    stale = json.loads(fresh_baseline)
    stale["scenarios"]["retired-scenario"] = copy.deepcopy(stale["scenarios"][TQ])
    b.write_text(json.dumps(halve(stale)))
    assert gate("--scenarios", scenario_dir, "--baseline", b) == 1
    assert gate("--scenarios", scenario_dir, "--baseline", b, "--update") == 0
    assert b.read_bytes() == fresh_baseline  # deterministic: the same scenarios, the same file
    assert gate("--scenarios", scenario_dir, "--baseline", b) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline.json"]


def test_update_regenerates_a_corrupt_baseline(
        tmp_path: Path, scenario_dir: Path, fresh_baseline: bytes,
        capsys: pytest.CaptureFixture[str]) -> None:
    b = tmp_path / "baseline.json"
    b.write_bytes(fresh_baseline[:100])
    assert gate("--scenarios", scenario_dir, "--baseline", b, "--update") == 0
    assert "--update regenerates it" in capsys.readouterr().err
    assert b.read_bytes() == fresh_baseline


def test_failing_update_leaves_the_baseline_untouched(
        tmp_path: Path, scenario_dir: Path, fresh_baseline: bytes,
        capsys: pytest.CaptureFixture[str]) -> None:
    scen_dir = tmp_path / "scenarios"
    shutil.copytree(scenario_dir, scen_dir)
    (scen_dir / "zz-broken.toml").write_text('model = "llama-3.1-8b"\ntensor_paralel_size = 2\n')
    b = tmp_path / "baseline.json"
    b.write_bytes(fresh_baseline)
    assert gate("--scenarios", scen_dir, "--baseline", b, "--update") == 2
    err = capsys.readouterr().err
    assert "unknown key 'tensor_paralel_size'" in err and "tensor_parallel_size" in err
    assert b.read_bytes() == fresh_baseline
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline.json", "scenarios"]


def test_interrupted_write_keeps_the_old_file(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    b = tmp_path / "baseline.json"
    b.write_text("old\n")
    os.chmod(b, 0o644)

    def boom(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(os, "replace", boom)
        with pytest.raises(KeyboardInterrupt):
            write_atomic(b, "new\n")
    assert b.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["baseline.json"]
    write_atomic(b, "new\n")
    assert b.read_text() == "new\n" and (b.stat().st_mode & 0o777) == 0o644


def test_removed_and_new_scenarios_are_reported_but_pass(
        tmp_path: Path, scenario_dir: Path, fresh_baseline: bytes,
        capsys: pytest.CaptureFixture[str]) -> None:
    scen_dir = tmp_path / "scenarios"
    shutil.copytree(scenario_dir, scen_dir)
    (scen_dir / "gpt-oss-120b-h100.toml").unlink()
    shutil.copy(scen_dir / "llama-3.1-8b-h100.toml", scen_dir / "llama-3.1-8b-copy.toml")
    b = tmp_path / "baseline.json"
    b.write_bytes(fresh_baseline)
    capsys.readouterr()
    assert gate("--scenarios", scen_dir, "--baseline", b) == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())  # the summary wraps at 80 columns
    assert "1 new scenario(s): llama-3.1-8b-copy" in flat
    assert "removed, still in the baseline: gpt-oss-120b-h100" in flat


def test_a_deployment_that_now_ooms_is_a_regression(
        tmp_path: Path, scenario_dir: Path, fresh_baseline: bytes,
        capsys: pytest.CaptureFixture[str]) -> None:
    scen_dir = tmp_path / "scenarios"
    shutil.copytree(scenario_dir, scen_dir)
    with (scen_dir / "llama-3.1-8b-h100.toml").open("a") as f:
        f.write('gpu_memory = "20GiB"\n')  # 16 GB of weights, a 128k-token request: no room
    b = tmp_path / "baseline.json"
    b.write_bytes(fresh_baseline)
    md = tmp_path / "gate.md"
    assert gate("--scenarios", scen_dir, "--baseline", b, "--markdown", md) == 1
    assert "| llama-3.1-8b-h100 | rank 0 (tp 0 pp 0 dp 0) | verdict | fits | startup_oom |" \
        in md.read_text()


def test_per_layer_scratch_is_caught_naming_the_component(
        tmp_path: Path, scenario_dir: Path, fresh_baseline: bytes) -> None:
    scen_dir = tmp_path / "scenarios"
    shutil.copytree(scenario_dir, scen_dir)
    toml = scen_dir / f"{TQ}.toml"
    assert "scratch" not in tomllib.loads(toml.read_text())
    with toml.open("a") as f:
        f.write('scratch = "per-layer"\n')
    b = tmp_path / "baseline.json"
    b.write_bytes(fresh_baseline)
    md = tmp_path / "gate.md"
    assert gate("--scenarios", scen_dir, "--baseline", b, "--markdown", md) == 1
    regressions = [ln.split(" | ") for ln in md.read_text().splitlines()
                   if ln.startswith(f"| {TQ} |") and ln.endswith("**regression** |")]
    metrics = {cells[2] for cells in regressions}
    assert "scratch_bytes" in metrics
    assert any(m.startswith("scratch: ") for m in metrics), metrics


def test_read_baseline_returns_the_scenarios(tmp_path: Path, fresh_baseline: bytes) -> None:
    b = tmp_path / "baseline.json"
    b.write_bytes(fresh_baseline)
    doc = json.loads(fresh_baseline)
    assert doc["kind"] == BASELINE_KIND
    assert read_baseline(b) == doc["scenarios"]
