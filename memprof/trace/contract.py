"""The JSON contract of a trace, built here beside ``TraceResult`` so the reporters only
serialise it: the estimate's component names with estimated and traced bytes, the phases, and
the verdict each gives. Sizes are integer bytes.

``schema_version`` 1: one process (one rank traced alone, ``trace_dict``); unchanged.
``schema_version`` 2: every rank under torchrun (``gathered_dict``): version 1's document of rank
0, except that ``ranks`` (in version 1 the global ranks with rank 0's estimate) becomes the list
of every traced rank, each with its own ``rank`` index, coordinates, phases, components and
verdict, and those global ranks move to ``same_as``. The bump is for that change of ``ranks``.
Each traced rank's ``tp_rank``, ``pp_stage`` and ``dp_rank`` follow vLLM's global order (DP
outermost, then PP, TP fastest)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memprof.trace.ranks import GatheredTrace
    from memprof.trace.run import TraceResult

TRACE_SCHEMA_VERSION = 1
GATHERED_SCHEMA_VERSION = 2


def trace_dict(t: TraceResult) -> dict[str, Any]:
    """The whole JSON document of ``memprof trace --format json``."""
    r = t.rank
    return {
        "schema_version": TRACE_SCHEMA_VERSION,
        "model": t.estimate.spec.name,
        "gpu": {"name": t.estimate.gpu.name, "total_bytes": t.estimate.gpu.total_bytes},
        "device": t.device, "device_name": t.device_name, "torch_version": t.torch_version,
        "rank": r.coord.rank, "ranks": list(r.same_as),
        "deployment": {"tensor_parallel_size": t.estimate.deployment.tp,
                       "pipeline_parallel_size": t.estimate.deployment.pp,
                       "data_parallel_size": t.estimate.deployment.dp,
                       "kv_cache_dtype": t.estimate.deployment.kv_cache_dtype,
                       "max_num_seqs": t.estimate.deployment.max_num_seqs,
                       "max_num_batched_tokens": t.estimate.max_num_batched_tokens,
                       "scratch": t.estimate.deployment.scratch,
                       "num_gpu_blocks": r.kv.num_gpu_blocks},
        **_traced(t),
    }


def _traced(t: TraceResult) -> dict[str, Any]:
    """What one rank traced (the part of the document each rank has its own of)."""
    return {
        "components": [{"name": c.name, "category": c.category, "estimated_bytes": c.estimated,
                        "traced_bytes": c.traced, "delta_bytes": c.delta, "how": c.how}
                       for c in t.components],
        "phases": [{"name": p.name, "allocated_bytes": p.allocated,
                    "reserved_bytes": p.reserved, "allocated_peak_bytes": p.allocated_peak,
                    "reserved_peak_bytes": p.reserved_peak, "segments": p.segments,
                    "tracked_bytes": p.tracked, "tracked_peak_bytes": p.tracked_peak,
                    "used_bytes": p.used, "non_torch_bytes": p.non_torch,
                    "seconds": round(p.seconds, 3)} for p in t.phases],
        "graph_sizes": list(t.graph_sizes),
        "verdict": {"estimated": t.verdict_estimated, "traced": t.verdict_traced},
        "notes": list(t.notes),
        "oom": None if t.oom is None else {"phase": t.oom.phase, "component": t.oom.component,
                                            "message": t.oom.message},
    }


def gathered_dict(g: GatheredTrace) -> dict[str, Any]:
    """The whole JSON document of ``torchrun … memprof trace --format json`` (version 2)."""
    first = g.results[0][1]
    doc = trace_dict(first)
    doc["schema_version"] = GATHERED_SCHEMA_VERSION
    doc["rank"] = g.results[0][0]
    doc["same_as"] = doc.pop("ranks")
    doc["world_size"] = len(g.results)
    doc["ranks"] = [{"rank": rank, "tp_rank": rank % t.estimate.deployment.tp,
                     "pp_stage": rank // t.estimate.deployment.tp % t.estimate.deployment.pp,
                     "dp_rank": rank // (t.estimate.deployment.tp * t.estimate.deployment.pp),
                     "device_name": t.device_name,
                     **_traced(t)} for rank, t in g.results]
    return doc
