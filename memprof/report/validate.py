"""Renderers of ``memprof validate``: per kernel a table of the scratch each policy holds next to
the estimate's catalog bytes, the parity lines, the speed and bandwidth lines and one verdict;
or the JSON document (``schema_version`` 1)."""

from __future__ import annotations

import dataclasses
import io
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from memprof.base.units import fmt_bytes
from memprof.kernels.validate_mla_tq import KernelValidation

VALIDATE_SCHEMA_VERSION = 1
KERNEL_TITLES = {"mla": "MLA decode (seed 000, _decode_out)",
                 "tq": "TurboQuant k8v4 decode (seed 001, mid_o + output + lse)"}


def _ok(flag: bool | None) -> str:
    return "n/a" if flag is None else ("pass" if flag else "FAIL")


def _opt_bytes(n: int | None) -> str:
    return "" if n is None else fmt_bytes(n)


def kernel_dict(k: KernelValidation) -> dict[str, Any]:
    d = dataclasses.asdict(k)
    d["parity_passed"] = k.parity_passed
    d["memory_passed"] = k.memory_passed
    d["passed"] = k.passed
    return d


def render_json(kernels: list[KernelValidation], torch_version: str, device_name: str) -> str:
    doc = {"schema_version": VALIDATE_SCHEMA_VERSION, "torch_version": torch_version,
           "device_name": device_name, "passed": all(k.passed for k in kernels),
           "kernels": [kernel_dict(k) for k in kernels]}
    return json.dumps(doc, indent=2) + "\n"


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


def render_table(kernels: list[KernelValidation], width: int | None = None, *,
                 color: bool = False) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width or 120, force_terminal=color, no_color=not color,
                      highlight=False, markup=False)
    for k in kernels:
        _kernel_block(k, console)
        console.print()
    failed = [k.kernel for k in kernels if not k.passed]
    console.print("verdict: " + ("all checks hold" if not failed
                                 else f"FAIL ({', '.join(failed)})"))
    return buf.getvalue()
