"""Renderers of an allocator replay: a summary table, and JSON with the state after every op."""

from __future__ import annotations

import json

from memprof.alloc.replay import ReplayResult
from memprof.base.units import fmt_bytes

REPLAY_SCHEMA_VERSION = 1


def render_json(r: ReplayResult) -> str:
    return json.dumps({
        "schema_version": REPLAY_SCHEMA_VERSION,
        "ops": r.ops,
        "states_columns": ["allocated_bytes", "reserved_bytes", "inactive_split_bytes",
                           "segments"],
        "states": [list(s) for s in r.states],
        "summary": {"allocated_peak_bytes": r.allocated_peak,
                    "reserved_peak_bytes": r.reserved_peak, "allocated_bytes": r.allocated,
                    "reserved_bytes": r.reserved, "fragmentation_bytes": r.fragmentation,
                    "inactive_split_bytes": r.inactive_split, "segments": r.segments,
                    "largest_free_block_bytes": r.largest_free_block,
                    "num_alloc_retries": r.num_alloc_retries, "num_ooms": r.num_ooms,
                    "oom_at_op": r.oom_at},
    }) + "\n"


def render_table(r: ReplayResult) -> str:
    lines = [
        f"memprof alloc replay: {r.ops:,} ops" + (f", out of memory at op {r.oom_at}"
                                                   if r.oom_at is not None else ""),
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
