"""The JSON contract (``schema_version`` 1) of an allocator replay, built here beside
``ReplayResult`` so the reporters only serialise it: the state after every op (columns named
once) and a summary. Sizes are integer bytes."""

from __future__ import annotations

from typing import Any

from memprof.alloc.replay import ReplayResult

REPLAY_SCHEMA_VERSION = 1
STATES_COLUMNS = ("allocated_bytes", "reserved_bytes", "inactive_split_bytes", "segments")


def replay_dict(r: ReplayResult) -> dict[str, Any]:
    """The whole JSON document of ``memprof alloc replay --format json``."""
    return {
        "schema_version": REPLAY_SCHEMA_VERSION,
        "ops": r.ops,
        "states_columns": list(STATES_COLUMNS),
        "states": [list(s) for s in r.states],
        "summary": {"allocated_peak_bytes": r.allocated_peak,
                    "reserved_peak_bytes": r.reserved_peak, "allocated_bytes": r.allocated,
                    "reserved_bytes": r.reserved, "fragmentation_bytes": r.fragmentation,
                    "inactive_split_bytes": r.inactive_split, "segments": r.segments,
                    "largest_free_block_bytes": r.largest_free_block,
                    "num_alloc_retries": r.num_alloc_retries, "num_ooms": r.num_ooms,
                    "oom_at_op": r.oom_at},
    }
