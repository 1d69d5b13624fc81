"""Validate the MLA and TurboQuant decode kernels and their scratch policies against the estimate.

Pure data in, a frozen dataclass out (``memprof.validation.mla_tq_result``, with the rows
``memprof validate`` runs through ``run_mla`` and ``run_tq`` here); nothing is printed. For one
model and deployment it runs a decode loop over ``layers`` layers (capped to fit the device) once
per scratch policy (``per-layer``, ``shared``) and reports:

- parity: the kernel's output against an fp32 torch reference (and, for TurboQuant, against
  plain attention over the unquantised K/V), with a tolerance per dtype;
- memory: the scratch the policy holds (exact tensor bytes; on CUDA also the allocator's
  ``memory_allocated`` / ``memory_reserved`` deltas and the peak), scaled to all layers of the
  model, next to the estimate's catalog bytes for the same deployment
  (``memprof.core.estimate.estimate``, components whose name starts with the catalog buffer's);
- speed (CUDA): time per decode step per policy, the shared / per-layer ratio, and the achieved
  bandwidth of the attention kernel against a device-to-device copy measured in the same run.

The decode loop reuses one KV cache for every layer (only the scratch differs between layers);
each layer gets its own queries so per-layer buffers hold distinct results.
``device="cpu"`` runs the torch reference path (Triton skipped); ``device="cuda"`` the kernels.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Callable
from typing import TypeVar

import torch

from memprof.core.attention import kind_of
from memprof.core.deployment import Deployment
from memprof.core.kvcache import TQ_BOUNDARY_LAYERS, tq_slot_bytes
from memprof.core.models import ModelSpec, load_model
from memprof.core.scratch import TQ_MAX_KV_SPLITS
from memprof.kernels.mla_decode import (
    D_LATENT,
    D_QK,
    DecodeOutPolicy,
    MLAConfig,
    default_num_splits,
    mla_decode,
    mla_decode_reference,
    mla_mid_shapes,
)
from memprof.kernels.tq_decode import (
    TQDecodeBuffers,
    tq_buffer_specs,
    tq_cache_shape,
    tq_decode,
    tq_decode_reference,
    tq_store_k8v4,
)
from memprof.kernels.workspace import Workspace, aligned_layout
from memprof.validation.checks import MAX_SHARED_RATIO, Bandwidth, Parity
from memprof.validation.mla_tq_result import MLA, TQ, KernelValidation, PolicyRun
from memprof.validation.registry import Request, prepare

POLICIES = ("per-layer", "shared")
_P = TypeVar("_P")  # what holds one policy's scratch (DecodeOutPolicy, TQDecodeBuffers)
# ‖out − ref‖ / ‖ref‖ tolerances (device/METHOD.md): bf16 operands 1e-2, fp32 far under 1e-3.
REL_TOL = {torch.bfloat16: 1e-2, torch.float16: 1e-2, torch.float32: 1e-4}
TQ_VS_UNQUANTISED_TOL = 0.3  # 4-bit values on random data: ~0.1 measured; a sanity bound
PLAIN_REQUESTS = 8  # requests compared with unquantised attention (on the CPU)
STORE_ROWS = 4096  # cache rows quantised per tq_store_k8v4 call while building the cache
MIN_BANDWIDTH_FRACTION = 0.70  # MLA ≥ 70 % of copy bandwidth at B ≥ 64, long contexts
CATALOG_NAMES = {"cutlass_mla": "CUTLASS MLA decode output",
                 "flashinfer_mla": "FlashInfer MLA decode output",
                 "turboquant": "TurboQuant decode mid_o+output+lse"}


# --- helpers --------------------------------------------------------------------------------------


def _parity(name: str, out: torch.Tensor, ref: torch.Tensor, tol: float) -> Parity:
    o, r = out.double(), ref.double()
    diff = o - r
    rel = float(diff.norm() / r.norm().clamp_min(1e-30))
    max_abs = float(diff.abs().max()) if diff.numel() else 0.0
    finite = bool(torch.isfinite(o).all())
    return Parity(name=name, dtype=str(out.dtype).removeprefix("torch."), max_abs=max_abs,
                  rel=rel, tol=tol, passed=finite and rel <= tol)


def _estimate_bytes(model: str, dep: Deployment, gpu_name: str, catalog: str,
                    notes: list[str]) -> int | None:
    from memprof.core.estimate import estimate  # the estimator imports no torch

    try:
        est = estimate(model, dep, gpu_name=gpu_name)
    except Exception as e:  # an estimate that cannot run is a note, not a failed kernel check
        notes.append(f"estimate({model}, {dep.scratch}) failed: {e}")
        return None
    total = sum(c.bytes for c in est.ranks[0].components if c.name.startswith(catalog))
    if total == 0:
        notes.append(f"estimate({model}, {dep.scratch}): {catalog} adds 0 B — a larger caller of "
                     "the same workspace already covers it")
    return total


def _cuda_mem(device: torch.device) -> tuple[int, int]:
    torch.cuda.synchronize(device)
    return torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)


def _time_ms(fn: Callable[[], object], device: torch.device, reps: int) -> float:
    """Median milliseconds of ``fn`` over ``reps`` CUDA-event-timed runs (after one warm-up)."""
    fn()
    times: list[float] = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize(device)
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _graph_time_ms(fn: Callable[[], object], device: torch.device, reps: int,
                   calls: int = 10) -> float:
    """Median milliseconds of one ``fn`` on the GPU alone: ``calls`` calls captured in one CUDA
    graph, the graph replayed ``reps`` times (after one warm-up), each replay timed by CUDA events,
    divided by ``calls``.

    This is the kernel time without the host's launch overhead (Python + two Triton launches,
    tens of µs), which an eager single call puts between the start event and the first kernel;
    decode runs under CUDA graphs in vLLM, so the graph figure is the one the engine sees. ``fn``
    must not allocate (its workspace is reserved beforehand).
    """
    fn()  # compiled and its buffers grown before capture
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return _time_ms(graph.replay, device, reps) / calls


def copy_bandwidth_gbps(device: torch.device, nbytes: int = 1 << 30, reps: int = 20) -> float:
    """Device-to-device copy bandwidth, bytes read + written per second (GB/s, 1e9)."""
    src = torch.empty((nbytes,), dtype=torch.uint8, device=device)  # (nbytes,)
    src.random_(0, 255)
    dst = torch.empty_like(src)  # (nbytes,)
    ms = _time_ms(lambda: dst.copy_(src), device, reps)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def _seq_lens(batch: int, context_len: int, gen: torch.Generator) -> torch.Tensor:
    """Context lengths in [context_len/2, context_len], the longest exactly context_len."""
    lo = max(1, context_len // 2)
    lens = torch.randint(lo, context_len + 1, (batch,), generator=gen, dtype=torch.int32)
    lens[0] = context_len
    return lens  # (B,)


def _block_table(seq_lens: torch.Tensor, page: int, gen: torch.Generator
                 ) -> tuple[torch.Tensor, int]:
    """A shuffled block table covering every request; returns it and the number of blocks."""
    per = [math.ceil(int(n) / page) for n in seq_lens.tolist()]
    width = max(1, max(per, default=1))
    total = sum(per)
    perm = torch.randperm(max(total, 1), generator=gen).to(torch.int32)
    bt = torch.zeros((len(per), width), dtype=torch.int32)  # (B, width)
    pos = 0
    for b, n in enumerate(per):
        bt[b, :n] = perm[pos:pos + n]
        pos += n
    return bt, max(total, 1)


def _mla_layers(spec: ModelSpec) -> int:
    return sum(1 for lay in spec.layers if lay.attention.kind == "mla" and not lay.is_mtp)


def _tq_layers(spec: ModelSpec) -> int:
    n = spec.num_layers
    return sum(1 for lay in spec.layers
               if kind_of(lay.attention).supports_turboquant() and not lay.is_mtp
               and TQ_BOUNDARY_LAYERS <= lay.index < n - TQ_BOUNDARY_LAYERS)


def _per_layer_bytes(nbytes: int, layers: int) -> int:
    return nbytes // layers if layers else 0


# --- MLA ------------------------------------------------------------------------------------------


def validate_mla(*, model: str = "deepseek-r1", tp: int = 8, backend: str = "cutlass_mla",
                 batch: int = 64, context_len: int = 8192, layers: int = 4,
                 device: str = "cpu", block_size: int = 64, gpu_name: str = "B200",
                 policies: tuple[str, ...] = POLICIES, num_splits: int | None = None,
                 config: MLAConfig | None = None, reps: int = 10, rounds: int = 5,
                 measure_bandwidth: bool = True, check_parity: bool = True,
                 seed: int = 0) -> KernelValidation:
    """MLA decode (seed 000) on one rank of ``model`` at TP ``tp``: parity, scratch, speed.

    ``gpu_name`` only feeds the estimate (CUTLASS MLA is an SM100 backend: B200 by default);
    the kernels run on whatever ``device`` is.
    """
    dev = torch.device(device)
    spec = load_model(model)
    attn = spec.layers[0].attention
    heads = max(1, attn.num_heads // tp)
    model_layers = _mla_layers(spec)
    scale = (attn.qk_nope_head_dim + attn.qk_rope_head_dim) ** -0.5
    notes: list[str] = []
    gen = torch.Generator().manual_seed(seed)
    lens = _seq_lens(batch, context_len, gen)  # (B,)
    bt, nblocks = _block_table(lens, block_size, gen)  # (B, W)
    kv = torch.randn((nblocks, block_size, D_QK), generator=gen).to(torch.bfloat16).to(dev)
    qs = [torch.randn((batch, heads, D_QK), generator=gen).to(torch.bfloat16).to(dev)
          for _ in range(layers)]  # L × (B, H, 576)
    bt, lens = bt.to(dev), lens.to(dev)
    on_cuda = dev.type == "cuda"
    use_triton = on_cuda
    cfg = config or MLAConfig()
    if num_splits is None:
        block_h = max(16, min(cfg.block_h, 1 << max(0, (heads - 1).bit_length())))
        from memprof.kernels._triton import num_sms

        num_splits = default_num_splits(batch, math.ceil(heads / block_h), context_len,
                                        min(cfg.block_n, block_size), num_sms(dev))
    mid_ws = Workspace(dev, name="mla_mid")
    mo_shape, ml_shape = mla_mid_shapes(batch, heads, num_splits)
    mid_ws.get_simultaneous((mo_shape, torch.float32), (ml_shape, torch.float32))  # pre-reserve

    def decode(policy: DecodeOutPolicy, layer: int) -> None:
        buf = policy.get(layer, batch)  # (B, Hpad, 512)
        mla_decode(qs[layer], kv, bt, lens, scale, out=policy.heads_view(buf),
                   workspace=mid_ws, num_splits=num_splits, config=cfg,
                   max_seq_len=context_len, use_triton=use_triton)

    refs: dict[int, torch.Tensor] = {}

    def ref(layer: int) -> torch.Tensor:
        if layer not in refs:
            refs[layer] = mla_decode_reference(qs[layer], kv, bt, lens, scale)  # (B, H, 512)
        return refs[layer]

    tol = REL_TOL[torch.bfloat16]  # the output is bf16 on either path
    catalog = CATALOG_NAMES[backend]
    runs: list[PolicyRun] = []
    live: dict[str, DecodeOutPolicy] = {}
    for pol in policies:
        if on_cuda:
            torch.cuda.empty_cache()
            a0, r0 = _cuda_mem(dev)
            torch.cuda.reset_peak_memory_stats(dev)
        policy = DecodeOutPolicy(pol, backend=backend, num_heads=heads, device=dev)
        for layer in range(layers):
            decode(policy, layer)
        a_d = r_d = p_d = None
        if on_cuda:
            a1, r1 = _cuda_mem(dev)
            a_d, r_d = a1 - a0, r1 - r0
            p_d = torch.cuda.max_memory_allocated(dev) - a0
        parity: list[Parity] = []
        if check_parity:
            last = layers - 1
            out_last = policy.heads_view(policy.get(last, batch))  # (B, H, 512)
            parity.append(_parity(f"layer {last} vs fp32 reference", out_last, ref(last), tol))
            if pol == "per-layer" and layers > 1:
                out0 = policy.heads_view(policy.get(0, batch))
                parity.append(_parity("layer 0 (its own buffer) vs fp32 reference", out0,
                                      ref(0), tol))
            pad = policy.get(last, batch)[:, heads:]  # padded heads stay zero
            if pad.numel():
                parity.append(Parity(name="padded heads zero",
                                     dtype=str(pad.dtype).removeprefix("torch."),
                                     max_abs=float(pad.abs().max()), rel=0.0, tol=0.0,
                                     passed=bool((pad == 0).all())))
        est = _estimate_bytes(model, Deployment(tp=tp, max_num_seqs=batch,
                                                max_model_len=context_len,
                                                attention_backend=backend, scratch=pol),
                              gpu_name, catalog, notes)
        runs.append(_policy_run(pol, layers, model_layers, policy.held_bytes, est,
                                (a_d, r_d, p_d), parity))
        live[pol] = policy

    ratio = speed_ok = None
    bw = None
    if on_cuda:
        runs, ratio, speed_ok = _timed(runs, live, decode, layers, dev, reps, rounds)
        if measure_bandwidth:
            pol0 = next(iter(live.values()))
            one = functools.partial(decode, pol0, 0)
            nbytes = (int(lens.sum()) * D_QK * 2 + batch * heads * D_QK * 2
                      + batch * heads * D_LATENT * 2)
            target = MIN_BANDWIDTH_FRACTION if batch >= 64 and context_len >= 8192 else None
            bw = _bandwidth(nbytes, _graph_time_ms(one, dev, reps * 2),
                            _time_ms(one, dev, reps * 2), copy_bandwidth_gbps(dev), target)
    else:
        notes.append("device is not CUDA: the decode under test is the torch reference path "
                     "(the Triton kernels run under TRITON_INTERPRET=1 in tests/kernels); no "
                     "timing or bandwidth")
    for p in live.values():
        p.release()
    return KernelValidation(kernel="mla", model=model, backend=backend, device=str(dev),
                            triton=use_triton, batch=batch, context_len=context_len,
                            heads=heads, kv_heads=1, num_splits=num_splits, runs=tuple(runs),
                            shared_over_per_layer=ratio, speed_passed=speed_ok, bandwidth=bw,
                            notes=tuple(notes))


def _policy_run(policy: str, layers: int, model_layers: int, held: int, est: int | None,
                mem: tuple[int | None, int | None, int | None],
                parity: list[Parity]) -> PolicyRun:
    """One policy's record: what it holds, that scaled to all the model's layers (per-layer:
    one layer's share × layers; shared: the one buffer), and the estimate beside it."""
    per = _per_layer_bytes(held, layers) if policy == "per-layer" else held
    scaled = per * model_layers if policy == "per-layer" else held
    return PolicyRun(policy=policy, layers_run=layers, model_layers=model_layers,
                     held_bytes=held, bytes_per_layer=per, scaled_bytes=scaled,
                     estimate_bytes=est, estimate_match=None if est is None else est == scaled,
                     allocated_delta_bytes=mem[0], reserved_delta_bytes=mem[1],
                     peak_delta_bytes=mem[2], step_ms=None, parity=tuple(parity))


def _timed(runs: list[PolicyRun], live: dict[str, _P], decode: Callable[[_P, int], None],
           layers: int, dev: torch.device, reps: int, rounds: int
           ) -> tuple[list[PolicyRun], float | None, bool | None]:
    """Time one decode step (all layers run) per policy, alternating; the runs with their step
    time, the shared / per-layer ratio and whether it is within ``MAX_SHARED_RATIO``."""
    def step_of(holder: _P) -> Callable[[], None]:
        def step() -> None:
            for i in range(layers):
                decode(holder, i)
        return step

    times = _alternate_steps({p: step_of(live[p]) for p in live}, dev, reps, rounds)
    runs = [_with_time(r, times.get(r.policy)) for r in runs]
    if "per-layer" in times and "shared" in times:
        ratio = times["shared"] / times["per-layer"]
        return runs, ratio, ratio <= MAX_SHARED_RATIO
    return runs, None, None


def _with_time(run: PolicyRun, ms: float | None) -> PolicyRun:
    return PolicyRun(**{**{f: getattr(run, f) for f in run.__dataclass_fields__}, "step_ms": ms})


def _alternate_steps(steps: dict[str, Callable[[], object]], dev: torch.device, reps: int,
                     rounds: int) -> dict[str, float]:
    """Median step time per policy, the policies timed alternately so drift hits both alike."""
    samples: dict[str, list[float]] = {p: [] for p in steps}
    for _ in range(rounds):
        for p, fn in steps.items():
            samples[p].append(_time_ms(fn, dev, reps))
    return {p: statistics.median(v) for p, v in samples.items()}


def _bandwidth(nbytes: int, ms: float, eager_ms: float, copy_gbps: float,
               target: float | None) -> Bandwidth:
    gbps = nbytes / (ms * 1e-3) / 1e9
    frac = gbps / copy_gbps
    return Bandwidth(kernel_bytes=nbytes, kernel_ms=ms, eager_ms=eager_ms, kernel_gbps=gbps,
                     copy_gbps=copy_gbps,
                     fraction=frac, target=target,
                     passed=None if target is None else frac >= target)


# --- TurboQuant -----------------------------------------------------------------------------------


def validate_tq(*, model: str = "qwen3-32b", tp: int = 1, batch: int = 256,
                context_len: int = 4096, layers: int = 4, device: str = "cpu",
                block_size: int = 16, gpu_name: str = "H200",
                policies: tuple[str, ...] = POLICIES, num_splits: int = TQ_MAX_KV_SPLITS,
                block_n: int = 16, num_warps: int = 4, num_stages: int = 2, reps: int = 10,
                rounds: int = 5, measure_bandwidth: bool = True, check_parity: bool = True,
                seed: int = 0) -> KernelValidation:
    """TurboQuant k8v4 decode (seed 001) on one rank of ``model``: parity, scratch, speed.

    ``batch`` is ``--max-num-seqs``: the per-layer policy registers buffers for it at
    construction (#38479), the shared one reserves its workspace for it (#40941).
    """
    dev = torch.device(device)
    spec = load_model(model)
    attn = spec.layers[0].attention
    hq, hkv, d = max(1, attn.num_heads // tp), max(1, attn.num_kv_heads // tp), attn.head_dim
    model_layers = _tq_layers(spec)
    scale = d ** -0.5
    notes: list[str] = []
    gen = torch.Generator().manual_seed(seed)
    lens = _seq_lens(batch, context_len, gen)  # (B,)
    bt, nblocks = _block_table(lens, block_size, gen)  # (B, W)
    on_cuda = dev.type == "cuda"
    use_triton = on_cuda
    kv = torch.zeros(tq_cache_shape(nblocks, block_size, hkv, d), dtype=torch.uint8,
                     device=dev)  # (NB, PAGE, Hkv, slot)
    # unquantised K/V of every cache row: quantised into the cache, then kept only for the
    # plain-attention parity check (computed here, once) and dropped
    n_rows = nblocks * block_size
    k_all = _randn_bf16((n_rows, hkv, d), gen)  # (rows, Hkv, D)
    v_all = _randn_bf16((n_rows, hkv, d), gen)  # (rows, Hkv, D)
    for r0 in range(0, n_rows, STORE_ROWS):  # row by row the same bytes, fewer temporaries
        r1 = min(n_rows, r0 + STORE_ROWS)
        tq_store_k8v4(k_all[r0:r1].to(dev), v_all[r0:r1].to(dev), kv,
                      torch.arange(r0, r1, dtype=torch.int32, device=dev))
    qs = [torch.randn((batch, hq, d), generator=gen).to(torch.bfloat16).to(dev)
          for _ in range(layers)]  # L × (B, Hq, D)
    nb = min(batch, PLAIN_REQUESTS)
    plain = _plain_attention(qs[layers - 1][:nb], k_all, v_all, bt[:nb], lens[:nb], block_size,
                             scale) if check_parity else None  # (nb, Hq, D) fp32
    del k_all, v_all
    bt, lens = bt.to(dev), lens.to(dev)

    def decode(bufs: TQDecodeBuffers, layer: int) -> None:
        tq_decode(qs[layer], kv, bt, lens, scale, num_kv_splits=num_splits,
                  buffers=bufs.get(layer, batch), block_n=block_n, num_warps=num_warps,
                  num_stages=num_stages, use_triton=use_triton)

    refs: dict[int, torch.Tensor] = {}

    def ref(layer: int) -> torch.Tensor:  # one reference per layer, shared by the policies
        if layer not in refs:
            refs[layer] = tq_decode_reference(qs[layer], kv, bt, lens, scale)[0]  # (B, Hq, D)
        return refs[layer]

    tol = REL_TOL[torch.bfloat16] if use_triton else REL_TOL[torch.float32]  # fp16 P·V dots
    catalog = CATALOG_NAMES["turboquant"]
    runs: list[PolicyRun] = []
    live: dict[str, TQDecodeBuffers] = {}
    for pol in policies:
        if on_cuda:
            torch.cuda.empty_cache()
            a0, r0 = _cuda_mem(dev)
            torch.cuda.reset_peak_memory_stats(dev)
        bufs = TQDecodeBuffers(pol, num_layers=layers, max_batch=batch, num_q_heads=hq,
                               head_dim=d, num_splits=num_splits, device=dev)
        for layer in range(layers):
            decode(bufs, layer)
        a_d = r_d = p_d = None
        if on_cuda:
            a1, r1 = _cuda_mem(dev)
            a_d, r_d = a1 - a0, r1 - r0
            p_d = torch.cuda.max_memory_allocated(dev) - a0
        parity: list[Parity] = []
        if check_parity:
            last = layers - 1
            parity.append(_parity(f"layer {last} vs reference (dequantised cache)",
                                  bufs.get(last, batch)[1], ref(last), tol))
            if pol == "per-layer" and layers > 1:
                parity.append(_parity("layer 0 (its own buffers) vs reference",
                                      bufs.get(0, batch)[1], ref(0), tol))
            assert plain is not None
            parity.append(_parity(f"layer {last} vs attention over unquantised K/V "
                                  f"(first {nb} requests)",
                                  bufs.get(last, batch)[1][:nb].cpu(), plain,
                                  TQ_VS_UNQUANTISED_TOL))
        est = _estimate_bytes(model, Deployment(tp=tp, kv_cache_dtype="turboquant_k8v4",
                                                max_num_seqs=batch, max_model_len=context_len,
                                                scratch=pol),
                              gpu_name, catalog, notes)
        runs.append(_policy_run(pol, layers, model_layers, bufs.held_bytes, est,
                                (a_d, r_d, p_d), parity))
        live[pol] = bufs

    ratio = speed_ok = None
    bw = None
    if on_cuda:
        runs, ratio, speed_ok = _timed(runs, live, decode, layers, dev, reps, rounds)
        if measure_bandwidth:
            b0 = next(iter(live.values()))
            one = functools.partial(decode, b0, 0)
            nbytes = (int(lens.sum()) * hkv * tq_slot_bytes("turboquant_k8v4", d)
                      + batch * hq * d * 2 + batch * hq * d * 4)
            bw = _bandwidth(nbytes, _graph_time_ms(one, dev, reps * 2),
                            _time_ms(one, dev, reps * 2), copy_bandwidth_gbps(dev), None)
    else:
        notes.append("device is not CUDA: the decode under test is the torch reference path "
                     "(the Triton kernels run under TRITON_INTERPRET=1 in tests/kernels); no "
                     "timing or bandwidth")
    for b in live.values():
        b.release()
    return KernelValidation(kernel="tq", model=model, backend="turboquant", device=str(dev),
                            triton=use_triton, batch=batch, context_len=context_len, heads=hq,
                            kv_heads=hkv, num_splits=num_splits, runs=tuple(runs),
                            shared_over_per_layer=ratio, speed_passed=speed_ok, bandwidth=bw,
                            notes=tuple(notes))


def _randn_bf16(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """``torch.randn(shape, generator=gen).to(torch.bfloat16)`` without the fp32 copy of the
    whole: drawn ``STORE_ROWS`` rows at a time. torch's CPU normal draws one uniform per value
    and transforms them in blocks of 16 values, so chunks of a multiple of 16 values give the
    same numbers as long as a short last chunk (under 16 values, drawn another way) joins the
    one before (``tests/kernels/test_reference_vectorised.py`` checks it)."""
    out = torch.empty(shape, dtype=torch.bfloat16)  # (rows, ...)
    per_row = math.prod(shape[1:])
    cuts = [*range(0, shape[0], STORE_ROWS), shape[0]]
    if len(cuts) > 2 and (cuts[-1] - cuts[-2]) * per_row < 16:
        del cuts[-2]
    for r0, r1 in itertools.pairwise(cuts):
        out[r0:r1] = torch.randn((r1 - r0, *shape[1:]), generator=gen)  # cast on the copy
    return out


def _plain_attention(q: torch.Tensor, k_all: torch.Tensor, v_all: torch.Tensor,
                     bt: torch.Tensor, lens: torch.Tensor, page: int,
                     scale: float) -> torch.Tensor:
    """fp32 attention over the unquantised rows ``k_all, v_all (rows, Hkv, D)`` (CPU)."""
    B, hq, d = q.shape  # (B, Hq, D)
    g = hq // k_all.shape[1]
    out = torch.zeros((B, hq, d), dtype=torch.float32)  # (B, Hq, D)
    qc = q.float().cpu()
    for b, n in enumerate(lens.tolist()):
        pos = torch.arange(int(n))  # (n,)
        rows = bt[b, pos // page].long() * page + pos % page  # (n,)
        k = k_all[rows].float().transpose(0, 1).repeat_interleave(g, 0)  # (Hq, n, D)
        v = v_all[rows].float().transpose(0, 1).repeat_interleave(g, 0)  # (Hq, n, D)
        s = torch.einsum("hd,hnd->hn", qc[b], k) * scale  # (Hq, n)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out


def tq_shared_bytes(batch: int, num_q_heads: int, head_dim: int,
                    num_splits: int = TQ_MAX_KV_SPLITS) -> int:
    """Workspace bytes of one shared TurboQuant decode set (each part rounded up to 256 B)."""
    return aligned_layout(tq_buffer_specs(batch, num_q_heads, head_dim, num_splits))[1]


# --- the runs of the rows (memprof/validation/mla_tq_result.py) ---------------------------------


def run_mla(req: Request) -> KernelValidation:
    p = prepare(MLA, req)
    return validate_mla(model=p.model, tp=p.tp, backend=MLA.backend(req), batch=p.batch,
                        context_len=p.context, layers=req.layers, device=req.device,
                        block_size=64, gpu_name=p.gpu, reps=req.steps, seed=req.seed)


def run_tq(req: Request) -> KernelValidation:
    p = prepare(TQ, req)
    return validate_tq(model=p.model, tp=p.tp, batch=p.batch, context_len=p.context,
                       layers=req.layers, device=req.device, block_size=16, gpu_name=p.gpu,
                       reps=req.steps, seed=req.seed)
