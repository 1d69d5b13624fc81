"""``trace --snapshot PATH``: a path that cannot be written is refused before the trace runs;
the snapshot is written whole (no temporary file left, an old file replaced at once)."""

from __future__ import annotations

import contextlib
import io
import pickle
from pathlib import Path

import pytest

pytest.importorskip("torch")

from memprof.cli import run


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(list(argv))
    return code, out.getvalue(), err.getvalue()


def _no_trace(*_a: object, **_k: object) -> None:
    raise AssertionError("the trace ran before the --snapshot path was checked")


@pytest.mark.parametrize(("where", "needle"), [
    ("nodir/x.pkl", "does not exist"),
    ("a-folder", "is a folder"),
    ("a-file/x.pkl", "is not a folder"),
    ("a-folder/", "names no file"),
])
def test_bad_snapshot_paths_fail_before_the_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  where: str, needle: str) -> None:
    import memprof.trace.run

    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("x")
    monkeypatch.setattr(memprof.trace.run, "run_trace", _no_trace)
    path = str(tmp_path / where) + ("/" if where.endswith("/") else "")
    code, out, err = call("trace", "-m", "qwen3-0.6b", "--gpu", "H200", "--device", "fake",
                          "--snapshot", path)
    lines = err.strip().splitlines()
    assert code == 2 and out == "", err
    assert len(lines) == 2 and lines[0].startswith("error: --snapshot") and needle in lines[0]
    assert lines[1].startswith("hint: ")


def test_run_trace_checks_the_path_first(tmp_path: Path) -> None:
    from memprof.base.errors import BadInput
    from memprof.core.deployment import Deployment
    from memprof.trace.run import run_trace

    with pytest.raises(BadInput, match="does not exist"):
        # a rank that does not exist would fail later: the path is checked before it
        run_trace("qwen3-0.6b", Deployment(), gpu_name="H200", device="fake", rank=99,
                  snapshot=str(tmp_path / "nodir" / "x.pkl"))


def test_snapshot_is_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "snap.pkl"
    path.write_bytes(b"an older snapshot")
    code, _, err = call("trace", "-m", "qwen3-0.6b", "--gpu", "H200", "--device", "fake",
                        "--max-num-seqs", "8", "--graphs", "1", "-f", "json", "--snapshot",
                        str(path))
    assert code == 0, err
    snap = pickle.loads(path.read_bytes())
    assert snap["segments"] and snap["device_traces"]
    assert [p.name for p in tmp_path.iterdir()] == ["snap.pkl"]  # no temporary file left
