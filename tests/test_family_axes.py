"""The model-family and attention-kind axes stay in their own modules (issue 23).

1. Outside a family's own modules (the module that defines its row, and the ones its row's
   ``modules`` lists), no module of ``memprof/`` names the family: no string equal to its name,
   a ``model_type`` or an architecture (``"DeepseekV3ForCausalLM"``), no identifier containing its
   name, a ``model_type`` or an alias (``dsv4``).
2. Outside ``memprof/core/attention/``, the families' own modules and the modules a kind
   declares as its own (``AttentionKind.modules``), no module branches on an attention kind:
   no comparison of a ``kind`` (name or attribute) with a kind's name
   (``kind == "mla"``, ``a.kind in ("gqa", "mla")``).

The registries that list every member of an axis by its module
(``core/models/families/__init__.py``, ``core/attention/__init__.py``, the scratch catalog
``core/scratch/catalog.py``) are their rows. What is left is on ``FAMILY_ALLOWED`` /
``KIND_ALLOWED`` with its reason; an entry that no longer matches anything fails too, so the
lists only shrink.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from functools import cache
from pathlib import Path

import pytest

from memprof.core.attention import KINDS
from memprof.core.models.families import ROWS, Family

ROOT = Path(__file__).resolve().parents[1]
# the registries that list every member of an axis, each member's module by its name: the
# families, the attention kinds, the scratch families (one of which is a family's own)
REGISTRIES = {"memprof/core/models/families/__init__.py", "memprof/core/attention/__init__.py",
              "memprof/core/scratch/catalog.py"}

FAMILY_ALLOWED: dict[str, str] = {}

KIND_ALLOWED: dict[str, str] = {}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _sources() -> list[Path]:
    return sorted((ROOT / "memprof").rglob("*.py"))


def _own_files(row: Family) -> set[str]:
    """The row's module (where its builder is defined) and its ``modules``."""
    module = sys.modules[row.build.__module__]
    assert module.__file__ is not None
    return {_rel(Path(module.__file__)), *row.modules}


def _words(row: Family) -> set[str]:
    return {row.name, *row.model_types, *row.aliases}


@cache
def _mine_and_longer(name: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """The family's words, and the longer words of other families that contain one of them
    (longest first)."""
    row = next(r for r in ROWS if r.name == name)
    mine = _words(row)
    longer = {w for other in ROWS if other is not row for w in _words(other)
              if any(m in w and m != w for m in mine)}
    return frozenset(mine), tuple(sorted(longer, key=len, reverse=True))


def _names_in(identifier: str, row: Family) -> bool:
    """Does ``identifier`` contain one of ``row``'s words, once the longer words of other
    families that contain them are taken out (``qwen2_moe`` is not ``qwen2``)?"""
    ident = identifier.lower()
    mine, longer = _mine_and_longer(row.name)
    for w in longer:
        ident = ident.replace(w, " ")
    return any(m in ident for m in mine)


@cache
def _tokens(path: Path) -> tuple[tuple[tuple[int, str], ...], tuple[tuple[int, str], ...]]:
    """A file's string constants and identifiers, each with its line (read and parsed once)."""
    src = path.read_text(encoding="utf-8")
    strings = tuple((n.lineno, n.value) for n in ast.walk(ast.parse(src))
                    if isinstance(n, ast.Constant) and isinstance(n.value, str))
    names = tuple((t.start[0], t.string)
                  for t in tokenize.generate_tokens(io.StringIO(src).readline)
                  if t.type == tokenize.NAME)
    return strings, names


def family_hits(path: Path, row: Family) -> list[str]:
    """Where ``path`` names ``row``: ``line: what``. A constant that is an attention kind's name
    in capitals (``DSV4``, the kind constant of the axis rows) names the kind, which the kind
    test below covers, not the family the kind was named after (a module ``dsv4`` still names
    the family)."""
    wanted = {row.name, *row.model_types, *row.architectures}
    strings, names = _tokens(path)
    out = [f"{line}: {value!r}" for line, value in strings if value in wanted]
    named = {name for name in _identifiers(path)  # each distinct identifier once
             if not (name.isupper() and name.lower() in KINDS) and _names_in(name, row)}
    if named:
        out += [f"{line}: {name}" for line, name in names if name in named]
    return out


@cache
def _identifiers(path: Path) -> frozenset[str]:
    """A file's distinct identifiers."""
    return frozenset(name for _line, name in _tokens(path)[1])


def _is_kind(node: ast.expr) -> bool:
    return ((isinstance(node, ast.Attribute) and node.attr == "kind")
            or (isinstance(node, ast.Name) and node.id == "kind"))


def _constants(node: ast.expr) -> list[object]:
    elts = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [e.value for e in elts if isinstance(e, ast.Constant)]


def kind_branches(src: str) -> list[str]:
    """Comparisons of a ``kind`` with an attention kind's name: ``line: kinds``."""
    out = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = [c for s in sides for c in _constants(s) if c in KINDS]
            if named and any(_is_kind(s) for s in sides):
                out.append(f"{node.lineno}: {named}")
    return out


def _family_violations() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for row in ROWS:
        own = _own_files(row) | REGISTRIES
        for path in _sources():
            rel = _rel(path)
            if rel not in own:
                hits = family_hits(path, row)
                if hits:
                    out.setdefault(rel, []).extend(f"{row.name} {h}" for h in hits)
    return out


def _kind_violations() -> dict[str, list[str]]:
    """Kind branches outside ``core/attention/`` and the families' own modules, less those in a
    module that every kind it compares with declares as its own (``AttentionKind.modules``)."""
    own = {f for row in ROWS for f in _own_files(row)}
    out: dict[str, list[str]] = {}
    for path in _sources():
        rel = _rel(path)
        if rel.startswith("memprof/core/attention/") or rel in own:
            continue
        hits = [h for h in kind_branches(path.read_text(encoding="utf-8"))
                if not all(rel in KINDS[k].modules for k in ast.literal_eval(h.split(": ")[1]))]
        if hits:
            out[rel] = hits
    return out


def test_no_module_names_a_family_outside_its_own() -> None:
    found = _family_violations()
    new = {k: v for k, v in found.items() if k not in FAMILY_ALLOWED}
    assert not new, f"modules that name a model family outside its own modules: {new}"
    stale = sorted(set(FAMILY_ALLOWED) - set(found))
    assert not stale, f"FAMILY_ALLOWED entries that no longer name a family: {stale}"


def test_no_module_branches_on_an_attention_kind_outside_its_module() -> None:
    found = _kind_violations()
    new = {k: v for k, v in found.items() if k not in KIND_ALLOWED}
    assert not new, f"branches on an attention kind outside core/attention: {new}"
    stale = sorted(set(KIND_ALLOWED) - set(found))
    assert not stale, f"KIND_ALLOWED entries with no kind branch left: {stale}"


def test_every_family_row_names_existing_modules_and_a_known_kind() -> None:
    for row in ROWS:
        assert row.attention in KINDS, row.name
        for rel in row.modules:
            assert (ROOT / rel).is_file(), (row.name, rel)
            assert family_hits(ROOT / rel, row), (row.name, rel)  # it is about the family


def test_every_module_a_kind_declares_branches_on_it() -> None:
    for kind in KINDS.values():
        for rel in kind.modules:
            hits = kind_branches((ROOT / rel).read_text(encoding="utf-8"))
            assert any(kind.name in h for h in hits), (kind.name, rel)


@pytest.mark.parametrize(("src", "hits"), [
    ('if a.kind == "mla":\n    pass\n', 1),
    ('x = layer.attention.kind in ("gqa", "dsv4")\n', 1),
    ('if kind != "gqa":\n    pass\n', 1),
    ('if mlp.kind == "moe":\n    pass\n', 0),  # an MLP kind, not an attention kind
    ('if s.kind == "full":\n    pass\n', 0),  # a KV spec's kind
    ('name = "mla"\n', 0),
])
def test_kind_branch_detector(src: str, hits: int) -> None:
    assert len(kind_branches(src)) == hits


def test_a_kind_constant_is_the_kind_a_kind_module_the_family(tmp_path: Path) -> None:
    row = next(r for r in ROWS if r.aliases and r.aliases[0] in KINDS)
    path = tmp_path / "k.py"
    path.write_text(f"from memprof.core.attention import {row.aliases[0]}\n"
                    f"KINDS = ({row.aliases[0].upper()},)\n", encoding="utf-8")
    assert [h.split(":")[0] for h in family_hits(path, row)] == ["1"]


def test_family_detector_sees_strings_and_identifiers(tmp_path: Path) -> None:
    row = next(r for r in ROWS if r.aliases)
    path = tmp_path / "m.py"
    path.write_text(f'ARCH = "{row.architectures[0]}"\n'
                    f'def {row.aliases[0]}_thing() -> None: ...\n'
                    '# a comment naming DeepseekV4ForCausalLM does not count\n'
                    'x = "deepseek-v4-flash"  # a bundled model name is not the family\n',
                    encoding="utf-8")
    assert [h.split(":")[0] for h in family_hits(path, row)] == ["1", "2"]
