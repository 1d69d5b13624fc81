"""``memprof/kernels/`` holds kernels only: the validation orchestration lives in
``memprof/validation/``, a layer above the kernels and below the reporters."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_imports_v", ROOT / "tools/check_imports.py")
assert _spec is not None and _spec.loader is not None
check_imports = importlib.util.module_from_spec(_spec)
sys.modules["check_imports_v"] = check_imports
_spec.loader.exec_module(check_imports)


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_no_validation_module_is_left_among_the_kernels() -> None:
    kernels = ROOT / "memprof" / "kernels"
    assert not list(kernels.glob("validate_*.py"))
    assert not (kernels / "graph_clean.py").exists()
    for name in ("mla_tq", "dsv4", "dp_gather", "graph_clean"):
        assert (ROOT / "memprof" / "validation" / f"{name}.py").is_file()


def test_kernels_never_import_the_validation() -> None:
    for path in sorted((ROOT / "memprof" / "kernels").glob("*.py")):
        bad = {m for m in _imports(path) if m.startswith("memprof.validation")}
        assert not bad, f"{path.name} imports {bad}"


def test_validation_sits_between_the_reporters_and_the_kernels() -> None:
    layer = check_imports.layer_of
    assert layer("memprof.report.validate") < layer("memprof.validation.mla_tq")
    assert layer("memprof.validation.mla_tq") < layer("memprof.kernels.mla_decode")
    # and an upward import from a kernel into the validation is a violation
    assert layer("memprof.kernels.tq_decode") > layer("memprof.validation")
