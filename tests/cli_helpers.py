"""Helpers of the CLI tests: run ``memprof`` in-process and check the one-line error contract."""

from __future__ import annotations

import contextlib
import io
import subprocess

from memprof.cli import run


def invoke(argv: list[str]) -> tuple[int, str, str]:
    """``memprof ARGV`` in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


def completed(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``memprof ARGV`` in this process, answered as ``subprocess.run(capture_output=True,
    text=True)`` answers ``python -m memprof ARGV`` (``memprof/__main__.py`` exits with what
    ``memprof.cli.run`` returns): for tests of a command's output, not of the process (each
    ``python -m memprof`` costs a cold start of the interpreter and of memprof)."""
    code, out, err = invoke(argv)
    return subprocess.CompletedProcess(["memprof", *argv], code, out, err)


def one_error(err: str, text: str) -> None:
    """``err`` is one ``error:`` line holding ``text``, then one ``hint:`` line."""
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert text in lines[0], lines[0]
