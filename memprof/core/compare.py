"""Two deployments side by side: ``--compare scratch=shared`` re-estimates the same deployment
with the given changes (``parse_changes``) and diffs the two component lists (``diff``)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from memprof.base.errors import BadInput
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate
from memprof.core.flags import coerce, field_for, flag_name

# fields whose default is None ("the engine's default"): only these take None / default
NULLABLE = frozenset(f.name for f in fields(Deployment) if f.default is None)


def no_none(field: str, value: object, where: str) -> object:
    """``value`` unless it is ``None`` for a field that has no engine default to fall back to
    (``tp``, ``kv_cache_dtype``, ...): that is :class:`BadInput` naming ``where``."""
    if value is None and field not in NULLABLE:
        default = getattr(Deployment(), field)
        raise BadInput(f"{where}: {field} has no engine default to fall back to (None)",
                       hint=f"give {field} a value, e.g. {field}={str(default).lower()} "
                       f"({flag_name(field)}'s default)")
    return value


def parse_changes(text: str) -> dict[str, object]:
    """``"scratch=shared,tp=4"`` → typed Deployment field values; keys are field names or any
    engine flag name (``tensor-parallel-size``, ``--tp-size``, ``kv_cache_memory_bytes``)."""
    out: dict[str, object] = {}
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise BadInput("--compare is empty", hint="give the changes as KEY=VALUE, e.g. "
                       "--compare scratch=shared or --compare kv_cache_dtype=fp8,max_num_seqs=256")
    for part in filter(None, parts):
        if "=" not in part:
            raise BadInput(f"cannot read the change {part[:40]!r}", hint="write KEY=VALUE, e.g. "
                           "scratch=shared or kv_cache_dtype=fp8")
        key, value = (x.strip() for x in part.split("=", 1))
        field = field_for(key)
        if field is None:
            raise BadInput(f"unknown deployment field {key[:40]!r} in --compare",
                           hint="use a memprof estimate flag name, e.g. scratch, tp, "
                           "kv_cache_dtype, max_num_seqs")
        if field in out:
            raise BadInput(f"--compare sets {field} twice", hint="give each setting once")
        out[field] = no_none(field, coerce(field, value, where="--compare"), "--compare")
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
