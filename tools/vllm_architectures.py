"""Write ``configs/vllm_architectures.json``: for each vLLM release read, the model architectures
its model registry lists (the ``architectures`` of a ``config.json`` that vLLM can load).

The registry is a set of dict literals keyed by architecture name in
``vllm/model_executor/models/__init__.py`` (0.6.0 – 0.6.2: ``_GENERATION_MODELS``,
``_MULTIMODAL_MODELS``, ...) or ``vllm/model_executor/models/registry.py`` (0.6.3 on:
``_TEXT_GENERATION_MODELS``, ``_MULTIMODAL_MODELS``, ...). Every ``_*_MODELS`` dict literal of
that file is read with ``ast`` (its string keys), except ``_ROCM_PARTIALLY_SUPPORTED_MODELS``
(notes, not models). ``memprof/core/engines/vllm_registry.py`` refuses an architecture a listed
release does not register.

Usage::

    python tools/vllm_architectures.py SRC_DIR RELEASE... > configs/vllm_architectures.json

where ``SRC_DIR/<release>/vllm/...`` holds each release's unpacked Python files
(``pip download vllm==X --no-deps``, unzipped).
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

SKIP = {"_ROCM_PARTIALLY_SUPPORTED_MODELS", "_OOT_MODELS"}


def registry_file(root: Path) -> Path:
    models = root / "vllm" / "model_executor" / "models"
    reg = models / "registry.py"
    return reg if reg.is_file() else models / "__init__.py"


def architectures(path: Path) -> list[str]:
    """The string keys of every ``_*_MODELS = {...}`` dict literal at module level."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if not names or not isinstance(value, ast.Dict):
            continue
        if not any(n.endswith("_MODELS") and n not in SKIP for n in names):
            continue
        out.update(k.value for k in value.keys
                   if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return sorted(out)


def main(src: str, releases: list[str]) -> None:
    root = Path(src)
    doc = {
        "_about": "The model architectures each vLLM release's model registry lists (the keys of "
                  "the _*_MODELS dicts of vllm/model_executor/models/registry.py, or of "
                  "__init__.py before 0.6.3), for the releases read. memprof/core/engines/"
                  "vllm_registry.py refuses an architecture a listed release does not register. "
                  "Written by tools/vllm_architectures.py.",
        "_source": "each release's wheel on PyPI (https://pypi.org/project/vllm/#history), "
                   "its Python files read as shipped",
        "releases": {r: architectures(registry_file(root / r)) for r in releases},
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
