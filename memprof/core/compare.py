"""Two deployments side by side: ``--compare scratch=shared`` re-estimates the same deployment
with the given changes (``parse_changes``) and diffs the two component lists (``diff``)."""

from __future__ import annotations

from dataclasses import dataclass

from memprof.base.errors import BadInput
from memprof.core.estimate import Estimate
from memprof.core.flags import coerce, field_for


def parse_changes(text: str) -> dict[str, object]:
    """``"scratch=shared,tp=4"`` → typed Deployment field values; keys are field names or any
    engine flag name (``tensor-parallel-size``, ``--tp-size``, ``kv_cache_memory_bytes``)."""
    out: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise BadInput(f"cannot read the change {part[:40]!r}", hint="write KEY=VALUE, e.g. "
                           "scratch=shared or kv_cache_dtype=fp8")
        key, value = (x.strip() for x in part.split("=", 1))
        field = field_for(key)
        if field is None:
            raise BadInput(f"unknown deployment field {key[:40]!r} in --compare",
                           hint="use a memprof estimate flag name, e.g. scratch, tp, "
                           "kv_cache_dtype, max_num_seqs")
        out[field] = coerce(field, value, where="--compare")
    return out


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One component whose bytes differ between two estimates (``a_bytes`` → ``b_bytes``)."""

    rank: int
    component: str
    category: str
    a_bytes: int
    b_bytes: int

    @property
    def delta(self) -> int:
        return self.b_bytes - self.a_bytes


def diff(a: Estimate, b: Estimate) -> list[DiffRow]:
    """Per distinct rank (matched by position), every component whose bytes differ."""
    rows: list[DiffRow] = []
    for ra, rb in zip(a.ranks, b.ranks, strict=False):
        ca = {c.name: c for c in ra.components}
        cb = {c.name: c for c in rb.components}
        for name in dict.fromkeys([*ca, *cb]):
            x, y = ca.get(name), cb.get(name)
            xa, yb = (x.bytes if x else 0), (y.bytes if y else 0)
            either = x or y
            if xa != yb and either is not None:
                rows.append(DiffRow(ra.coord.rank, name, either.category, xa, yb))
    return rows
