"""``EstimateReport`` (``memprof estimate``) as JSON.

The ``json`` reporter: the contract of ``memprof.core.contract``, serialised. Nothing but the
JSON goes to stdout in JSON mode."""

from __future__ import annotations

import json

from memprof.core.contract import EstimateReport, report_dict


def render_json(report: EstimateReport, width: int | None = None) -> str:
    del width  # JSON has no width
    return json.dumps(report_dict(report), indent=2) + "\n"
