"""What vLLM's "Graph capturing finished in N secs, took X GiB" line measures, release by
release, and memprof's prediction of that figure for one rank (its term context; for a rank of an
estimate: ``memprof.core.graph_log.logged_graph``). Model Runner V2 from 0.29.0 charges the same
window, captured once while profiling, as its CUDA-graph estimate
(``memprof.core.terms.runner_v2_graphs``).

The figure is a free-memory delta, not a pool size: ``capture_model`` reads
``torch.cuda.mem_get_info()[0]`` before and after capturing and logs the difference in GiB with
two decimals (V0: vllm/worker/model_runner.py ``GPUModelRunnerBase.capture_model``, 0.7.2 and
0.9.2; V1: vllm/v1/worker/gpu_model_runner.py ``GPUModelRunner.capture_model``, 0.8.0, 0.9.2,
0.10.1, 0.11.0, 0.14.1, 0.20.0). Whatever the device gives out between the two reads is in it:

- the graphs' private pool: the decode live sets of the largest size of each mode, and the
  cuBLAS workspace of the capture stream where that stream's first GEMM runs under capture
  (``cudagraph.graph_pool_tensor_bytes``; ``CAPTURE_STREAM``);
- the driver's memory for the graph executables (``cudagraph.graph_driver_bytes``), its kernel
  nodes at the driver stack of the release's wheel (``cudagraph.DRIVER_STACK``: before 0.20.0
  the wheel is built for CUDA 12.x and the log's driver, which it does not print, is taken as
  older than R580, at NVIDIA's published ~10 KB a kernel node; R580's measured costs from
  0.20.0, on sm90 and later: an NVIDIA card before Hopper keeps the published figure at every
  driver, ``cudagraph.NODE_COSTS_MEASURED_ARCH``, as the A100 / A40 logs under R580 show);
- what the eager warm-up runs leave. vLLM runs them inside the window on ``graph_capture``'s
  stream before capturing each size (V0 ``CUDAGraphRunner.capture``: ``_NUM_WARMUP_ITERS`` = 2
  forwards, 0.7.2 / 0.8.4 / 0.9.2; V1: ``cudagraph_num_of_warmups`` = 1 ``_dummy_run`` calls,
  0.8.4 ``capture_model`` inline, 0.10.1 / 0.20.0 ``_capture_cudagraphs``), in the ordinary
  pool. Their activations do not stay: ``torch.cuda.graph.__enter__`` calls
  ``torch.cuda.empty_cache()`` before every capture it begins (torch/cuda/graphs.py), and vLLM
  lets it run for each size's first graph (V0 every graph; V1 patches it out only for the
  later pieces, 0.8.4 compilation/backends.py ``PiecewiseBackend``, 0.11.0 / 0.14.1
  compilation/cuda_graph.py ``CUDAGraphWrapper``), which releases every segment the warm-up
  freed. What stays is the warm-up stream's cuBLAS workspace, which torch keeps for the
  (handle, stream) pair (aten/src/ATen/cuda/CublasHandlePool.cpp), and the whole segment it
  was placed in (``alloc.allocator.get_allocation_size``: 20 MiB for the 8 MiB + 128 KiB
  workspace before compute capability 9.0, exact at 32 MiB from it) [approximation: the
  workspace is placed alone in the segment its request makes]: ``WARMUP_WORKSPACE``;
- torch's CUDA stream pool (73,400,320 B, ``reports/gpu/nccl/README.md``), made by the first
  ``torch.cuda.Stream()`` of the process, when ``graph_capture`` makes it inside the window:
  ``STREAM_POOL_IN_WINDOW`` (not on a rank whose NCCL process group made the pool earlier,
  ``cudagraph.graph_driver_first``).

Model Runner V2 (vLLM 0.22.0+, where ``vllm_runner.runs_v2`` runs the model) logs the same
free-memory delta (v1/worker/gpu/model_runner.py ``capture_model``, read in 0.26.0 and 0.27.1)
around its own capture (v1/worker/gpu/cudagraph_utils.py ``CudaGraphManager.capture``): one global
graph pool; one eager warm-up per size on ``graph_capture``'s stream; the PIECEWISE sizes captured
by the compiled pieces on that stream, then the FULL decode sizes by V2's own
``torch.cuda.graph(graph, self.pool)``, the model forward only (the sampler runs outside the
graphs). Its ``GPUModelRunner.__init__`` makes ``output_copy_stream`` (0.22.0-0.29.0), so the
stream pool predates the window, as ``STREAM_POOL_IN_WINDOW`` has it from 0.11.0. Before 0.29.0
V2's ``torch.cuda.graph`` call names no stream, so the FULL live sets and the cuBLAS workspace of
torch's default capture stream take pool segments of their own (``V2_FULL_CAPTURE_STREAM``).
Not modelled under V2 [approximation]: the ``hidden_states`` buffer [largest size, hidden] in the
model dtype that ``ModelCudaGraphManager`` allocates at the first warm-up inside the window and
keeps (whether it opens a segment of its own depends on where the allocator places it among the
warm-up's freed blocks), the speculator's graphs (``self.speculator.capture()``, in the same
window). From 0.29.0 the figure here is the capture as the process's first, which V2's estimate
charges; the logged capture after the KV allocation builds its graphs in the driver memory the
destroyed profiling graphs left (``memprof.core.terms.runner_v2_capture``;
docs/model-runner-v2.md, "The capture after the KV allocation, below the estimate"). The V1 runner
from 0.18.0 captures and destroys two descriptors a mode while profiling before its logged
capture, which is built in what they left (``memprof.core.terms.runner_v1_capture``).

What is not modelled [approximation]: memory the caching allocator held cached but unused before the
window, which the same ``empty_cache`` releases and which lowers the figure (below zero in vLLM PR
#25779's logs, "took -4.58 GiB"); attention backends' capture-time buffers (V0
``attn_state.graph_capture``; FlashAttention 3's split-KV accumulators in FULL graphs are in the
pool's tensors: ``cudagraph.full_graph_split_bytes``; FlashInfer's per-size decode wrappers under
Model Runner V2 0.22.0-0.28.x are counted: ``memprof.core.terms.attn_capture``), the encoder graphs
of 0.20+, NCCL 2.21.5's work buffer of each captured collective (nWork × 512 B, ``cudaMalloc``'d per
persistent plan, src/enqueue.cc ``uploadWork``; torch 2.5.1 / 2.6.0, so vLLM 0.7.x-0.8.x; at most 60
MiB for the published 0.8.4 TP2 rows: reports/gpu/graph-small-malloc), and the rounding of the log
to 0.01 GiB. Checked in the window and found to allocate nothing per capture size: FlashAttention 2
(its scheduler metadata is FA3's, made in the metadata builder's ``__init__``, 0.11.0
v1/attention/backends/flash_attn.py), the attention op under PIECEWISE capture (no metadata, nothing
launched: 0.8.4 / 0.10.1.1 ``_dummy_run``), and the custom all-reduce's graph registration (0.10.1.1
custom_all_reduce.py ``register_graph_buffers``: handles over gloo, addresses into the ``rank_data``
buffer made at init; opening the peers' handles holds no device memory on either GPU, measured on 4
GPUs joined by NVLink: reports/gpu/ipc-open/). Kernels first launched inside the window (CUDA's lazy
module loading) add nothing measurable: one 2 MiB granule on an H100
(reports/gpu/graph-pieces/README.md), where memprof's per-graph and per-node driver costs also held
for Inductor-compiled pieces within 1% and eager ones within 6%.

The transport NCCL joins the ranks by does not enter the NCCL nodes' cost, measured with each
case in its own processes (2× H100, driver 580.159.04, NCCL 2.28.9:
reports/gpu/graph-transport/graph-collectives-transport-2x-h100.json, graphs of 0, 1, 8 and 64
PyNccl all-reduces between kernels, back to back, and the kernels alone): over NVLink P2P and host
shared memory (``NCCL_P2P_DISABLE=1``, the transport between GPUs without peer access, where custom
all-reduce is off and every TP all-reduce is a PyNccl ``ncclAllReduce`` node) every case costs the
same to the byte, cuMem on and off; an all-reduce costs 8,613 B back to back and 124,206 B between
kernels, and a graph holding any ~104.5 KB more (NCCL's event-wait node at its head). For a piece
of vLLM's shape (one or two all-reduces among kernels) ``GRAPH_DRIVER_PER_NCCL_NODE`` +
``GRAPH_DRIVER_NCCL_MIXING`` (read off whole-model traces, so holding the per-graph part) are
within 6% of it (433,670 against 461,748 B for a graph of two): they hold for both transports.
Over NCCL's NET transport (ranks on other hosts; loopback sockets there) a graph holding a
collective costs 104,858 B more, whatever the number of collectives in it (NCCL's host strong
stream, which pushes proxy work, joins each graph): ``cudagraph.GRAPH_DRIVER_NET_PER_GRAPH``,
charged where the TP group spans hosts. The published no-P2P rows' misses (the same 7B Qwen2
shape logged 2.13 GiB under vLLM 0.8.4 on RTX 3090s and 0.65 GiB under 0.10.1.1 on A100s,
memprof 0.99 GiB for both) lie elsewhere.

Inductor is not in the window either, read at 0.8.4: the general-shape graph is compiled, autotuned
and its Triton kernels loaded at the profile run's first forward (v1/worker/gpu_model_runner.py
``profile_run`` -> ``_dummy_run(max_num_tokens)``; compilation/backends.py
``PiecewiseBackend.__call__`` runs ``compiled_graph_for_general_shape`` on its first call), and
v1/worker/gpu_worker.py ``compile_or_warm_up_model`` compiles no capture size before
``capture_model`` unless ``compile_sizes`` lists it (``need_to_compile``; the logs' config lines
print ``compile_sizes`` []). What is left of the 0.8.4 RTX 3090 logs is the driver's part of the
figure: for the same 1,943 graphs of the same Qwen2-7B shape it is 3.9x (TP1) and 3.6x (TP2) that
of the 0.10.1.1 A100 logs, which memprof meets within 4% at TP1 (rows 311-313 against 521-524 in
tests/data/published.json), the factor vLLM issue #5517 records between CUDA 12.2/12.3 and 12.4
drivers for the same graphs (3.81 against 1.14 GiB; an 8-GPU host whose thread turns on custom
all-reduce and NCCL, so graphs holding collectives); the logs print no driver, so it is not
modelled. The 0.8.x capture terms themselves hold on sm86: a 0.8.5.post1 A10 log of 1,943 graphs is
within 7% of them (row 1952). Per captured PyNccl all-reduce both pairs of logs leave about a third
of their own per-graph cost (0.31x and 0.37x), where memprof's R580 / NCCL 2.28.9 cost is 1.16x
R580's per-graph cost; NCCL 2.26.2-2.27.3 put the graph-mixing event-record node as a leaf and
2.21.5 / 2.27.5+ in line (src/misc/strongstream.cc), which does not separate the two logs, and
measured apart (reports/gpu/graph-mixing-topology/graph-mixing-topology-h100-fresh.json, each case
in a fresh process) the two placements cost the same to the byte for graphs of one or two
collectives, which is what vLLM's pieces hold (they part only at eight). No transport, graph shape,
cuMem setting or placement measured on R580 / NCCL 2.28.9 comes near the A100 rows' 66 KB an
all-reduce (reports/gpu/graph-transport/README.md), so memprof's per-node cost is right on the
stack it was measured on, and the A100 TP2 rows' over-prediction is left [not modelled: no
NCCL-node cost measured under a pre-R580 driver or NCCL 2.26.2]; read per release, a captured
all-reduce over SHM or P2P allocates no device memory from NCCL 2.26.2 on (its work in the
kernel's arguments, src/enqueue.cc ``finishPlan``; reports/gpu/graph-transport/README.md). Where
the placements part, graphs of more than two collectives, memprof follows them: at 2.26.2-2.27.3
only two NCCL nodes a graph pay ``cudagraph.GRAPH_DRIVER_NCCL_MIXING``
(``cudagraph.nccl_mixing_nodes``), which brings vLLM 0.11.0's FULL graphs on four RTX 4090s
(NCCL 2.27.3) from +35% to +10% (row 1951).

Two single-GPU A100 logs print several times memprof's figure (tests/data/published.json rows 502,
0.11.0 Llama-3.1-8B, 2.85 GiB, and 1218, 0.10.0 Qwen3-14B, 2.49 GiB), and nothing in their windows
sizes it, read in the 0.10.0 and 0.11.0 wheels: 0.10.0's ``_dummy_run`` builds no attention
metadata outside FULL capture (``full_cuda_graph`` off), so nothing there is sized by
max_model_len or the KV cache; 0.11.0's FULL decode batch (``seq_lens`` 1, ``max_seq_len`` =
max_model_len) runs FlashAttention 2 on sm80, which allocates nothing per size; both warm the
sampler up after ``capture_model`` (v1/worker/gpu_worker.py ``compile_or_warm_up_model``), and
memprof's graph counts equal the logs' progress bars (tests/test_graph_log_a100_rows.py). The
excess is per graph: above the pool tensors and the warm-up workspace the logs hold 5.4x and 4.7x
memprof's executables, where the same model or shape on A100s under 0.10.1.1 and 0.17.1 is within
0.9-1.1x, the size of the pre-12.4 drivers' graph memory in vLLM issue #5517 and of the 0.8.4
RTX 3090 rows above. The logs print no driver [not modelled: choosing one for them would fit it].

What separates these three single-GPU misses (311, 502, 1218) from the rows that land is none of
the settings memprof reads (tests/test_graph_log_a100_rows.py): row 311 has row 521's parts to
the byte (the same 1,943 graphs of the Qwen2-7B shape; 1.44 against 0.50 GiB logged) and row
1953's executables (0.8.1 on an A10, the same GA102 die and torch 2.6.0, driver R565 stated:
within 10%); row 502 has row 314's release, checkpoint and FULL_AND_PIECEWISE mode (0.11.0 on an
L4: within 16%). The landers hold 0.9-1.2x memprof's executables, the misses 3.6-5.5x. Kept at
R580's per-graph cost, the misses would take 74-99 KiB a kernel node, where NVIDIA's published
figure is ~10 KB (cccl#3768) and one graph of empty kernels under driver 470.16 took ~64 KiB a
node (NVIDIA developer forums thread 244901): the driver generation moves a node's cost by such
factors on one GPU, but the pre-12.4 driver figures read are of multi-GPU runs or show every
sign of it (vLLM #5517: an 8-GPU host, its thread about custom all-reduce and NCCL; #17462: two
L20s; #11452: four ranks). Single-GPU logs whose source prints an R535 driver (rows 2500-2502
and 2507: 535.247.01, one A100-SXM4-40GB, vLLM 0.19.1 and 0.9.2) miss the same way, while every
vLLM graph figure logged under a stated R550-or-later driver lands; no controlled A/B that memprof
can rebuild gives the old drivers' cost [not modelled: docs/accuracy.md, "Drivers before R550"].
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.alloc.allocator import get_allocation_size
from memprof.core.components import TermContext
from memprof.core.engines import engine_of
from memprof.core.terms.activation import cublas_workspace_bytes
from memprof.core.terms.attn_capture import ATTN_CAPTURE_RULES, capture_window_buffers
from memprof.core.terms.cudagraph import (
    DRIVER_STACK,
    FP8_BLOCK_PAD_SM90,
    MOE_EP_EXPERT_MAP,
    MOE_RENORMALIZE,
    MOE_ROUTER_CAST,
    GraphModel,
    cudagraph_model,
    driver_stack_note,
    graph_driver_first,
    graph_pool_tensor_bytes_apart,
    node_costs_measured_here,
)
from memprof.core.terms.runner_v2_profile import runs_v2
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

# What the eager warm-up runs leave at the second read: their stream's cuBLAS workspace and its
# segment; the activations' segments are released by the empty_cache that begins each size's
# capture (the module docstring). The same in every release read, V0 and V1 alike.
WARMUP_WORKSPACE: tuple[Rule, ...] = (
    Rule(name="graph_log_warmup", changes="logged graph figure: what the warm-up runs leave",
         since=None, until=None, value=True, introduced_by="before 0.7.1",
         source="V0: 0.7.2 / 0.8.4 / 0.9.2 worker/model_runner.py CUDAGraphRunner.capture, "
         "_NUM_WARMUP_ITERS (2) forwards on graph_capture's stream, then torch.cuda.graph; V1: "
         "0.8.4 v1/worker/gpu_model_runner.py capture_model and 0.10.1 / 0.20.0 "
         "_capture_cudagraphs, cudagraph_num_of_warmups (1) _dummy_run calls inside "
         "graph_capture before the capturing run; torch/cuda/graphs.py graph.__enter__ calls "
         "torch.cuda.empty_cache(), which vLLM patches out only for later pieces (0.8.4 "
         "compilation/backends.py, 0.11.0 / 0.14.1 compilation/cuda_graph.py): the warm-up "
         "stream keeps its cuBLAS workspace (CublasHandlePool.cpp), nothing else"),
)

# Whether torch.cuda.graph captures on the stream the warm-up ran on ("warmup": vLLM passes it;
# the warm-up's workspace serves the capture and the private pool holds none) or on torch's own
# default capture stream ("torch_default": torch.cuda.graph without ``stream=`` captures on
# ``graph.default_capture_stream``, torch/cuda/graphs.py, whose first GEMM runs under capture,
# so its workspace is allocated in the private pool: a second one).
CAPTURE_STREAM: tuple[Rule, ...] = (
    Rule(name="graph_log_capture_stream", changes="logged graph figure: capture stream",
         since=None, until="0.11.0", value="warmup", introduced_by="before 0.7.1",
         removed_by="V0 engine removed (0.11.0)", generation="v0",
         source="0.8.4 worker/model_runner.py CUDAGraphRunner.capture: torch.cuda.graph("
         "self._graph, pool=memory_pool, stream=stream), the stream its warm-up ran on"),
    Rule(name="graph_log_capture_stream", changes="logged graph figure: capture stream",
         since="0.8.0", until="0.14.0", value="torch_default",
         introduced_by="V1 on by default (0.8.0)",
         removed_by="torch.cuda.graph(..., stream=current_stream()) (first released in 0.14.0)",
         generation="v1",
         source="0.8.4 compilation/backends.py PiecewiseBackend.__call__; 0.11.0 / 0.12.0 / "
         "0.13.0 compilation/cuda_graph.py CUDAGraphWrapper.__call__: torch.cuda.graph("
         "cudagraph, pool=self.graph_pool) with no stream"),
    Rule(name="graph_log_capture_stream", changes="logged graph figure: capture stream",
         since="0.14.0", until=None, value="warmup",
         introduced_by="torch.cuda.graph(..., stream=current_stream()) (first released in "
         "0.14.0)", generation="v1",
         source="0.14.0 / 0.14.1 compilation/cuda_graph.py CUDAGraphWrapper.__call__: "
         "torch.cuda.graph(cudagraph, pool=self.graph_pool, stream=current_stream()), "
         "graph_capture's stream"),
)

# Where Model Runner V2 runs the model (``Engine.runs_runner_v2``; vllm_runner.py), the capture is
# its own: ``capture_model`` (v1/worker/gpu/model_runner.py) reads ``get_memory_info`` around
# ``ModelCudaGraphManager.capture`` (v1/worker/gpu/cudagraph_utils.py), which under
# ``graph_capture`` warms up each size eagerly and captures PIECEWISE sizes through the compiled
# pieces (compilation/cuda_graph.py ``CUDAGraphWrapper``, ``stream=current_stream()``: the
# warm-up's stream), then FULL sizes with its own ``torch.cuda.graph(graph, self.pool)``, all
# into the one global graph pool. Before 0.29.0 that call names no stream, so torch captures the
# FULL graphs on its default capture stream ("torch_default"): their live sets get segments of
# their own and that stream's cuBLAS workspace lands in the pool
# (``cudagraph.graph_pool_tensor_bytes_apart``). From 0.29.0 it passes the warm-up's stream
# ("warmup"), as V1's wrapper does from 0.14.0.
V2_FULL_CAPTURE_STREAM: tuple[Rule, ...] = (
    Rule(name="graph_log_v2_full_capture_stream",
         changes="logged graph figure: capture stream of FULL graphs (Model Runner V2)",
         since="0.22.0", until="0.29.0", value="torch_default",
         introduced_by="Model Runner V2 by default for listed architectures (0.22.0)",
         removed_by="0.29.0: torch.cuda.graph(graph, self.pool, stream=current_stream())",
         source="0.22.1 / 0.23.0 / 0.24.0 / 0.25.0 / 0.26.0 / 0.27.1 / 0.28.0 "
         "v1/worker/gpu/cudagraph_utils.py CudaGraphManager.capture: "
         "torch.cuda.graph(graph, self.pool) with no stream, after "
         "the PIECEWISE sizes; torch/cuda/graphs.py graph.__init__: capture_stream = "
         "default_capture_stream (a torch.cuda.Stream() of its own)"),
    Rule(name="graph_log_v2_full_capture_stream",
         changes="logged graph figure: capture stream of FULL graphs (Model Runner V2)",
         since="0.29.0", until=None, value="warmup",
         introduced_by="0.29.0: torch.cuda.graph(graph, self.pool, stream=current_stream())",
         source="0.29.0 v1/worker/gpu/cudagraph_utils.py CudaGraphManager.capture"),
)

# with the driver stack the graph executables are costed at (``cudagraph.DRIVER_STACK``), which
# moves the logged figure most, and the kernel-node counts read per release
# (``cudagraph.FP8_BLOCK_PAD_SM90``, ``MOE_ROUTER_CAST``, ``MOE_RENORMALIZE``,
# ``MOE_EP_EXPERT_MAP``): listed here so
# that ``memprof versions`` shows them
GRAPH_LOG_RULES: tuple[tuple[Rule, ...], ...] = (STREAM_POOL_IN_WINDOW, WARMUP_WORKSPACE,
                                                  CAPTURE_STREAM, V2_FULL_CAPTURE_STREAM,
                                                  DRIVER_STACK,
                                                  FP8_BLOCK_PAD_SM90, MOE_ROUTER_CAST,
                                                  MOE_RENORMALIZE, MOE_EP_EXPERT_MAP,
                                                  *ATTN_CAPTURE_RULES)


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
# graph-mixing-2x-h100.json); before Hopper the kernel nodes are at NVIDIA's published figure
# instead (``cudagraph.NODE_COSTS_MEASURED_ARCH``).
COST_MEASURED_ARCH = "sm90"


def _cost_basis(ctx: TermContext) -> str:
    """Where the driver costs come from, said where they are applied to another architecture or
    where the release's CUDA 12.x wheel puts its kernel nodes at the older drivers' cost
    (``cudagraph.DRIVER_STACK``)."""
    notes = []
    stack = driver_stack_note(ctx)
    if stack:
        notes.append(stack)
    if ctx.gpu.arch != COST_MEASURED_ARCH:
        what = ("per-graph, per-node and NCCL-node" if node_costs_measured_here(ctx)
                else "per-graph and NCCL-node")
        notes.append(f"{what} costs measured on H100/H200 "
                     f"({COST_MEASURED_ARCH}, driver 580), applied unmeasured to {ctx.gpu.name} "
                     f"({ctx.gpu.arch})")
    return f" ({'; '.join(notes)})" if notes else ""


def v2_full_apart(ctx: TermContext) -> bool:
    """Does the release capture Model Runner V2's FULL graphs on torch's default capture stream
    (``V2_FULL_CAPTURE_STREAM``), and does it run this model with V2 (``Engine.runs_runner_v2``,
    the runner selection of vllm_runner.py)?"""
    dep = ctx.dep
    if value_at(V2_FULL_CAPTURE_STREAM, dep.engine_version, "warmup") != "torch_default":
        return False
    return runs_v2(ctx)


def logged_graph_model(ctx: TermContext) -> GraphModel | None:
    """``cudagraph_model`` of the rank of ``ctx`` where vLLM logs its capture figure; ``None``
    where the line is not printed (``--enforce-eager``; an engine other than vLLM, whose capture
    log is its own)."""
    dep = ctx.dep
    if dep.enforce_eager or not engine_of(dep).graph_estimate_by_release:
        return None
    return cudagraph_model(ctx)


def logged_graph_of_context(ctx: TermContext,
                            g: GraphModel | None = None) -> LoggedGraph | None:
    """The figure vLLM logs at ``ctx.dep.engine_version`` for the rank of ``ctx``; ``None`` where
    the line is not printed (``logged_graph_model``). ``g``: that model where the caller made it
    already (it is the same for the same context)."""
    g = logged_graph_model(ctx) if g is None else g
    if g is None or not g.modes:
        return None
    dep = ctx.dep
    version = dep.engine_version
    first = graph_driver_first(ctx)  # 0 where an NCCL process group made the stream pool
    ws = cublas_workspace_bytes(ctx.gpu)
    # the pool's tensors as cudagraph_model counts them hold one workspace; where the capture
    # runs on the warm-up's stream, that workspace is the warm-up's, outside the private pool
    own_stream = value_at(CAPTURE_STREAM, version, "warmup") == "warmup"
    tensors = g.actual - g.driver - (ws if own_stream else 0)
    where = ("private pool: decode live sets of each mode's largest size"
             + ("" if own_stream else " + the cuBLAS workspace of torch's own capture stream"))
    if "FULL" in g.modes and v2_full_apart(ctx):
        tensors = graph_pool_tensor_bytes_apart(ctx, g.modes, "FULL")
        where = ("private pool: the PIECEWISE live set, then Model Runner V2's FULL graphs "
                 "captured on torch's own stream, in segments of their own with that stream's "
                 "cuBLAS workspace")
    parts: list[tuple[str, int, str]] = [
        ("graph pool tensors", tensors, where),
        ("graph executables", g.driver - first,
         f"driver memory of {g.graphs} graphs{_cost_basis(ctx)}"),
    ]
    if "FULL" in g.modes and runs_v2(ctx):
        held, what = capture_window_buffers(ctx, g.modes["FULL"])
        if held:
            parts.append(("attention backend's capture buffers", held, what))
    if first and value_at(STREAM_POOL_IN_WINDOW, version, False):
        parts.append(("stream pool", first,
                      "torch's CUDA stream pool, made for the capture stream inside the window"))
    if value_at(WARMUP_WORKSPACE, version, True):
        seg = get_allocation_size(ws)
        parts.append(("warm-up stream's cuBLAS workspace", seg,
                      f"the {ws} B workspace of the warm-up's stream in its {seg} B segment; the "
                      "warm-up's activations are released by torch.cuda.graph's empty_cache"))
    return LoggedGraph(parts=tuple(parts))

