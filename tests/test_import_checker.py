"""tools/check_imports.py follows the package ``__init__`` Python runs before a module: a circle
closed through a package ``__init__`` fails, a clean tree (and a package's own submodules
importing each other under an ``__init__`` that imports them) passes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_imports_pkg",
                                               ROOT / "tools/check_imports.py")
assert _spec is not None and _spec.loader is not None
check_imports = importlib.util.module_from_spec(_spec)
sys.modules["check_imports_pkg"] = check_imports
_spec.loader.exec_module(check_imports)


def write(root: Path, files: dict[str, str]) -> Path:
    """A source tree ``root/memprof`` with ``files`` (paths relative to it)."""
    src = root / "memprof"
    for rel, text in files.items():
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return src


CLEAN = {
    "__init__.py": "",
    "core/__init__.py": "",
    # a package __init__ that imports its own modules, as memprof.core.models does
    "core/terms/__init__.py": ("from memprof.core.terms.a import A\n"
                               "from memprof.core.terms.b import B\n"),
    "core/terms/a.py": "A = 1\n",
    "core/terms/b.py": "from memprof.core.terms.a import A\nB = A\n",
    "core/allocations.py": "from memprof.core.terms.a import A\n",
}


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    src = write(tmp_path, CLEAN)
    assert check_imports.check(src) == []
    assert check_imports.main(["check", str(src)]) == 0


def test_a_circle_through_a_package_init_fails(tmp_path: Path) -> None:
    """Today's circle before it was broken: ``allocations`` imports a term module, which runs
    the ``terms`` package ``__init__`` first; that imports a term that imports ``allocations``
    back (inside a function, which counts). No module imports ``memprof.core.terms`` by name,
    so without the package edge there is no circle to see."""
    files = dict(CLEAN)
    files["core/terms/b.py"] = ("def late() -> int:\n"
                                "    from memprof.core.allocations import A\n"
                                "    return A\n")
    src = write(tmp_path, files)
    problems = check_imports.check(src)
    circles = [p for p in problems if p.startswith("import circle:")]
    assert len(circles) == 1, problems
    for name in ("memprof.core.allocations", "memprof.core.terms ", "memprof.core.terms.b"):
        assert name in circles[0] + " ", circles[0]
    assert check_imports.main(["check", str(src)]) == 1


def test_the_package_edge_is_what_finds_it(tmp_path: Path) -> None:
    """The same tree with an ``__init__`` that imports nothing has no circle: the failure above
    comes from the package edge alone."""
    files = dict(CLEAN)
    files["core/terms/__init__.py"] = ""
    files["core/terms/b.py"] = ("def late() -> int:\n"
                                "    from memprof.core.allocations import A\n"
                                "    return A\n")
    assert check_imports.check(write(tmp_path, files)) == []


def test_packages_run_first() -> None:
    run_first = check_imports.packages_run_first
    assert run_first("memprof.core.terms.a", "memprof.core.allocations") == [
        "memprof.core.terms"]  # memprof and memprof.core are above the importer: started
    assert run_first("memprof.core.terms.a", "memprof.core.terms.b") == []
    assert run_first("memprof.core.terms.a", "memprof.core.terms") == []
    assert run_first("memprof.alloc.va", "memprof.core.x") == ["memprof.alloc"]


def test_the_tree_has_no_circle_through_a_package() -> None:
    assert [p for p in check_imports.check(ROOT / "memprof")
            if p.startswith("import circle:")] == []
