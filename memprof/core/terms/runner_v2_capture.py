"""Model Runner V2's capture after the KV allocation (vLLM 0.29.0 on): the "Graph capturing
finished ..., took X GiB" figure it logs, and the pool line's "(actual)", given what the capture
while profiling left behind.

From 0.29.0 V2 captures its graphs twice in one process (read in the 0.29.0-0.33.0 wheels;
``runner_v2_graphs``): while profiling, every PIECEWISE size and the two largest FULL sizes
(``FULL_GRAPH_PROFILING_SAMPLES``), into a throwaway pool that ``_teardown_profiling_state``
destroys (graphs dropped, ``gc.collect``, ``empty_cache``) before the KV cache is allocated;
then, after it, every size (v1/worker/gpu/model_runner.py ``capture_model``: ``empty_cache``, a
free-memory read, the capture, a second read).

The CUDA driver does not give the device memory of destroyed graph executables back to
``cudaMemGetInfo``'s free figure; it keeps it in the process and builds later graphs in it.
Measured on one H100 (driver 580.159.04, torch 2.11.0+cu130, CUDA 13.0;
reports/gpu/graph-reuse/graph-reuse-h100.json), a decoder's pieces captured at V2's sizes, the
graphs and their pool destroyed, a 60 GiB tensor allocated, and the sizes captured again:
destroying the graphs raised the free memory by the pool's reserved bytes alone (0 B of driver
memory), and the second capture's driver memory was the same capture's in a fresh process less
what the first left, to the MiB (48 MiB = 346 − 298 for a Qwen2.5-1.5B-shaped stack, 66 MiB =
426 − 360 for a Qwen3-4B-shaped one); a second capture no larger than the first took none. The
KV allocation between, and destroying the graphs one by one instead of together, changed none
of it. The pool's tensors and the new capture stream's cuBLAS workspace are not reused (the
second capture reserved what the first did).

So the capture after the KV allocation takes, of driver memory, only what its graphs need
beyond the profiling capture's: the FULL graphs past the two it profiled, at their driver
memory each (``cudagraph.graph_driver_bytes``); the rest of the window (its pool tensors, its
stream's workspace, the attention backend's capture buffers) is as for a first capture
(``graph_window.logged_graph_of_context``). The process still holds the whole window at run
time (what the profiling capture left plus this), so V2's estimate and memprof's prediction of
the pool at run time are the window's (``runner_v2_graphs``). [approximation: the reuse is
measured on H100 under driver 580 and applied unmeasured to other cards and drivers, said in
the part's text.]
"""

from __future__ import annotations

from memprof.core.components import TermContext
from memprof.core.terms.cudagraph import cudagraph_model, graph_driver_bytes
from memprof.core.terms.graph_window import COST_MEASURED_ARCH, LoggedGraph, logged_graph_of_context
from memprof.core.terms.lora import lora_capture_cases
from memprof.core.terms.runner_v2_graphs import FULL_GRAPH_PROFILING_SAMPLES
from memprof.core.terms.runner_v2_profile import v2_estimates_graphs

REUSE_MEASURED = "reports/gpu/graph-reuse/graph-reuse-h100.json"
EXECUTABLES = "graph executables"


def full_graphs_beyond_profiling(ctx: TermContext) -> int:
    """The FULL graphs the capture after the KV allocation makes beyond the profiling capture's
    (its FULL descriptors, sizes × LoRA cases, less ``FULL_GRAPH_PROFILING_SAMPLES``); 0 where
    it captures no FULL graph or no more than the samples."""
    g = cudagraph_model(ctx)
    with_lora, without = lora_capture_cases(ctx)
    n_full = (with_lora + without) * len(g.modes.get("FULL", ()))
    return max(0, n_full - FULL_GRAPH_PROFILING_SAMPLES)


def v2_capture_after_kv(ctx: TermContext) -> LoggedGraph | None:
    """The logged figure of V2's capture after the KV allocation: the window as the process's
    first, with its graph executables' driver memory cut to what the FULL graphs beyond the
    profiling capture's need (the module docstring); ``None`` where V2 does not capture while
    profiling (``runner_v2_profile.v2_estimates_graphs``) or nothing is captured."""
    if not v2_estimates_graphs(ctx):
        return None
    window = logged_graph_of_context(ctx)
    if window is None:
        return None
    extra = full_graphs_beyond_profiling(ctx)
    where = (f"{REUSE_MEASURED}: H100, driver 580; applied unmeasured to {ctx.gpu.name}"
             if ctx.gpu.arch != COST_MEASURED_ARCH else REUSE_MEASURED)
    parts = []
    for name, b, what in window.parts:
        if name == EXECUTABLES:
            new = min(b, graph_driver_bytes(ctx, "FULL", extra))
            what = (f"driver memory of the {extra} FULL graphs beyond the "
                    f"{FULL_GRAPH_PROFILING_SAMPLES} captured while profiling; the other "
                    f"{b - new} B of the window's "
                    f"executables ({what}) are built in the memory the destroyed profiling "
                    f"graphs left to the driver ({where})")
            b = new
        parts.append((name, b, what))
    return LoggedGraph(parts=tuple(parts))
