"""Renderers: every reporter turns one report object into text. ``REPORTERS`` maps a format to
its reporter (``module:function``), loaded when that format is asked for, so ``--format json``
never imports rich.

An estimate reporter is ``render(report: EstimateReport, width: int | None) -> str``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Literal, get_args

Format = Literal["table", "json", "markdown"]
FORMATS: tuple[str, ...] = get_args(Format)

REPORTERS: dict[str, str] = {
    "table": "memprof.report.table:render_table",
    "json": "memprof.report.json:render_json",
    "markdown": "memprof.report.markdown:render_markdown",
}


def reporter(fmt: str) -> Callable[..., str]:
    """The reporter of ``fmt`` (a key of ``REPORTERS``)."""
    module, _, name = REPORTERS[fmt].partition(":")
    fn: Callable[..., str] = getattr(importlib.import_module(module), name)
    return fn
