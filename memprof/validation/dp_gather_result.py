"""SGLang's DP-attention gather validation (seed 002) as a row of the validation registry, and
its result: the gathered buffer each policy holds and allocates beside the estimate, parity,
graph-clean and speed (:class:`DPGatherValidation`), with the block its report is laid out
from. Pure data; the run is ``memprof.validation.dp_gather`` (torch), imported when the row
runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from memprof.base.units import fmt_bytes
from memprof.validation.checks import GraphClean, Parity, all_hold, graph_lines, graph_verdict
from memprof.validation.registry import (
    Block,
    ValidationRow,
    match,
    ms,
    ok,
    opt_bytes,
    parity_line,
    speed_line,
    verdict_line,
)


@dataclass(frozen=True, slots=True)
class DPPolicyRun:
    policy: str
    catalog_policy: str
    buffer_bytes: int  # the gathered buffer's tensor bytes
    held_bytes: int  # held between forwards (persistent: the buffer; per forward: 0)
    allocated_per_forward_bytes: int  # allocated by one forward (per forward: the buffer)
    estimate_bytes: int | None
    estimate_match: bool | None
    allocated_delta_bytes: int | None
    step_ms: float | None
    parity: tuple[Parity, ...]
    graph: GraphClean | None


@dataclass(frozen=True, slots=True)
class DPGatherValidation:
    kernel: str  # "dp_gather"
    model: str
    device: str
    backend: str  # process-group backend
    world_size: int
    dp: int
    max_bs: int
    tokens_per_bs: int
    hidden: int
    rows: int
    dtype: str
    runs: tuple[DPPolicyRun, ...]
    persistent_over_per_forward: float | None
    speed_passed: bool | None
    notes: tuple[str, ...]

    VERDICTS: ClassVar[tuple[str, ...]] = ("parity_passed", "memory_passed", "graph_passed",
                                           "passed")

    @property
    def parity_passed(self) -> bool:
        return all(p.passed for r in self.runs for p in r.parity)

    @property
    def path(self) -> str:
        return "torch.distributed"

    def block(self) -> Block:
        """Its report: the gathered buffer each policy holds and allocates beside the estimate,
        parity, graph-clean and speed."""
        runs = self.runs
        title = (f"{VALIDATION.title} — {self.model}, {self.backend} world of "
                 f"{self.world_size} on {self.device}; dp {self.dp}, max_bs {self.max_bs} × "
                 f"{self.tokens_per_bs} tokens, hidden {self.hidden}: ({self.rows}, "
                 f"{self.hidden}) {self.dtype}")
        rows = tuple((r.policy, r.catalog_policy, fmt_bytes(r.buffer_bytes),
                      fmt_bytes(r.held_bytes), fmt_bytes(r.allocated_per_forward_bytes),
                      opt_bytes(r.estimate_bytes), match(r.estimate_match),
                      "" if r.graph is None else fmt_bytes(r.graph.pool_bytes), ms(r.step_ms))
                     for r in runs)
        lines = [parity_line(r.policy, p) for r in runs for p in r.parity]
        for r in runs:
            lines += graph_lines(r.policy, r.graph)
        lines.append(f"  graph-clean: persistent clean, per forward shown not clean: "
                     f"{ok(self.graph_passed)}")
        if self.persistent_over_per_forward is not None:
            lines.append(speed_line("persistent / per-forward time",
                                    self.persistent_over_per_forward, self.speed_passed))
        lines += [f"  note: {n}" for n in self.notes]
        lines.append(verdict_line(self))
        return Block(title, ("policy", "catalog policy", "buffer", "held",
                             "allocated / forward", "estimate", "equal", "graph pool",
                             "step ms"), rows, tuple(lines))

    @property
    def memory_passed(self) -> bool:
        return all(r.estimate_match is True for r in self.runs)

    @property
    def graph_passed(self) -> bool | None:
        return graph_verdict({r.policy: r.graph for r in self.runs}, "persistent", "per-forward")

    @property
    def passed(self) -> bool:
        return all_hold([self.parity_passed, self.memory_passed],
                        [self.graph_passed, self.speed_passed])


# --- the row ``memprof validate`` runs ------------------------------------------------------------

# seed 002: DeepSeek-R1 on SGLang, --tp 8 --dp 8 --enable-dp-attention, --cuda-graph-max-bs 64
VALIDATION = ValidationRow(
    name="dp_gather", flag="dp_gather",
    title="SGLang DP-attention gather (seed 002, gathered buffer)",
    runner="memprof.validation.dp_gather:run", result=DPGatherValidation,
    models=("deepseek-r1", "deepseek-v3"), tp=8, batch=64, gpu="H200",
    what="DP-attention gather", own=("dp",))
VALIDATIONS = (VALIDATION,)
