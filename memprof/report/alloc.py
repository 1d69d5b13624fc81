"""``ReplayResult`` (``memprof alloc replay``) as table, JSON and Markdown.

Reporters of an allocator replay (``memprof.alloc.replay.ReplayResult``): a summary table,
JSON with the state after every op (``memprof.alloc.contract``, serialised) and Markdown (the
summary's figures)."""

from __future__ import annotations

import json

from memprof.alloc.contract import REPLAY_SCHEMA_VERSION, replay_dict
from memprof.alloc.replay import ReplayResult
from memprof.base.units import fmt_bytes

__all__ = ["REPLAY_SCHEMA_VERSION", "render_json", "render_markdown", "render_table"]


def render_json(r: ReplayResult) -> str:
    return json.dumps(replay_dict(r)) + "\n"


def _title(r: ReplayResult) -> str:
    return f"memprof alloc replay: {r.ops:,} ops" + (
        f", out of memory at op {r.oom_at}" if r.oom_at is not None else "")


def render_table(r: ReplayResult) -> str:
    lines = [
        _title(r),
        f"  peak allocated {fmt_bytes(r.allocated_peak)}, peak reserved "
        f"{fmt_bytes(r.reserved_peak)}",
        f"  final: allocated {fmt_bytes(r.allocated)}, reserved {fmt_bytes(r.reserved)}, "
        f"{r.segments} segment(s)",
        f"  fragmentation (reserved − allocated): {fmt_bytes(r.fragmentation)}, of which "
        f"empty_cache cannot release (inactive split): {fmt_bytes(r.inactive_split)}",
        f"  largest free block: {fmt_bytes(r.largest_free_block)}; alloc retries "
        f"{r.num_alloc_retries}, OOMs {r.num_ooms}",
    ]
    return "\n".join(lines) + "\n"


def render_markdown(r: ReplayResult) -> str:
    """The replay's summary as GitHub Markdown: the table's figures, one row each."""
    rows = [("peak allocated", fmt_bytes(r.allocated_peak)),
            ("peak reserved", fmt_bytes(r.reserved_peak)),
            ("final allocated", fmt_bytes(r.allocated)),
            ("final reserved", fmt_bytes(r.reserved)),
            ("segments", str(r.segments)),
            ("fragmentation (reserved − allocated)", fmt_bytes(r.fragmentation)),
            ("of which empty_cache cannot release (inactive split)",
             fmt_bytes(r.inactive_split)),
            ("largest free block", fmt_bytes(r.largest_free_block)),
            ("alloc retries", str(r.num_alloc_retries)),
            ("OOMs", str(r.num_ooms))]
    out = [f"### {_title(r)}", "", "| figure | value |", "|---|---:|"]
    out += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(out) + "\n"
