"""``memprof versions`` as text: the releases modelled and every rule row, or what differs between
two releases for one deployment (rules, then components)."""

from __future__ import annotations

from memprof.base.units import fmt_bytes
from memprof.core.version_diff import VersionDiff, all_rules
from memprof.core.versions import RELEASES, Rule


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


def render_version_diff(d: VersionDiff) -> str:
    e = d.estimate_a
    lines = [f"{e.spec.name} on {e.deployment.world_size}× {e.gpu.name}: "
             f"{'SGLang' if e.deployment.sglang else 'vLLM'} {d.a} → {d.b}", ""]
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
    else:
        lines.append("no component differs")
    ta, tb = d.estimate_a.kv_cache_tokens, d.estimate_b.kv_cache_tokens
    lines.append(f"KV cache tokens: {ta:,} → {tb:,}; verdict: {d.estimate_a.verdict} → "
                 f"{d.estimate_b.verdict}")
    return "\n".join(lines) + "\n"
