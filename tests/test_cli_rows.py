"""The settings table drives the CLI: every ``Setting`` row is a flag of ``estimate`` (all its
names, its kind, its choices from core's constants) and is understood by the serve-command
parser; no command module declares a deployment flag by hand; rich only in ``memprof/report/``
and no private name of typer, click or rich imported anywhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from memprof.cli import parser_of
from memprof.commands import COMMANDS, find
from memprof.commands.options import MEMPROF_DEPLOYMENT
from memprof.core.deployment import ENGINE_DTYPES
from memprof.core.flags import SETTINGS, Setting
from memprof.probes.serve_command import parse_tokens
from tests.cli_helpers import invoke, one_error

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "memprof"
SAMPLE = {"int": "3", "float": "0.5", "bool": "", "size": "4GiB", "tokens": "4k"}


def _estimate_rows() -> dict[str, object]:
    entry = find("estimate")
    assert entry is not None
    return {o.dest: o for o in parser_of(entry).options}


@pytest.mark.parametrize("s", SETTINGS, ids=lambda s: s.field)
def test_every_row_is_a_flag_of_estimate(s: Setting) -> None:
    row = _estimate_rows()[s.field]
    assert row.names == s.cli_flags()  # type: ignore[attr-defined]
    assert set(s.cli_flags()) == set(row.names)  # type: ignore[attr-defined]
    assert row.kind == s.kind and row.help == s.help  # type: ignore[attr-defined]
    assert row.all_choices() == s.choices()  # type: ignore[attr-defined]
    if s.field in ("kv_cache_dtype", "attention_backend"):
        assert row.all_choices(), s.field  # type: ignore[attr-defined]


def test_choices_come_from_cores_constants() -> None:
    from memprof.core.deployment import KV_CACHE_DTYPES
    from memprof.core.scratch.backends import BACKENDS

    by = {s.field: s for s in SETTINGS}
    assert by["kv_cache_dtype"].choices() == tuple(KV_CACHE_DTYPES)
    assert by["attention_backend"].choices() == tuple(BACKENDS)


def _value(s: Setting) -> str:
    if s.kind in SAMPLE:
        return SAMPLE[s.kind]
    choices = s.choices()
    if s.field == "dtype":  # memprof's own bf16 / fp16 are no engine's: a pasted one is refused
        choices = tuple(c for c in choices if c in ENGINE_DTYPES)
    return choices[-1] if choices else "x"


@pytest.mark.parametrize("s", [s for s in SETTINGS if not s.memprof_only], ids=lambda s: s.field)
def test_every_row_is_understood_by_the_serve_command_parser(s: Setting) -> None:
    for engine, launcher in (("vllm", ["vllm", "serve", "qwen3-32b"]),
                             ("sglang", ["python", "-m", "sglang.launch_server",
                                         "--model-path", "qwen3-32b"])):
        for flag in s.flags(engine):
            if s.field in ("engine", "engine_version"):
                continue
            value = _value(s)
            words = [flag] if s.kind == "bool" else [flag, value]
            cmd = parse_tokens([*launcher, *words])
            assert s.field in cmd.settings, (engine, flag, cmd.settings)


def test_the_cli_and_the_serve_command_agree() -> None:
    """The same setting given as memprof's flag and in a pasted command reads the same."""
    code, out, err = invoke(["estimate", "-f", "json", "--gpu", "H200", "-tp", "2",
                             "--max-model-len", "8192", "--", "vllm", "serve", "qwen3-32b",
                             "--tensor-parallel-size", "2", "--max-model-len", "8192"])
    assert code == 0, err
    import json

    dep = json.loads(out)["deployment"]
    assert dep["tensor_parallel_size"] == 2 and dep["max_model_len"] == 8192
    code, _, err = invoke(["estimate", "--gpu", "H200", "-tp", "4", "--", "vllm", "serve",
                           "qwen3-32b", "-tp", "2"])
    assert code == 2
    one_error(err, "--tensor-parallel-size is 2 in the pasted command and 4")


DEPLOYMENT_NAMES = {n for s in SETTINGS for n in s.cli_flags()} | {
    n for o in MEMPROF_DEPLOYMENT for n in o.names}


def test_no_command_declares_a_deployment_flag_by_hand() -> None:
    """A deployment flag's name appears in a command module only through the rows: as a string
    literal inside ``Option(names=...)`` it would restate the table."""
    offenders = []
    for path in sorted((PACKAGE / "commands").glob("*.py")):
        if path.name == "options.py":  # memprof's own deployment flags are rows there
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Option":
                for kw in node.keywords:
                    if kw.arg == "names" and isinstance(kw.value, ast.Tuple):
                        names = {e.value for e in kw.value.elts if isinstance(e, ast.Constant)}
                        # validate's own --model/-m, --gpu, --dp (dp_gather's DP-attention
                        # ranks) and --kv-cache-memory-bytes (an int) have other defaults
                        # and meanings than the deployment's: its flags, not the table's
                        if names & DEPLOYMENT_NAMES - {"--model", "-m", "--gpu", "--dp",
                                                       "--kv-cache-memory-bytes"}:
                            offenders.append(f"{path.name}:{node.lineno} {sorted(names)}")
    assert offenders == []


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every import statement of ``path``."""
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, [a.name for a in node.names]))
    return out


FILES = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py"),
                *(ROOT / "tools").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")])


def test_no_private_name_of_typer_click_or_rich_is_imported() -> None:
    bad = []
    for path in FILES:
        for module, names in _imports(path):
            top = module.split(".")[0]
            if top in ("typer", "click", "rich"):
                parts = module.split(".")[1:] + names
                if any(re.match(r"_[^_]", p) for p in parts):
                    bad.append(f"{path.relative_to(ROOT)}: {module} {names}")
    assert bad == []


def test_rich_is_imported_only_in_the_report_package() -> None:
    bad = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
           if any(m.split(".")[0] == "rich" for m, _ in _imports(p))
           and (PACKAGE / "report") not in p.parents]
    assert bad == []


def test_typer_is_gone() -> None:
    assert not any(m.split(".")[0] in ("typer", "click") for p in PACKAGE.rglob("*.py")
                   for m, _ in _imports(p))
    assert "typer" not in (ROOT / "pyproject.toml").read_text()


@pytest.mark.parametrize("c", COMMANDS, ids=lambda c: c.name)
def test_every_command_takes_format_from_one_vocabulary(c: object) -> None:
    """``--format`` of every command that prints a result is table|json|markdown (or part of
    it); sweep keeps csv and jsonl beside its table."""
    entry = c  # type: ignore[assignment]
    subs = getattr(entry.module_object(), "SUBCOMMANDS", None)  # type: ignore[attr-defined]
    for sub in subs or [None]:
        fmt = next((o for o in parser_of(entry, sub).options if o.dest == "fmt"), None)
        if fmt is None:
            continue
        allowed = {"table", "json", "markdown"} | ({"csv", "jsonl"} if entry.name == "sweep"
                                                   else set())  # type: ignore[attr-defined]
        assert set(fmt.all_choices()) <= allowed and fmt.default == "table"


@pytest.mark.parametrize(("argv", "text", "hint"), [
    (["estimate", "--max-num-seq", "8"], "no such option: --max-num-seq", "--max-num-seqs"),
    (["estimate", "--gpu"], "--gpu needs a value", "--gpu"),
    (["estimate", "--tp", "x"], "--tensor-parallel-size", "memprof estimate --help"),
    (["estimate", "--gpu-memory-utilization", "lots"], "'lots'", "--help"),
    (["estimate", "--tensor-parallel"], "no such option", "did you mean"),  # no prefixes
    (["plan", "-m", "qwen3-32b"], "missing --requests, --context", "memprof plan needs"),
    (["alloc", "rewind"], "no such command", "replay"),
])
def test_usage_errors_are_one_error_and_a_hint(argv: list[str], text: str, hint: str) -> None:
    code, out, err = invoke(argv)
    assert code == 2 and out == "", err
    one_error(err, text)
    assert hint in err.splitlines()[1]
