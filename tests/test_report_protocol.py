"""The result-and-report protocol: each result's JSON is built beside its type (core, alloc,
trace, validation, probes), never in ``memprof/report/``, whose JSON renderers only serialise;
every reporter module offers Markdown beside its table and says in its first docstring line what
it renders; rich is imported only under ``memprof/report/``."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "memprof" / "report"
# reporter modules that render a command's result as a table: each offers Markdown too
WITH_MARKDOWN = ("alloc", "devices", "explain", "gate", "listing", "markdown", "plan", "sweep",
                 "trace", "validate", "versions")
# command modules that still make a rich console themselves (the gate's table is drawn on one);
# the CLI rewrite (issue 23, deliverable 1) moves that into memprof.report: empty this set then
NOT_YET: set[str] = set()
BUILDERS = ("memprof.core.contract", "memprof.core.gate", "memprof.core.explain",
            "memprof.core.version_diff", "memprof.core.listing", "memprof.batch.plan_report",
            "memprof.alloc.contract", "memprof.trace.contract", "memprof.probes.devices")


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _imports_rich(path: Path) -> bool:
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "rich"
                                                for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "rich":
            return True
    return False


def test_rich_is_imported_only_by_the_reporters() -> None:
    users = {p.relative_to(ROOT).as_posix() for p in (ROOT / "memprof").rglob("*.py")
             if _imports_rich(p) and REPORT not in p.parents}
    assert users <= NOT_YET, f"rich outside memprof/report/: {sorted(users - NOT_YET)}"
    assert users == NOT_YET, f"{sorted(NOT_YET - users)} no longer import rich: drop them here"


@pytest.mark.parametrize("name", sorted(p.stem for p in REPORT.glob("*.py")
                                        if p.stem != "__init__"))
def test_each_reporter_says_what_it_renders_in_one_line(name: str) -> None:
    doc = ast.get_docstring(_tree(REPORT / f"{name}.py"))
    assert doc, f"memprof/report/{name}.py has no docstring"
    first = doc.splitlines()[0]
    assert len(first) <= 96 and first.endswith(".") and " as " in first, first
    if name in WITH_MARKDOWN:
        assert "Markdown" in first or "Markdown" in doc, first


@pytest.mark.parametrize("name", WITH_MARKDOWN)
def test_each_table_has_markdown_beside_it(name: str) -> None:
    if name in ("trace", "validate"):  # their result types are torch's
        pytest.importorskip("torch")
    module = importlib.import_module(f"memprof.report.{name}")
    assert callable(getattr(module, "render_markdown", None)), name


def _json_renderers() -> list[tuple[str, ast.FunctionDef]]:
    out = []
    for path in sorted(REPORT.glob("*.py")):
        for node in _tree(path).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("render") \
                    and "json" in node.name:
                out.append((f"{path.stem}.{node.name}", node))
    return out


def test_the_json_renderers_only_serialise() -> None:
    """A JSON renderer returns ``json.dumps(builder(...))`` (or a list of a builder's records):
    no dict is assembled in memprof/report/."""
    renderers = _json_renderers()
    assert len(renderers) >= 9
    for name, fn in renderers:
        dumps = [n for n in ast.walk(fn) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "dumps"]
        assert len(dumps) == 1, name
        arg = dumps[0].args[0]
        if isinstance(arg, ast.ListComp):
            arg = arg.elt
        assert isinstance(arg, ast.Call | ast.Name | ast.IfExp), (name, ast.dump(arg)[:80])
        assert not any(isinstance(n, ast.Dict | ast.DictComp) for n in ast.walk(fn)), name


def test_no_json_document_is_built_in_the_reporters() -> None:
    """No ``*_dict`` builder is defined under memprof/report/ and no dict there carries a
    ``schema_version``: the documents are built beside their types."""
    for path in sorted(REPORT.glob("*.py")):
        tree = _tree(path)
        builders = [n.name for n in ast.walk(tree)
                    if isinstance(n, ast.FunctionDef) and n.name.endswith("_dict")]
        assert not builders, (path.name, builders)
        keys = [k.value for n in ast.walk(tree) if isinstance(n, ast.Dict) for k in n.keys
                if isinstance(k, ast.Constant)]
        assert "schema_version" not in keys, path.name


def test_the_json_builders_import_no_ui_library() -> None:
    """The modules that build results' JSON load without rich, typer or pandas."""
    code = ("import sys\n" + "".join(f"import {m}\n" for m in BUILDERS) +
            "bad = [m for m in ('rich', 'typer', 'pandas') if m in sys.modules]\n"
            "assert not bad, bad\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=False, env={"PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
