"""The memory gate's comparison: estimates in, findings out. Pure (no IO, no rich).

``memprof gate`` evaluates every scenario, reduces each estimate (the JSON contract of
``memprof.core.contract.estimate_dict``) to a *snapshot* with :func:`snapshot`, and compares
the snapshots with a committed baseline (:func:`compare`).

What is tracked, per scenario and per distinct rank (identical ranks are folded as the estimate
folds them; the key names the first of them, e.g. ``rank 8 (tp 0 pp 1 dp 0)``):

=================  ===========================================================================
weights_bytes      the rank's weights (the contract's ``weights_bytes``)
scratch_bytes      the sum of its ``scratch`` components (attention/MoE workspaces, decode bufs)
activation_bytes   the sum of its ``activation`` components (profile-run peak)
runtime_bytes      the sum of components with ``where == "runtime"``: memory that appears after
                   start-up and that the engine did not budget (lazy scratch, graph pool above
                   the estimate, allocator slack) — the class of bug memprof exists for
peak_bytes         what the process would hold at run time: the sum of **every** component of
                   the rank — baseline (CUDA context, NCCL), the budget (weights, activation
                   peak, non-torch, CUDA graphs, the KV cache) and runtime ones
kv_cache_tokens    the rank's KV-cache capacity in tokens
verdict            ``fits`` / ``runtime_oom`` / ``startup_oom``
components         every named component's bytes, keyed ``"category: name"`` (KV-cache
                   components excluded: the KV cache is capacity, tracked as kv_cache_tokens)
=================  ===========================================================================

Rules (``tolerance`` in percent, default 1 %):

* a bytes figure (rank metric or component) that grows by more than ``tolerance`` % of its
  baseline value is a **regression**; one that was 0 (or absent) regresses on any growth, so a
  new component (e.g. a per-layer scratch buffer) is named;
* ``kv_cache_tokens`` shrinking by more than ``tolerance`` % is a regression;
* a verdict that gets more severe (towards an OOM) is always a regression;
* the opposite moves beyond the tolerance are **improvements** (shown, never failing); smaller
  moves are shown as ``within tolerance``;
* a scenario only in the baseline is ``removed`` and one only in the current run is ``new``:
  both are reported and neither fails (``--update`` records them);
* a renamed component shows as one removed and one new component: accept it with ``--update``.

Ranks are matched by global rank, so a change in how ranks fold still compares like with like.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memprof.base.errors import BadInput
from memprof.core.verdict import VERDICTS

GATE_SCHEMA_VERSION = 1
BASELINE_KIND = "memprof-gate-baseline"
DEFAULT_TOLERANCE_PCT = 1.0
# Absolute floor of a bytes regression: 16 MiB, a cuBLAS workspace's half, far below any
# per-layer scratch set (vLLM #37442's is 61 × 128 KiB × B). Smaller moves never fail.
DEFAULT_FLOOR_BYTES = 16 * 1024 * 1024

BYTES_METRICS = ("peak_bytes", "runtime_bytes", "weights_bytes", "scratch_bytes",
                 "activation_bytes")
RANK_METRICS = ("verdict", "kv_cache_tokens", *BYTES_METRICS)

REGRESSION = "regression"
IMPROVEMENT = "improvement"
WITHIN = "within tolerance"
NEW = "new"
REMOVED = "removed"
EDITED = "edited"
STATUSES = (REGRESSION, IMPROVEMENT, WITHIN, NEW, REMOVED, EDITED)
_INT_LIST = re.compile(r"\[\s*((?:-?[0-9]+,\s*)*-?[0-9]+)\s*\]")


# --- snapshots -----------------------------------------------------------------------------------


def rank_key(rank: Mapping[str, Any]) -> str:
    """A stable, readable key of a (folded) rank of the JSON contract."""
    ep = "" if rank.get("ep_rank") is None else f" ep {rank['ep_rank']}"
    return (f"rank {rank['rank']} (tp {rank['tp_rank']} pp {rank['pp_stage']} "
            f"dp {rank['dp_rank']}{ep})")


def component_key(c: Mapping[str, Any]) -> str:
    return f"{c['category']}: {c['name']}"


def snapshot_rank(rank: Mapping[str, Any]) -> dict[str, Any]:
    comps: list[Mapping[str, Any]] = list(rank["components"])

    def total(pred: Any) -> int:
        return sum(int(c["bytes"]) for c in comps if pred(c))

    named: dict[str, int] = {}
    for c in comps:
        if c["category"] != "kv_cache":
            key = component_key(c)
            named[key] = named.get(key, 0) + int(c["bytes"])
    return {
        "ranks": [int(x) for x in rank["ranks"]],
        "verdict": rank["verdict"],
        "kv_cache_tokens": int(rank["kv_cache_tokens"]),
        "peak_bytes": total(lambda c: True),
        "runtime_bytes": total(lambda c: c.get("where") == "runtime"),
        "weights_bytes": int(rank["weights_bytes"]),
        "scratch_bytes": total(lambda c: c["category"] == "scratch"),
        "activation_bytes": total(lambda c: c["category"] == "activation"),
        "components": named,
    }


def snapshot(estimate_json: Mapping[str, Any], *, inputs: Mapping[str, Any],
             description: str = "") -> dict[str, Any]:
    """One scenario's entry of the baseline, from the estimate's JSON contract."""
    return {
        "description": description,
        "inputs": {k: v for k, v in inputs.items() if k != "description"},
        "verdict": estimate_json["summary"]["verdict"],
        "kv_cache_tokens": int(estimate_json["summary"]["kv_cache_tokens"]),
        "ranks": {rank_key(r): snapshot_rank(r) for r in estimate_json["ranks"]},
    }


def _compact_int_lists(text: str) -> str:
    return _INT_LIST.sub(
        lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)


def dump_baseline(doc: Mapping[str, Any]) -> str:
    """The baseline as stable JSON text: indented, lists of rank numbers on one line."""
    return _compact_int_lists(json.dumps(doc, indent=2, ensure_ascii=False)) + "\n"


def baseline_doc(scenarios: Mapping[str, Mapping[str, Any]], *, tool_version: str,
                 estimate_schema_version: int) -> dict[str, Any]:
    """The whole baseline file (scenarios sorted by name, so rewrites diff cleanly)."""
    return {
        "kind": BASELINE_KIND,
        "schema_version": GATE_SCHEMA_VERSION,
        "estimate_schema_version": estimate_schema_version,
        "generated_by": f"memprof {tool_version} gate --update",
        "scenarios": {name: dict(scenarios[name]) for name in sorted(scenarios)},
    }


# --- validation ----------------------------------------------------------------------------------


def _bad(where: str, what: str) -> BadInput:
    return BadInput(f"baseline {where}: {what}",
                    hint="restore it from version control, or regenerate it with "
                    "memprof gate --update")


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_baseline(doc: object, *, where: str, estimate_schema_version: int
                      ) -> dict[str, dict[str, Any]]:
    """Check a parsed baseline file and return its scenarios; :class:`BadInput` otherwise."""
    if not isinstance(doc, dict) or doc.get("kind") != BASELINE_KIND:
        raise _bad(where, f"is not a memprof gate baseline (no \"kind\": \"{BASELINE_KIND}\")")
    if doc.get("schema_version") != GATE_SCHEMA_VERSION:
        raise BadInput(
            f"baseline {where}: schema_version {doc.get('schema_version')!r}, this memprof "
            f"reads {GATE_SCHEMA_VERSION}",
            hint="regenerate it with memprof gate --update (and review the diff)")
    if doc.get("estimate_schema_version") != estimate_schema_version:
        raise BadInput(
            f"baseline {where}: made from estimate schema_version "
            f"{doc.get('estimate_schema_version')!r}, this memprof writes "
            f"{estimate_schema_version}",
            hint="regenerate it with memprof gate --update (and review the diff)")
    scenarios = doc.get("scenarios")
    if not isinstance(scenarios, dict):
        raise _bad(where, "\"scenarios\" is missing or not an object")
    for name, entry in scenarios.items():
        at = f"scenarios[{name!r}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("ranks"), dict) \
                or not entry["ranks"]:
            raise _bad(where, f"{at} has no \"ranks\" object")
        if not isinstance(entry.get("inputs", {}), dict):
            raise _bad(where, f"{at}.inputs is not an object")
        for key, rank in entry["ranks"].items():
            rat = f"{at}.ranks[{key!r}]"
            if not isinstance(rank, dict):
                raise _bad(where, f"{rat} is not an object")
            ids = rank.get("ranks")
            if not isinstance(ids, list) or not ids or not all(_int(i) for i in ids):
                raise _bad(where, f"{rat}.ranks is not a list of rank numbers")
            if rank.get("verdict") not in VERDICTS:
                raise _bad(where, f"{rat}.verdict is not one of {', '.join(VERDICTS)}")
            for metric in ("kv_cache_tokens", *BYTES_METRICS):
                if not _int(rank.get(metric)):
                    raise _bad(where, f"{rat}.{metric} is missing or not an integer")
            comps = rank.get("components")
            if not isinstance(comps, dict) or not all(_int(v) for v in comps.values()):
                raise _bad(where, f"{rat}.components is not an object of integer bytes")
    return scenarios


# --- comparison ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One changed figure. ``rank`` and ``metric`` are empty for a whole scenario."""

    scenario: str
    rank: str
    metric: str  # a RANK_METRICS name, or a component key "category: name"
    unit: str  # "bytes", "tokens", "verdict" or "" (scenario / rank presence, inputs)
    baseline: int | str | None
    now: int | str | None
    status: str

    @property
    def delta(self) -> int | None:
        if self.unit in ("bytes", "tokens"):
            return int(self.now or 0) - int(self.baseline or 0)
        return None

    @property
    def pct(self) -> float | None:
        """Change in percent of the baseline; ``None`` where the baseline is 0 or not a number."""
        d = self.delta
        if d is None or not self.baseline:
            return None
        return 100.0 * d / int(self.baseline)


@dataclass(frozen=True, slots=True, kw_only=True)
class GateResult:
    """The findings of one gate run and the scenarios compared, new and removed."""

    findings: tuple[Finding, ...]
    tolerance_pct: float
    compared: tuple[str, ...]  # scenarios in both the baseline and the current run
    new: tuple[str, ...]
    removed: tuple[str, ...]
    floor_bytes: int = 0

    @property
    def regressions(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status == REGRESSION)

    @property
    def improvements(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status == IMPROVEMENT)

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    @property
    def regressed_scenarios(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.scenario for f in self.regressions))


GATE_RESULT_SCHEMA_VERSION = 1
ORDER = (REGRESSION, EDITED, REMOVED, NEW, IMPROVEMENT, WITHIN)  # by importance


def finding_dict(f: Finding) -> dict[str, Any]:
    return {"scenario": f.scenario, "rank": f.rank, "metric": f.metric, "unit": f.unit,
            "baseline": f.baseline, "now": f.now, "delta": f.delta,
            "pct": None if f.pct is None else round(f.pct, 4), "status": f.status}


def gate_result_dict(result: GateResult) -> dict[str, Any]:
    """A gate run as a JSON-able document (``schema_version`` 1; a result, not the baseline):
    whether it regressed, the tolerance, the scenarios compared, new and removed, and every
    finding in the order the table shows them (``ORDER``)."""
    return {
        "schema_version": GATE_RESULT_SCHEMA_VERSION,
        "regressed": result.regressed,
        "tolerance_pct": result.tolerance_pct,
        "floor_bytes": result.floor_bytes,
        "compared": list(result.compared),
        "new": list(result.new),
        "removed": list(result.removed),
        "regressed_scenarios": list(result.regressed_scenarios),
        "findings": [finding_dict(f) for f in ordered_findings(result)],
    }


def ordered_findings(result: GateResult) -> list[Finding]:
    """The findings by importance: regressions, then scenario/rank/input changes, improvements
    and changes within the tolerance (stable within each)."""
    return sorted(result.findings, key=lambda f: ORDER.index(f.status))


def _status_growth_bad(base: int, now: int, tol: float, floor: int = 0) -> str | None:
    """Status of a figure for which growth is bad (bytes); None when unchanged. A move counts
    only when it exceeds both ``tol`` of the baseline and the absolute ``floor`` (bytes), so a
    component of a few MiB does not flap."""
    delta = now - base
    if delta == 0:
        return None
    if delta > 0:
        return REGRESSION if delta > tol * base and delta > floor else WITHIN
    return IMPROVEMENT if -delta > tol * base and -delta > floor else WITHIN


def _kv_status(base: int, now: int, tol: float) -> str | None:
    delta = now - base
    if delta == 0:
        return None
    if delta < 0:
        return REGRESSION if -delta > tol * base else WITHIN
    return IMPROVEMENT if delta > tol * base else WITHIN


def _verdict_status(base: str, now: str) -> str | None:
    b, n = VERDICTS.index(base), VERDICTS.index(now)
    if b == n:
        return None
    return REGRESSION if n > b else IMPROVEMENT


def compare_rank(scenario: str, label: str, base: Mapping[str, Any], now: Mapping[str, Any],
                 tol: float, floor: int = 0) -> list[Finding]:
    """Findings of one rank (``tol`` as a fraction, 0.01 = 1 %)."""
    out: list[Finding] = []

    def add(metric: str, unit: str, b: int | str | None, n: int | str | None,
            status: str | None) -> None:
        if status is not None:
            out.append(Finding(scenario=scenario, rank=label, metric=metric, unit=unit,
                               baseline=b, now=n, status=status))

    add("verdict", "verdict", base["verdict"], now["verdict"],
        _verdict_status(base["verdict"], now["verdict"]))
    add("kv_cache_tokens", "tokens", base["kv_cache_tokens"], now["kv_cache_tokens"],
        _kv_status(base["kv_cache_tokens"], now["kv_cache_tokens"], tol))
    for metric in BYTES_METRICS:
        add(metric, "bytes", base[metric], now[metric],
            _status_growth_bad(base[metric], now[metric], tol, floor))
    bc: Mapping[str, int] = base["components"]
    nc: Mapping[str, int] = now["components"]
    for key in [*nc, *(k for k in bc if k not in nc)]:
        b, n = bc.get(key), nc.get(key)
        add(key, "bytes", b, n, _status_growth_bad(b or 0, n or 0, tol, floor))
    return out


def _owners(ranks: Mapping[str, Mapping[str, Any]]) -> dict[int, str]:
    return {int(g): key for key, r in ranks.items() for g in r["ranks"]}


def _ranges(ids: Iterable[int]) -> str:
    xs = sorted(ids)
    parts: list[str] = []
    start = prev = xs[0]
    for x in [*xs[1:], None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ",".join(parts)


def compare_scenario(name: str, base: Mapping[str, Any], now: Mapping[str, Any],
                     tol: float, floor: int = 0) -> list[Finding]:
    out: list[Finding] = []
    b_in: Mapping[str, Any] = base.get("inputs", {})
    n_in: Mapping[str, Any] = now.get("inputs", {})
    if b_in != n_in:
        keys = [k for k in [*n_in, *(k for k in b_in if k not in n_in)]
                if b_in.get(k, _UNSET) != n_in.get(k, _UNSET)]
        out.append(Finding(scenario=name, rank="", metric="inputs", unit="",
                           baseline=_inputs_text(b_in, keys), now=_inputs_text(n_in, keys),
                           status=EDITED))
    b_ranks: Mapping[str, Mapping[str, Any]] = base["ranks"]
    n_ranks: Mapping[str, Mapping[str, Any]] = now["ranks"]
    b_own, n_own = _owners(b_ranks), _owners(n_ranks)
    pairs: dict[tuple[str, str], None] = {}
    for g in sorted(n_own):
        if g in b_own:
            pairs[(b_own[g], n_own[g])] = None
    for bkey, nkey in pairs:
        label = nkey if bkey == nkey else f"{nkey} (baseline {bkey})"
        out += compare_rank(name, label, b_ranks[bkey], n_ranks[nkey], tol, floor)
    only_now = sorted(set(n_own) - set(b_own))
    only_base = sorted(set(b_own) - set(n_own))
    if only_now:
        out.append(Finding(scenario=name, rank=f"ranks {_ranges(only_now)}", metric="rank",
                           unit="", baseline=None, now=len(only_now), status=NEW))
    if only_base:
        out.append(Finding(scenario=name, rank=f"ranks {_ranges(only_base)}", metric="rank",
                           unit="", baseline=len(only_base), now=None, status=REMOVED))
    return out


_UNSET = object()


def _inputs_text(inputs: Mapping[str, Any], keys: list[str]) -> str:
    """The changed keys only: ``scratch=per-layer``, ``scratch=—`` where unset."""
    return " ".join(f"{k}={inputs.get(k, '—')}" for k in keys)


def compare(baseline: Mapping[str, Mapping[str, Any]], current: Mapping[str, Mapping[str, Any]],
            tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
            floor_bytes: int = DEFAULT_FLOOR_BYTES) -> GateResult:
    """Compare the baseline's scenarios with the current ones (both: name -> snapshot).

    A bytes figure regresses when it grows by more than ``tolerance_pct`` % of its baseline
    *and* by more than ``floor_bytes``."""
    if not 0.0 <= tolerance_pct < 100.0:
        raise BadInput(f"--tolerance must be a percentage in [0, 100), got {tolerance_pct}",
                       hint="e.g. --tolerance 1 (one percent)")
    tol = tolerance_pct / 100.0
    findings: list[Finding] = []
    compared = tuple(n for n in sorted(current) if n in baseline)
    new = tuple(n for n in sorted(current) if n not in baseline)
    removed = tuple(n for n in sorted(baseline) if n not in current)
    for name in sorted({*current, *baseline}):
        if name in new:
            findings.append(Finding(scenario=name, rank="", metric="scenario", unit="",
                                    baseline=None, now=current[name].get("verdict"),
                                    status=NEW))
        elif name in removed:
            findings.append(Finding(scenario=name, rank="", metric="scenario", unit="",
                                    baseline=baseline[name].get("verdict"), now=None,
                                    status=REMOVED))
        else:
            findings += compare_scenario(name, baseline[name], current[name], tol, floor_bytes)
    return GateResult(findings=tuple(findings), tolerance_pct=tolerance_pct, compared=compared,
                      new=new, removed=removed, floor_bytes=floor_bytes)
