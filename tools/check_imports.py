"""The import contract of memprof, checked on the source (no import is executed).

Three rules, each a list of violations (exit 1 when any):

1. **Layers**: a module imports only modules of its own layer or of the layers below it
   (``LAYERS``, top first — the layers of docs/architecture.md, with the command registry,
   the budget API and the pytest plugin placed where their imports put them).
2. **Pure core**: ``memprof.core``, ``memprof.alloc`` and ``memprof.base`` import none of
   ``FORBIDDEN_IN_CORE`` (UI, GPU and data libraries), so the estimator stays fast and runs
   anywhere.
3. **No circles**: the graph of memprof's modules (every import, also inside functions) has no
   cycle. Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first, so an import
   is also an edge to each package above its target, except the packages that hold the
   importing module itself (Python has started them before the module runs): a package
   ``__init__`` that imports a module which imports back into the package from outside it is a
   circle.

Usage: ``python tools/check_imports.py [SRC_DIR]`` (default: the checkout's ``memprof/``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

LAYERS: tuple[tuple[str, ...], ...] = (
    ("memprof.__main__", "memprof.cli"),
    ("memprof.commands",),
    ("memprof.pytest_plugin",),
    ("memprof.budget",),
    ("memprof.report",),
    ("memprof.trace",),
    ("memprof.validation",),
    ("memprof.kernels",),
    ("memprof.probes",),
    ("memprof.batch",),
    ("memprof.core",),
    ("memprof.alloc",),
    ("memprof.base", "memprof"),
)
PURE = ("memprof.core", "memprof.alloc", "memprof.base")
FORBIDDEN_IN_CORE = ("typer", "click", "rich", "torch", "triton", "pynvml", "amdsmi", "pandas",
                     "matplotlib", "numpy")


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> int:
    """Index of the module's layer (0 = top); the longest matching prefix wins."""
    best, best_len = len(LAYERS), -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if _within(module, p) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def modules(src: Path) -> dict[str, Path]:
    """Module name → file, for every ``*.py`` under ``src`` (the ``memprof`` package folder)."""
    out: dict[str, Path] = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(module: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """(imported name, line) of every import in the file; memprof names resolved to a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_pkg = path.name == "__init__.py"
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".") if is_pkg else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join([*pkg, base] if base else pkg)
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((sub if sub in known else base, node.lineno))
    return out


def packages_run_first(target: str, importer: str) -> list[str]:
    """The packages Python runs before ``target`` when ``importer`` imports it: every package
    above ``target`` (``a`` and ``a.b`` for ``a.b.c``), less those above ``importer`` itself
    (already started when it runs) and ``importer`` (a package's own submodules)."""
    parts = target.split(".")
    above = [".".join(parts[:i]) for i in range(1, len(parts))]
    return [p for p in above if not _within(importer, p)]


def check(src: Path) -> list[str]:
    known = modules(src)
    problems: list[str] = []
    graph: dict[str, set[str]] = {m: set() for m in known}
    for mod, path in known.items():
        for name, line in imports(mod, path, known):
            where = f"{path}:{line}"
            top = name.split(".")[0]
            if any(_within(mod, p) for p in PURE) and top in FORBIDDEN_IN_CORE:
                problems.append(f"{where}: {mod} imports {name} (the pure core imports no "
                                f"{', '.join(FORBIDDEN_IN_CORE)})")
            if top != "memprof":
                continue
            target = name
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target not in known or target == mod:
                continue
            graph[mod].add(target)
            graph[mod].update(p for p in packages_run_first(target, mod) if p in known)
            if layer_of(target) < layer_of(mod):
                problems.append(f"{where}: {mod} imports {target}, a layer above it "
                                f"({LAYERS[layer_of(target)][0]} over "
                                f"{LAYERS[layer_of(mod)][0]})")
    problems += [f"import circle: {' -> '.join(c)}" for c in cycles(graph)]
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                ring = sorted(comp)
                found.append([*ring, ring[0]])

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main(argv: list[str]) -> int:
    src = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1] / "memprof"
    problems = check(src)
    for p in problems:
        print(p)
    n = len(modules(src))
    print(f"import contract: {n} modules, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
