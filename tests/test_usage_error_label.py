"""A usage error names the option by its first long spelling and, where the user typed another
long spelling, that one beside it: ``--max-model-len`` and its SGLang alias ``--context-length`` are
one option (an error used to name it by its longest spelling, ``--context-length``, whichever was
typed)."""

from __future__ import annotations

import pytest

from memprof.cli import run as main


@pytest.mark.parametrize(("typed", "argv_tail"), [
    ("--max-model-len", ["--max-model-len", "12q"]),
    ("--max-model-len (given as --context-length)", ["--context-length", "12q"]),
    ("--max-model-len", ["--max-model-len=12q"]),
    ("--max-model-len (given as --context-length)", ["--context-length=12q"]),
    ("--tensor-parallel-size", ["-tp", "12q"]),
    ("--tensor-parallel-size (given as --tp-size)", ["--tp-size", "12q"]),
])
def test_bad_value_names_the_spelling_typed(typed: str, argv_tail: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["estimate", "--model", "qwen3-0.6b", "--gpu", "H100", *argv_tail])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2
    assert err[0].startswith(f"error: bad value for {typed}: '12q'"), err
    assert err[1].startswith("hint:"), err


def test_missing_value_names_the_spelling_typed(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["estimate", "--model", "qwen3-0.6b", "--gpu", "H100", "--max-model-len"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2
    assert err[0] == "error: --max-model-len needs a value", err
