"""The record a version-dependent rule is written in (``Rule``), and the engine releases it is
checked against: resolving ``--engine-version``, ordering releases, the row in force. The
releases themselves are rows of ``memprof/core/releases.py``, a leaf this module and the engine
modules both read.

A rule that changed between releases is a ``Rule`` row kept beside the term it changes (the MLA
absorption rows in ``weights/mla_absorption.py``, the PP split rows in ``deployment.py``, ...):
the release range where it holds, the pull request that introduced or removed it, and the data
the term reads. Adding a release is adding its name to its engine's row in
``memprof/core/releases.py`` and, where something changed, rows — never an ``if version`` in a
term.

Ranges are half-open: a rule holds for ``since <= version < until`` (``None``: unbounded).

vLLM had two engines from 0.8.0 to 0.10.2: V1 by default and V0 behind ``VLLM_USE_V1=0`` (or
chosen by ``EngineArgs._is_v1_supported_oracle`` for what V1 did not run yet). A deployment that
runs V0 on such a release carries the release as ``"0.8.5+v0"`` (``V0_SUFFIX``); a rule of one
engine's code names it as ``generation`` ("v0" or "v1") and holds only for deployments of that
engine, so one release has a V0 row and a V1 row side by side. Rules without a generation are
code both engines share (model files, the platform, the argument parser) and hold by release.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache

from memprof.base.errors import BadInput
from memprof.core.releases import (
    DISPLAY_NAMES,
    PUBLISHED,
    RELEASES,
    SGLANG_SNAPSHOTS,
    SNAPSHOT_ENGINES,
    VLLM_RELEASES,
)

# the engines' source snapshots (names that are no release)
SNAPSHOT_NAMES = frozenset(SGLANG_SNAPSHOTS)

# A release run under vLLM's V0 engine where V1 was the default (engines/vllm.py V0_ENGINE).
V0_SUFFIX = "+v0"
# The first vLLM release whose default engine is V1 (envs.py VLLM_USE_V1 default "1" from 0.8.0;
# 0.7.3 envs.py default "0").
V1_DEFAULT_SINCE = "0.8.0"

_VERSION = re.compile(r"^v?(\d{1,4})\.(\d{1,4})(?:\.(\d{1,4}))?(?:\.(\d{1,4}))?"
                      r"(?:\.post(\d{1,4}))?$")


@lru_cache(maxsize=1024)  # rules compare the same few release names over and over
def version_key(text: str) -> tuple[int, ...]:
    """``"0.8.5.post1"`` → ``(0, 8, 5, 0, 1)``: a key that orders releases (a post release after
    its base, ``0.9.0.1`` after ``0.9.0``). ``ValueError`` for anything else."""
    m = _VERSION.match(text.strip())
    if m is None:
        raise ValueError(text)
    return tuple(int(g) if g else 0 for g in m.groups())


@lru_cache(maxsize=1024)
def split_generation(version: str) -> tuple[str, str]:
    """``"0.8.5+v0"`` → ``("0.8.5", "v0")``; ``"0.8.5"`` → ``("0.8.5", "v1")``; a release before
    0.8.0 → ``(release, "v0")`` (V0 was the default and the only engine memprof models there).
    A name that is no release number (an SGLang snapshot) → ``(name, "")``."""
    release = version[:-len(V0_SUFFIX)] if version.endswith(V0_SUFFIX) else version
    try:
        key = version_key(release)
    except ValueError:
        return version, ""
    if release != version or key < version_key(V1_DEFAULT_SINCE):
        return release, "v0"
    return release, "v1"


def newest(engine: str = "vllm") -> str:
    """The newest release memprof models for ``engine`` (the default ``--engine-version``)."""
    return RELEASES.get(engine, VLLM_RELEASES)[-1]


def _modelled(engine: str) -> str:
    rel = RELEASES.get(engine, VLLM_RELEASES)
    if len(rel) == 1:
        return rel[0]
    return f"{rel[0]} to {rel[-1]} ({', '.join(rel)})"


def resolve_version(text: str | None, engine: str = "vllm", *,
                    flag: str = "--engine-version") -> str:
    """The release a ``--engine-version`` names (``None``: the newest modelled); a malformed or
    unmodelled version is :class:`BadInput` (exit 2) naming the versions memprof models and the
    ``flag`` that gave it (``memprof versions --from``)."""
    if text is None:
        return newest(engine)
    shown = repr(str(text)[:40])
    rel = RELEASES.get(engine, VLLM_RELEASES)
    cleaned = str(text).strip()
    if cleaned in rel:
        return cleaned
    if cleaned[:1] in ("v", "V") and cleaned[1:] in rel:  # an image tag's v0.8.5.post1
        return cleaned[1:]
    if engine not in SNAPSHOT_ENGINES and cleaned.lower().endswith(V0_SUFFIX):
        # a resolved V0 deployment (engine_defaults.resolve): the release under V0 (+V0 too:
        # PEP 440 local labels are case-insensitive)
        base = resolve_version(cleaned[:-len(V0_SUFFIX)], engine, flag=flag)
        return base + V0_SUFFIX if version_key(base) >= version_key(V1_DEFAULT_SINCE) else base
    name = DISPLAY_NAMES.get(engine, engine)
    if engine in SNAPSHOT_ENGINES:
        # its version numbers are placed among its numbered releases (its post, dev, rc and local
        # builds by release_names.map_build, before this); what reaches here is refused
        rel = tuple(r for r, _ in PUBLISHED.get(engine, ())) or rel
    # PEP 440 ignores a leading v or V; a build of a release (0.6.0.dev1, 0.7.4rc1+cu124) that
    # release_names.map_build could not map is placed by its release
    built = re.fullmatch(r"[vV]?(\d{1,4}(?:\.\d{1,4}){1,3})([.+_-]?[A-Za-z][\w.+-]*)?", cleaned)
    try:
        key = version_key(built.group(1) if built else cleaned)
    except ValueError:
        raise BadInput(f"{flag} {shown} is not a release number" + (
            " or a source snapshot memprof models" if engine in SNAPSHOT_ENGINES else ""),
                       hint=f"write it as {name} does, e.g. {rel[-1]}; memprof models {name} "
                       f"{_modelled(engine)}") from None
    for r in rel:  # "v0.8.0" / "V0.8" name a modelled release; a build of one is not it
        if version_key(r) == key and not (built and built.group(2)):
            return r
    # a development or pre-release build of the oldest release comes before it (PEP 440)
    before = bool(built and re.match(r"[.\-_]?(dev|rc|a|b|c|alpha|beta|pre)\d*(?![A-Za-z])",
                                     built.group(2) or "", re.I))
    where = ("older than" if key < version_key(rel[0]) or (
        before and key == version_key(rel[0])) else
             "newer than" if key > version_key(rel[-1]) else "not a release among")
    other = next((e for e, names in RELEASES.items()
                  if e != engine and cleaned.lstrip("vV") in names), None)
    def a(word: str) -> str:  # "an SGLang", "a vLLM": by the letter's sound
        return ("an " if word[:1] in "AEFHILMNORSX" else "a ") + word

    mixed = (f"{cleaned.lstrip('vV')} is {a(DISPLAY_NAMES.get(other, str(other)))} release, not "
             f"{a(name)} one; " if other is not None else "")
    raise BadInput(f"{flag} {shown} is {where} the {name} releases memprof models",
                   hint=f"{mixed}memprof models {name} {_modelled(engine)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One version-dependent rule: where it holds, who changed it, what the term reads.

    ``since`` / ``until``: the first release where it holds / no longer holds (``None``:
    unbounded); ``introduced_by`` / ``removed_by``: the pull requests (or where the rule was
    read when no PR is known); ``source``: file, function and release it was read in;
    ``applies_to``: which deployments it can change (``all``, ``pp``, ``deepseek``,
    ``sliding``, ``chunked``, ``mxfp4``, ``fp8_block``, ``nccl``, ``state``, ``mamba2``,
    ``multimodal``, an attention kind's or a family's name: the tags of
    ``memprof.core.version_diff.tags``);
    ``value``: the data the term reads while it holds; ``generation``: "v0" / "v1" for a rule of
    one vLLM engine's code (it holds only for deployments running that engine:
    ``split_generation``), "" for code both share."""

    name: str
    changes: str  # the term it changes, as the report names it
    since: str | None
    until: str | None
    introduced_by: str
    removed_by: str = ""
    source: str
    applies_to: str = "all"
    value: object = True
    engine: str = "vllm"
    generation: str = ""

    def holds(self, version: str, engine: str = "vllm") -> bool:
        return _holds(self.engine, self.since, self.until, self.generation, version, engine)

    @property
    def span(self) -> str:
        lo = self.since or "…"
        hi = f"before {self.until}" if self.until else "today"
        span = f"{lo} – {hi}" if self.since else f"up to {hi}"
        return f"{span} ({self.generation.upper()})" if self.generation else span



# Whether a rule's range holds depends only on these strings (RELEASES is fixed at import), and
# an estimate asks the same few hundred rules at one release over and over: cached.
@lru_cache(maxsize=16384)
def _holds(rule_engine: str, since: str | None, until: str | None, rule_generation: str,
           version: str, engine: str) -> bool:
    if engine != rule_engine:
        return False
    if engine in SNAPSHOT_ENGINES:  # ordered by their place in RELEASES
        rel = RELEASES.get(engine, ())
        if version not in rel:  # an unbounded row holds at any snapshot
            return since is None and until is None
        at = rel.index(version)
        if since is not None and at < rel.index(since):
            return False
        return until is None or at < rel.index(until)
    release, generation = split_generation(version)
    if not generation:  # another engine's snapshot name: no vLLM row holds
        return False
    if rule_generation and rule_generation != generation:
        return False
    key = version_key(release)
    if since is not None and key < version_key(since):
        return False
    return until is None or key < version_key(until)


def around_snapshots(row: Rule, at_snapshot: Rule | None = None) -> tuple[Rule, ...]:
    """``row`` cut where a source snapshot of its engine stands inside its range: the pieces hold
    at the releases around each snapshot, and ``at_snapshot`` (its ``since`` / ``until`` set to
    the snapshot alone) holds at the snapshot; ``None``: no row holds there. For a row read in
    the releases' wheels whose source was not read at a snapshot that the date order places in
    its range (``memprof/core/releases.py``)."""
    rel = RELEASES.get(row.engine, ())
    if row.engine not in SNAPSHOT_ENGINES:
        return (row,)
    lo = rel.index(row.since) if row.since is not None else 0
    hi = rel.index(row.until) if row.until is not None else len(rel)
    out: list[Rule] = []
    since = row.since
    for at in range(lo, hi):
        name = rel[at]
        if name not in SNAPSHOT_NAMES:
            continue
        after = rel[at + 1] if at + 1 < len(rel) else None
        if since != name:
            out.append(replace(row, since=since, until=name, removed_by=f"its source is not "
                               f"read at the source snapshot {name}, which the dates place here"))
        if at_snapshot is not None:
            out.append(replace(at_snapshot, since=name, until=after))
        since = after
    if not out:
        return (row,)
    if since is not None and since != row.until:
        out.append(replace(row, since=since))
    return tuple(out)


def rule_in_force(rules: Iterable[Rule], version: str | None,
                  engine: str = "vllm") -> Rule | None:
    """The row of ``rules`` (rows of one rule over its ranges) that holds at ``version``
    (``None``: the newest release modelled)."""
    version = version or newest(engine)
    return _first_holding(rules, version, engine)


def _first_holding(rules: Iterable[Rule], version: str, engine: str) -> Rule | None:
    """The first row of ``rules`` that holds at ``version`` for ``engine`` (None: none)."""
    return _scan(rules, version, engine)


def _scan(rules: Iterable[Rule], version: str, engine: str) -> Rule | None:
    for r in rules:
        if r.holds(version, engine):
            return r
    return None


def value_at(rules: Iterable[Rule], version: str | None, default: object = None,
             engine: str = "vllm") -> object:
    """The ``value`` of the row in force at ``version`` (``default`` when none holds)."""
    r = rule_in_force(rules, version, engine)
    return default if r is None else r.value
