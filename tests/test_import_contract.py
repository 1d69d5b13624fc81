"""The import contract of tools/check_imports.py: the tree keeps it, and a break is caught."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_imports", ROOT / "tools/check_imports.py")
assert _spec is not None and _spec.loader is not None
check_imports = importlib.util.module_from_spec(_spec)
sys.modules["check_imports"] = check_imports
_spec.loader.exec_module(check_imports)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the package to break on purpose."""
    dst = tmp_path / "memprof"
    shutil.copytree(ROOT / "memprof", dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def add_line(path: Path, line: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")


def test_the_tree_keeps_the_contract() -> None:
    assert check_imports.check(ROOT / "memprof") == []


def test_an_upward_import_fails(tree: Path) -> None:
    add_line(tree / "core" / "dtypes.py", "from memprof.report.json import render_json")
    problems = check_imports.check(tree)
    assert any("memprof.core.dtypes imports memprof.report.json, a layer above it" in p
               for p in problems)
    assert check_imports.main(["check", str(tree)]) == 1


def test_core_importing_a_ui_or_gpu_library_fails(tree: Path) -> None:
    (tree / "core" / "plotting.py").write_text("import rich\nimport torch.cuda\n")
    problems = check_imports.check(tree)
    assert any("imports rich" in p for p in problems)
    assert any("imports torch.cuda" in p for p in problems)


def test_a_new_circle_fails_even_through_a_lazy_import(tree: Path) -> None:
    add_line(tree / "core" / "gpus.py",
             "def _late() -> None:\n    from memprof.core.estimate import estimate  # noqa")
    problems = check_imports.check(tree)
    assert any(p.startswith("import circle:") and "memprof.core.gpus" in p for p in problems)


def test_no_module_cites_a_path_outside_the_repository() -> None:
    """Citations name the upstream source (repository, commit, file, function) or a document in
    the repository; never notes beside it or a machine path."""
    outside = ("reference/", "internals.md", "deepseek_v4.md", "DESIGN.md", "../shared",
               "/work/", "seeds/", "calibration/")
    offenders = [f"{p.relative_to(ROOT)}: {needle}"
                 for p in sorted((ROOT / "memprof").rglob("*.py"))
                 for needle in outside if needle in p.read_text(encoding="utf-8")]
    assert offenders == []
