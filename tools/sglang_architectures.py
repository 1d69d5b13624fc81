"""Write ``configs/sglang_architectures.json``: for each SGLang release read, the model
architectures its model registry holds (the ``architectures`` of a ``config.json`` that SGLang
loads with its own model code).

SGLang's ``ModelRegistry`` (``sglang/srt/models/registry.py``, ``import_model_classes``) imports
every module of the package ``sglang.srt.models`` (``pkgutil.iter_modules``; sub-packages are
skipped) and keys each class its ``EntryClass`` names (one class or a list) by the class's
``__name__``. This tool reads the same modules with ``ast``, without importing them: the
module-level ``EntryClass`` assignments, each name resolved to the class it is bound to (a
``class`` statement, an alias ``A = B``, or ``from ... import B as A``: the class's own name
``B``). ``memprof/core/engines/sglang_registry.py`` refuses an architecture a listed release
does not hold.

An architecture the registry lacks is not refused by SGLang at once: ``_normalize_archs`` falls
back to ``TransformersForCausalLM`` (the Transformers backend) where the release has it. That
runs Hugging Face's modelling code, not the SGLang model memprof estimates.

A post release memprof does not model (``0.4.10.post2``) is read too: ``--engine-version``
models it at a modelled release (``memprof.core.release_names.map_build``), which the table's
``modelled_at`` records, so that release is taken to load what its post releases hold (memprof
cannot tell them apart once mapped; gpt-oss came in 0.4.10.post2, not in 0.4.10).

Usage::

    python tools/sglang_architectures.py SRC_DIR RELEASE... > configs/sglang_architectures.json
    python tools/sglang_architectures.py --pypi RELEASE... > configs/sglang_architectures.json

where ``SRC_DIR/<release>/sglang/srt/models/`` holds each release's unpacked files
(``pip download sglang==X --no-deps``, unzipped); ``--pypi`` reads the same files out of each
release's wheel on PyPI with HTTP range requests (``tools/pypi_wheel.py``).
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

MODELS = "sglang/srt/models/"


def _statements(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, those under a module-level ``if`` / ``try`` included."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            yield from _statements(node.body)
            yield from _statements(node.orelse)


def entry_classes(source: str) -> list[str]:
    """The ``__name__`` of each class a module's ``EntryClass`` names."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # a module-level name -> the class name it is bound to
    entries: list[ast.expr] = []
    for node in _statements(tree.body):
        if isinstance(node, ast.ClassDef):
            bound[node.name] = node.name
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                bound[alias.asname or alias.name] = alias.name
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if node.value is None:
                continue
            if "EntryClass" in names:
                if not isinstance(node, ast.AugAssign):
                    entries = []
                entries.extend(node.value.elts if isinstance(node.value, (ast.List, ast.Tuple))
                               else [node.value])
            elif isinstance(node.value, ast.Name):
                for n in names:
                    bound[n] = bound.get(node.value.id, node.value.id)
    out: list[str] = []
    for e in entries:
        if isinstance(e, ast.Name):
            out.append(bound.get(e.id, e.id))
        elif isinstance(e, ast.Attribute):
            out.append(e.attr)
    return out


def architectures(files: dict[str, str]) -> list[str]:
    """The registry of one release from its ``{module file name: source}`` of
    ``sglang/srt/models/`` (top-level ``.py`` modules only, as ``pkgutil.iter_modules``)."""
    out: set[str] = set()
    for name, source in files.items():
        if "/" in name or not name.endswith(".py") or name in ("__init__.py", "registry.py"):
            continue
        out.update(entry_classes(source))
    return sorted(out)


def _from_dir(root: Path) -> dict[str, str]:
    models = root / MODELS
    return {p.name: p.read_text(encoding="utf-8-sig") for p in sorted(models.glob("*.py"))}


def _from_pypi(release: str) -> dict[str, str]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from pypi_wheel import open_wheel

    with open_wheel("sglang", release) as wheel:
        return {n[len(MODELS):]: wheel.read(n).decode("utf-8-sig") for n in wheel.namelist()
                if n.startswith(MODELS) and n.endswith(".py") and "/" not in n[len(MODELS):]}


def table(registries: dict[str, list[str]], how: str) -> dict[str, object]:
    return {
        "_about": "The model architectures each SGLang release's model registry holds: the "
                  "__name__ of each class the EntryClass of a module of sglang/srt/models/ "
                  "names (sglang/srt/models/registry.py import_model_classes), for the releases "
                  "read, oldest first: every release memprof models and every post release it "
                  "does not, which --engine-version models at the release 'modelled_at' names "
                  "(memprof/core/release_names.py map_build), so that release also loads what "
                  "they hold. memprof/core/engines/sglang_registry.py refuses an architecture "
                  "a modelled release does not hold. Written by tools/sglang_architectures.py.",
        "_source": "each release's wheel on PyPI (https://pypi.org/project/sglang/#history), "
                   f"its sglang/srt/models/*.py {how}, parsed with ast (not imported)",
        "releases": registries,
    }


def modelled_at(releases: Iterable[str]) -> dict[str, str]:
    """Each release read that memprof does not model (a post release) → the modelled release
    ``--engine-version`` maps it to (``memprof.core.release_names.map_build``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from memprof.core.release_names import map_build
    from memprof.core.releases import SGLANG_RELEASES

    out: dict[str, str] = {}
    for r in releases:
        mapped = None if r in SGLANG_RELEASES else map_build(r, "sglang")
        if mapped is not None:
            out[r] = mapped.release
    return out


def main(argv: list[str]) -> None:
    if argv[:1] == ["--pypi"]:
        regs = {r: architectures(_from_pypi(r)) for r in argv[1:]}
        how = "read out of the wheel by HTTP range requests (tools/pypi_wheel.py)"
    else:
        root = Path(argv[0])
        regs = {r: architectures(_from_dir(root / r)) for r in argv[1:]}
        how = "as shipped"
    doc = table(regs, how)
    doc["modelled_at"] = modelled_at(regs)
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
