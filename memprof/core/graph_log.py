"""The "Graph capturing finished in N secs, took X GiB" figure of a rank of an estimate: what the
line measures, release by release, and the rules that place each part are
``memprof.core.terms.graph_window`` (a term-level module, so that Model Runner V2's own graph
estimate, ``memprof.core.terms.runner_v2_graphs``, which charges the same window, can read it);
this module gives the figure for a rank of an :class:`~memprof.core.estimate.Estimate` (for
Model Runner V2's capture after the KV allocation, 0.29.0 on:
``memprof.core.terms.runner_v2_capture``; for the V1 runner's capture after its CUDA-graph
memory profiling, 0.18.0 on: ``memprof.core.terms.runner_v1_capture``)."""

from __future__ import annotations

from memprof.core.estimate import Estimate, RankEstimate, rank_context
from memprof.core.terms.graph_window import (
    CAPTURE_STREAM,
    COST_MEASURED_ARCH,
    STREAM_POOL_IN_WINDOW,
    V2_FULL_CAPTURE_STREAM,
    WARMUP_WORKSPACE,
    LoggedGraph,
    logged_graph_of_context,
    v2_full_apart,
)
from memprof.core.terms.graph_window import (
    GRAPH_LOG_RULES as WINDOW_RULES,
)
from memprof.core.terms.runner_v1_capture import V1_PROFILING_CAPTURE, v1_capture_after_profiling
from memprof.core.terms.runner_v2_capture import v2_capture_after_kv

__all__ = ["CAPTURE_STREAM", "COST_MEASURED_ARCH", "GRAPH_LOG_RULES", "STREAM_POOL_IN_WINDOW",
           "V2_FULL_CAPTURE_STREAM", "WARMUP_WORKSPACE", "LoggedGraph", "logged_graph",
           "logged_graph_of_context", "v2_full_apart"]

# the window's rules and which releases destroy graphs before it (``runner_v1_capture``)
GRAPH_LOG_RULES = (*WINDOW_RULES, V1_PROFILING_CAPTURE)


def logged_graph(e: Estimate, rank: RankEstimate) -> LoggedGraph | None:
    """The figure logged for a rank of an estimate: ``logged_graph_of_context``, or, where Model
    Runner V2 captured the graphs once while profiling (0.29.0 on), its capture after the KV
    allocation, built in what the profiling capture left (``runner_v2_capture``), or where the V1
    runner captured and destroyed graphs while profiling (0.18.0 on), its logged capture, built
    in what those left (``runner_v1_capture``)."""
    ctx = rank_context(e, rank)
    return (v2_capture_after_kv(ctx) or v1_capture_after_profiling(ctx)
            or logged_graph_of_context(ctx))
