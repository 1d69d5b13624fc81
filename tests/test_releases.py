"""The engines' release rows (``memprof/core/releases.py``): a leaf that ``versions`` and the
engine modules both read, so neither imports the other to learn an engine's releases."""

from __future__ import annotations

import ast
from pathlib import Path

from memprof.core import releases, versions
from memprof.core.engines import ENGINES

SRC = Path(__file__).resolve().parents[1] / "memprof"


def _memprof_imports(rel: str) -> set[str]:
    tree = ast.parse((SRC / rel).read_text(encoding="utf-8"))
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("memprof"):
            out.add(n.module)
        elif isinstance(n, ast.Import):
            out |= {a.name for a in n.names if a.name.startswith("memprof")}
    return out


def test_the_release_rows_are_a_leaf_and_versions_reads_no_engine() -> None:
    assert _memprof_imports("core/releases.py") == set()
    assert not any(m.startswith("memprof.core.engines") for m in
                   _memprof_imports("core/versions.py"))


def test_every_engine_has_one_row_and_reads_its_name_there() -> None:
    assert set(ENGINES) == {r.name for r in releases.ROWS}
    for row in releases.ROWS:
        assert ENGINES[row.name].display == row.display
        assert versions.newest(row.name) == row.releases[-1]
        assert len(set(row.releases)) == len(row.releases)


def test_release_numbers_are_ordered_and_snapshots_keep_their_row_order() -> None:
    for row in releases.ROWS:
        if row.snapshots:
            assert row.name in releases.SNAPSHOT_ENGINES
            for i, r in enumerate(row.releases):  # a rule from a snapshot on holds from there
                rule = versions.Rule(name="t", changes="t", since=r, until=None,
                                     introduced_by="t", source="t", engine=row.name)
                assert [rule.holds(x, row.name) for x in row.releases] == [
                    j >= i for j in range(len(row.releases))]
        else:
            keys = [versions.version_key(r) for r in row.releases]
            assert keys == sorted(keys)
