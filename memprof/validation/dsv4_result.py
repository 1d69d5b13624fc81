"""The DeepSeek-V4 sparse MLA decode validation (seed 003) as a row of the validation registry,
and its result: the scratch of each policy per layer kind beside the estimate, parity,
graph-clean, speed and bandwidth (:class:`DSV4Validation`), with the block its report is laid
out from. Pure data; the run is ``memprof.validation.dsv4`` (torch), imported when the row runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from memprof.base.units import fmt_bytes
from memprof.validation.checks import (
    Bandwidth,
    GraphClean,
    Parity,
    all_hold,
    graph_lines,
    graph_verdict,
)
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
class MemoryPart:
    name: str
    measured_bytes: int
    estimate_bytes: int | None
    equal: bool | None


@dataclass(frozen=True, slots=True)
class DSV4PolicyRun:
    policy: str
    layers_run: int
    model_layers: int
    per_call_bytes: tuple[tuple[str, int, int], ...]  # (kind, model layers of it, bytes/call)
    measured_bytes: int  # scaled to the model: per-step Σ kind count × call; shared held
    estimate_bytes: int | None
    estimate_match: bool | None
    parts: tuple[MemoryPart, ...]  # the dequant and the IO buffers separately
    unmodelled_bytes: int  # per call / held, not in the catalog (the scopes' lse)
    allocated_delta_bytes: int | None
    reserved_delta_bytes: int | None
    peak_delta_bytes: int | None
    step_ms: float | None
    parity: tuple[Parity, ...]
    graph: GraphClean | None


@dataclass(frozen=True, slots=True)
class DSV4Validation:
    kernel: str  # "dsv4"
    model: str
    backend: str
    device: str
    triton: bool
    batch: int
    context_len: int
    heads: int
    topk: tuple[tuple[str, int], ...]  # scope → topk
    num_blocks: int
    layer_kinds: tuple[tuple[str, int], ...]  # kind → layers of the model
    runs: tuple[DSV4PolicyRun, ...]
    direct_parity: tuple[Parity, ...]  # the kernel reading fp8_ds_mla, no pool dequant
    shared_over_per_step: float | None
    speed_passed: bool | None
    bandwidth: Bandwidth | None
    notes: tuple[str, ...]

    VERDICTS: ClassVar[tuple[str, ...]] = ("parity_passed", "memory_passed", "graph_passed",
                                           "passed")

    @property
    def parity_passed(self) -> bool:
        return all(p.passed for r in self.runs for p in r.parity) and all(
            p.passed for p in self.direct_parity)

    @property
    def path(self) -> str:
        return "Triton" if self.triton else "torch reference"

    def block(self) -> Block:
        """Its report: the scratch of each policy per layer kind beside the estimate, memory
        parts, parity, graph-clean, speed and bandwidth."""
        runs = self.runs
        topk = ", ".join(f"{s} {n}" for s, n in self.topk)
        kinds = ", ".join(f"{n} {kind}" for kind, n in self.layer_kinds)
        title = (f"{VALIDATION.title} — {self.model}, {self.path} on {self.device}; "
                 f"B={self.batch}, context {self.context_len}, {self.heads} q heads, topk "
                 f"{topk}, {self.num_blocks} KV blocks (the estimate's); layers {kinds}")
        rows = tuple((r.policy, f"{r.layers_run} of {r.model_layers}",
                      " + ".join(f"{n}×{fmt_bytes(b)}" for _kind, n, b in r.per_call_bytes)
                      or "held once", fmt_bytes(r.measured_bytes), opt_bytes(r.estimate_bytes),
                      match(r.estimate_match), fmt_bytes(r.unmodelled_bytes),
                      opt_bytes(r.allocated_delta_bytes), opt_bytes(r.reserved_delta_bytes),
                      ms(r.step_ms)) for r in runs)
        lines: list[str] = []
        for r in runs:
            for part in r.parts:
                eq = "" if part.equal is None else (" equal" if part.equal else " NOT equal")
                lines.append(f"  memory [{r.policy}] {part.name}: {part.measured_bytes:,} B, "
                             f"estimate {opt_bytes(part.estimate_bytes) or 'none'}{eq}")
            est = "none" if r.estimate_bytes is None else f"{r.estimate_bytes:,} B"
            lines.append(f"  memory [{r.policy}]: {r.measured_bytes:,} B for all "
                         f"{r.model_layers} layers, estimate {est}")
        lines += [parity_line(r.policy, p) for r in runs for p in r.parity]
        lines += [parity_line("kernel", p) for p in self.direct_parity]
        for r in runs:
            lines += graph_lines(r.policy, r.graph)
        lines.append(f"  graph-clean: shared clean, per-step shown not clean: "
                     f"{ok(self.graph_passed)}")
        if self.shared_over_per_step is not None:
            lines.append(speed_line("shared / per-step step time", self.shared_over_per_step,
                                    self.speed_passed))
        if self.bandwidth is not None:
            b = self.bandwidth
            lines.append(f"  bandwidth (fp8_ds_mla read directly): kernel "
                         f"{b.kernel_gbps:.0f} GB/s ({fmt_bytes(b.kernel_bytes)} in "
                         f"{b.kernel_ms:.3f} ms), copy {b.copy_gbps:.0f} GB/s, "
                         f"{b.fraction:.0%} (no target)")
        lines += [f"  note: {n}" for n in self.notes]
        lines.append(verdict_line(self))
        return Block(title, ("policy", "layers run", "layers × per call", "all model layers",
                             "estimate", "equal", "not in catalog", "allocated Δ",
                             "reserved Δ", "step ms"), rows, tuple(lines))

    @property
    def memory_passed(self) -> bool:
        return all(r.estimate_match is True for r in self.runs)

    @property
    def graph_passed(self) -> bool | None:
        """``shared`` clean and ``per-step`` shown not clean (None: the check did not run)."""
        return graph_verdict({r.policy: r.graph for r in self.runs}, "shared", "per-step")

    @property
    def passed(self) -> bool:
        return all_hold([self.parity_passed, self.memory_passed],
                        [self.graph_passed, self.speed_passed])


# --- the row ``memprof validate`` runs ------------------------------------------------------------

# seed 003: DeepSeek-V4-Flash TP8 on AITER (ROCm: the estimate is taken on an MI355X); the KV
# pool the per-step dequant copies are sized by is set with --kv-cache-memory-bytes
VALIDATION = ValidationRow(
    name="dsv4", flag="dsv4",
    title="DeepSeek-V4 sparse MLA decode (seed 003, AITER dequant + IO buffers)",
    runner="memprof.validation.dsv4:run", result=DSV4Validation,
    models=("deepseek-v4-flash", "deepseek-v4-pro"), tp=8, batch=32, gpu="MI355X",
    what="DeepSeek-V4 decode", attention="dsv4", attention_label="DeepSeek-V4",
    context_cuda=8192, own=("kv_cache_memory_bytes",))
VALIDATIONS = (VALIDATION,)
