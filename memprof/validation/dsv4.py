"""Validate the DeepSeek-V4 sparse MLA decode (seed 003) and its scratch policies.

For one model and deployment it runs the decode of ``layers`` DeepSeek-V4 layers (at least one of
every layer kind the model has) once per policy (``per-step``, ``shared``) and reports:

- parity: every kind's last layer against the fp32 torch reference over the fp8_ds_mla cache
  (the two scopes merged by log-sum-exp), and the kernel reading fp8_ds_mla directly;
- memory: the scratch bytes the policy allocates per call (per-step: one call per layer kind,
  times the model's layers of that kind, as all stay in the CUDA-graph pool) or holds (shared),
  beside the estimate's ``AITER DSv4 decode`` components for the same deployment: vLLM on an
  MI355X (AITER is the ROCm path), ``--kv-cache-memory-bytes`` setting the pool the dequant
  copies are sized by; the kernel's pools have exactly the estimate's ``num_gpu_blocks``;
- graph-clean: the decode of all layers run captured once and replayed with new lens and
  indices (``graph_clean``); on a machine without CUDA the simulated recorder;
- speed (CUDA): a step per policy, the shared / per-step ratio, and the direct fp8_ds_mla kernel's
  bandwidth next to a device-to-device copy (reported, no target: gathered rows are random).
"""

from __future__ import annotations

import functools
import math

import torch

from memprof.core.deployment import Deployment
from memprof.core.models import load_model
from memprof.kernels.dsv4_decode import (
    CATALOG_POLICY,
    KINDS,
    POLICIES,
    DSV4DecodeScratch,
    layer_kind,
)
from memprof.kernels.sparse_mla_decode import (
    D_HEAD,
    SLOT_BYTES,
    merge_scopes_reference,
    pack_fp8_ds_mla,
    sparse_mla_decode,
    sparse_mla_decode_reference,
)
from memprof.validation.checks import MAX_SHARED_RATIO, GraphClean, Parity
from memprof.validation.dsv4_result import (
    VALIDATION,
    DSV4PolicyRun,
    DSV4Validation,
    MemoryPart,
)
from memprof.validation.graph_clean import CudaGraphRecorder, SimulatedRecorder, check_graph_clean
from memprof.validation.mla_tq import (
    REL_TOL,
    _alternate_steps,
    _bandwidth,
    _cuda_mem,
    _graph_time_ms,
    _parity,
    _seq_lens,
    _time_ms,
    copy_bandwidth_gbps,
)
from memprof.validation.registry import Request, prepare

CATALOG_KEYS = ("AITER DSv4 decode K dequant bf16+fp8", "AITER DSv4 decode q_fp8/out/indices")
SWA_ROWS = 64  # SWA block of 64 tokens (vLLM @023da1fc SlidingWindowMLASpec, DeepSeek-V4)
# compressed entries per 256-token block (vLLM @023da1fc MLAAttentionSpec, compress_ratio 4 / 128)
EXTRA_ROWS = {"C4": 64, "C128": 2}
DEFAULT_KV_BYTES = 64 << 20  # --kv-cache-memory-bytes of the validated deployment (CPU)
HOLE_FRACTION = 0.03  # -1 entries sprinkled inside lens


# --- inputs ---------------------------------------------------------------------------------------


def _indices(lens: torch.Tensor, topk: int, slots: int, gen: torch.Generator) -> torch.Tensor:
    """``(B, topk)`` int32 random slots for the first ``lens`` entries, a few ``-1`` holes among
    them, ``-1`` after."""
    B = lens.shape[0]
    idx = torch.randint(0, slots, (B, topk), generator=gen, dtype=torch.int32)
    col = torch.arange(topk)[None, :]
    holes = torch.rand((B, topk), generator=gen) < HOLE_FRACTION
    idx[(col >= lens[:, None].long()) | holes] = -1
    return idx


def scope_inputs(ctx: torch.Tensor, window: int, index_topk: int, max_len: int,
                 slots: dict[str, int], gen: torch.Generator
                 ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Per scope (``SWA``, ``C4``, ``C128``): ``(indices, lens)`` for requests of context
    ``ctx``: the last ``min(ctx, window)`` tokens; C4 ``min(ceil(ctx/4), index_topk)`` of
    ``index_topk``; C128 all ``ceil(ctx/128)`` of ``ceil(max_len/128)``."""
    out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    swa_lens = ctx.clamp(max=window).to(torch.int32)
    out["SWA"] = (_indices(swa_lens, window, slots["SWA"], gen), swa_lens)
    if "C4" in slots:
        c4 = ((ctx + 3) // 4).clamp(max=index_topk).to(torch.int32)
        out["C4"] = (_indices(c4, index_topk, slots["C4"], gen), c4)
    if "C128" in slots:
        k = math.ceil(max_len / 128)
        c128 = ((ctx + 127) // 128).clamp(max=k).to(torch.int32)
        out["C128"] = (_indices(c128, k, slots["C128"], gen), c128)
    return out


def _estimates(model: str, dep: Deployment, gpu_name: str, notes: list[str]
               ) -> tuple[int | None, dict[str, dict[str, int]]]:
    """``num_gpu_blocks`` and, per catalog policy, the standalone bytes of each catalog key."""
    from memprof.core.estimate import estimate  # the estimator imports no torch

    blocks = None
    out: dict[str, dict[str, int]] = {}
    for pol in ("per-layer", "shared"):
        try:
            est = estimate(model, dep.with_(scratch=pol), gpu_name=gpu_name)
        except Exception as e:  # an estimate that cannot run proves nothing: the check fails
            notes.append(f"estimate({model}, {pol}) failed: {e}")
            continue
        rank = est.ranks[0]
        nb = rank.kv.num_gpu_blocks
        if blocks is not None and nb != blocks:
            notes.append(f"the estimate sizes {nb} blocks under {pol} but {blocks} otherwise")
        blocks = nb
        col = 1 if pol == "per-layer" else 2
        out[pol] = {row[0]: int(row[col]) for row in rank.scratch_savings
                    if row[0] in CATALOG_KEYS}
    return blocks, out


# --- the run --------------------------------------------------------------------------------------


def validate_dsv4(*, model: str = "deepseek-v4-flash", tp: int = 8, batch: int = 32,
                  context_len: int = 8192, layers: int = 4, device: str = "cpu",
                  gpu_name: str = "MI355X", kv_cache_memory_bytes: int = DEFAULT_KV_BYTES,
                  policies: tuple[str, ...] = POLICIES, graph_steps: int | None = None,
                  reps: int = 10, rounds: int = 3, check_graph: bool = True,
                  measure_bandwidth: bool = True, seed: int = 0) -> DSV4Validation:
    """DeepSeek-V4 sparse decode (seed 003) on one rank of ``model`` at TP ``tp``.

    ``graph_steps``: replays of the graph-clean check (default 100 on CUDA, 3 simulated)."""
    dev = torch.device(device)
    on_cuda = dev.type == "cuda"
    spec = load_model(model)
    attn = spec.layers[0].attention
    if attn.kind != "dsv4":
        raise ValueError(f"{spec.name} has no DeepSeek-V4 attention layers")
    heads = max(1, attn.num_heads // tp)
    window = attn.sliding_window or 128
    index_topk = attn.index_topk
    scale = attn.head_dim ** -0.5
    kinds_of = [(lay.index, layer_kind(lay.attention.compress_ratio)) for lay in spec.layers
                if lay.attention.kind == "dsv4" and not lay.is_mtp]
    counts = {k: sum(1 for _, kk in kinds_of if kk == k) for k in KINDS}
    counts = {k: n for k, n in counts.items() if n}
    # the first `layers` layers, plus the first of every kind they miss
    run = list(kinds_of[:layers])
    for k in counts:
        if all(kk != k for _, kk in run):
            run.append(next(x for x in kinds_of if x[1] == k))
    notes: list[str] = []
    dep = Deployment(tp=tp, max_num_seqs=batch, max_model_len=context_len,
                     kv_cache_dtype="fp8", kv_cache_memory_bytes=kv_cache_memory_bytes)
    nb, est = _estimates(model, dep, gpu_name, notes)
    if nb is None or nb < 1:
        notes.append("no KV block count from the estimate: pools of 16 blocks")
        nb = 16
    gen = torch.Generator().manual_seed(seed)
    extra_kinds = [k for k in ("C4", "C128") if k in counts]
    slots: dict[str, int] = {"SWA": nb * SWA_ROWS}
    slots.update({k: nb * EXTRA_ROWS[k] for k in extra_kinds})

    def pool(rows: int) -> torch.Tensor:  # fp8_ds_mla cache of nb blocks of `rows`
        x = torch.randn((nb * rows, D_HEAD), generator=gen)
        return pack_fp8_ds_mla(x, rows).to(dev)  # (nb, rows, 584)

    caches: dict[str, torch.Tensor] = {"SWA": pool(SWA_ROWS)}
    caches.update({k: pool(EXTRA_ROWS[k]) for k in extra_kinds})
    qs = [torch.randn((batch, heads, D_HEAD), generator=gen).to(torch.bfloat16).to(dev)
          for _ in run]  # per run layer (B, H, 512)

    def make_inputs() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        ctx = _seq_lens(batch, context_len, gen)
        return {k: (i.to(dev), n.to(dev)) for k, (i, n) in scope_inputs(
            ctx, window, index_topk, context_len, slots, gen).items()}

    static = make_inputs()  # the captured input buffers
    extra_topk = max((static[k][0].shape[1] for k in extra_kinds), default=0)
    topk = tuple((k, int(static[k][0].shape[1])) for k in static)
    outs = [torch.zeros((batch, heads, D_HEAD), dtype=torch.bfloat16, device=dev) for _ in run]
    use_triton = on_cuda

    def decode(holder: DSV4DecodeScratch, i: int) -> None:
        li, kind = run[i]
        ex = static.get(kind) if kind != "SWA-only" else None
        holder.decode_layer(li, kind, qs[i], scale, caches["SWA"], *static["SWA"],
                            caches.get(kind), ex[0] if ex else None, ex[1] if ex else None,
                            outs[i], use_triton=use_triton)

    def step(holder: DSV4DecodeScratch) -> None:
        for i in range(len(run)):
            decode(holder, i)

    def reference(i: int) -> torch.Tensor:
        _li, kind = run[i]
        o, lse = sparse_mla_decode_reference(qs[i], caches["SWA"], *static["SWA"], scale)
        if kind == "SWA-only":
            return o
        o2, l2 = sparse_mla_decode_reference(qs[i], caches[kind], *static[kind], scale)
        return merge_scopes_reference(o, lse, o2, l2)

    tol = REL_TOL[torch.bfloat16]
    runs: list[DSV4PolicyRun] = []
    live: dict[str, DSV4DecodeScratch] = {}
    for pol in policies:
        if on_cuda:
            torch.cuda.empty_cache()
            a0, r0 = _cuda_mem(dev)
            torch.cuda.reset_peak_memory_stats(dev)
        holder = DSV4DecodeScratch(pol, tokens=batch, heads=heads, swa_topk=window,
                                   extra_topk=extra_topk, swa_pool=(nb, SWA_ROWS),
                                   extra_pools={k: (nb, EXTRA_ROWS[k]) for k in extra_kinds},
                                   device=dev)
        call: dict[str, tuple[int, int]] = {}  # kind → (catalog bytes, unmodelled) per call
        for i in range(len(run)):
            decode(holder, i)
            call[run[i][1]] = (holder.last_call_bytes, holder.last_call_extra)
        mem: list[int | None] = [None, None, None]
        if on_cuda:
            a1, r1 = _cuda_mem(dev)
            mem = [a1 - a0, r1 - r0, torch.cuda.max_memory_allocated(dev) - a0]
        parity: list[Parity] = []
        for k in counts:
            i = max(j for j, (_, kk) in enumerate(run) if kk == k)
            parity.append(_parity(f"{k} layer {run[i][0]} vs fp32 reference", outs[i],
                                  reference(i), tol))
        runs.append(_memory_run(pol, holder, call, counts, len(run), est, parity, mem))
        live[pol] = holder

    graphs: dict[str, GraphClean | None] = {p: None for p in live}
    if check_graph:
        steps = graph_steps if graph_steps is not None else (100 if on_cuda else 3)
        inputs = [static] + [make_inputs() for _ in range(steps)]

        def set_inputs(j: int) -> None:
            for k, (idx, lens) in inputs[j].items():
                static[k][0].copy_(idx)
                static[k][1].copy_(lens)

        for pol, holder in live.items():
            rec: CudaGraphRecorder | SimulatedRecorder
            rec = CudaGraphRecorder(dev) if on_cuda else SimulatedRecorder(holder.counter)

            def tracked(h: DSV4DecodeScratch = holder) -> dict[str, int]:
                t = h.tracked()
                t.update({f"out[{i}]": o.data_ptr() for i, o in enumerate(outs)})
                t.update({f"{k}.{n}": x.data_ptr() for k, (i_, l_) in static.items()
                          for n, x in (("indices", i_), ("lens", l_))})
                return t

            graphs[pol] = check_graph_clean(rec, functools.partial(step, holder), set_inputs,
                                            outs, tracked, steps)
            rec.release()
        set_inputs(0)
        if not on_cuda:
            notes.append("graph-clean on the CPU: simulated (the step re-run eagerly, "
                         "allocations counted by the scratch object); CUDA graph capture, "
                         "replay and the graph pool size are CUDA-only and skipped here")
    runs = [_with(r, graph=graphs.get(r.policy)) for r in runs]

    direct = _direct_parity(qs[0], caches, static, scale, tol, use_triton)
    ratio = speed_ok = None
    bw = None
    if on_cuda:
        times = _alternate_steps({p: functools.partial(step, h) for p, h in live.items()},
                                 dev, reps, rounds)
        runs = [_with(r, step_ms=times.get(r.policy)) for r in runs]
        if "per-step" in times and "shared" in times:
            ratio = times["shared"] / times["per-step"]
            speed_ok = ratio <= MAX_SHARED_RATIO
        if measure_bandwidth:
            k = "C4" if "C4" in static else "SWA"
            idx, lens = static[k]

            def direct_call() -> None:
                sparse_mla_decode(qs[0], caches[k], idx, lens, scale)

            ms = eager_ms = _time_ms(direct_call, dev, reps * 2)
            try:  # the GPU time alone, as for the MLA decode (a capture failure keeps eager)
                ms = _graph_time_ms(direct_call, dev, reps * 2)
            except RuntimeError as exc:
                notes.append(f"bandwidth timed eagerly: the call did not capture ({exc!s:.80})")
            valid = int(((idx >= 0) & (torch.arange(idx.shape[1], device=dev)[None, :]
                                       < lens[:, None])).sum())
            nbytes = (valid * SLOT_BYTES + idx.numel() * 4 + batch * heads * D_HEAD * 2 * 2
                      + batch * heads * 4)
            bw = _bandwidth(nbytes, ms, eager_ms, copy_bandwidth_gbps(dev), None)
    else:
        notes.append("device is not CUDA: the decode under test is the torch reference path "
                     "(the Triton kernels run under TRITON_INTERPRET=1 in tests/kernels); no "
                     "timing or bandwidth")
    notes.append("per-step bytes are what one step allocates: under CUDA graphs every layer's "
                  "copy stays in the graph pool (vLLM #40909), so the model figure is Σ kind "
                  "layers × bytes per call; the scopes' lse (not in the catalog) is listed apart")
    for h in live.values():
        h.release()
    return DSV4Validation(
        kernel="dsv4", model=spec.name, backend="aiter_mla (Triton stand-in)", device=str(dev),
        triton=use_triton, batch=batch, context_len=context_len, heads=heads, topk=topk,
        num_blocks=nb, layer_kinds=tuple(counts.items()), runs=tuple(runs),
        direct_parity=tuple(direct), shared_over_per_step=ratio, speed_passed=speed_ok,
        bandwidth=bw, notes=tuple(notes))


def _direct_parity(q: torch.Tensor, caches: dict[str, torch.Tensor],
                   static: dict[str, tuple[torch.Tensor, torch.Tensor]], scale: float,
                   tol: float, use_triton: bool) -> list[Parity]:
    """The kernel on the fp8_ds_mla cache itself (rows dequantised in registers)."""
    out: list[Parity] = []
    for k, (idx, lens) in static.items():
        o, lse = sparse_mla_decode(q, caches[k], idx, lens, scale, use_triton=use_triton)
        ro, rl = sparse_mla_decode_reference(q, caches[k], idx, lens, scale)
        out.append(_parity(f"{k} scope, fp8_ds_mla read directly", o, ro, tol))
        fin = torch.isfinite(rl)
        lse_ok = bool(torch.equal(fin, torch.isfinite(lse))) and (
            not bool(fin.any()) or float((lse[fin] - rl[fin]).abs().max()) <= 1e-3)
        out.append(Parity(name=f"{k} scope lse", dtype="float32",
                          max_abs=float((lse[fin] - rl[fin]).abs().max()) if fin.any() else 0.0,
                          rel=0.0, tol=1e-3, passed=lse_ok))
    return out


def _memory_run(pol: str, holder: DSV4DecodeScratch, call: dict[str, tuple[int, int]],
                counts: dict[str, int], layers_run: int,
                est: dict[str, dict[str, int]], parity: list[Parity],
                mem: list[int | None]) -> DSV4PolicyRun:
    cat = est.get(CATALOG_POLICY[pol])
    deq_key, io_key = CATALOG_KEYS
    if pol == "per-step":
        per = tuple((k, counts[k], call[k][0]) for k in counts)
        measured = sum(n * b for _k, n, b in per)
        unmodelled = max((call[k][1] for k in counts), default=0)
        parts: tuple[MemoryPart, ...] = ()
    else:
        per = ()
        measured = holder.held_bytes
        unmodelled = holder.extra_bytes
        parts = (_part(deq_key + " (workspace)", holder.workspace.size_bytes, cat, deq_key),
                 _part(io_key + " (scope scratch)", holder.io_bytes, cat, io_key))
    total = None if cat is None else sum(cat.get(k, 0) for k in CATALOG_KEYS)
    return DSV4PolicyRun(
        policy=pol, layers_run=layers_run, model_layers=sum(counts.values()),
        per_call_bytes=per, measured_bytes=measured, estimate_bytes=total,
        estimate_match=None if total is None else total == measured, parts=parts,
        unmodelled_bytes=unmodelled, allocated_delta_bytes=mem[0], reserved_delta_bytes=mem[1],
        peak_delta_bytes=mem[2], step_ms=None, parity=tuple(parity), graph=None)


def _part(name: str, measured: int, cat: dict[str, int] | None, key: str) -> MemoryPart:
    e = None if cat is None else cat.get(key)
    return MemoryPart(name=name, measured_bytes=measured, estimate_bytes=e,
                      equal=None if e is None else e == measured)


def _with(r: DSV4PolicyRun, **kw: object) -> DSV4PolicyRun:
    return DSV4PolicyRun(**{**{f: getattr(r, f) for f in r.__dataclass_fields__}, **kw})


# --- the run of the row (memprof/validation/dsv4_result.py) -------------------------------------

KV_BYTES = {"cuda": 1 << 30, "cpu": DEFAULT_KV_BYTES}  # --kv-cache-memory-bytes by device


def run(req: Request) -> DSV4Validation:
    p = prepare(VALIDATION, req)
    return validate_dsv4(model=p.model, tp=p.tp, batch=p.batch, context_len=p.context,
                         layers=req.layers, device=req.device, gpu_name=p.gpu,
                         kv_cache_memory_bytes=req.kv_cache_memory_bytes or KV_BYTES[req.device],
                         graph_steps=req.graph_steps, reps=req.steps, seed=req.seed)
