"""Renderers: the one reporter entry, :func:`render`, turns any result into text in one of the
formats ``table``, ``json`` or ``markdown``. ``REGISTRY`` maps (result kind, format) to the
reporter (``module:function``), imported when that pair is asked for, so ``--format json``
never imports rich; :func:`render` adapts each reporter's own signature.

The width of a table follows one policy (:func:`output_width`): a terminal's own width, else
``$COLUMNS`` when set, else 100.

An estimate reporter is ``render(report: EstimateReport, width: int | None) -> str``.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any, Literal, get_args

Format = Literal["table", "json", "markdown"]
FORMATS: tuple[str, ...] = get_args(Format)
DEFAULT_WIDTH = 100

REPORTERS: dict[str, str] = {
    "table": "memprof.report.table:render_table",
    "json": "memprof.report.json:render_json",
    "markdown": "memprof.report.markdown:render_markdown",
}

# (result kind, format) -> "module:function". The kind is the result's class name unless the
# caller names it (a sweep's or plan's DataFrame "frame", a listing's name "listing"). How each
# is called: _CALLS.
REGISTRY: dict[tuple[str, str], str] = {
    ("EstimateReport", "table"): REPORTERS["table"],
    ("EstimateReport", "json"): REPORTERS["json"],
    ("EstimateReport", "markdown"): REPORTERS["markdown"],
    ("Explanation", "table"): "memprof.report.explain:render_explain_table",
    ("Explanation", "json"): "memprof.report.explain:render_explain_json",
    ("Explanation", "markdown"): "memprof.report.explain:render_markdown",
    ("TraceResult", "table"): "memprof.report.trace:render_table",
    ("TraceResult", "json"): "memprof.report.trace:render_json",
    ("TraceResult", "markdown"): "memprof.report.trace:render_markdown",
    ("ReplayResult", "table"): "memprof.report.alloc:render_table",
    ("ReplayResult", "json"): "memprof.report.alloc:render_json",
    ("ReplayResult", "markdown"): "memprof.report.alloc:render_markdown",
    ("ValidationRun", "table"): "memprof.report.validate:render_table",
    ("ValidationRun", "json"): "memprof.report.validate:render_json",
    ("ValidationRun", "markdown"): "memprof.report.validate:render_markdown",
    ("GateResult", "table"): "memprof.report.console:gate_table",
    ("GateResult", "json"): "memprof.report.gate:render_json",
    ("GateResult", "markdown"): "memprof.report.gate:render_markdown",
    ("frame", "table"): "memprof.report.sweep:render_table",
    ("frame", "markdown"): "memprof.report.sweep:render_markdown",
    ("PlanReport", "table"): "memprof.report.plan:render_table",
    ("PlanReport", "json"): "memprof.report.plan:render_json",
    ("PlanReport", "markdown"): "memprof.report.plan:render_markdown",
    ("VersionDiff", "table"): "memprof.report.versions:render_version_diff",
    ("VersionDiff", "json"): "memprof.report.versions:render_json",
    ("VersionDiff", "markdown"): "memprof.report.versions:render_markdown",
    ("rulebook", "table"): "memprof.report.versions:render_rulebook",
    ("rulebook", "json"): "memprof.report.versions:render_json",
    ("rulebook", "markdown"): "memprof.report.versions:render_markdown",
    ("listing", "table"): "memprof.report.listing:render_table",
    ("listing", "json"): "memprof.report.listing:render_json",
    ("listing", "markdown"): "memprof.report.listing:render_markdown",
    ("devices", "table"): "memprof.report.devices:render_table",
    ("devices", "json"): "memprof.report.devices:render_json",
    ("devices", "markdown"): "memprof.report.devices:render_markdown",
}

# how a reporter is called: result + width + color (W: width positional, C: color keyword;
# "-": without the result), the context keywords it takes positionally after the result (by
# name), in order
_CALLS: dict[str, tuple[str, tuple[str, ...]]] = {
    "memprof.report.table:render_table": ("WC", ()),
    "memprof.report.json:render_json": ("W", ()),
    "memprof.report.markdown:render_markdown": ("W", ()),
    "memprof.report.explain:render_explain_table": ("W", ("about",)),
    "memprof.report.explain:render_explain_json": ("", ("about",)),
    "memprof.report.explain:render_markdown": ("", ("about",)),
    "memprof.report.trace:render_table": ("WC", ()),
    "memprof.report.trace:render_json": ("", ()),
    "memprof.report.trace:render_markdown": ("", ()),
    "memprof.report.alloc:render_table": ("", ()),
    "memprof.report.alloc:render_json": ("", ()),
    "memprof.report.alloc:render_markdown": ("", ()),
    "memprof.report.validate:render_table": ("WC", ()),
    "memprof.report.validate:render_json": ("", ()),
    "memprof.report.validate:render_markdown": ("", ()),
    "memprof.report.console:gate_table": ("WC", ()),
    "memprof.report.gate:render_json": ("", ()),
    "memprof.report.gate:render_markdown": ("", ()),
    "memprof.report.sweep:render_table": ("", ("columns", "title", "width")),
    "memprof.report.sweep:render_markdown": ("", ("columns", "title")),
    "memprof.report.plan:render_table": ("W", ()),
    "memprof.report.plan:render_json": ("", ()),
    "memprof.report.plan:render_markdown": ("", ()),
    "memprof.report.versions:render_version_diff": ("", ()),
    "memprof.report.versions:render_json": ("", ()),
    "memprof.report.versions:render_markdown": ("", ()),
    "memprof.report.versions:render_rulebook": ("-", ()),
    "memprof.report.listing:render_table": ("WC", ()),
    "memprof.report.listing:render_json": ("", ()),
    "memprof.report.listing:render_markdown": ("", ()),
    "memprof.report.devices:render_table": ("WC", ()),
    "memprof.report.devices:render_json": ("", ()),
    "memprof.report.devices:render_markdown": ("", ()),
}


def reporter(fmt: str) -> Callable[..., str]:
    """The estimate reporter of ``fmt`` (a key of ``REPORTERS``)."""
    return _load(REPORTERS[fmt])


def _load(where: str) -> Callable[..., str]:
    module, _, name = where.partition(":")
    fn: Callable[..., str] = getattr(importlib.import_module(module), name)
    return fn


def formats(kind: str) -> tuple[str, ...]:
    """The formats a result kind has a reporter for."""
    return tuple(f for k, f in REGISTRY if k == kind)


def render(result: Any, fmt: str, *, width: int | None = None, color: bool = False,
           kind: str | None = None, **context: Any) -> str:
    """``result`` as text in ``fmt``: the one reporter entry of every command. ``width`` None:
    as wide as the text needs (a terminal); ``context``: what a reporter needs beside the
    result (the log of an explanation, the columns of a sweep, ...)."""
    key = (kind or type(result).__name__, fmt)
    if key not in REGISTRY:
        from memprof.base.errors import BadInput

        raise BadInput(f"no {fmt} rendering of {key[0]}",
                       hint="one of: " + ", ".join(formats(key[0])))
    where = REGISTRY[key]
    how, names = _CALLS[where]
    fn = _load(where)
    args: list[Any] = [] if how.startswith("-") else [result]
    args += [context[n] for n in names if n != "width"]
    if "width" in names or "W" in how:
        args.append(width)
    kwargs = {"color": color} if "C" in how else {}
    return fn(*args, **kwargs)


def output_width(stream: Any = None) -> int | None:
    """The one width policy: None for a terminal (rich takes its width), else ``$COLUMNS``
    when set to a positive number, else ``DEFAULT_WIDTH``."""
    out = sys.stdout if stream is None else stream
    isatty = getattr(out, "isatty", None)
    if callable(isatty) and isatty():
        return None
    text = os.environ.get("COLUMNS", "")
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_WIDTH


def is_terminal(stream: Any = None) -> bool:
    """Whether ``stream`` (stdout) is a terminal: colour on, width the terminal's."""
    out = sys.stdout if stream is None else stream
    isatty = getattr(out, "isatty", None)
    return bool(callable(isatty) and isatty())
