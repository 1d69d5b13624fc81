"""docs/architecture.md lists the layers of ``tools/check_imports.py``'s ``LAYERS``: the same
packages, in the same order, one table row per layer; and it names every library the pure layers
may not import."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def _checker() -> ModuleType:
    path = ROOT / "tools" / "check_imports.py"
    spec = importlib.util.spec_from_file_location("check_imports", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def doc_layers(text: str) -> tuple[tuple[str, ...], ...]:
    """The layers of the doc's table, top first: the backticked packages of each row
    ``| N | `pkg`, `pkg` | ... |``, rows numbered 1, 2, 3, ... in order."""
    rows = re.findall(r"^\| (\d+) \| ([^|]*) \|", text, flags=re.M)
    numbers = [int(n) for n, _ in rows]
    assert numbers == list(range(1, len(rows) + 1)), f"rows are not numbered 1..n: {numbers}"
    return tuple(tuple(re.findall(r"`([\w.]+)`", cell)) for _, cell in rows)


def test_the_doc_lists_the_checkers_layers_in_order() -> None:
    layers = _checker().LAYERS
    assert doc_layers(DOC.read_text(encoding="utf-8")) == layers


def test_the_doc_names_what_the_pure_layers_may_not_import() -> None:
    checker = _checker()
    text = DOC.read_text(encoding="utf-8")
    for pure in checker.PURE:
        assert f"`{pure}`" in text, pure
    for library in checker.FORBIDDEN_IN_CORE:
        assert re.search(rf"\b{library}\b", text), library


def test_a_missing_or_moved_layer_is_seen() -> None:
    text = DOC.read_text(encoding="utf-8")
    layers = _checker().LAYERS
    # a layer dropped from the doc (and the rows renumbered) no longer equals LAYERS
    dropped = re.sub(r"^\| 4 \| `memprof\.budget` \|[^\n]*\n", "", text, flags=re.M)
    dropped = re.sub(r"^\| (\d+) \|", lambda m: f"| {int(m.group(1)) - (int(m.group(1)) > 4)} |",
                     dropped, flags=re.M)
    assert doc_layers(dropped) != layers and len(doc_layers(dropped)) == len(layers) - 1
    # two layers swapped
    swapped = text.replace("`memprof.trace`", "`@@`")
    swapped = swapped.replace("`memprof.kernels`", "`memprof.trace`")
    swapped = swapped.replace("`@@`", "`memprof.kernels`")
    assert doc_layers(swapped) != layers
    # a new layer in LAYERS that the doc lacks
    assert doc_layers(text) != (*layers[:2], ("memprof.validation",), *layers[2:])
