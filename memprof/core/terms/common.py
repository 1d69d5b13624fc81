"""What every term of the profile run needs: the model dtype's size, the resolved batch sizes,
the PP stage a rank sits on, and a ``Stage`` (the tensors live at one point of a forward)."""

from __future__ import annotations

from typing import NamedTuple

from memprof.base.units import fmt_bytes
from memprof.core.components import TermContext
from memprof.core.deployment import Deployment
from memprof.core.dtypes import dtype_bytes


def model_bytes(ctx: TermContext) -> int:
    """Bytes of one element of the model dtype ("s" in the formulas)."""
    return dtype_bytes(ctx.model_dtype)


def profile_tokens(dep: Deployment) -> int:
    """Tokens of the profile run on one DP rank: ``max_num_batched_tokens`` (resolved)."""
    if dep.max_num_batched_tokens is None:
        raise ValueError("terms need a resolved deployment (max_num_batched_tokens is None)")
    return dep.max_num_batched_tokens


def max_seqs(dep: Deployment) -> int:
    """``max_num_seqs`` (resolved)."""
    if dep.max_num_seqs is None:
        raise ValueError("terms need a resolved deployment (max_num_seqs is None)")
    return dep.max_num_seqs


def is_first_stage(ctx: TermContext) -> bool:
    return ctx.coord.pp_stage == 0


def is_last_stage(ctx: TermContext) -> bool:
    return ctx.coord.pp_stage == ctx.dep.pp - 1


class Stage(NamedTuple):
    """The tensors live at one point of the profile forward, and their sum."""

    name: str
    parts: tuple[tuple[str, int], ...]

    @property
    def bytes(self) -> int:
        return sum(b for _n, b in self.parts)

    def describe(self) -> str:
        return f"{self.name}: " + " + ".join(f"{n} {fmt_bytes(b)}" for n, b in self.parts if b)
