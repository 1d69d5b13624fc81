"""Turning the catalog into a rank's components: which buffers apply, how many copies, how many
bytes (WorkspaceManager callers merged into one buffer), and what sharing would save."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple

from memprof.base.errors import BadInput
from memprof.base.units import fmt_bytes, round_up
from memprof.core.attention import kind_of
from memprof.core.components import Component, TermContext
from memprof.core.engines import engine_of
from memprof.core.kvcache import rank_layers
from memprof.core.scratch.backends import default_scratch_policy, resolve_backend
from memprof.core.scratch.buffer import (
    POLICIES,
    WORKSPACE_ALIGN,
    Dims,
    ScratchBuffer,
    Shape,
    dims,
    dtype_bytes,
    dtype_name,
)
from memprof.core.scratch.catalog import buffers_for

# --- evaluation ----------------------------------------------------------------------------------
# Nothing is kept between calls: a sweep shares scratch work between its points by remembering
# the scratch terms and tensors by what they read (``memprof.batch``).


def _prod(shape: Shape) -> int:
    return math.prod(shape)


def _call_bytes(buf: ScratchBuffer, d: Dims, kind: str) -> tuple[int, list[str]]:
    """Bytes one call holds at once (workspace callers: each part rounded up to 256 B)."""
    total, terms = 0, []
    for p in buf.parts:
        shape = p.shape(d, kind)
        if shape is None:
            continue
        size = _prod(shape) * dtype_bytes(p.dtype, d)
        if buf.workspace_manager:
            size = round_up(size, WORKSPACE_ALIGN)
        total += size
        terms.append(f"{p.label} [{'×'.join(str(x) for x in shape)}] {dtype_name(p.dtype, d)}")
    return total, terms


def _applicable(ctx: TermContext) -> list[ScratchBuffer]:
    """The catalog entries of ``ctx``'s deployment under its scratch policy.

    vLLM: the resolved attention backend's entries (plus DeepSeek-V4's own workspace). SGLang:
    only the DP-attention gathered buffer; ``--attention-backend`` names vLLM backends and is not
    read for SGLang.
    """
    return _applicable_uncached(ctx)


def _applicable_uncached(ctx: TermContext) -> list[ScratchBuffer]:
    dep, spec = ctx.dep, ctx.spec
    if dep.scratch is not None and dep.scratch not in POLICIES:
        raise BadInput(f"unknown --scratch {dep.scratch!r}", hint="per-layer or shared")
    engine = engine_of(dep)
    keys = list(engine.scratch_keys(dep))
    if engine.selects_attention_backend:
        keys.append(resolve_backend(spec, ctx.gpu, dep))
        kind_key = kind_of(spec.layers[0].attention).scratch_key
        if kind_key is not None:
            keys.append(kind_key)
    out: list[ScratchBuffer] = []
    for key in keys:
        policy = dep.scratch or default_scratch_policy(key)
        out += [b for b in buffers_for(key) if b.policy in (policy, "both")]
    return out


def _dims(ctx: TermContext) -> Dims:
    return dims(ctx)


def _layer_kinds(buf: ScratchBuffer, ctx: TermContext) -> dict[str, int]:
    """Layer kind → number of this rank's layers holding the buffer (PP-aware, MTP included)."""
    kinds: dict[str, int] = {}
    for layer in rank_layers(ctx.spec, ctx.dep, ctx.coord):
        kind = buf.applies(ctx.spec, ctx.dep, layer)
        if kind is not None:
            kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


@dataclass(frozen=True, slots=True)
class _Row:
    """One component-to-be: ``count`` copies of ``each`` bytes."""

    buf: ScratchBuffer
    kind: str  # layer kind of per-layer copies ("" when the rank has one kind)
    sized_by: str  # layer kind whose call sizes a single copy ("" when only one kind)
    count: int
    each: int
    terms: tuple[str, ...]
    eager_reuse: bool = False


def _rows(buf: ScratchBuffer, ctx: TermContext, d: Dims) -> list[_Row]:
    """Per-layer copies: one row per layer kind; otherwise one copy sized for the largest call.

    A ``per_step`` buffer under ``--enforce-eager`` is freed when its layer returns and reused by
    the next layer, so the peak is one call; under CUDA graphs every layer's allocation stays in
    the graph pool (vLLM #40909 text: "122-244 fresh ~kv-cache-sized allocations per step ...
    never get reused").
    """
    kinds = _layer_kinds(buf, ctx)
    if not kinds:
        return []
    sized = {k: _call_bytes(buf, d, k) for k in kinds}
    eager_reuse = buf.per_layer and buf.lifetime == "per_step" and ctx.dep.enforce_eager
    if not buf.per_layer or eager_reuse:
        kind = max(sized, key=lambda k: sized[k][0])
        each, terms = sized[kind]
        return [_Row(buf, "", kind if len(kinds) > 1 else "", 1, each, tuple(terms),
                     eager_reuse)]
    return [_Row(buf, k if len(kinds) > 1 else "", "", n, sized[k][0], tuple(sized[k][1]))
            for k, n in kinds.items()]


def _component(row: _Row, bytes_: int, note: str = "") -> Component:
    """``bytes_`` is what a single copy adds (a WorkspaceManager caller: its growth)."""
    buf = row.buf
    label = buf.label + (f", {row.kind} layers" if row.kind else "")
    notes = [note] if note else []
    if row.sized_by:
        notes.insert(0, f"sized by the largest call ({row.sized_by} layers)")
    if row.eager_reuse:
        notes.insert(0, "--enforce-eager: freed after each layer and reused, one call live")
    align = " (each part rounded up to 256 B)" if buf.workspace_manager else ""
    per_layer = buf.per_layer and not row.eager_reuse
    times = ""
    if per_layer:
        times = f" × {row.count} {row.kind + ' ' if row.kind else ''}layer" + \
            ("s" if row.count != 1 else "")
    formula = (" + ".join(row.terms) + f" = {row.each:,} B{align}{times}"
               + "".join(f"; {n}" for n in notes) + f" — {buf.source}")
    total = row.count * row.each if per_layer else bytes_
    return Component(name=f"{buf.name} ({label})", category="scratch", bytes=total,
                     count=row.count if per_layer else 1, profiled=buf.profiled,
                     where=buf.where, formula=formula)


def _components(ctx: TermContext) -> list[Component]:
    """Every scratch component of the rank, WorkspaceManager callers merged into one buffer.

    The WorkspaceManager keeps one buffer as large as its largest call (vLLM@52a31cc
    vllm/v1/worker/workspace.py WorkspaceManager). Callers
    the engine reaches before sizing the KV cache come first, largest first; then the runtime
    callers, largest first. The first of each phase carries what it adds to the buffer; a caller
    that fits in it adds 0 B and says so.
    """
    return _components_uncached(ctx)


def _components_uncached(ctx: TermContext) -> list[Component]:
    applicable = _applicable(ctx)
    if not applicable:  # (nor the dimensions read)
        return []
    d = _dims(ctx)
    rows = [r for b in applicable for r in _rows(b, ctx, d)]
    out = [_component(r, r.each) for r in rows if not r.buf.workspace_manager]
    wm = sorted((r for r in rows if r.buf.workspace_manager),
                key=lambda r: (not r.buf.profiled, -r.each))
    high = 0
    for r in wm:
        grow = max(0, r.each - high)
        if not high:
            note = ""
        elif grow:
            note = (f"the WorkspaceManager buffer grows {fmt_bytes(high)} → "
                    f"{fmt_bytes(high + grow)}: +{grow:,} B")
        else:
            note = f"fits in the WorkspaceManager buffer already at {fmt_bytes(high)}: +0 B"
        out.append(_component(r, grow, note))
        high += grow
    return out


def scratch_terms(ctx: TermContext) -> list[Component]:
    """All scratch components of one rank (``scratch_budget_terms`` + ``scratch_runtime_terms``).

    The backend is ``ctx.dep.attention_backend`` (validated) or ``default_backend``; the policy
    ``ctx.dep.scratch`` or ``default_scratch_policy``. KV-sized buffers are 0 B until
    ``ctx.num_gpu_blocks`` is set.
    """
    return _components(ctx)


def scratch_budget_terms(ctx: TermContext) -> list[Component]:
    """Scratch the engine sees before it sizes the KV cache (``where == "budget"``): registered
    per-layer buffers (model load) and workspaces reserved at model construction or in the profile
    run. Never reads ``ctx.num_gpu_blocks``."""
    return [c for c in _components(ctx) if c.where == "budget"]


def scratch_runtime_terms(ctx: TermContext) -> list[Component]:
    """Scratch that first appears after start-up (``where == "runtime"``): lazily allocated decode
    buffers, per-step copies and KV-pool-sized dequant buffers (these read
    ``ctx.num_gpu_blocks``)."""
    return [c for c in _components(ctx) if c.where == "runtime"]


def scratch_savings(ctx: TermContext) -> list[tuple[str, int, int]]:
    """For every buffer of the deployment: ``(name, per-layer total, shared total)`` in bytes.

    Totals are standalone (a WorkspaceManager caller at its own size, not the growth it adds);
    workspaces that exist under both policies report the same number twice.
    """
    d = _dims(ctx)
    saved: list[tuple[str, int, int]] = []
    policies = {"per-layer": ctx.dep.with_(scratch="per-layer"),
                "shared": ctx.dep.with_(scratch="shared")}
    by_policy: dict[str, dict[str, tuple[str, int]]] = {}
    for policy, dep in policies.items():
        sub = ctx.with_(dep=dep)
        totals: dict[str, tuple[str, int]] = {}
        for buf in _applicable(sub):
            name, total = totals.get(buf.key, (buf.name, 0))
            totals[buf.key] = (name, total + sum(r.count * r.each for r in _rows(buf, sub, d)))
        by_policy[policy] = totals
    per, shared = by_policy["per-layer"], by_policy["shared"]
    for key in dict.fromkeys([*per, *shared]):
        name = (per.get(key) or shared[key])[0]
        saved.append((name, per.get(key, (name, 0))[1], shared.get(key, (name, 0))[1]))
    return saved


class ScratchTensor(NamedTuple):
    """One scratch allocation as the engine makes it: the component(s) it belongs to with the
    bytes each is charged (a WorkspaceManager buffer serves several), its shape and dtype, and
    whether the engine's start-up sees it (``profiled``: model load or profile run)."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # a memprof.core.dtypes name
    shares: tuple[tuple[str, int], ...]  # (component name, bytes charged to it)
    profiled: bool
    first_use: Literal["decode", "prefill"] = "decode"


def scratch_tensors(ctx: TermContext) -> list[ScratchTensor]:
    """The scratch of ``ctx``'s rank as tensors, in the order the engine allocates them: every
    copy of every part of a non-workspace buffer (per-layer buffers once per layer), and one
    uint8 WorkspaceManager buffer of the largest call (256-B aligned parts), charged to its
    callers as ``scratch_terms`` charges them. Σ bytes = Σ scratch components."""
    return _scratch_tensors(ctx)


def _scratch_tensors(ctx: TermContext) -> list[ScratchTensor]:
    if not _applicable(ctx):
        return []
    d = _dims(ctx)
    comps = {c.name: c for c in _components(ctx)}
    out: list[ScratchTensor] = []
    wm_shares: list[tuple[str, int]] = []
    wm_profiled = False
    for buf in _applicable(ctx):
        for row in _rows(buf, ctx, d):
            label = buf.label + (f", {row.kind} layers" if row.kind else "")
            name = f"{buf.name} ({label})"
            if buf.workspace_manager:
                wm_shares.append((name, comps[name].bytes))
                wm_profiled = wm_profiled or buf.profiled
                continue
            kind = row.sized_by or row.kind
            copies = row.count if buf.per_layer and not row.eager_reuse else 1
            for i in range(copies):
                for p in buf.parts:
                    shape = p.shape(d, kind)
                    if shape is None:
                        continue
                    dt = dtype_name(p.dtype, d)
                    nbytes = _prod(shape) * dtype_bytes(p.dtype, d)
                    out.append(ScratchTensor(name=f"{name}[{i}].{p.label}", shape=shape,
                                             dtype=dt, shares=((name, nbytes),),
                                             profiled=buf.profiled, first_use=buf.first_use))
    total = sum(b for _n, b in wm_shares)
    if total:
        out.append(ScratchTensor(name="WorkspaceManager buffer", shape=(total,), dtype="uint8",
                                 shares=tuple(wm_shares), profiled=wm_profiled))
    return out
