"""The MLA and TurboQuant decode validations (seeds 000 and 001) as rows of the validation
registry, and their result: the scratch each policy holds beside the estimate, parity, speed and
bandwidth (:class:`KernelValidation`), with the block its report is laid out from. Pure data;
the run is ``memprof.validation.mla_tq`` (torch), imported when a row runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from memprof.base.units import fmt_bytes
from memprof.validation.checks import Bandwidth, Parity
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
class PolicyRun:
    policy: str
    layers_run: int
    model_layers: int  # layers of the model that hold this scratch
    held_bytes: int  # scratch the policy holds after the loop (exact tensor bytes)
    bytes_per_layer: int  # per-layer: one layer's share; shared: the one buffer
    scaled_bytes: int  # to all model layers: per-layer × model_layers, shared × 1
    estimate_bytes: int | None  # the estimate's catalog bytes for the same deployment
    estimate_match: bool | None  # scaled_bytes == estimate_bytes
    allocated_delta_bytes: int | None  # CUDA: memory_allocated after − before the loop
    reserved_delta_bytes: int | None  # CUDA: memory_reserved after − before
    peak_delta_bytes: int | None  # CUDA: max_memory_allocated − before
    step_ms: float | None  # CUDA: median time of one decode step over layers_run layers
    parity: tuple[Parity, ...]


@dataclass(frozen=True, slots=True)
class KernelValidation:
    kernel: str  # "mla" | "tq"
    model: str
    backend: str
    device: str
    triton: bool  # did the Triton kernels run (else the torch reference)
    batch: int
    context_len: int
    heads: int  # query heads on this rank
    kv_heads: int
    num_splits: int
    runs: tuple[PolicyRun, ...]
    shared_over_per_layer: float | None  # step time ratio (CUDA)
    speed_passed: bool | None
    bandwidth: Bandwidth | None
    notes: tuple[str, ...]

    VERDICTS: ClassVar[tuple[str, ...]] = ("parity_passed", "memory_passed", "passed")

    @property
    def parity_passed(self) -> bool:
        return all(p.passed for r in self.runs for p in r.parity)

    @property
    def graph_passed(self) -> bool | None:
        """No graph-clean check here (the scratch is the same tensor in every step)."""
        return None

    @property
    def path(self) -> str:
        return "Triton" if self.triton else "torch reference"

    def block(self) -> Block:
        """Its report: the scratch each policy holds beside the estimate, parity, memory,
        speed and bandwidth."""
        runs = self.runs
        title = (f"{TITLES.get(self.kernel, self.kernel)} — {self.model}, backend "
                 f"{self.backend}, {self.path} on {self.device}; B={self.batch}, context "
                 f"{self.context_len}, {self.heads} q heads / {self.kv_heads} kv heads, "
                 f"{self.num_splits} KV splits")
        rows = tuple((r.policy, f"{r.layers_run} of {r.model_layers}", fmt_bytes(r.held_bytes),
                      fmt_bytes(r.bytes_per_layer), fmt_bytes(r.scaled_bytes),
                      opt_bytes(r.estimate_bytes), match(r.estimate_match),
                      opt_bytes(r.allocated_delta_bytes), opt_bytes(r.reserved_delta_bytes),
                      ms(r.step_ms)) for r in runs)
        lines = [parity_line(r.policy, p, dtype=True) for r in runs for p in r.parity]
        for r in runs:
            est = "no estimate" if r.estimate_bytes is None else f"{r.estimate_bytes:,} B"
            lines.append(f"  memory [{r.policy}]: {r.scaled_bytes:,} B for all "
                         f"{r.model_layers} layers, estimate {est}")
        lines.append(f"  memory: per-layer = one buffer per layer, shared = one, both equal "
                     f"to the estimate: {ok(self.memory_passed)}")
        if self.shared_over_per_layer is not None:
            lines.append(speed_line("shared / per-layer step time", self.shared_over_per_layer,
                                    self.speed_passed))
        if self.bandwidth is not None:
            b = self.bandwidth
            target = "" if b.target is None else f" (target ≥ {b.target:.0%})"
            lines.append(f"  bandwidth: kernel {b.kernel_gbps:.0f} GB/s "
                         f"({fmt_bytes(b.kernel_bytes)} in {b.kernel_ms:.3f} ms under a CUDA "
                         f"graph; {b.eager_ms:.3f} ms launched eagerly), copy "
                         f"{b.copy_gbps:.0f} GB/s, {b.fraction:.0%}{target} {ok(b.passed)}")
        lines += [f"  note: {n}" for n in self.notes]
        lines.append(verdict_line(self))
        return Block(title, ("policy", "layers run", "held", "per layer / shared",
                             "all model layers", "estimate", "equal", "allocated Δ",
                             "reserved Δ", "step ms"), rows, tuple(lines))

    @property
    def memory_passed(self) -> bool:
        """Per-layer holds one buffer per layer, shared holds one, and both equal the estimate
        (an estimate that could not run proves nothing, so it fails the check)."""
        by = {r.policy: r for r in self.runs}
        ok = all(r.estimate_match is True for r in self.runs)
        if "per-layer" in by and "shared" in by:
            pl, sh = by["per-layer"], by["shared"]
            ok = ok and pl.held_bytes == pl.layers_run * pl.bytes_per_layer
            ok = ok and sh.held_bytes == sh.bytes_per_layer
            ok = ok and sh.scaled_bytes <= pl.scaled_bytes
        return ok

    @property
    def passed(self) -> bool:
        checks = [self.parity_passed, self.memory_passed]
        if self.speed_passed is not None:
            checks.append(self.speed_passed)
        if self.bandwidth is not None and self.bandwidth.passed is not None:
            checks.append(self.bandwidth.passed)
        return all(checks)


# --- the rows ``memprof validate`` runs -----------------------------------------------------------

# seed 000: DeepSeek-R1 TP8 on CUTLASS MLA, an SM100 backend, so the estimate is taken on a B200
MLA = ValidationRow(
    name="mla", flag="mla", title="MLA decode (seed 000, _decode_out)",
    runner="memprof.validation.mla_tq:run_mla", result=KernelValidation,
    models=("deepseek-r1", "deepseek-v3"), tp=8, batch=64, gpu="B200", what="MLA decode",
    attention="mla", attention_label="MLA", context_cuda=8192,
    backends=("cutlass_mla", "flashinfer_mla"))
# seed 001: Qwen3-32B on one H200, TurboQuant k8v4
TQ = ValidationRow(
    name="tq", flag="turboquant",
    title="TurboQuant k8v4 decode (seed 001, mid_o + output + lse)",
    runner="memprof.validation.mla_tq:run_tq", result=KernelValidation,
    models=("qwen3-32b", "qwen3-0.6b"), tp=1, batch=256, gpu="H200", what="TurboQuant decode",
    attention="gqa", attention_label="GQA", context_cuda=4096)
VALIDATIONS = (MLA, TQ)
TITLES = {r.name: r.title for r in VALIDATIONS}
