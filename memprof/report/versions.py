"""The rulebook or a ``VersionDiff`` (``memprof versions``) as text, JSON and Markdown.

Reporters of ``memprof versions``: the rulebook (the releases modelled and every rule row) or a
``VersionDiff`` (what differs between two releases for one deployment: rules, then components),
as text, JSON (``memprof.core.version_diff``'s dicts, serialised) and Markdown (the same rows)."""

from __future__ import annotations

import json

from memprof.base.units import fmt_bytes
from memprof.core.engines import engine_of
from memprof.core.releases import RELEASES
from memprof.core.version_diff import (
    VersionDiff,
    all_rules,
    rulebook_dict,
    version_diff_dict,
)
from memprof.core.versions import Rule


def _row(r: Rule | None) -> str:
    if r is None:
        return "does not hold"
    return f"{r.value} ({r.span}; {r.introduced_by})"


def render_rulebook() -> str:
    lines = ["releases modelled:"]
    for engine, rel in RELEASES.items():
        lines.append(f"  {engine}: {', '.join(rel)}")
    lines.append("")
    lines.append("version rules (rows kept beside the terms they change):")
    for r in all_rules():
        removed = f"; removed by {r.removed_by}" if r.removed_by else ""
        lines.append(f"  {r.name} [{r.applies_to}] {r.span}: {r.value!s}")
        lines.append(f"      changes {r.changes}; introduced by {r.introduced_by}{removed}")
        lines.append(f"      source: {r.source}")
    return "\n".join(lines) + "\n"


def _title(d: VersionDiff) -> str:
    e = d.estimate
    return (f"{e.spec.name} on {e.deployment.world_size}× {e.gpu.name}: "
            f"{engine_of(e.deployment).display} {d.a} → {d.b}")


def render_version_diff(d: VersionDiff) -> str:
    lines = [_title(d), ""]
    touching = [c for c in d.rules if c.applies]
    other = [c for c in d.rules if not c.applies]
    lines.append("rules that differ and apply to this deployment:"
                 if touching else "no rule that differs applies to this deployment")
    for c in touching:
        lines.append(f"  {c.name} ({c.changes}): {d.a}: {_row(c.a)}")
        lines.append(f"  {' ' * len(c.name)}  {' ' * (len(c.changes) + 2)}  {d.b}: {_row(c.b)}")
    if other:
        lines.append("rules that differ but not for this deployment: "
                     + ", ".join(c.name for c in other))
    lines.append("")
    if d.components:
        lines.append(f"components that differ (rank: {d.a} → {d.b}, Δ):")
        for x in d.components:
            lines.append(f"  rank {x.rank} {x.component} [{x.category}]: "
                         f"{fmt_bytes(x.a_bytes)} → {fmt_bytes(x.b_bytes)} "
                         f"({'+' if x.delta >= 0 else '−'}{fmt_bytes(abs(x.delta))})")
    elif _refusals(d):
        lines += _refusals(d)
    else:
        lines.append("no component differs")
    lines.append(_outcome(d))
    return "\n".join(lines) + "\n"


def _refusals(d: VersionDiff) -> list[str]:
    """Why no component is compared: the release(s) memprof refuses the deployment at."""
    return [f"components not compared: memprof refuses this deployment at {v}: {why}"
            for v, why in ((d.a, d.refused_a), (d.b, d.refused_b)) if why]


def _outcome(d: VersionDiff) -> str:
    ea, eb = d.estimate_a, d.estimate_b
    ta = f"{ea.kv_cache_tokens:,}" if ea else "refused"
    tb = f"{eb.kv_cache_tokens:,}" if eb else "refused"
    return (f"KV cache tokens: {ta} → {tb}; verdict: {ea.verdict if ea else 'refused'} → "
            f"{eb.verdict if eb else 'refused'}")


def render_json(d: VersionDiff | None = None) -> str:
    """The diff ``d`` as JSON; without one, the rulebook."""
    doc = rulebook_dict() if d is None else version_diff_dict(d)
    return json.dumps(doc, indent=2) + "\n"


def _md(cell: object) -> str:
    return str(cell).replace("|", "\\|").replace("\n", " ")


def render_markdown(d: VersionDiff | None = None) -> str:
    """The diff ``d`` as GitHub Markdown; without one, the rulebook (the text's rows)."""
    if d is None:
        out = ["### memprof versions", "", "| engine | releases modelled |", "|---|---|"]
        out += [f"| {engine} | {', '.join(rel)} |" for engine, rel in RELEASES.items()]
        out += ["", "| rule | applies to | span | value | changes | introduced by | removed by "
                "| source |", "|---|---|---|---|---|---|---|---|"]
        out += ["| " + " | ".join(_md(c) for c in (r.name, r.applies_to, r.span, r.value,
                                                   r.changes, r.introduced_by,
                                                   r.removed_by, r.source)) + " |"
                for r in all_rules()]
        return "\n".join(out) + "\n"
    out = [f"### memprof versions: {_title(d)}", ""]
    touching = [c for c in d.rules if c.applies]
    other = [c for c in d.rules if not c.applies]
    if touching:
        out += ["| rule | changes | " + f"{_md(d.a)} | {_md(d.b)} |", "|---|---|---|---|"]
        out += [f"| {_md(c.name)} | {_md(c.changes)} | {_md(_row(c.a))} | {_md(_row(c.b))} |"
                for c in touching]
    else:
        out.append("No rule that differs applies to this deployment.")
    if other:
        out += ["", "Rules that differ but not for this deployment: "
                + ", ".join(c.name for c in other) + "."]
    out.append("")
    if d.components:
        out += [f"| rank | component | category | {_md(d.a)} | {_md(d.b)} | Δ |",
                "|---:|---|---|---:|---:|---:|"]
        out += [f"| {x.rank} | {_md(x.component)} | {x.category} | {fmt_bytes(x.a_bytes)} | "
                f"{fmt_bytes(x.b_bytes)} | {'+' if x.delta >= 0 else '−'}"
                f"{fmt_bytes(abs(x.delta))} |" for x in d.components]
    elif _refusals(d):
        out += [_md(x[0].upper() + x[1:]) for x in _refusals(d)]
    else:
        out.append("No component differs.")
    out += ["", f"**{_outcome(d)}**"]
    return "\n".join(out) + "\n"
