"""Write ``configs/vllm_architectures.json``: for each vLLM release read, the model architectures
its model registry lists (the ``architectures`` of a ``config.json`` that vLLM can load).

The registry is a set of dict literals keyed by architecture name in
``vllm/model_executor/models/__init__.py`` (0.6.0 – 0.6.2: ``_GENERATION_MODELS``,
``_MULTIMODAL_MODELS``, ...) or ``vllm/model_executor/models/registry.py`` (0.6.3 on:
``_TEXT_GENERATION_MODELS``, ``_MULTIMODAL_MODELS``, ...). Every ``_*_MODELS`` dict literal of
that file is read with ``ast`` (its string keys), except the dicts that name models the
release does not build: ``_ROCM_PARTIALLY_SUPPORTED_MODELS`` (notes), ``_OOT_MODELS`` (filled at
run time), ``_PREVIOUSLY_SUPPORTED_MODELS`` (0.10.0 on: architectures removed, with the last
release that had them; ``ModelRegistry._raise_for_unsupported`` refuses them) and
``_OOT_SUPPORTED_MODELS`` (architectures moved out to plugins, refused likewise).
``memprof/core/engines/vllm_registry.py`` refuses an architecture a listed release does not
register.

Usage::

    python tools/vllm_architectures.py SRC_DIR RELEASE... > configs/vllm_architectures.json
    python tools/vllm_architectures.py --pypi RELEASE... > configs/vllm_architectures.json

where ``SRC_DIR/<release>/vllm/...`` holds each release's unpacked Python files
(``pip download vllm==X --no-deps``, unzipped); ``--pypi`` reads the one registry file out of
each release's wheel on PyPI with HTTP range requests (``tools/pypi_wheel.py``: the zip's
central directory and that member, a few hundred KB of a 400 MB wheel).
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

SKIP = {"_ROCM_PARTIALLY_SUPPORTED_MODELS", "_OOT_MODELS", "_PREVIOUSLY_SUPPORTED_MODELS",
        "_OOT_SUPPORTED_MODELS"}
REGISTRY = "vllm/model_executor/models/registry.py"
INIT = "vllm/model_executor/models/__init__.py"


def registry_file(root: Path) -> Path:
    models = root / "vllm" / "model_executor" / "models"
    reg = models / "registry.py"
    return reg if reg.is_file() else models / "__init__.py"


def architectures(path: Path) -> list[str]:
    """The string keys of every ``_*_MODELS = {...}`` dict literal at module level."""
    return registry_keys(path.read_text(encoding="utf-8"))


def registry_keys(source: str) -> list[str]:
    """:func:`architectures` of a registry file's text."""
    tree = ast.parse(source)
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


def from_pypi(release: str) -> list[str]:
    """The registry of ``release`` read out of its wheel on PyPI by range requests."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from pypi_wheel import open_wheel

    with open_wheel("vllm", release) as wheel:
        names = set(wheel.namelist())
        return registry_keys(wheel.read(REGISTRY if REGISTRY in names else INIT)
                             .decode("utf-8-sig"))


def main(src: str, releases: list[str]) -> None:
    if src == "--pypi":
        regs = {r: from_pypi(r) for r in releases}
        how = "the registry file read out of the wheel by HTTP range requests (tools/pypi_wheel.py)"
    else:
        regs = {r: architectures(registry_file(Path(src) / r)) for r in releases}
        how = "its Python files read as shipped"
    doc = {
        "_about": "The model architectures each vLLM release's model registry lists (the keys of "
                  "the _*_MODELS dicts of vllm/model_executor/models/registry.py, or of "
                  "__init__.py before 0.6.3; not _PREVIOUSLY_SUPPORTED_MODELS nor "
                  "_OOT_SUPPORTED_MODELS, which name architectures it refuses), for the releases "
                  "read, oldest first. memprof/core/engines/"
                  "vllm_registry.py refuses an architecture a listed release does not register. "
                  "Written by tools/vllm_architectures.py.",
        "_source": "each release's wheel on PyPI (https://pypi.org/project/vllm/#history), "
                   + how,
        "releases": regs,
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
