"""``memprof trace``: build one rank at its true shapes, run it as the engine does at start-up and
at decode, record the allocator phase by phase, and put each traced figure beside the
estimated one.

Phases, in vLLM's start-up order (vLLM@52a31cc ``Worker.init_device`` / ``load_model`` /
``determine_available_memory`` / ``initialize_from_config`` / ``compile_or_warm_up_model``):
``context`` (CUDA context), ``weights`` (model construction and loading, with the scratch the
backend registers there), ``profile_run`` (``max_num_batched_tokens`` eager, attention skipped,
then the sampler), ``kv_cache``, ``cudagraph`` (decode graphs captured largest first into one
pool), ``decode`` (steps at ``max_num_seqs``; lazy scratch appears here).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from memprof.base.errors import EnvironmentProblem
from memprof.core.components import TermContext
from memprof.core.deployment import Deployment
from memprof.core.engines import engine_of
from memprof.core.estimate import Estimate, RankEstimate, estimate, rank_context
from memprof.core.terms.activation import V2_SAMPLER_STATE_ROW
from memprof.core.terms.allocations import rank_allocations
from memprof.core.terms.cudagraph import cudagraph_model, engine_graph_modes, graph_driver_first
from memprof.core.terms.load_rounding import NAME as LOAD_ROUNDING
from memprof.core.terms.load_segments import NAME as LOAD_SEGMENTS
from memprof.trace.sglang_capture import logits_plan

# what the trace charges the buffers SGLang's CUDA-graph runner makes in its window to
CAPTURE_STATE = "CUDA-graph capture state"
# the estimate's communicator rows (core/terms/non_torch.py), by prefix: "NCCL TP communicator"
NCCL_ROW = "NCCL {} communicator"
# the estimate's rows of torch's stream pool made by vLLM's model runner before the profile run
# (core/terms/stream_pool.py: V1's comm_stream, Model Runner V2's output_copy_stream); the trace
# makes the stream where the rank has one, in a phase of its own
RUNNER_STREAM_ROWS = ("torch stream pool (model runner's comm_stream)",
                      "torch stream pool (Model Runner V2's output_copy_stream)")
RUNNER_STREAM = "runner_stream"
COMMS_NOTE = ("communicators made as vLLM makes them: init_process_group without device_id "
              "(no NCCL communicator for the world), then for each group a torch device group, a "
              "gloo group and a PyNccl-shaped ncclCommInitRank with its warm-up all_reduce")

if TYPE_CHECKING:
    from memprof.trace.dist import Communicators
Progress = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseRecord:
    """The allocator after one phase (bytes): torch's (or the simulator's) allocated, reserved
    and their peaks within the phase, the device's used and non-torch memory (GPU only), the
    bytes memprof's tracker saw live, and how long the phase took (s)."""

    name: str
    allocated: int
    reserved: int
    allocated_peak: int
    reserved_peak: int
    segments: int
    tracked: int
    tracked_peak: int
    used: int | None
    non_torch: int | None
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ComponentTrace:
    """One estimate component beside its traced bytes (``None``: not measurable here)."""

    name: str
    category: str
    estimated: int
    traced: int | None
    how: str

    @property
    def delta(self) -> int | None:
        return None if self.traced is None else self.traced - self.estimated


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceResult:
    """A traced rank: the estimate it checks, the phases, each component estimated vs traced,
    and the verdict each gives."""

    estimate: Estimate
    rank: RankEstimate
    device: Literal["cuda", "fake"]
    device_name: str
    torch_version: str
    phases: tuple[PhaseRecord, ...]
    components: tuple[ComponentTrace, ...]
    verdict_estimated: str
    verdict_traced: str
    notes: tuple[str, ...] = ()
    graph_sizes: tuple[int, ...] = field(default=())
    oom: TraceOOM | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceOOM:
    """An out-of-memory during the trace: the phase, the component being allocated, torch's (or
    the simulator's) message and, on a GPU, ``torch.cuda.memory_summary``."""

    phase: str
    component: str
    message: str
    summary: str = ""


def _is_oom(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, torch.OutOfMemoryError):
        return True
    return type(exc).__name__ in ("AllocatorOOM", "OutOfMemory", "SimulatedOOM") or \
        "out of memory" in str(exc).lower()


def _choose_device(device: str | None) -> Literal["cuda", "fake"]:
    from memprof.trace.device import cuda_available, require_cuda

    if device is None:
        return "cuda" if cuda_available() else "fake"
    if device == "cuda":
        require_cuda()
        return "cuda"
    return "fake"


def run_trace(model: str, dep: Deployment, *, gpu_name: str | None = None,
              gpu_memory_bytes: int | None = None, gpu_arch: str | None = None,
              device: str | None = None,
              rank: int | None = None, decode_steps: int = 2, max_graphs: int | None = None,
              alloc_conf: str = "", snapshot: str | None = None,
              progress: Progress | None = None, group: object = None,
              connect: Callable[[], Communicators] | None = None) -> TraceResult:
    """Trace one rank (``rank``: a global rank; default the first distinct rank).

    ``group``: a ``torch.distributed`` process group whose collectives the replica runs (under
    torchrun; a world of 1 on one GPU; gloo on CPU); None traces the rank alone, each collective
    replaced by a local op with the same output allocation. Ignored on the fake device (fake
    tensors cannot cross a real process group).

    ``connect``: under torchrun, starts the process group and returns this rank's communicators
    (``memprof.trace.dist.communicators``); it is called after the CUDA context, and on a GPU
    the first communicator's creation and its first all_reduce are recorded as phases
    ``nccl_init`` and ``nccl_first_all_reduce``, then each later one (vLLM's PP, DP or EP
    after the first) made with its warm-up all_reduce as ``nccl_<name>_communicator``: each
    one's non-torch growth is its row's traced figure, and the profile run's non-torch increase
    is measured from after the last. The replica's all-reduces run over the TP group (none
    where TP is 1)."""
    import torch

    from memprof.trace.device import Device, SimSink
    from memprof.trace.replica import Replica
    from memprof.trace.tracker import Counter, Tracker

    if snapshot:  # a path that cannot be written fails now, not after the whole trace
        from memprof.base.files import check_output

        check_output(snapshot, flag="--snapshot")
    kind = _choose_device(device)
    e = estimate(model, dep, gpu_name=gpu_name, gpu_memory_bytes=gpu_memory_bytes,
                 gpu_arch=gpu_arch)
    if e.spec.draft_head is not None:
        from memprof.base.errors import BadInput

        raise BadInput("memprof trace does not build an EAGLE draft head (its weights, its KV "
                       "layer, the proposer's buffers), which the estimate sizes",
                       hint="memprof estimate sizes the head; trace the target without "
                       "--speculative-method eagle / eagle3")
    if e.deployment.speculative_mtp:
        from memprof.base.errors import BadInput

        raise BadInput("memprof trace does not build the MTP drafter (the proposer's buffers, "
                       "its forward in the profile run), which the estimate sizes",
                       hint="memprof estimate sizes it; trace the target without "
                       "--num-speculative-tokens")
    r = next((x for x in e.ranks if rank is None or rank in x.same_as), None)
    if r is None:
        from memprof.base.errors import BadInput

        n = e.deployment.world_size
        raise BadInput(f"--rank {rank} is not a rank of this deployment ({n} rank"
                       f"{'' if n == 1 else 's'})",
                       hint="leave out --rank, or pass --rank 0" if n == 1 else
                       f"pass --rank 0 to {n - 1}")
    allocs = rank_allocations(rank_context(e, r))
    sim = SimSink(alloc_conf, e.gpu.total_bytes) if kind == "fake" else None
    dev = Device(kind, sim=sim)
    counter = Counter()
    sinks: list[object] = [counter] + ([sim] if sim is not None else [])
    tracker = Tracker(sinks, on_first_gemm=None if sim is None else (
        lambda: _cublas_workspace(sim, e)))
    replica = Replica(ctx=rank_context(e, r), device=torch.device("cuda"),
                      charge=tracker.charge)
    replica.lazy = [a for a in allocs if a.phase == "decode"]
    replica.group = group if kind == "cuda" else None
    records: list[PhaseRecord] = []
    notes: list[str] = []
    # each row traced by a phase of its own (a communicator, the runner's stream): its prefix →
    # (the phase before it, the phase that made it)
    comm_phases: dict[str, tuple[str, str]] = {}
    report = progress or (lambda _p, _d, _t: None)
    current = ["context"]  # the phase running, for the progress bar's layer updates
    replica.on_layer = lambda done, total: report(f"{current[0]}: layer {done}/{total}",
                                                  len(records), 6)

    def record(name: str, start: float, tracked_peak: int) -> None:
        dev.synchronize()
        s = dev.state()
        records.append(PhaseRecord(
            name=name, allocated=s.allocated, reserved=s.reserved,
            allocated_peak=s.allocated_peak, reserved_peak=s.reserved_peak, segments=s.segments,
            tracked=counter.live, tracked_peak=tracked_peak, used=s.used,
            non_torch=s.non_torch, seconds=time.perf_counter() - start))
        report(name, len(records), 6)

    if kind == "cuda" and snapshot:
        dev.start_history()
    dep_r = e.deployment
    mnbt = e.max_num_batched_tokens
    seqs = min(dep_r.max_num_seqs or 1, mnbt)
    graphs: list[int] = []
    act_peak = 0
    capture: GraphCapture | None = None
    kv_before = None
    oom: TraceOOM | None = None
    phase = "context"

    def weights() -> None:
        replica.allocate([a for a in allocs if a.phase == "weights"])

    def profile_run() -> None:
        nonlocal act_peak
        replica.sampler_state()  # made in load_model, after the weights' figure (V2 only)
        dev.reset_peak()
        base = counter.live
        replica.forward(mnbt, min(seqs, mnbt))
        act_peak = counter.peak - base

    def kv_cache() -> None:
        nonlocal kv_before
        dev.empty_cache()  # vLLM's memory_profiling exit: gc + empty_cache
        kv_before = dev.state()
        replica.allocate([a for a in allocs if a.phase == "kv_cache"], zero=True)

    def cudagraph() -> None:
        nonlocal capture, graphs
        if not dep_r.enforce_eager:
            # the graphs the estimate sizes: the engine's own decode list (SGLang's), vLLM's
            # by release, Model Runner V2's own FULL decode sizes where it runs
            modes = engine_graph_modes(rank_context(e, r))
            graphs = sorted({x for v in modes.values() for x in v}, reverse=True)[:max_graphs]
            ctx = rank_context(e, r)
            if engine_of(dep_r).decode_graph_sizes(dep_r, e.gpu) is not None:
                graphs = [n for n in modes["FULL"] if n in graphs]  # the engine's order
                capture = _capture_engine(kind, replica, ctx, modes["FULL"], max_graphs)
            else:
                capture = _capture(kind, replica, modes, max_graphs)

    def decode() -> None:
        for _ in range(max(1, decode_steps)):
            replica.forward(seqs, seqs, decode=True)

    def prefill() -> None:
        replica.allocate([a for a in allocs if a.phase == "prefill"], zero=True)

    steps: list[tuple[str, Callable[[], None]]] = [
        ("weights", weights), ("profile_run", profile_run), ("kv_cache", kv_cache),
        ("cudagraph", cudagraph), ("decode", decode)]
    if any(a.phase == "prefill" for a in allocs):
        steps.append(("continuation_prefill", prefill))
    with dev.active(), tracker:
        try:
            t0 = time.perf_counter()
            with tracker.charge("CUDA context"):
                warm = torch.empty(1, device="cuda")
            del warm
            record("context", t0, counter.peak)
            if connect is not None:
                phase = current[0] = "nccl_init"
                t0 = time.perf_counter()
                comms = connect()
                replica.group = comms.replica if kind == "cuda" else None
                if kind == "cuda":
                    record("nccl_init", t0, counter.peak)
                    if comms.first is not None:
                        name = comms.first[0]
                        phase = current[0] = "nccl_first_all_reduce"
                        t0 = time.perf_counter()
                        _first_all_reduce(comms.first[1], tracker)
                        record(phase, t0, counter.peak)
                        comm_phases[NCCL_ROW.format(name)] = ("context", phase)
                    for name, part in comms.later:
                        before, phase = records[-1].name, f"nccl_{name.lower()}_communicator"
                        current[0] = phase
                        t0 = time.perf_counter()
                        _first_all_reduce(comms.make(part), tracker)
                        record(phase, t0, counter.peak)
                        comm_phases[NCCL_ROW.format(name)] = (before, phase)
                for name in comms.unbuilt:
                    notes.append(f"the NCCL {name} communicator is not built under torchrun "
                                 "(not a TP, PP, DP or EP group): its row is not traced")
                if kind == "cuda":
                    notes.append(COMMS_NOTE)
            if kind == "cuda" and (stream_row := _runner_stream_row(r)) is not None:
                phase = current[0] = RUNNER_STREAM
                t0 = time.perf_counter()
                # the first torch stream makes the pool, which lasts as long as the process
                torch.cuda.Stream()  # type: ignore[no-untyped-call]
                record(phase, t0, counter.peak)
                comm_phases[stream_row] = (records[-2].name, phase)
            for phase, fn in steps:
                current[0] = phase
                t0 = time.perf_counter()
                counter.reset_peak()
                fn()
                record(phase, t0, counter.peak)
        except Exception as exc:
            if not _is_oom(exc):
                raise
            oom = TraceOOM(phase=phase, component=tracker.current, message=str(exc),
                           summary=dev.summary())
            notes.append(f"OOM in phase {phase} while allocating {tracker.current}: "
                         f"{' '.join(str(exc).split())[:300]}")
        if snapshot:
            dev.dump_snapshot(snapshot)

    kv_slack = None
    if kv_before is not None and "kv_cache" in {p.name for p in records}:
        k = next(p for p in records if p.name == "kv_cache")
        kv_slack = (k.reserved - kv_before.reserved) - counter.by_component.get("KV cache", 0)
    comps = _components(e, r, counter.by_component, act_peak, records, capture, kind, kv_slack,
                        comm_phases)
    total = e.gpu.total_bytes
    traced_total = sum(c.traced if c.traced is not None else c.estimated for c in comps)
    verdict_traced = "fits" if traced_total <= total else "runtime_oom"
    if r.verdict == "startup_oom":
        verdict_traced = "startup_oom"
    notes.append("weights are allocated, not loaded; fp8 block linears, MLA and the fused MoE "
                 "launch one kernel per kernel vLLM launches (a plain write of the output where "
                 "torch has none); other quantised GEMMs and attention kernels are modelled by "
                 "their output allocations")
    return TraceResult(estimate=e, rank=r, device=kind,
                       device_name=(torch.cuda.get_device_name() if kind == "cuda"
                                    else f"fake ({e.gpu.name})"),
                       torch_version=str(torch.__version__), phases=tuple(records),
                       components=tuple(comps), verdict_estimated=r.verdict,
                       verdict_traced=verdict_traced if oom is None else "startup_oom"
                       if oom.phase in ("weights", "profile_run", "kv_cache") else "runtime_oom",
                       notes=tuple(notes), graph_sizes=tuple(graphs), oom=oom)


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphCapture:
    """What capturing the CUDA graphs cost (bytes): the device's ``mem_get_info`` delta around
    the capture (vLLM's measure), the part the caching allocator reserved for the graphs' private
    pool (their tensors), and the rest, the driver's memory for the graph executables; the
    capture sizes per mode and the graphs captured (a PIECEWISE size is one graph per piece)."""

    total: int
    tensors: int
    driver: int
    sizes: dict[str, list[int]]
    graphs: int
    pool: int | None = None  # the graphs' private pool alone (an engine's own graphs)


def _capture(kind: str, replica: object, modes: dict[str, list[int]],
             max_graphs: int | None) -> GraphCapture | None:
    """Capture the decode forward as vLLM's ``capture_model`` does under FULL_AND_PIECEWISE
    (vllm/v1/worker/gpu_model_runner.py ``capture_model`` / ``_capture_cudagraphs``,
    vllm/compilation/cuda_graph.py ``CUDAGraphWrapper``, vLLM@52a31cc): every size largest first,
    PIECEWISE sizes first, then the FULL (uniform decode) sizes, all into one graph pool;
    a PIECEWISE size is one graph per piece of the forward split at each attention op (the
    attention runs eagerly between them: the replica's kernels of the op, where it launches
    them, run outside the pieces, ``Replica.piece_gap``); ``gc.collect`` / ``empty_cache`` are
    not called between captures (vLLM patches them out). ``max_graphs`` keeps the largest sizes
    of each mode. On the fake device only the warm-up runs (the simulator has no private pools
    here)."""
    import torch

    from memprof.trace.replica import Replica

    assert isinstance(replica, Replica)
    # a mode left with no size (none captured, or --graphs 0) captures nothing
    sizes = {m: kept for m, v in modes.items() if (kept := sorted(v, reverse=True)[:max_graphs])}
    if not sizes:
        return None
    largest = max(max(v) for v in sizes.values())
    # warm-up at the largest size first, outside any graph (vLLM's dummy runs before capture)
    replica.forward(largest, 0, decode=True)
    if kind != "cuda":
        return None
    torch.cuda.synchronize()
    free_before = torch.cuda.mem_get_info()[0]
    reserved_before = torch.cuda.memory_reserved()
    pool = torch.cuda.graph_pool_handle()
    keep: list[torch.cuda.CUDAGraph] = []
    stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]

    def begin() -> torch.cuda.CUDAGraph:
        g = torch.cuda.CUDAGraph()
        g.capture_begin(pool=pool)
        keep.append(g)
        return g

    with torch.cuda.stream(stream):
        for mode in ("PIECEWISE", "FULL"):
            for n in sizes.get(mode, []):
                current = [begin()]
                if mode == "PIECEWISE":
                    def piece_break(cur: list[torch.cuda.CUDAGraph] = current) -> None:
                        cur[0].capture_end()
                        cur[0] = begin()

                    def piece_gap(op: Callable[[], None],
                                  cur: list[torch.cuda.CUDAGraph] = current) -> None:
                        cur[0].capture_end()
                        op()
                        cur[0] = begin()
                    replica.piece_break = piece_break
                    replica.piece_gap = piece_gap
                try:
                    replica.forward(n, 0, decode=True)
                finally:
                    replica.piece_break = None
                    replica.piece_gap = None
                    current[0].capture_end()
    torch.cuda.synchronize()
    total = free_before - torch.cuda.mem_get_info()[0]
    tensors = torch.cuda.memory_reserved() - reserved_before
    replica.tensors["_graphs"] = keep  # type: ignore[assignment]
    return GraphCapture(total=int(total), tensors=int(tensors), driver=int(total - tensors),
                        sizes=sizes, graphs=len(keep))


def _capture_engine(kind: str, replica: object, ctx: TermContext, sizes: list[int],
                    max_graphs: int | None) -> GraphCapture | None:
    """Capture the decode forward as SGLang's ``CudaGraphRunner`` does
    (``memprof.trace.sglang_capture``; 0.5.9 model_executor/cuda_graph_runner.py, 0.4.10 the
    same): ``max_graphs`` keeps the largest sizes, captured in the release's order. Before the
    window, a warm-up at the largest size (the lazy decode scratch, as ``_capture``) and, where
    the estimate has torch's stream pool made before the capture (``graph_driver_first`` 0:
    SGLang's ``forward_stream`` or KV pool ``alt_stream``, or the rank's NCCL communicator), a
    first stream. The window, read as SGLang reads it (``get_available_gpu_memory``: after
    ``empty_cache``): the attention backend's ``init_cuda_graph_state`` buffers, the runner's
    input buffers (``sglang_graph_inputs``) and from 0.5.1 the fp32 logits buffer on the current
    stream (``sglang_attention.capture_buffers``, by their
    bytes; ``sglang_capture.logits_plan``); then on a new stream, per size, the backend's
    per-size buffers, two eager ``run_once`` and the capture (``torch.cuda.graph``, which
    empties the cache first) into one pool, every forward ending in the logits processor
    (``Replica.sglang_logits``), each graph's output kept as ``output_buffers[bs]``. On the
    fake device only the warm-up runs."""
    import torch

    from memprof.core.engines.sglang_attention import capture_buffers
    from memprof.core.engines.sglang_graph_inputs import graph_input_buffers
    from memprof.trace.replica import Replica, torch_dtype

    assert isinstance(replica, Replica)
    top = sorted(sizes, reverse=True)[:max_graphs]
    order = [n for n in sizes if n in top]
    if not order:
        return None
    largest = max(order)
    replica.forward(largest, 0, decode=True, logits_max_bs=largest)
    if kind != "cuda":
        return None
    if graph_driver_first(ctx) == 0:
        torch.cuda.Stream()  # type: ignore[no-untyped-call]
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free_before = torch.cuda.mem_get_info()[0]
    reserved_before = torch.cuda.memory_reserved()
    current, per_size, _ = capture_buffers(ctx.dep, ctx.gpu, ctx.spec, order)
    plan = logits_plan(ctx, largest, largest)
    state: list[torch.Tensor] = []
    with replica.charge(CAPTURE_STATE):  # type: ignore[attr-defined]
        state += [torch.zeros(n, dtype=torch.uint8, device="cuda") for n in current if n > 0]
        # the runner's input buffers, by shape and dtype (sglang_graph_inputs)
        state += [torch.zeros(b.shape, dtype=torch_dtype(b.dtype), device="cuda")
                  for b in graph_input_buffers(ctx.dep.engine_version, largest,
                                               ctx.spec.hidden_size, ctx.model_dtype, ctx.dep.pp)]
        if plan.buffer is not None:  # GraphInputBuffers.create makes it on every rank
            replica.tensors["_sglang_logits_buffer"] = torch.zeros(
                plan.buffer.shape, dtype=torch.float32, device="cuda")
    pool = torch.cuda.graph_pool_handle()
    stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    keep: list[torch.cuda.CUDAGraph] = []
    outputs: list[torch.Tensor | tuple[torch.Tensor, ...] | None] = []
    with torch.cuda.stream(stream):
        for n in order:
            with replica.charge(CAPTURE_STATE):  # type: ignore[attr-defined]
                state += [torch.zeros(b, dtype=torch.uint8, device="cuda")
                          for b in per_size if b > 0]
            for _ in range(2):
                torch.cuda.synchronize()
                replica.forward(n, 0, decode=True, logits_max_bs=largest)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool, stream=stream):
                outputs.append(replica.forward(n, 0, decode=True, logits_max_bs=largest))
            keep.append(g)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    total = free_before - torch.cuda.mem_get_info()[0]
    tensors = torch.cuda.memory_reserved() - reserved_before
    in_pool = [s for s in torch.cuda.memory_snapshot()  # type: ignore[no-untyped-call]
               if tuple(s.get("segment_pool_id", ())) == tuple(pool)]
    replica.tensors["_graphs"] = keep  # type: ignore[assignment]
    replica.tensors["_graph_state"] = state  # type: ignore[assignment]
    replica.tensors["_graph_outputs"] = outputs  # type: ignore[assignment]
    return GraphCapture(total=int(total), tensors=int(tensors), driver=int(total - tensors),
                        sizes={"FULL": order}, graphs=len(keep),
                        pool=sum(int(s["total_size"]) for s in in_pool) if in_pool else None)


def _components(e: Estimate, r: RankEstimate, charged: dict[str, int], act_peak: int,
                records: list[PhaseRecord], capture: GraphCapture | None, kind: str,
                kv_slack: int | None,
                comm_phases: dict[str, tuple[str, str]]) -> list[ComponentTrace]:
    from memprof.trace.replica import MOE_WORKSPACE

    phases = {p.name: p for p in records}
    out: list[ComponentTrace] = []
    seen_groups: set[str] = set()
    for c in r.components:
        traced: int | None = None
        how = ""
        if c.category in ("weights", "kv_cache", "scratch"):
            if c.category == "weights":
                if c.name in seen_groups:
                    continue  # a group in several rows (layers of different sizes): one total
                seen_groups.add(c.name)
                est = sum(x.bytes for x in r.components if x.name == c.name)
            else:
                est = c.bytes
            traced = charged.get(c.name, 0)
            how = "bytes of the tensors allocated for it (live at the end)"
            if c.name == LOAD_ROUNDING and "weights" in phases:
                w = phases["weights"]
                traced = w.allocated - w.tracked
                how = ("allocated − tracked tensor bytes after the weights phase (blocks the "
                       "allocator did not split)")
            if c.name == LOAD_SEGMENTS and "weights" in phases:
                w = phases["weights"]
                traced = w.reserved - w.tracked
                how = ("reserved − tracked tensor bytes after the weights phase (the segments a "
                       "free-memory drop holds; no RoPE temporaries are traced)")
            out.append(ComponentTrace(name=c.name, category=c.category, estimated=est,
                                      traced=traced, how=how))
            continue
        if c.name == "activation peak (profile run)" and "profile_run" in phases:
            ws = charged.get(MOE_WORKSPACE, 0)
            traced, how = act_peak - ws, "tracked peak of the profile run above what was live"
            if ws:
                how += " − the fused-MoE workspace (its own row)"
        elif c.name == V2_SAMPLER_STATE_ROW and c.name in charged:
            traced, how = charged[c.name], ("bytes of the sampler state tensors the replica "
                                            "made before the profile run (live at the end)")
        elif c.name == MOE_WORKSPACE and "profile_run" in phases and MOE_WORKSPACE in charged:
            traced, how = charged[MOE_WORKSPACE], ("bytes of the workspaces the replica's first "
                                                   "fused-MoE call made (live at the end)")
        elif c.name == "cuBLAS workspace" and kind == "cuda" and "profile_run" in phases:
            p = phases["profile_run"]
            w = phases["weights"]
            state = charged.get(V2_SAMPLER_STATE_ROW, 0)  # made in this phase, before the run
            traced = max(0, (p.allocated_peak - w.allocated - state) - act_peak)
            how = "allocator peak of the profile run above the tracked peak (op-internal)"
        elif c.name == "CUDA-graph pool above the estimate":
            if capture is not None:
                out.extend(_graph_rows(rank_context(e, r), capture))
            how = "the predicted pool above vLLM's estimate (not measurable alone)"
        elif c.name == "non-torch increase (profile run)" and kind == "cuda" and \
                "profile_run" in phases:
            made = [after for _, after in comm_phases.values()]
            before = made[-1] if made else "context"
            ctx_nt, prof_nt = phases[before].non_torch, phases["profile_run"].non_torch
            if ctx_nt is not None and prof_nt is not None:
                traced = prof_nt - ctx_nt
                how = ("non-torch after the profile run − after the context" if
                       before == "context" else "non-torch after the profile run − after the "
                       "runner's stream" if before == RUNNER_STREAM else "non-torch after the "
                       "profile run − after the last NCCL communicator's first all_reduce")
                if before == "context" and any(x.name.startswith("NCCL ")
                                               for x in r.components):
                    how += (" (a rank traced alone: it holds the first fill kernel, which the "
                            "deployment's NCCL warm-up runs before its profile run)")
        elif (row := next((k for k in comm_phases if c.name.startswith(k)), None)) is not None:
            before, after = comm_phases[row]
            ctx_nt, nccl_nt = phases[before].non_torch, phases[after].non_torch
            if ctx_nt is not None and nccl_nt is not None:
                traced = nccl_nt - ctx_nt
                how = ("non-torch growth over the model runner's torch.cuda.Stream()"
                       if after == RUNNER_STREAM else "non-torch growth over the group's "
                       "torch groups, its ncclCommInitRank and warm-up all_reduce"
                       + (" (the first communicator)" if before == "context" else
                          ", made after the first communicator"))
        elif c.name == "CUDA context" and kind == "cuda":
            traced, how = phases["context"].non_torch, "used − reserved after the first tensor"
        elif c.name == "allocator rounding (KV tensors)" and kv_slack is not None:
            traced = kv_slack
            how = "reserved growth of the KV allocation − the KV tensors' bytes"
        out.append(ComponentTrace(name=c.name, category=c.category, estimated=c.bytes,
                                  traced=traced, how=how))
    return out


def _first_all_reduce(comm: Any, tracker: object) -> None:
    """A communicator's first collective: an all_reduce of one element, as vLLM's
    ``PyNcclCommunicator.__init__`` issues after creating it ("A small all_reduce for warmup",
    vllm/distributed/device_communicators/pynccl.py, 0.11.0 and 0.33.0)."""
    import torch

    from memprof.trace.tracker import Tracker

    assert isinstance(tracker, Tracker)
    with tracker.charge("NCCL warm-up"):
        x = torch.zeros(1, device="cuda")
        y = comm.all_reduce(x)
        torch.cuda.synchronize()
        del x, y


def _runner_stream_row(r: RankEstimate) -> str | None:
    """The rank's row of torch's stream pool made by vLLM's model runner before the profile run
    (``RUNNER_STREAM_ROWS``), if it has one."""
    return next((c.name for c in r.components if c.name in RUNNER_STREAM_ROWS), None)


def _graph_rows(ctx: TermContext, cap: GraphCapture) -> list[ComponentTrace]:
    """The graph pool memprof predicts for the sizes that were captured, whole and in its two
    parts, beside the capture's measure."""
    g = cudagraph_model(ctx, sizes=cap.sizes)
    n = ", ".join(f"{m} {len(v)}" for m, v in cap.sizes.items())
    pool = [] if cap.pool is None or not g.pool else [
        ComponentTrace(name="CUDA-graph pool: the graphs' private pool", category="cudagraph",
                       estimated=g.pool, traced=cap.pool,
                       how="segments of the capture's graph pool (torch.cuda.memory_snapshot): "
                       "the largest size's decode live set with the logits processor, and each "
                       "graph's kept logits where the release keeps them"),
        ComponentTrace(name="CUDA-graph pool: tensors outside the private pool",
                       category="cudagraph", estimated=g.actual - g.driver - g.pool,
                       traced=cap.tensors - cap.pool,
                       how="memory_reserved delta − the private pool: the attention backend's "
                       "capture state, the runner's input buffers, the logits buffer, the "
                       "capture stream's cuBLAS workspace and torch's generator graph state")]
    return [
        ComponentTrace(name="CUDA-graph pool (memprof's prediction)", category="cudagraph",
                       estimated=g.actual, traced=cap.total,
                       how=f"mem_get_info delta around the capture (vLLM's measure); sizes {n}, "
                       f"{cap.graphs} graphs"),
        ComponentTrace(name="CUDA-graph pool: tensors", category="cudagraph",
                       estimated=g.actual - g.driver, traced=cap.tensors,
                       how="memory_reserved delta around the capture (the private pool)"),
        ComponentTrace(name="CUDA-graph pool: driver (graph executables)", category="cudagraph",
                       estimated=g.driver, traced=cap.driver,
                       how="the capture's mem_get_info delta − its memory_reserved delta"),
        *pool,
    ]


def _cublas_workspace(sim: object, e: Estimate) -> None:
    """The fake device's stand-in for what cuBLAS allocates through torch at the first GEMM on a
    stream (its workspace, ``cublas_workspace_bytes``; on a GPU torch allocates it itself)."""
    from memprof.core.terms.activation import cublas_workspace_bytes
    from memprof.trace.device import SimSink

    assert isinstance(sim, SimSink)
    sim.malloc(cublas_workspace_bytes(e.gpu), "cuBLAS workspace")


def torch_missing() -> EnvironmentProblem:
    return EnvironmentProblem("memprof trace needs PyTorch",
                              hint="pip install 'memprof-llm[trace]' (or torch alone)")
