"""``memprof.base.frozen.copier``: the straight-line copy behind ``Deployment.with_`` and
``TermContext.with_`` gives what ``dataclasses.replace`` gives."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import pytest

from memprof.base.frozen import copier
from memprof.core.deployment import Deployment


@dataclass(frozen=True, slots=True, kw_only=True)
class _Point:
    x: int
    y: int = 0
    label: str = ""


def test_copy_is_replace() -> None:
    copy = copier(_Point, tuple(f.name for f in fields(_Point)))
    p = _Point(x=1, y=2, label="a")
    assert copy(p, {}) == p and copy(p, {}) is not p
    assert copy(p, {"y": 5, "label": "b"}) == replace(p, y=5, label="b")
    with pytest.raises(ValueError, match="not a field name"):
        copier(_Point, ("x", "y); import os; (z",))


def test_deployment_with_is_replace_for_every_field() -> None:
    dep = Deployment(tp=2, max_model_len=8192, kv_cache_dtype="fp8")
    for f in fields(Deployment):
        value = getattr(Deployment(tp=4, pp=2, max_num_seqs=7, block_size=32), f.name)
        assert dep.with_(**{f.name: value}) == replace(dep, **{f.name: value})
    assert dep.with_() is dep
    with pytest.raises(TypeError):
        dep.with_(no_such_field=1)
