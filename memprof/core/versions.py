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
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from memprof.base.errors import BadInput
from memprof.core.releases import DISPLAY_NAMES, RELEASES, SNAPSHOT_ENGINES, VLLM_RELEASES

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


def newest(engine: str = "vllm") -> str:
    """The newest release memprof models for ``engine`` (the default ``--engine-version``)."""
    return RELEASES.get(engine, VLLM_RELEASES)[-1]


def _modelled(engine: str) -> str:
    rel = RELEASES.get(engine, VLLM_RELEASES)
    if len(rel) == 1:
        return rel[0]
    return f"{rel[0]} to {rel[-1]} ({', '.join(rel)})"


def resolve_version(text: str | None, engine: str = "vllm") -> str:
    """The release a ``--engine-version`` names (``None``: the newest modelled); a malformed or
    unmodelled version is :class:`BadInput` (exit 2) naming the versions memprof models."""
    if text is None:
        return newest(engine)
    shown = repr(str(text)[:40])
    rel = RELEASES.get(engine, VLLM_RELEASES)
    cleaned = str(text).strip()
    if cleaned in rel:
        return cleaned
    name = DISPLAY_NAMES.get(engine, engine)
    if engine in SNAPSHOT_ENGINES:
        raise BadInput(f"--engine-version {shown}: memprof models {name} at source snapshots",
                       hint=f"drop --engine-version (the newest, {rel[-1]}), or pass one of "
                       f"{', '.join(rel)}")
    try:
        key = version_key(cleaned)
    except ValueError:
        raise BadInput(f"--engine-version {shown} is not a release number",
                       hint=f"write it as vLLM does, e.g. {rel[-1]}; memprof models {name} "
                       f"{_modelled(engine)}") from None
    for r in rel:  # "v0.8.0" / "0.8" name a modelled release
        if version_key(r) == key:
            return r
    where = ("older than" if key < version_key(rel[0]) else
             "newer than" if key > version_key(rel[-1]) else "not a release among")
    raise BadInput(f"--engine-version {shown} is {where} the {name} releases memprof models",
                   hint=f"memprof models {name} {_modelled(engine)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One version-dependent rule: where it holds, who changed it, what the term reads.

    ``since`` / ``until``: the first release where it holds / no longer holds (``None``:
    unbounded); ``introduced_by`` / ``removed_by``: the pull requests (or where the rule was
    read when no PR is known); ``source``: file, function and release it was read in;
    ``applies_to``: which deployments it can change (``all``, ``pp``, ``deepseek``,
    ``sliding``, ``mxfp4``, ``nccl``, an attention kind's or a family's name: the tags of
    ``memprof.core.version_diff.tags``); ``value``: the data the term reads while it holds."""

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

    def holds(self, version: str, engine: str = "vllm") -> bool:
        if engine != self.engine:
            return False
        if engine in SNAPSHOT_ENGINES:  # ordered by their place in RELEASES
            rel = RELEASES.get(engine, ())
            if version not in rel:  # an unbounded row holds at any snapshot
                return self.since is None and self.until is None
            at = rel.index(version)
            if self.since is not None and at < rel.index(self.since):
                return False
            return self.until is None or at < rel.index(self.until)
        try:
            key = version_key(version)
        except ValueError:  # another engine's snapshot name: no vLLM row holds
            return False
        if self.since is not None and key < version_key(self.since):
            return False
        return self.until is None or key < version_key(self.until)

    @property
    def span(self) -> str:
        lo = self.since or "…"
        hi = f"before {self.until}" if self.until else "today"
        return f"{lo} – {hi}" if self.since else f"up to {hi}"


def rule_in_force(rules: Iterable[Rule], version: str | None,
                  engine: str = "vllm") -> Rule | None:
    """The row of ``rules`` (rows of one rule over its ranges) that holds at ``version``
    (``None``: the newest release modelled)."""
    version = version or newest(engine)
    for r in rules:
        if r.holds(version, engine):
            return r
    return None


def value_at(rules: Iterable[Rule], version: str | None, default: object = None,
             engine: str = "vllm") -> object:
    """The ``value`` of the row in force at ``version`` (``default`` when none holds)."""
    r = rule_in_force(rules, version, engine)
    return default if r is None else r.value
