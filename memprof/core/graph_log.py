"""What vLLM's "Graph capturing finished in N secs, took X GiB" line measures, release by
release, and memprof's prediction of that figure for one rank of an estimate.

The figure is a free-memory delta, not a pool size: ``capture_model`` reads
``torch.cuda.mem_get_info()[0]`` before and after capturing and logs the difference in GiB with
two decimals (V0: vllm/worker/model_runner.py ``GPUModelRunnerBase.capture_model``, 0.7.2 and
0.9.2; V1: vllm/v1/worker/gpu_model_runner.py ``GPUModelRunner.capture_model``, 0.8.0, 0.9.2,
0.10.1, 0.11.0, 0.14.1, 0.20.0). Whatever the device gives out between the two reads is in it:

- the graphs' private pool: the decode live sets of the largest size of each mode and the
  cuBLAS workspace of the capture stream (``cudagraph.graph_pool_tensor_bytes``);
- the driver's memory for the graph executables (``cudagraph.graph_driver_bytes``);
- the eager warm-up runs of each size, which vLLM runs on the capture stream before capturing
  it (V0 ``CUDAGraphRunner.capture``: ``_NUM_WARMUP_ITERS`` = 2 forwards, 0.7.2 / 0.9.2; V1
  ``_capture_cudagraphs``: ``cudagraph_num_of_warmups`` ``_dummy_run`` calls with
  ``CUDAGraphMode.NONE``, 0.10.1 / 0.20.0; 0.8.0 / 0.9.2 ``capture_model`` the same inline).
  They allocate in the ordinary pool, and PyTorch's caching allocator gives a stream only blocks
  freed on that stream (c10/cuda/CUDACachingAllocator.cpp ``BlockPool`` keyed by stream), so the
  largest size's live set reserves new segments, which are still reserved at the second read:
  ``WARMUP_ON_CAPTURE_STREAM``;
- torch's CUDA stream pool (73,400,320 B, ``reports/gpu/nccl/README.md``), made by the first
  ``torch.cuda.Stream()`` of the process, when ``graph_capture`` makes it inside the window:
  ``STREAM_POOL_IN_WINDOW`` (not on a rank whose NCCL process group made the pool earlier,
  ``cudagraph.graph_driver_first``).

What is not modelled [approximation]: attention backends' capture-time buffers
(V0 ``attn_state.graph_capture``), custom all-reduce's IPC registration of the graph buffers
(a mapping of peer memory, not an allocation on this device), the encoder graphs of 0.20+, and
the rounding of the log to 0.01 GiB.
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core.components import TermContext
from memprof.core.engines import engine_of
from memprof.core.estimate import Estimate, RankEstimate, rank_context
from memprof.core.terms.activation import cublas_workspace_bytes
from memprof.core.terms.cudagraph import (
    cudagraph_model,
    graph_driver_first,
    graph_pool_tensor_bytes,
)
from memprof.core.versions import Rule, value_at

# Whether the read before capturing precedes the process's first torch stream (so the stream
# pool that ``graph_capture`` makes for the capture stream is in the figure).
STREAM_POOL_IN_WINDOW: tuple[Rule, ...] = (
    Rule(name="graph_log_stream_pool", changes="logged graph figure: stream pool",
         since=None, until="0.11.0", value=True, introduced_by="before 0.7.1",
         removed_by="V0 engine removed (0.11.0)", generation="v0",
         source="0.7.2 / 0.9.2 worker/model_runner.py capture_model: start_free_gpu_memory is "
         "read before `graph_capture(self.device)`, whose GroupCoordinator.graph_capture makes "
         "the capture stream (distributed/parallel_state.py: torch.cuda.Stream())"),
    Rule(name="graph_log_stream_pool", changes="logged graph figure: stream pool",
         since="0.8.0", until="0.11.0", value=True, introduced_by="V1 on by default (0.8.0)",
         removed_by="GPUModelRunner.__init__ makes comm_stream (0.11.0)", generation="v1",
         source="0.8.0 / 0.9.2 / 0.10.1 v1/worker/gpu_model_runner.py capture_model: "
         "start_free_gpu_memory read before `with graph_capture(device=self.device)`; no "
         "torch.cuda.Stream() in v1/worker before it"),
    Rule(name="graph_log_stream_pool", changes="logged graph figure: stream pool",
         since="0.11.0", until=None, value=False,
         introduced_by="GPUModelRunner.__init__ makes comm_stream (0.11.0)", generation="v1",
         source="0.11.0 v1/worker/gpu_model_runner.py GPUModelRunner.__init__: "
         "self.comm_stream = torch.cuda.Stream() (the pool exists before loading); 0.14.1 / "
         "0.20.0 capture_model read start_free_gpu_memory inside graph_capture"),
)

# Whether the warm-up runs are on the capture stream inside the window: so in every release
# read, V0 and V1 alike (one row: both engines' code).
WARMUP_ON_CAPTURE_STREAM: tuple[Rule, ...] = (
    Rule(name="graph_log_warmup", changes="logged graph figure: warm-up runs", since=None,
         until=None, value=True, introduced_by="before 0.7.1",
         source="V0: 0.7.2 / 0.9.2 worker/model_runner.py CUDAGraphRunner.capture, "
         "_NUM_WARMUP_ITERS (2) forwards on the capture stream before torch.cuda.graph; V1: "
         "0.8.0 / 0.9.2 v1/worker/gpu_model_runner.py capture_model and 0.10.1 / 0.20.0 "
         "_capture_cudagraphs, cudagraph_num_of_warmups _dummy_run calls (CUDAGraphMode.NONE) "
         "inside graph_capture before the capturing run"),
)

GRAPH_LOG_RULES: tuple[tuple[Rule, ...], ...] = (STREAM_POOL_IN_WINDOW, WARMUP_ON_CAPTURE_STREAM)


@dataclass(frozen=True, slots=True)
class LoggedGraph:
    """memprof's prediction of the "took X GiB" figure of one rank: ``parts`` as (name, bytes,
    where it comes from); ``total`` their sum."""

    parts: tuple[tuple[str, int, str], ...]

    @property
    def total(self) -> int:
        return sum(b for _n, b, _w in self.parts)


# The cards the per-graph, per-node and NCCL-node driver costs were measured on
# (``cudagraph.GRAPH_DRIVER_*``: reports/gpu/trace/graph-costs-h200.json,
# reports/gpu/nccl/graph-costs-1x-h100.json, graph-collectives-4x-h100.json,
# graph-mixing-2x-h100.json).
COST_MEASURED_ARCH = "sm90"


def _cost_basis(ctx: TermContext) -> str:
    """Where the driver costs come from, said where they are applied to another architecture."""
    if ctx.gpu.arch == COST_MEASURED_ARCH:
        return ""
    return (f" (per-graph, per-node and NCCL-node costs measured on H100/H200 ({COST_MEASURED_ARCH}"
            f", driver 580), applied unmeasured to {ctx.gpu.name} ({ctx.gpu.arch}))")


def logged_graph_of_context(ctx: TermContext) -> LoggedGraph | None:
    """The figure vLLM logs at ``ctx.dep.engine_version`` for the rank of ``ctx``; ``None`` where
    the line is not printed (``--enforce-eager``; an engine other than vLLM, whose capture log
    is its own)."""
    dep = ctx.dep
    if dep.enforce_eager or not engine_of(dep).graph_estimate_by_release:
        return None
    g = cudagraph_model(ctx)
    if not g.modes:
        return None
    version = dep.engine_version
    first = graph_driver_first(ctx)  # 0 where an NCCL process group made the stream pool
    tensors = g.actual - g.driver
    parts: list[tuple[str, int, str]] = [
        ("graph pool tensors", tensors,
         "private pool: decode live sets of each mode's largest size + the capture stream's "
         "cuBLAS workspace"),
        ("graph executables", g.driver - first,
         f"driver memory of {g.graphs} graphs{_cost_basis(ctx)}"),
    ]
    if first and value_at(STREAM_POOL_IN_WINDOW, version, False):
        parts.append(("stream pool", first,
                      "torch's CUDA stream pool, made for the capture stream inside the window"))
    if value_at(WARMUP_ON_CAPTURE_STREAM, version, True):
        # the same live set as the graph pool's for the largest size, less the capture
        # stream's cuBLAS workspace, which the pool already holds (one per handle and stream)
        largest = max(max(v) for v in g.modes.values())
        mode = next(m for m, v in g.modes.items() if largest in v)
        warm = graph_pool_tensor_bytes(ctx, {mode: [largest]}) - cublas_workspace_bytes(ctx.gpu)
        parts.append(("warm-up on the capture stream", warm,
                      f"ordinary-pool segments of the eager warm-up at {largest} tokens"))
    return LoggedGraph(parts=tuple(parts))


def logged_graph(e: Estimate, rank: RankEstimate) -> LoggedGraph | None:
    """``logged_graph_of_context`` for a rank of an estimate."""
    return logged_graph_of_context(rank_context(e, rank))
