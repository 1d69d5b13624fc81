"""Every repository path the documentation names exists: in ``README.md`` and ``docs/**/*.md``
(backticked or plain, and the targets of relative Markdown links), and in the docstrings and
comments of ``memprof/``, ``tools/``, ``benchmarks/`` and ``recorders/``.

A path is a word that starts with a top-level entry of the checkout (``memprof/``, ``tests/``,
``configs/``, ``reports/``, ...) or with a package of ``memprof`` (``core/terms/allocator.py`` is
read as ``memprof/core/terms/allocator.py``), so upstream paths (``vllm/...``, ``c10/...``) are
not taken for ours. A ``*`` is a glob that must match something; ``<name>`` placeholders end the
path before them. Text between ``<!-- planned`` and ``<!-- /planned -->`` in a page describes
files still to be made, and is skipped.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
CODE_DIRS = ("memprof", "tools", "benchmarks", "recorders")

# the first component of a repository path: a top-level entry, or a package of memprof
_TOP = sorted({p.name for p in ROOT.iterdir() if not p.name.startswith(".") or p.name == ".ci"}
              - {"__pycache__"})
_PACKAGES = sorted(p.name for p in (ROOT / "memprof").iterdir()
                   if p.is_dir() and (p / "__init__.py").exists())
_PATH = re.compile(
    r"(?<![\w./-])"  # not in the middle of a longer path or a URL
    r"((?:" + "|".join(re.escape(t) for t in {*_TOP, *_PACKAGES}) + r")"
    r"(?:/[\w.*-]+)*/?[\w*-]*(?:\.[A-Za-z0-9]+)*)"
    r"(?![\w/]|\.[A-Za-z])"
)
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_PLANNED = re.compile(r"<!-- planned.*?<!-- /planned -->", flags=re.S)


def candidates(text: str) -> list[str]:
    """The repository paths named in ``text``: words with a ``/`` whose first component is a
    top-level entry of the checkout or a package of memprof."""
    out = []
    for m in _PATH.finditer(text):
        path = m.group(1).rstrip(".")
        if "/" not in path and "." not in path:
            continue  # a bare word (`tests`, `core`): not a path
        if "/" not in path and path not in _TOP:
            continue  # `core.py`-like names need a folder to be ours
        if text[m.end(1):m.end(1) + 1] == "<":
            continue  # `docs/commands/<name>.md`: a placeholder
        out.append(path)
    return out


def exists(path: str) -> bool:
    """Whether ``path`` names something in the checkout (from its root, or from ``memprof/``
    for a path that starts with one of its packages); a ``*`` must match something.

    A path that starts with a package of memprof but whose folders are not memprof's
    (``kernels/linear/scaled_mm/deep_gemm.py``, an engine's file cited by its tail) is not ours,
    and counts as existing."""
    first = path.split("/")[0]
    if first in _PACKAGES and first not in _TOP:
        folder = (ROOT / "memprof" / path.rstrip("/")).parent
        if not folder.is_dir():
            return True
    for base in (ROOT, ROOT / "memprof"):
        if "*" in path:
            if any(base.glob(path.rstrip("/"))):
                return True
        elif (base / path).exists():
            return True
    return False


def doc_paths(path: Path, text: str | None = None) -> list[tuple[str, str]]:
    """(what was named, where) for one Markdown page (``text``: its text, if not the file's):
    its paths, and its relative link targets resolved from the page's folder."""
    if text is None:
        text = path.read_text(encoding="utf-8")
    text = _PLANNED.sub("", text)
    found = [(p, f"{path.relative_to(ROOT)}") for p in candidates(_LINK.sub("]", text))]
    for target in _LINK.findall(text):
        if "://" in target or target.startswith("mailto:"):
            continue
        resolved = (path.parent / target).resolve()
        try:
            found.append((str(resolved.relative_to(ROOT)), f"{path.relative_to(ROOT)} (link)"))
        except ValueError:
            found.append((target, f"{path.relative_to(ROOT)} (link out of the checkout)"))
    return found


def code_text(source: str) -> str:
    """The docstrings and comments of a Python file, one per line."""
    parts: list[str] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                parts.append(doc)
        # attribute docstrings: a string statement after an assignment
        body = getattr(node, "body", None)
        if isinstance(body, list):
            parts += [s.value.value for s in body[1:] if isinstance(s, ast.Expr)
                      and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)]
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            parts.append(tok.string)
    return "\n".join(parts)


def code_paths(path: Path) -> list[tuple[str, str]]:
    text = code_text(path.read_text(encoding="utf-8"))
    return [(p, str(path.relative_to(ROOT))) for p in candidates(text)]


def missing(named: list[tuple[str, str]]) -> list[str]:
    return sorted({f"{where}: {p}" for p, where in named if not exists(p)})


def all_named() -> list[tuple[str, str]]:
    named: list[tuple[str, str]] = []
    for page in DOCS:
        named += doc_paths(page)
    for folder in CODE_DIRS:
        for py in sorted((ROOT / folder).rglob("*.py")):
            named += code_paths(py)
    return named


def test_every_path_the_docs_and_code_comments_name_exists() -> None:
    named = all_named()
    assert len(named) > 200  # the scan sees the paths (it would pass vacuously otherwise)
    assert missing(named) == []


def test_the_docs_link_every_page() -> None:
    # a link is a page's (doc_paths); the code's comments name paths, never links
    linked = {p for page in DOCS for p, where in doc_paths(page) if where.endswith("(link)")}
    pages = {str(p.relative_to(ROOT)) for p in DOCS if p.name != "README.md"}
    assert pages - linked == set(), "pages no other page links to"


@pytest.mark.parametrize(("text", "bad"), [
    ("see `memprof/core/terms/nope.py` for it", "memprof/core/terms/nope.py"),
    ("measured by recorders/gpu_nope.py on an H200", "recorders/gpu_nope.py"),
    ("the row lives in core/terms/nope.py", "core/terms/nope.py"),
    ("[a page](nope.md)", "docs/nope.md"),
    ("[a page](../README.md) and [another](commands/nope.md)", "docs/commands/nope.md"),
    ("(reports/gpu/nope/, benchmarks/bench_*.nope)", "reports/gpu/nope/"),
])
def test_a_planted_bad_path_is_found(text: str, bad: str) -> None:
    page = ROOT / "docs" / "index.md"  # the page as it is, then with the bad path planted
    assert missing(doc_paths(page)) == []
    found = missing(doc_paths(page, page.read_text(encoding="utf-8") + "\n" + text + "\n"))
    assert found and all("nope" in m for m in found) and any(m.endswith(bad) for m in found)


def test_a_planted_bad_path_in_a_comment_or_docstring_is_found() -> None:
    source = ('"""Reads ``configs/nope.json``."""\n\nX = 1  # from recorders/gpu_nope.py\n'
              'Y = "memprof/not_a_path.py"  # a string, not a comment: not read\n')
    found = missing([(p, "planted.py") for p in candidates(code_text(source))])
    assert found == ["planted.py: configs/nope.json", "planted.py: recorders/gpu_nope.py"]


def test_what_is_not_ours_or_not_a_path_is_left_alone() -> None:
    text = ("vllm/distributed/utils.py, c10/cuda/CUDACachingAllocator.cpp, https://github.com/"
            "x/memprof/core/y.py, the tests pass, `docs/commands/<name>.md`, <!-- planned -->"
            " memprof/core/engines/ <!-- /planned -->")
    assert candidates(_PLANNED.sub("", text)) == []
    assert exists("configs/scenarios/*.toml") and not exists("configs/scenarios/*.nope")
    assert exists("kernels/linear/scaled_mm/deep_gemm.py")  # an engine's file: no such folder here
    assert not exists("core/terms/nope.py") and not exists("memprof/kernels/linear/x.py")
