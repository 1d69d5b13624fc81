"""The extension axes stay tables (issue 23): outside ``memprof/core/engines/`` no module branches
on the engine (``dep.sglang``, ``engine == "vllm"``, ...), and outside their row modules
(``core/attention_backends.py``, ``core/kv_dtypes.py``) no module names an attention backend or a
KV-cache dtype as a string literal, except the modules a row declares as its own (a backend's
scratch family and ``modules``, a KV dtype's ``modules``: the kernels that reproduce it). What
remains is on ``ALLOWED`` with the reason; an entry whose file no longer needs it fails too, so
the list only shrinks."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from memprof.core import attention_backends, engines, kv_dtypes
from memprof.core.attention import KINDS
from memprof.core.releases import DISPLAY_NAMES, RELEASES
from memprof.core.scratch import CATALOG
from memprof.core.scratch.buffer import SGLANG_DP_ATTENTION

SRC = Path(__file__).resolve().parents[1] / "memprof"
ROW_MODULES = ("memprof/core/engines/", "memprof/core/attention_backends.py",
               "memprof/core/kv_dtypes.py")
# KV dtype names that are also model dtypes ("auto", "bfloat16", "float16": --dtype values) or a
# quantisation method ("fp8": --quantization fp8): a literal of these says nothing about the axis
AMBIGUOUS_KV = frozenset({"auto", "bfloat16", "float16", "fp8"})

# file → why it still names the engine / a backend / a KV dtype (owner in brackets)
ALLOWED: dict[str, str] = {}


def owners() -> dict[str, set[str]]:
    """Backend / KV-dtype name → the modules its row declares as its own: a backend's scratch
    family (``core/scratch/<scratch>.py``) and ``modules``, a KV dtype's ``modules``."""
    out: dict[str, set[str]] = {}
    for b in attention_backends.ROWS:
        out[b.name] = {*b.modules, *([f"memprof/core/scratch/{b.scratch}.py"] if b.scratch
                                     else [])}
    for k in kv_dtypes.ROWS:
        out.setdefault(k.name, set()).update(k.modules)
    return out


def _rel(path: Path) -> str:
    return path.relative_to(SRC.parent).as_posix()


def _literals(node: ast.AST) -> list[object]:
    if isinstance(node, ast.Constant):
        return [node.value]
    return [e.value for e in getattr(node, "elts", []) if isinstance(e, ast.Constant)]


def findings(path: Path) -> list[str]:
    """What ``path`` says about an axis outside its row: engine attributes (``.sglang``),
    comparisons with an engine name, backend and KV-dtype names as literals."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set(engines.NAMES)
    named = set(attention_backends.NAMES) | (set(kv_dtypes.NAMES) - AMBIGUOUS_KV)
    out: list[str] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr in names:
            out.append(f"{n.lineno}: .{n.attr}")
        elif isinstance(n, ast.Compare):
            hits = [v for x in (n.left, *n.comparators) for v in _literals(x) if v in names]
            out += [f"{n.lineno}: compares with {v!r}" for v in hits]
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in named:
            out.append(f"{n.lineno}: names {n.value!r}")
    return out


def _named(finding: str) -> str | None:
    """The backend / KV dtype a finding names (None: an engine finding)."""
    return finding.split("names ", 1)[1].strip("'") if "names '" in finding else None


def _scan() -> dict[str, list[str]]:
    """Each file's findings, less the names whose row declares the file as its own."""
    own = owners()
    out: dict[str, list[str]] = {}
    for p in sorted(SRC.rglob("*.py")):
        rel = _rel(p)
        if rel.startswith(ROW_MODULES):
            continue
        left = [f for f in findings(p) if rel not in own.get(_named(f) or "", set())]
        if left:
            out[rel] = left
    return out


def test_no_module_outside_the_rows_names_an_axis() -> None:
    found = _scan()
    unexplained = {p: f for p, f in found.items() if p not in ALLOWED}
    assert not unexplained, unexplained


def test_the_allow_list_has_no_stale_entry() -> None:
    found = _scan()  # (an entry for a file this tree does not have is another branch's path)
    stale = [p for p in ALLOWED if (SRC.parent / p).is_file() and p not in found]
    assert not stale, f"no longer needed, remove from ALLOWED: {stale}"


def test_every_declared_module_names_its_row() -> None:
    """A row's ``modules`` (and its scratch family) are files that exist and name it: the
    declaration is not a blanket exemption."""
    for name, files in owners().items():
        for rel in files:
            path = SRC.parent / rel
            assert path.is_file(), (name, rel)
            assert any(_named(f) == name for f in findings(path)), (name, rel)


def test_the_scan_sees_what_it_forbids(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('def f(dep, e):\n    if dep.sglang or e.engine == "vllm":\n'
                       '        return ("flashmla", "turboquant_k8v4", "auto")\n')
    assert findings(planted) == ["2: .sglang", "2: compares with 'vllm'", "3: names 'flashmla'",
                                 "3: names 'turboquant_k8v4'"]


def test_catalog_backends_are_rows() -> None:
    keys = Counter(b.backend for b in CATALOG)
    assert set(keys) <= set(attention_backends.NAMES) | {SGLANG_DP_ATTENTION} | {
        k.scratch_key for k in KINDS.values() if k.scratch_key}
    for row in attention_backends.ROWS:  # a row has a scratch family iff it has entries
        assert bool(row.scratch) == (row.name in keys), row.name


def test_every_engine_is_one_module_with_releases_and_a_name() -> None:
    assert set(engines.ENGINES) == set(RELEASES) == set(DISPLAY_NAMES)
    for name, engine in engines.ENGINES.items():
        assert engine.name == name and DISPLAY_NAMES[name] == engine.display
        assert (SRC / "core" / "engines" / f"{name}.py").is_file()


def test_kv_dtype_rows_agree_with_the_backend_rows() -> None:
    for row in kv_dtypes.ROWS:
        if row.forces_backend is not None:
            backend = attention_backends.backend(row.forces_backend)
            assert row.name in backend.kv_dtypes and row.kinds <= backend.kinds
        assert row.engines <= set(engines.NAMES) and row.source
