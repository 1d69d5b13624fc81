"""One memo per test process of the published rows' estimates and outcomes
(``tests/test_published_distribution.py`` ``row_estimate`` and ``outcome``).

A dozen test files ask for them, several for every row of ``tests/data/published.json`` (the
distribution, the eras, explain's calibration at collection and again per row, SGLang's eras),
and some load ``test_published_distribution.py`` by its path, each load a module of its own. The
memo lives here, in one module every copy imports, so that a row is estimated once per process.

An estimate is a frozen value of the row's fields alone (nothing here is built while a test patches
memprof), so the memo is keyed by the row's whole content: a test that edits a row (another
release, another card) gets its own entry, never the published row's. Only answers are kept: a
row that raises is built again by the next caller, which sees the error itself. An answer is
shared read-only (an ``Estimate`` is frozen); ``remembered`` hands each caller a copy of a
mutable one (an ``Outcome``), so that no test can change what the next one reads.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_MEMO: dict[tuple[str, str], Any] = {}


def row_key(row: dict[str, Any]) -> str | None:
    """The row's whole content as one string (None where a field is no JSON value: such a
    row is not remembered)."""
    try:
        return json.dumps(row, sort_keys=True)
    except (TypeError, ValueError):
        return None


def remembered(kind: str, row: dict[str, Any], build: Callable[[dict[str, Any]], T], *,
               mutable: bool = False) -> T:
    """``build(row)``, once per process for each ``kind`` and row content; ``mutable``: the
    answer can be changed in place, so each caller gets a deep copy of it."""
    key = row_key(row)
    if key is None:
        return build(row)
    try:
        got: T = _MEMO[(kind, key)]
    except KeyError:
        got = _MEMO[(kind, key)] = build(row)
    return copy.deepcopy(got) if mutable else got
