"""``memprof validate --markdown FILE``: the path is checked before any work (a missing folder,
a folder, a FIFO: exit 2, one ``error:`` and one ``hint:`` line, nothing run, no folder created)
and the report is written whole (``write_atomic``: no temporary left, an old file replaced)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("torch")

import memprof.commands.validate as cmd
from memprof.cli import run

SMALL = ["validate", "--device", "cpu", "--kernel", "mla", "--max-num-seqs", "2",
         "--context", "16", "--layers", "1"]


def _no_work(*_: object) -> None:
    raise AssertionError("validate did work before refusing its output path")


@pytest.mark.parametrize(("make", "needle"), [
    (lambda d: d / "missing" / "v.md", "does not exist"),
    (lambda d: d, "is a folder"),
    (lambda d: d / "f.txt" / "v.md", "is not a folder"),
    (lambda d: d / "fifo", "FIFO"),
])
def test_bad_markdown_path_is_refused_before_work(
        make, needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f.txt").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    monkeypatch.setattr(cmd, "_validate_all", _no_work)
    target = make(tmp_path)
    code = run([*SMALL, "--markdown", str(target)])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and out == "", err
    assert len(lines) == 2 and lines[0].startswith("error: --markdown")
    assert lines[1].startswith("hint: ") and needle in lines[0]
    assert not (tmp_path / "missing").exists()  # no folder created


def test_markdown_is_written_whole_and_replaces(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    md = tmp_path / "v.md"
    md.write_text("an older report, much longer than nothing " * 100)
    md.chmod(0o640)
    code = run([*SMALL, "--markdown", str(md)])
    _, err = capsys.readouterr()
    assert code == 0, err
    text = md.read_text()
    assert text.startswith("## memprof validate") and "older report" not in text
    assert "| mla |" in text and text.endswith("\n")
    assert (md.stat().st_mode & 0o777) == 0o640  # the file keeps its mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.md"]  # no temporary left


def test_cpu_threads_are_set_then_restored(capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``--device cpu`` runs the reference on ``CPU_THREADS`` torch threads unless
    ``OMP_NUM_THREADS`` is set, and gives the caller's setting back (tests and other in-process
    callers keep theirs)."""
    import torch

    seen: list[int] = []

    def spy(*_: object) -> list[object]:
        seen.append(torch.get_num_threads())
        return []

    monkeypatch.setattr(cmd, "_validate_all", spy)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert run(SMALL) == 0
        assert torch.get_num_threads() == 3
        monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's choice wins
        assert run(SMALL) == 0
    finally:
        torch.set_num_threads(before)
    capsys.readouterr()
    assert seen == [cmd.CPU_THREADS, 3] and cmd.CPU_THREADS == 1
