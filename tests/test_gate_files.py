"""``memprof gate`` and the files it reads and writes: the baseline is read capped (a FIFO or
/dev/zero is refused), an empty baseline is refused, a deeply nested scenario is bad input (not
a RecursionError), ``--markdown`` and ``--baseline`` are checked before any work and never
create folders, a killed ``--update`` leaves no temporary file; and the table reads at 80
columns (golden: tests/golden/gate-80.txt)."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from memprof.core.gate import EDITED, IMPROVEMENT, NEW, REGRESSION, WITHIN, Finding, GateResult
from memprof.report.gate import render_table
from tests.cli_helpers import invoke as invoke_cli
from tests.cli_helpers import one_error

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "gate-80.txt"
ONE = "llama-3.1-8b-h100.toml"


def invoke(*argv: object) -> tuple[int, str, str]:
    return invoke_cli(["gate", *map(str, argv)])


@pytest.fixture
def scen(tmp_path: Path) -> Path:
    d = tmp_path / "sc"
    d.mkdir()
    shutil.copy(ROOT / "configs" / "scenarios" / ONE, d / ONE)
    return d


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    import memprof.commands.gate as cmd

    def refuse(directory: Path) -> None:
        raise AssertionError("scenarios evaluated before the bad input was refused")

    monkeypatch.setattr(cmd, "current_snapshots", refuse)


def baseline_of(scen: Path, path: Path) -> dict[str, object]:
    code, _, err = invoke("--scenarios", scen, "--update", "--baseline", path)
    assert code == 0, err
    doc: dict[str, object] = json.loads(path.read_text())
    return doc


def test_empty_baseline_is_refused(scen: Path, tmp_path: Path) -> None:
    b = tmp_path / "b.json"
    doc = baseline_of(scen, b)
    doc["scenarios"] = {}
    b.write_text(json.dumps(doc))
    code, out, err = invoke("--scenarios", scen, "--baseline", b)
    assert code == 2 and out == ""
    one_error(err, "has no scenarios")
    assert "--update" in err.splitlines()[1]
    b.write_text("{}")
    code, _, err = invoke("--scenarios", scen, "--baseline", b)
    assert code == 2
    one_error(err, "is not a memprof gate baseline")


def test_baseline_must_be_a_regular_file(scen: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO (named pipe)"), (Path("/dev/zero"), "a character device")):
        code, out, err = invoke("--scenarios", scen, "--baseline", path)
        assert code == 2 and out == ""
        one_error(err, f"is {kind}, not a regular file")


def test_baseline_larger_than_its_cap_is_refused(scen: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import memprof.commands.gate as cmd

    b = tmp_path / "b.json"
    baseline_of(scen, b)
    monkeypatch.setattr(cmd, "BASELINE_CAP", b.stat().st_size - 1)
    code, _, err = invoke("--scenarios", scen, "--baseline", b)
    assert code == 2
    one_error(err, "is larger than")


def test_deeply_nested_scenario_is_bad_input(scen: Path) -> None:
    (scen / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    code, out, err = invoke("--scenarios", scen)
    assert code == 2 and out == ""
    one_error(err, "deep.toml: values nested too deeply")


def test_scenario_must_be_a_regular_file(scen: Path) -> None:
    os.mkfifo(scen / "pipe.toml")
    code, _, err = invoke("--scenarios", scen)
    assert code == 2
    one_error(err, "is a FIFO (named pipe), not a regular file")


@pytest.mark.parametrize("flag", ["--markdown", "--baseline"])
def test_output_folders_are_never_created(no_work: None, scen: Path, tmp_path: Path,
                                          flag: str) -> None:
    path = tmp_path / "nodir" / "out"
    extra = ["--update"] if flag == "--baseline" else []
    code, out, err = invoke("--scenarios", scen, *extra, flag, path)
    assert code == 2 and out == ""
    one_error(err, f"{flag} {path}: the folder {path.parent} does not exist")
    assert not path.parent.exists()


def test_markdown_is_written_whole(scen: Path, tmp_path: Path) -> None:
    b = tmp_path / "b.json"
    baseline_of(scen, b)
    md = tmp_path / "gate.md"
    md.write_text("old")
    code, _, err = invoke("--scenarios", scen, "--baseline", b, "--markdown", md)
    assert code == 0, err
    assert md.read_text().startswith("## memprof gate")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json", "gate.md", "sc"]


def test_killed_update_leaves_no_temporary_file(scen: Path, tmp_path: Path) -> None:
    """SIGKILL a ``gate --update`` while it writes: the old baseline is whole, no ``.tmp``."""
    b = tmp_path / "b.json"
    old = json.dumps(baseline_of(scen, b))
    code = (
        "import os, sys, time\n"
        "import memprof.base.files as f\n"
        "real = os.write\n"
        "def slow(fd, data):\n"
        "    n = real(fd, bytes(data)[:1])\n"
        "    sys.stderr.write('writing\\n'); sys.stderr.flush(); time.sleep(60)\n"
        "    return n\n"
        "f.os.write = slow\n"
        "from memprof.cli import run\n"
        f"run(['gate', '--scenarios', {str(scen)!r}, '--update', '--baseline', {str(b)!r}])\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    line = b""
    while b"writing" not in line and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
    assert b"writing" in line, "the child never reached the write"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.dumps(json.loads(b.read_text())) == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json", "sc"]


def golden_result() -> GateResult:
    s, r = "deepseek-r1-tp8-b200-cutlass-mla", "rank 0 (tp 0 pp 0 dp 0)"
    f = [
        Finding(scenario=s, rank="", metric="inputs", unit="",
                baseline="max_num_seqs=— gpu_memory_utilization=— max_num_batched_tokens=— "
                "kv_cache_dtype=—",
                now="max_num_seqs=128 gpu_memory_utilization=0.85 max_num_batched_tokens=4096 "
                "kv_cache_dtype=auto", status=EDITED),
        Finding(scenario=s, rank=r, metric="kv_cache_tokens", unit="tokens",
                baseline=1_187_072, now=1_061_504, status=REGRESSION),
        Finding(scenario=s, rank=r, metric="activation: fused-MoE workspace (WorkspaceManager)",
                unit="bytes", baseline=3758096384, now=939524096, status=IMPROVEMENT),
        Finding(scenario=s, rank=r, metric="cudagraph: CUDA-graph pool above the estimate",
                unit="bytes", baseline=3607101, now=5704253, status=WITHIN),
        Finding(scenario=s, rank=r, metric="verdict", unit="verdict", baseline="fits",
                now="runtime_oom", status=REGRESSION),
        Finding(scenario="qwen3-32b-tq-k8v4-pp2-h200", rank="ranks 2-3", metric="rank",
                unit="", baseline=None, now=2, status=NEW),
    ]
    return GateResult(findings=tuple(f), tolerance_pct=1.0,
                      compared=(s, "qwen3-32b-tq-k8v4-pp2-h200"), new=(), removed=(),
                      floor_bytes=16 << 20)


def render_80() -> str:
    buf = io.StringIO()
    render_table(golden_result(), Console(file=buf, width=80, color_system=None,
                                          force_terminal=False))
    return buf.getvalue()


def test_gate_table_at_80_columns_golden(request: pytest.FixtureRequest) -> None:
    text = render_80()
    if request.config.getoption("--update-goldens"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8"), \
        "gate-80.txt changed; rerun with --update-goldens if intended"
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= 80
    # no cell squeezed to a letter a line: every non-empty line has a word of 3+ letters
    assert all(len(x.strip()) > 2 for x in lines if x.strip())
    flat = " ".join(text.split())
    assert "max_num_seqs=128 gpu_memory_utilization=0.85 max_num_batched_tokens=4096" in flat
    assert "kv_cache_dtype=auto" in flat and "inputs edited" in flat
