"""Kernel validations (``memprof validate``) as table, JSON and Markdown.

Reporters of ``memprof validate`` (a list of kernel validations, ``memprof.validation``):
table, JSON (``memprof.validation.results``, serialised) and Markdown.

The table: per kernel a table of the scratch each policy holds next to the estimate's catalog
bytes, the parity lines, the graph-clean lines (DeepSeek-V4, DP gather), the speed and bandwidth
lines and one verdict; with several kernels one summary table."""

from __future__ import annotations

import io
import json

from rich.console import Console
from rich.table import Table

from memprof.base.units import fmt_bytes
from memprof.validation.dp_gather import DPGatherValidation
from memprof.validation.dsv4 import DSV4Validation
from memprof.validation.graph_clean import GraphClean
from memprof.validation.mla_tq import KernelValidation
from memprof.validation.results import (
    VALIDATE_SCHEMA_VERSION,
    AnyValidation,
    kernel_dict,
    validation_dict,
)

__all__ = ["VALIDATE_SCHEMA_VERSION", "AnyValidation", "kernel_dict", "render_json",
           "render_markdown", "render_table"]

KERNEL_TITLES = {"mla": "MLA decode (seed 000, _decode_out)",
                 "tq": "TurboQuant k8v4 decode (seed 001, mid_o + output + lse)",
                 "dsv4": "DeepSeek-V4 sparse MLA decode (seed 003, AITER dequant + IO buffers)",
                 "dp_gather": "SGLang DP-attention gather (seed 002, gathered buffer)"}


def _ok(flag: bool | None) -> str:
    return "n/a" if flag is None else ("pass" if flag else "FAIL")


def _opt_bytes(n: int | None) -> str:
    return "" if n is None else fmt_bytes(n)


def render_json(kernels: list[AnyValidation], torch_version: str, device_name: str) -> str:
    return json.dumps(validation_dict(kernels, torch_version, device_name), indent=2) + "\n"


def _kernel_block(k: KernelValidation, console: Console) -> None:
    path = "Triton" if k.triton else "torch reference"
    console.print(f"{KERNEL_TITLES.get(k.kernel, k.kernel)} — {k.model}, "
                  f"backend {k.backend}, {path} on {k.device}; B={k.batch}, context "
                  f"{k.context_len}, {k.heads} q heads / {k.kv_heads} kv heads, "
                  f"{k.num_splits} KV splits", style="bold")
    t = Table(show_lines=False)
    for col in ("policy", "layers run", "held", "per layer / shared", "all model layers",
                "estimate", "equal", "allocated Δ", "reserved Δ", "step ms"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    for r in k.runs:
        t.add_row(r.policy, f"{r.layers_run} of {r.model_layers}", fmt_bytes(r.held_bytes),
                  fmt_bytes(r.bytes_per_layer), fmt_bytes(r.scaled_bytes),
                  _opt_bytes(r.estimate_bytes),
                  "" if r.estimate_match is None else ("yes" if r.estimate_match else "NO"),
                  _opt_bytes(r.allocated_delta_bytes), _opt_bytes(r.reserved_delta_bytes),
                  "" if r.step_ms is None else f"{r.step_ms:.3f}")
    console.print(t)
    for r in k.runs:
        for p in r.parity:
            console.print(f"  parity [{r.policy}] {p.name}: max abs {p.max_abs:.3g}, rel "
                          f"{p.rel:.3g} (tol {p.tol:g}, {p.dtype}) {_ok(p.passed)}")
    for r in k.runs:
        est = "no estimate" if r.estimate_bytes is None else f"{r.estimate_bytes:,} B"
        console.print(f"  memory [{r.policy}]: {r.scaled_bytes:,} B for all {r.model_layers} "
                      f"layers, estimate {est}")
    console.print(f"  memory: per-layer = one buffer per layer, shared = one, both equal to "
                  f"the estimate: {_ok(k.memory_passed)}")
    if k.shared_over_per_layer is not None:
        console.print(f"  speed: shared / per-layer step time {k.shared_over_per_layer:.3f} "
                      f"(≤ 1.02) {_ok(k.speed_passed)}")
    if k.bandwidth is not None:
        b = k.bandwidth
        target = "" if b.target is None else f" (target ≥ {b.target:.0%})"
        console.print(f"  bandwidth: kernel {b.kernel_gbps:.0f} GB/s ({fmt_bytes(b.kernel_bytes)} "
                      f"in {b.kernel_ms:.3f} ms under a CUDA graph; {b.eager_ms:.3f} ms launched "
                      f"eagerly), copy {b.copy_gbps:.0f} GB/s, {b.fraction:.0%}{target} "
                      f"{_ok(b.passed)}")
    for n in k.notes:
        console.print(f"  note: {n}")
    console.print(f"  {k.kernel}: {'PASS' if k.passed else 'FAIL'}")


def _graph_line(policy: str, g: GraphClean | None, console: Console) -> None:
    if g is None:
        console.print(f"  graph-clean [{policy}]: not run")
        return
    head = (f"  graph-clean [{policy}] ({g.mode}): {g.steps} replays, outputs "
            f"{'equal' if g.outputs_equal else 'DIFFER'} to eager, "
            f"{g.pointers_tracked - g.num_pointers_changed}/{g.pointers_tracked} pointers "
            f"stable, {g.replay_allocations} allocations in replay, pool "
            f"{fmt_bytes(g.pool_bytes)} ({fmt_bytes(g.held_bytes)} left allocated): "
            f"{'clean' if g.clean else 'NOT clean'}")
    console.print(head)
    for w in g.what_changed:
        console.print(f"    what changes: {w}")


def _dsv4_block(k: DSV4Validation, console: Console) -> None:
    path = "Triton" if k.triton else "torch reference"
    topk = ", ".join(f"{s} {n}" for s, n in k.topk)
    kinds = ", ".join(f"{n} {kind}" for kind, n in k.layer_kinds)
    console.print(f"{KERNEL_TITLES['dsv4']} — {k.model}, {path} on {k.device}; B={k.batch}, "
                  f"context {k.context_len}, {k.heads} q heads, topk {topk}, "
                  f"{k.num_blocks} KV blocks (the estimate's); layers {kinds}", style="bold")
    t = Table(show_lines=False)
    for col in ("policy", "layers run", "layers × per call", "all model layers",
                "estimate", "equal", "not in catalog", "allocated Δ", "reserved Δ", "step ms"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    for r in k.runs:
        per = " + ".join(f"{n}×{fmt_bytes(b)}" for _kind, n, b in r.per_call_bytes) \
            or "held once"
        t.add_row(r.policy, f"{r.layers_run} of {r.model_layers}", per,
                  fmt_bytes(r.measured_bytes), _opt_bytes(r.estimate_bytes),
                  "" if r.estimate_match is None else ("yes" if r.estimate_match else "NO"),
                  fmt_bytes(r.unmodelled_bytes), _opt_bytes(r.allocated_delta_bytes),
                  _opt_bytes(r.reserved_delta_bytes),
                  "" if r.step_ms is None else f"{r.step_ms:.3f}")
    console.print(t)
    for r in k.runs:
        for part in r.parts:
            eq = "" if part.equal is None else (" equal" if part.equal else " NOT equal")
            console.print(f"  memory [{r.policy}] {part.name}: {part.measured_bytes:,} B, "
                          f"estimate {_opt_bytes(part.estimate_bytes) or 'none'}{eq}")
        console.print(f"  memory [{r.policy}]: {r.measured_bytes:,} B for all "
                      f"{r.model_layers} layers, estimate "
                      f"{'none' if r.estimate_bytes is None else f'{r.estimate_bytes:,} B'}")
    for r in k.runs:
        for p in r.parity:
            console.print(f"  parity [{r.policy}] {p.name}: max abs {p.max_abs:.3g}, rel "
                          f"{p.rel:.3g} (tol {p.tol:g}) {_ok(p.passed)}")
    for p in k.direct_parity:
        console.print(f"  parity [kernel] {p.name}: max abs {p.max_abs:.3g}, rel {p.rel:.3g} "
                      f"(tol {p.tol:g}) {_ok(p.passed)}")
    for r in k.runs:
        _graph_line(r.policy, r.graph, console)
    console.print(f"  graph-clean: shared clean, per-step shown not clean: "
                  f"{_ok(k.graph_passed)}")
    if k.shared_over_per_step is not None:
        console.print(f"  speed: shared / per-step step time {k.shared_over_per_step:.3f} "
                      f"(≤ 1.02) {_ok(k.speed_passed)}")
    if k.bandwidth is not None:
        b = k.bandwidth
        console.print(f"  bandwidth (fp8_ds_mla read directly): kernel {b.kernel_gbps:.0f} GB/s "
                      f"({fmt_bytes(b.kernel_bytes)} in {b.kernel_ms:.3f} ms), copy "
                      f"{b.copy_gbps:.0f} GB/s, {b.fraction:.0%} (no target)")
    for n in k.notes:
        console.print(f"  note: {n}")
    console.print(f"  dsv4: {'PASS' if k.passed else 'FAIL'}")


def _dp_block(k: DPGatherValidation, console: Console) -> None:
    console.print(f"{KERNEL_TITLES['dp_gather']} — {k.model}, {k.backend} world of "
                  f"{k.world_size} on {k.device}; dp {k.dp}, max_bs {k.max_bs} × "
                  f"{k.tokens_per_bs} tokens, hidden {k.hidden}: ({k.rows}, {k.hidden}) "
                  f"{k.dtype}", style="bold")
    t = Table(show_lines=False)
    for col in ("policy", "catalog policy", "buffer", "held", "allocated / forward",
                "estimate", "equal", "graph pool", "step ms"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    for r in k.runs:
        t.add_row(r.policy, r.catalog_policy, fmt_bytes(r.buffer_bytes),
                  fmt_bytes(r.held_bytes), fmt_bytes(r.allocated_per_forward_bytes),
                  _opt_bytes(r.estimate_bytes),
                  "" if r.estimate_match is None else ("yes" if r.estimate_match else "NO"),
                  "" if r.graph is None else fmt_bytes(r.graph.pool_bytes),
                  "" if r.step_ms is None else f"{r.step_ms:.3f}")
    console.print(t)
    for r in k.runs:
        for p in r.parity:
            console.print(f"  parity [{r.policy}] {p.name}: max abs {p.max_abs:.3g}, rel "
                          f"{p.rel:.3g} (tol {p.tol:g}) {_ok(p.passed)}")
    for r in k.runs:
        _graph_line(r.policy, r.graph, console)
    console.print(f"  graph-clean: persistent clean, per forward shown not clean: "
                  f"{_ok(k.graph_passed)}")
    if k.persistent_over_per_forward is not None:
        console.print(f"  speed: persistent / per-forward time "
                      f"{k.persistent_over_per_forward:.3f} (≤ 1.02) {_ok(k.speed_passed)}")
    for n in k.notes:
        console.print(f"  note: {n}")
    console.print(f"  dp_gather: {'PASS' if k.passed else 'FAIL'}")


def _summary_rows(kernels: list[AnyValidation]) -> list[list[str]]:
    rows = []
    for k in kernels:
        path = "Triton" if getattr(k, "triton", False) else (
            "torch.distributed" if isinstance(k, DPGatherValidation) else "torch reference")
        graph = "n/a" if isinstance(k, KernelValidation) else _ok(k.graph_passed)
        speed = k.speed_passed
        rows.append([k.kernel, k.model, f"{path} on {k.device}", _ok(k.parity_passed),
                     _ok(k.memory_passed), graph, _ok(speed),
                     "PASS" if k.passed else "FAIL"])
    return rows


SUMMARY_COLUMNS = ("kernel", "model", "path", "parity", "memory = estimate", "graph-clean",
                   "speed", "verdict")


def render_table(kernels: list[AnyValidation], width: int | None = None, *,
                 color: bool = False) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width or 120, force_terminal=color, no_color=not color,
                      highlight=False, markup=False)
    for k in kernels:
        if isinstance(k, DSV4Validation):
            _dsv4_block(k, console)
        elif isinstance(k, DPGatherValidation):
            _dp_block(k, console)
        else:
            _kernel_block(k, console)
        console.print()
    if len(kernels) > 1:
        t = Table(title="summary", show_lines=False)
        for col in SUMMARY_COLUMNS:
            t.add_column(col)
        for row in _summary_rows(kernels):
            t.add_row(*row)
        console.print(t)
    console.print(_verdict(kernels))
    return buf.getvalue()


def _verdict(kernels: list[AnyValidation]) -> str:
    failed = [k.kernel for k in kernels if not k.passed]
    return "verdict: " + ("all checks hold" if not failed else f"FAIL ({', '.join(failed)})")


def render_markdown(kernels: list[AnyValidation], torch_version: str, device_name: str) -> str:
    """A page for a pull request: the summary table, then each kernel's report verbatim."""
    lines = [f"## memprof validate — {device_name}, torch {torch_version}", "",
             "| " + " | ".join(SUMMARY_COLUMNS) + " |",
             "|" + "---|" * len(SUMMARY_COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in _summary_rows(kernels)]
    lines += ["", f"**{_verdict(kernels)}**", "", "<details><summary>full report</summary>",
              "", "```", render_table(kernels, 120).rstrip(), "```", "", "</details>", ""]
    return "\n".join(lines)
