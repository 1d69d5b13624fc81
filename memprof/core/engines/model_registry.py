"""Which model architectures an engine release can load with its own model code: its model
registry, read from each release's wheel into a table in ``configs/`` (one per engine).

``check`` refuses an architecture the release's registry does not hold, naming the first read
release that holds it (or, for one the engine removed, the last). Releases the table does not
list (an SGLang source snapshot) are not checked. The tables are read once, and each
(release, architecture) is looked up once (the sweep asks for the same pair at every point).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from memprof.base.errors import BadInput
from memprof.core.models.load import configs_dir


@lru_cache(maxsize=4)
def _doc(name: str) -> dict[str, Any]:
    """``configs/<name>`` parsed, once a process; empty where the file is missing."""
    path = configs_dir() / name
    if not path.is_file():
        return {}
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


@lru_cache(maxsize=4)
def read_releases(name: str) -> dict[str, frozenset[str]]:
    """``configs/<name>``'s releases as read, in its order (oldest first), each with its own
    architectures; empty where the file is missing."""
    return {r: frozenset(archs) for r, archs in _doc(name).get("releases", {}).items()}


@lru_cache(maxsize=4)
def table(name: str) -> dict[str, frozenset[str]]:
    """The architectures each release memprof models loads: its own registry's, and those of
    the releases read that ``--engine-version`` models at it (the table's ``modelled_at``: an
    SGLang post release memprof does not list, which it cannot tell from its base once mapped).
    """
    at: dict[str, str] = _doc(name).get("modelled_at", {})
    read = read_releases(name)
    merged = {r: set(archs) for r, archs in read.items() if r not in at}
    for r, base in at.items():
        merged[base] |= read[r]
    return {r: frozenset(archs) for r, archs in merged.items()}


@lru_cache(maxsize=4096)
def missing_hint(name: str, release: str, architecture: str) -> str | None:
    """None where ``release`` is not in the table or loads ``architecture``; else the hint of
    the refusal: the releases read that hold it."""
    known = table(name).get(release)
    if known is None or architecture in known:
        return None
    read = read_releases(name)
    releases = list(read)
    holding = [r for r in releases if architecture in read[r]]
    if not holding:
        return (f"use a release after {releases[-1]} (memprof reads the model registry of "
                f"{len(releases)} releases from {releases[0]} to {releases[-1]}, and none of "
                f"them lists {architecture})")
    later = [r for r in holding if releases.index(r) > releases.index(release)]
    if later:
        return f"use --engine-version {later[0]} or later"
    return (f"use --engine-version {holding[-1]} or earlier (the last release whose registry "
            f"lists {architecture})")


def check(name: str, engine: str, where: str, release: str, architecture: str,
          model: str) -> None:
    """:class:`BadInput` where ``release``'s registry (table ``name``) does not hold
    ``architecture``; ``where`` names the registry's place in the engine's source."""
    hint = missing_hint(name, release, architecture)
    if hint is not None:
        raise BadInput(f"{engine} {release} cannot load {model}: its model registry "
                       f"({where}) has no {architecture}", hint=hint)
