"""Model Runner V2's own CUDA-graph estimate (vLLM 0.29.0 on), which the budget line subtracts in
place of the V1 runner's.

Read in the 0.29.0, 0.30.0, 0.31.0, 0.32.0 and 0.33.0 wheels (``vllm_runner.V2_GRAPH_ESTIMATE``;
0.28.0's ``GPUModelRunner.profile_cudagraph_memory`` still returns 0).
``Worker.determine_available_memory`` (v1/worker/gpu_worker.py) calls the runner's
``profile_cudagraph_memory`` after the profile window's last snapshot and subtracts what it
returns from the requested memory (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, default 1), as it
does V1's. V2's (v1/worker/gpu/cudagraph_utils.py ``profile_cudagraph_memory``) measures instead
of extrapolating from samples:

1. ``_init_minimal_kv_cache_for_profiling``: a KV cache of min(max_num_seqs, largest capture
   size) blocks, the attention backends, block tables and the ``ModelCudaGraphManager``, all
   before the capture's first read, so none of it is in the figure;
2. ``capture_model`` (``profile_only=True`` from 0.30.0) with the global graph pool pointed at
   a throwaway one: ``empty_cache``, ``get_memory_info`` before, the whole capture
   (``CudaGraphManager.capture``: every PIECEWISE size, then the FULL decode sizes, each after
   one eager warm-up on ``graph_capture``'s stream), ``get_memory_info`` after: the same
   free-memory delta as the "Graph capturing finished … took X GiB" line, which it logs too
   ("measured"), with one difference: ``_max_full_descs_to_capture`` =
   ``_FULL_GRAPH_PROFILING_SAMPLES`` = 2, so only the two largest FULL sizes are captured, and
   each FULL capture's own free-memory delta (``torch.cuda.graph`` alone, not its warm-up) is
   kept as a sample;
   The builders ``_init_minimal_kv_cache_for_profiling`` makes hold no FlashInfer workspace
   until their first metadata build, inside ``capture_model``'s delta: where the attention runs
   FlashInfer, "measured" holds it (``attn_capture.estimate_window_workspace``);
3. ``estimate = measured − Σ samples + _extrapolate_full_graph_memory(samples, n_full)``, where
   ``_extrapolate_full_graph_memory`` = first sample + (n_full − 1) × max(second sample,
   ``_MIN_PER_GRAPH_BYTES`` = 1 MiB), n_full the FULL descriptors (sizes × LoRA cases);
4. ``_teardown_profiling_state``: the graphs, the pool, the minimal KV cache released
   (``empty_cache``); the real capture runs after the KV cache is allocated.

memprof's figure of the window is ``graph_window.logged_graph_of_context`` (the pool's tensors,
the graph executables' driver memory, the warm-up stream's cuBLAS workspace, with every FULL
size). A FULL graph captured after the PIECEWISE ones on the same stream (0.29.0 on:
``graph_window.V2_FULL_CAPTURE_STREAM``) finds its live set in blocks the PIECEWISE captures
freed, so a FULL sample is its graph's driver memory d (``cudagraph.graph_driver_bytes`` of one
FULL size), plus, for the first, whatever the FULL live set adds to the pool, which the window
already holds. With the window W of all n_full FULL graphs, measured = W − (n_full − 2)·d, and::

    estimate = W + (n_full − 1) × max(0, 1 MiB − d) + FlashInfer's workspace (where it runs)

The 1 MiB floor lifts a model whose FULL graph costs less than 1 MiB of driver memory (a dense
bf16 decoder of fewer than about 35 layers at R580's sm90 node costs: Qwen2.5-0.5B's 24 layers
cost 766,880 B). [approximation] vLLM's samples are
free-memory deltas in the driver's 2 MiB granules, so its second sample is 0 or 2 MiB where d is
about 1 MiB, and the extrapolation lands anywhere between W − d and W + (n_full − 2) MiB; memprof
takes the mean cost d. (The two logs that print the capture while profiling beside the estimate,
rows 1601 and 2455, put their second sample at 1.3-1.9 MiB, off the granule:
tests/test_v2_capture_after_profiling.py.) Not modelled: the ``hidden_states`` buffer the first
FULL warm-up allocates (as in the logged figure), the speculator's graphs
(memprof/core/terms/drafter_graphs.py: said in the estimate's formula), and the 32 MiB
cuBLAS workspace of the profiling capture's stream, which stays allocated after the teardown
(torch keeps a workspace per (handle, stream) until it is cleared). The published V2 logs that
print both figures: rows 1601 (0.29.0) and 1602 (0.30.0) of tests/data/published.json log "0.38 GiB
(estimated)" for Qwen3-4B on an RTX 5060 Ti, where memprof has 0.34 (V1's estimate: 0.41).

The estimate does not depend on what the profile run compiled, so it stands on a cold start too;
the profile run's own terms are ``runner_v2_profile``'s. The real capture beyond the estimate is
memprof's prediction of the pool (``cudagraph.cudagraph_model``) above it, at run time, as for V1.
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.base.units import MiB, fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.terms.attn_capture import estimate_window_workspace
from memprof.core.terms.cudagraph import graph_driver_bytes
from memprof.core.terms.drafter_graphs import drafter_graph_note
from memprof.core.terms.graph_window import logged_graph_model, logged_graph_of_context
from memprof.core.terms.lora import lora_capture_cases
from memprof.core.terms.runner_v2_profile import v2_estimates_graphs

# v1/worker/gpu/cudagraph_utils.py (0.29.0 - 0.33.0): the FULL graphs captured while profiling
# and the floor of the extrapolated per-graph cost ("driver overhead per graph")
FULL_GRAPH_PROFILING_SAMPLES = 2
MIN_PER_GRAPH_BYTES = 1 * MiB


@dataclass(frozen=True, slots=True)
class V2GraphEstimate:
    """V2's estimate for one rank (bytes): the capture window with every FULL graph
    (``window``), the FULL descriptors (``full_graphs``) and one FULL graph's driver memory
    (``per_full``), the estimate, memprof's prediction of the real capture (``actual``) and the
    capture sizes of every mode (``sizes``)."""

    window: int
    full_graphs: int
    per_full: int
    estimate: int
    actual: int
    sizes: int
    workspace: int = 0  # FlashInfer's, made inside the profiling capture (attn_capture)


def v2_graph_estimate(ctx: TermContext) -> V2GraphEstimate | None:
    """The module docstring's estimate; ``None`` where V2 does not estimate its own graphs
    (``runner_v2_profile.v2_estimates_graphs``) or nothing is captured."""
    if not v2_estimates_graphs(ctx):
        return None
    g = logged_graph_model(ctx)
    window = None if g is None else logged_graph_of_context(ctx, g)
    if window is None or g is None:
        return None
    with_lora, without = lora_capture_cases(ctx)
    n_full = (with_lora + without) * len(g.modes.get("FULL", ()))
    per_full = graph_driver_bytes(ctx, "FULL", 1) if n_full else 0
    lift = max(0, n_full - 1) * max(0, MIN_PER_GRAPH_BYTES - per_full)
    workspace, _why = estimate_window_workspace(ctx)
    return V2GraphEstimate(window=window.total, full_graphs=n_full, per_full=per_full,
                           estimate=window.total + lift + workspace, actual=g.actual,
                           sizes=sum(len(v) for v in g.modes.values()), workspace=workspace)


def runner_v2_graph_terms(ctx: TermContext) -> list[Component]:
    """Two components (category "cudagraph"), named as ``cudagraph.cudagraph_terms`` names V1's
    (which gives none where these apply): "CUDA-graph estimate", V2's own (where "budget",
    profiled), and "CUDA-graph pool above the estimate", memprof's prediction of the real
    capture above it (where "runtime")."""
    v = v2_graph_estimate(ctx)
    if v is None:
        return []
    release = ctx.dep.engine_version
    drafter = drafter_graph_note(ctx)
    floor = (f" + {v.full_graphs - 1} × (1 MiB floor − {fmt_bytes(v.per_full)}) for the FULL "
             "graphs' extrapolation" if v.estimate > v.window + v.workspace else "")
    if v.workspace:
        floor += (f" + FlashInfer's workspace {fmt_bytes(v.workspace)}, made by the capture's "
                  "first metadata build (memprof/core/terms/attn_capture.py)")
    return [
        Component(name="CUDA-graph estimate", category="cudagraph", bytes=v.estimate,
                  count=max(1, v.sizes), where="budget", profiled=True,
                  formula=f"Model Runner V2 at vLLM {release}: the capture while profiling, "
                  + (f"PIECEWISE sizes in full and {FULL_GRAPH_PROFILING_SAMPLES} of "
                     f"{v.full_graphs} FULL graphs measured, the rest extrapolated at their "
                     f"driver memory ({fmt_bytes(v.per_full)} each)" if v.full_graphs else
                     "PIECEWISE sizes in full (no FULL graph)")
                  + f": the capture window {fmt_bytes(v.window)}{floor} "
                  "(v1/worker/gpu/cudagraph_utils.py "
                  "profile_cudagraph_memory; memprof/core/terms/runner_v2_graphs.py)"
                  + (f"; the speculative drafter's CUDA graphs: {drafter}" if drafter else "")),
        Component(name="CUDA-graph pool above the estimate", category="cudagraph",
                  bytes=max(0, v.actual - v.estimate), where="runtime", profiled=False,
                  formula=f"predicted capture {fmt_bytes(v.actual)} − V2's estimate"),
    ]
