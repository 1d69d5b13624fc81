"""CLI habits: the lazy command registry (``memprof --help`` imports no command module, a
command imports only its own), ``-h`` beside ``--help`` everywhere, and ``--version``."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import memprof
from memprof.cli import parser_of, run
from memprof.commands import COMMANDS, find

ROOT = Path(__file__).resolve().parents[1]


def call(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def imported_after(argv: list[str]) -> tuple[int, set[str]]:
    """(exit code, the memprof.commands.* modules imported) of ``run(argv)`` in a fresh
    interpreter."""
    code = ("import json, sys; from memprof.cli import run; rc = run(sys.argv[1:]); "
            "sys.stderr.write('\\n' + json.dumps([m for m in sys.modules "
            "if m.startswith('memprof.commands.')]))")
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    return proc.returncode, set(json.loads(proc.stderr.strip().splitlines()[-1]))


def test_help_lists_every_command_without_importing_one() -> None:
    rc, mods = imported_after(["--help"])
    assert rc == 0 and mods == set()


def test_a_command_imports_its_own_module_only() -> None:
    rc, mods = imported_after(["estimate", "--model", "qwen3-32b", "--gpu", "H200", "-f", "json"])
    assert rc == 0
    # its own module and the shared ones (rows → parser, deployment flags, --format/--markdown)
    shared = {"memprof.commands.options", "memprof.commands.common"}
    assert mods == {"memprof.commands.estimate", "memprof.commands.flags", *shared}
    rc, mods = imported_after(["gpus"])
    assert rc == 0 and mods == {"memprof.commands.gpus", *shared}


def test_top_level_help_shows_each_registry_line(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = call(capsys, "--help")
    assert code == 0 and err == ""
    lines = out.splitlines()
    for c in COMMANDS:
        row = next(line for line in lines if line.lstrip("│| ").startswith(f"{c.name} "))
        assert c.help in row, (c.name, row)
    assert "--version" in out and "-h" in out


def test_registry_lines_are_the_built_commands_short_help() -> None:
    for c in COMMANDS:
        assert "\n" not in c.help and len(c.help) <= 70 and c.help.endswith("."), c.name
        module = c.module_object()
        subs = getattr(module, "SUBCOMMANDS", None)
        if subs is None:
            assert callable(module.run) and parser_of(c).prog == f"memprof {c.name}"
        else:
            for sub, spec in subs.items():
                assert callable(spec.run) and parser_of(c, sub).prog == f"memprof {c.name} {sub}"
    assert find("estimate") is COMMANDS[0] and find("estimat") is None
    assert len({c.name for c in COMMANDS}) == len(COMMANDS) == 12


SUBCOMMANDS = [[c.name] for c in COMMANDS] + [["alloc", "replay"]]


@pytest.mark.parametrize("path", [[], *SUBCOMMANDS], ids=lambda p: " ".join(p) or "top")
def test_dash_h_is_help(capsys: pytest.CaptureFixture[str], path: list[str]) -> None:
    code_long, long, err_long = call(capsys, *path, "--help")
    code_short, short, err_short = call(capsys, *path, "-h")
    assert code_long == code_short == 0 and err_long == err_short == ""
    assert short == long and "usage: memprof" in short


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        expected = metadata.version("memprof-llm")
    except metadata.PackageNotFoundError:
        expected = memprof.__version__
    code, out, err = call(capsys, "--version")
    assert (code, out, err) == (0, f"memprof {expected}\n", "")
    # eager: it wins over a command that follows it, and does no work
    assert call(capsys, "--version", "estimate", "--model", "no-such-model")[:2] == (
        0, f"memprof {expected}\n")


def test_version_falls_back_to_the_package(capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert call(capsys, "--version") == (0, f"memprof {memprof.__version__}\n", "")


def test_unknown_command_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call(capsys, "estimat")
    lines = err.splitlines()
    assert code == 2 and out == "" and len(lines) == 2
    assert lines[0].startswith("error: ") and "'estimate'" in lines[0]
    assert lines[1].startswith("hint: ")


def test_no_arguments_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = call(capsys)
    assert code == 0 and "usage: memprof" in out and "estimate" in out


@pytest.mark.parametrize(("typed", "meant"), [("--gpu-mem", "--gpu-memory"),
                                              ("--max-num-seq", "--max-num-seqs"),
                                              ("--enforce-eagr", "--enforce-eager"),
                                              ("--bogus", None), ("--xyz", None)])
def test_an_unknown_flag_is_matched_on_its_name_not_its_dashes(
        capsys: pytest.CaptureFixture[str], typed: str, meant: str | None) -> None:
    code, _, err = call(capsys, "estimate", "--model", "qwen3-32b", typed, "1")
    assert code == 2 and f"error: no such option: {typed}" in err
    hint = err.splitlines()[-1]
    assert hint.startswith("hint: ")
    assert (f"did you mean {meant}?" in hint) if meant else ("did you mean" not in hint)
