"""The V1 model runner's logged capture after its CUDA-graph memory profiling (vLLM 0.18.0 on):
the "Graph capturing finished ..., took X GiB" figure, given what the profiling capture left.

From 0.18.0 the V1 runner captures graphs twice in one process (read in the 0.18.0, 0.19.1,
0.20.0, 0.21.0, 0.24.0, 0.28.0, 0.29.0 and 0.33.0 wheels; absent from 0.17.1):

1. while profiling, before the KV budget: v1/worker/gpu_worker.py ``determine_available_memory``
   calls ``GPUModelRunner.profile_cudagraph_memory`` on CUDA (0.18.0 l. 398 and 0.19.1 l. 380:
   not ``enforce_eager`` and not ROCm; 0.20.0 l. 381-385: ``cudagraph_mode`` not NONE and not
   ROCm; 0.21.0 l. 407, 0.24.0 l. 453: ``is_cuda()``; from 0.28.0, #44825, ``is_cuda_alike()``,
   ROCm too: 0.28.0 l. 532, 0.29.0 l. 570, 0.33.0 l. 717), whatever
   ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` says (the flag only decides whether the figure
   is subtracted). v1/worker/gpu_model_runner.py ``profile_cudagraph_memory`` captures, for each
   mode of ``cudagraph_dispatcher.get_capture_descs()`` (PIECEWISE then FULL, descriptors sorted
   largest first by (tokens, active LoRAs)), ``descs[:2]``: the two largest descriptors, each a
   graph per piece under PIECEWISE and one graph under FULL (0.18.0 l. 5631, 0.19.1 l. 5900,
   0.20.0 l. 5987, 0.21.0 l. 6087, 0.24.0 l. 6509, 0.28.0 l. 6862, 0.29.0 l. 6815, 0.33.0
   l. 6330), into a temporary pool (``current_platform.graph_pool_handle()``), then destroys
   them: ``CUDAGraphWrapper.clear_all_graphs()`` (0.18.0 l. 5669; from 0.24.0 with
   ``BreakableCUDAGraphWrapper``'s, 0.33.0 l. 6383-6384) and ``_cleanup_profiling_kv_cache``
   (``gc.collect()``, ``empty_cache()``: 0.18.0 l. 5568-5588). From 0.24.0 the same function also
   captures the multimodal encoder's graphs when ``cudagraph_mm_encoder`` is set, which memprof
   does not model (``graph_window``).
2. after the KV allocation, ``compile_or_warm_up_model`` -> ``capture_model``: the logged window
   (``empty_cache``, a free-memory read, every descriptor, a second read; 0.18.0 l. 5694-5747).
   Nothing else between captures a graph on CUDA: the compile-size warm-up runs eagerly and
   ``kernel_warmup`` (model_executor/warmup/) captures none (0.18.0; in 0.33.0 only ROCm's
   segmented-attention autotune does, ``rocm_segmented_attn_autotune_warmup.py``).

Before 0.18.0 (0.17.1 v1/worker/gpu_worker.py: ``kernel_warmup`` then ``capture_model``, no
profiling capture) and under V0 (``determine_num_available_blocks`` captures nothing:
``cudagraph.CUDAGRAPH_ESTIMATE``'s source) the logged capture is the process's first.

The CUDA driver keeps the memory of destroyed graph executables and builds later graphs in it,
to the byte (reports/gpu/graph-reuse/graph-reuse-h100.json, one H100, driver 580.159.04;
``runner_v2_capture``, which applies it to Model Runner V2). So the logged capture takes, of
driver memory, its executables less those of the destroyed profiling graphs (at
``cudagraph.graph_driver_bytes`` each, never below 0); the pool's tensors, the new capture
stream's cuBLAS workspace and the rest of the window are as for a first capture
(``graph_window.logged_graph_of_context``). The process still holds the whole window at run
time, so vLLM's estimate and memprof's prediction of the pool at run time are unchanged.
[approximation: measured on H100 under driver 580 and applied unmeasured to other cards and
drivers, said in the part's text; not applied on ROCm (0.28.0 on), whose HIP runtime was not
measured: there the figure stays the first capture's, said in the part's text.]

At TP > 1 with the custom all-reduce, the end of the profiling capture's context
opens each peer's allocation holding a captured all-reduce's input and keeps the handle until the
communicator is destroyed (custom_all_reduce.py ``CustomAllreduce.capture`` ->
``register_graph_buffers``, 0.19.0 and 0.22.0; csrc/custom_all_reduce.cuh ``ipc_handles_``, closed
only in ``~CustomAllreduce``). An allocation a peer maps keeps its device memory after its owner
frees it (reports/gpu/ipc-free-open/), so the profiling pool's segments holding those inputs stay
in use after ``empty_cache`` and count in the budget window's non-torch increase:
``memprof.core.terms.graph_input_handles`` charges them.
"""

from __future__ import annotations

from memprof.core.components import TermContext
from memprof.core.engines import engine_of
from memprof.core.terms.cudagraph import cudagraph_model, graph_driver_bytes
from memprof.core.terms.graph_window import COST_MEASURED_ARCH, LoggedGraph, logged_graph_of_context
from memprof.core.terms.lora import lora_capture_cases
from memprof.core.terms.runner_v2_profile import runs_v2
from memprof.core.versions import Rule, value_at

REUSE_MEASURED = "reports/gpu/graph-reuse/graph-reuse-h100.json"
EXECUTABLES = "graph executables"
# descs[:2] of each mode in profile_cudagraph_memory
PROFILED_PER_MODE = 2

# On which platforms the V1 runner captures graphs while profiling, before the logged capture.
V1_PROFILING_CAPTURE: tuple[Rule, ...] = (
    Rule(name="graph_log_v1_profiling_capture",
         changes="logged graph figure: graphs captured and destroyed while profiling (V1)",
         since="0.18.0", until="0.28.0", value="cuda",
         introduced_by="profile_cudagraph_memory (first released in 0.18.0)",
         removed_by="#44825: ROCm profiled too (first released in 0.28.0)", generation="v1",
         source="0.18.0 / 0.19.1 / 0.20.0 / 0.21.0 / 0.24.0 v1/worker/gpu_worker.py "
         "determine_available_memory calls profile_cudagraph_memory on CUDA, not ROCm; "
         "v1/worker/gpu_model_runner.py profile_cudagraph_memory captures descs[:2] of each "
         "mode, then CUDAGraphWrapper.clear_all_graphs() and _cleanup_profiling_kv_cache "
         "(gc.collect, empty_cache); 0.17.1 has no such capture"),
    Rule(name="graph_log_v1_profiling_capture",
         changes="logged graph figure: graphs captured and destroyed while profiling (V1)",
         since="0.28.0", until=None, value="cuda_alike",
         introduced_by="#44825: ROCm profiled too (first released in 0.28.0)", generation="v1",
         source="0.28.0 / 0.29.0 / 0.33.0 v1/worker/gpu_worker.py determine_available_memory: "
         "current_platform.is_cuda_alike(); gpu_model_runner.py profile_cudagraph_memory as "
         "0.18.0 (descs[:2], clear_all_graphs, _cleanup_profiling_kv_cache)"),
)


def v1_profiles_graphs(ctx: TermContext) -> bool:
    """Does the V1 runner capture (and destroy) graphs while profiling before the logged
    capture (``V1_PROFILING_CAPTURE``): vLLM from 0.18.0 on the V1 runner, not eager, on CUDA
    (and on ROCm from 0.28.0)?"""
    dep = ctx.dep
    if dep.enforce_eager or not engine_of(dep).graph_estimate_by_release:
        return False
    platforms = value_at(V1_PROFILING_CAPTURE, dep.engine_version, None, dep.engine)
    if platforms is None:
        return False
    if ctx.gpu.is_rocm and platforms != "cuda_alike":
        return False
    return not runs_v2(ctx)


def profiled_graph_driver_bytes(ctx: TermContext) -> tuple[int, dict[str, int]]:
    """Driver memory of the graphs ``profile_cudagraph_memory`` captured and destroyed: the two
    largest descriptors (sizes × LoRA cases) of each mode; with the descriptors per mode."""
    with_lora, without = lora_capture_cases(ctx)
    cases = with_lora + without
    counts = {m: min(PROFILED_PER_MODE, cases * len(s))
              for m, s in cudagraph_model(ctx).modes.items() if s}
    return sum(graph_driver_bytes(ctx, m, n) for m, n in counts.items()), counts


def v1_capture_after_profiling(ctx: TermContext) -> LoggedGraph | None:
    """The logged figure of the V1 runner's capture after its profiling capture: the window as
    the process's first, its graph executables less the destroyed profiling graphs' driver
    memory (the module docstring); ``None`` where no graph is captured while profiling
    (``v1_profiles_graphs``) or nothing is logged."""
    if not v1_profiles_graphs(ctx):
        return None
    window = logged_graph_of_context(ctx)
    if window is None:
        return None
    if ctx.gpu.is_rocm:
        note = ("; the graphs captured and destroyed while profiling are not deducted: the "
                "reuse of their memory was measured under the CUDA driver, not ROCm's HIP "
                "[not modelled]")
        return LoggedGraph(parts=tuple(
            (n, b, w + note if n == EXECUTABLES else w) for n, b, w in window.parts))
    profiled, counts = profiled_graph_driver_bytes(ctx)
    which = " and ".join(f"{n} {m}" for m, n in counts.items())
    where = (f"{REUSE_MEASURED}: H100, driver 580; applied unmeasured to {ctx.gpu.name}"
             if ctx.gpu.arch != COST_MEASURED_ARCH else REUSE_MEASURED)
    parts = []
    for name, b, what in window.parts:
        if name == EXECUTABLES:
            new = max(0, b - profiled)
            what = (f"{what}, less the {b - new} B of the {which} descriptors captured while "
                    "profiling (profile_cudagraph_memory) and destroyed, whose driver memory "
                    f"the driver keeps and builds these graphs in ({where})")
            b = new
        parts.append((name, b, what))
    return LoggedGraph(parts=tuple(parts))
