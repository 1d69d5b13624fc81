"""The caching allocator's rounding inside vLLM's "model loading took": blocks the allocator hands
out whole, larger than the tensors asked for, which ``torch.cuda.memory_allocated`` counts.

vLLM reads the weights figure as the ``memory_allocated`` delta around ``get_model`` (0.7.2
``worker/model_runner.py::GPUModelRunnerBase.load_model``: ``DeviceMemoryProfiler`` →
``utils.py::DeviceMemoryProfiler.current_memory_usage`` → ``platforms/cuda.py::CudaPlatform
.get_current_memory_usage``: ``reset_peak_memory_stats`` then ``max_memory_allocated``; V1's
``GPUModelRunner.load_model`` keeps the same profiler). PyTorch's allocated-bytes statistic adds
the *block* size, not the request (``DeviceCachingAllocator::alloc_found_block``), and a large-pool
block is split only when more than ``kSmallSize`` (1 MiB) would remain (``should_split``). A
tensor of ``n ≥ 10 MiB`` bytes that finds no cached block gets a fresh segment of
``2 MiB·ceil(n / 2 MiB)``; when that leaves ≤ 1 MiB the whole segment is the tensor's block::

    35 MiB (qkv) → 36 MiB;  25 MiB (o_proj) → 26;  135 MiB (gate_up) → 136;  67.5 MiB → 68

so ``memory_allocated`` after loading exceeds the bytes of the tensors. The term replays the
model-load allocations through ``memprof.alloc`` (weights in construction order, the model-load
buffers where ``rank_allocations`` puts them) and adds the RoPE cache's float32 temporaries,
which are freed and leave cached blocks that later weights are split from (0.7.2
``model_executor/layers/rotary_embedding.py::RotaryEmbedding._compute_cos_sin_cache``: ``freqs``
``[positions, rotary/2]``, ``cos``, ``sin``, ``cat`` ``[positions, rotary]``, all fp32 and on the
GPU — the model is built under ``with target_device`` — then ``cache.to(dtype)``)::

    rounding = allocated − requested   after the replay

From vLLM 0.21.0 the worker loads the model under ``max_split_size_mb:20`` on CUDA (0.21.0 /
0.28.0 / 0.30.0 ``v1/worker/gpu_worker.py::Worker.load_model``: ``_scoped_allocator_max_split
(max_split_size_mb=20)`` around ``model_runner.load_model``, whose ``DeviceMemoryProfiler`` is the
"model loading took" figure; a no-op unless ``current_platform.is_cuda()``; vLLM PR #41268;
absent from 0.20.0 – 0.20.2: ``LOAD_MAX_SPLIT``), and from 0.31.0 on ROCm too (the scope then
runs where ``current_platform.is_cuda_alike()``: ``LOAD_MAX_SPLIT_ROCM``). A tensor of 20 MiB
or more is then never split off a block, so it holds its whole 2 MiB-rounded segment, remainders
of more than 1 MiB included::

    Qwen2.5-1.5B: gate_up 52.5 MiB → 54;  down 26.25 MiB → 28   (3.25 MiB a layer × 28 = 91 MiB)

and the replay runs with that ``max_split_size`` (``memprof.alloc``: freed blocks of 20 MiB or
more serve no smaller request, ``get_free_block``).

The same rounding is part of the runtime allocator slack (reserved − requested), which
subtracts it (``memprof.core.terms.allocator``; that replay still allocates the q and kv parts of
a QKV projection apart, so the two can differ by a block or two). Not for SGLang (its load figure
is the free-memory drop, and its loader was not read). Not modelled: fp32 scalars of 4 B that
take a 512-B block (0.7.2 ``attention/layer.py::Attention.__init__``: ``_k_scale``, ``_v_scale``,
``k_range``, ``v_range``: 96 KiB over 48 layers).

Published row 48 (DeepSeek-R1-Distill-Qwen-14B, TP2, 0.7.2): 164 MiB, and the same sequence
allocated with torch on an H100 moved ``memory_allocated`` by the log's 13.9476 GiB
(``tests/test_model_load_terms.py``).
"""

from __future__ import annotations

from functools import lru_cache
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING

from memprof.base.units import MiB, fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.dtypes import dtype_bytes
from memprof.core.engines import engine_of
from memprof.core.terms.allocations import model_load_position
from memprof.core.terms.init_buffers import init_buffer_terms
from memprof.core.terms.rope_cache import RopeCache, engine_rope_caches
from memprof.core.versions import Rule, value_at

if TYPE_CHECKING:
    from memprof.alloc import CachingAllocator
    from memprof.core.deployment import Deployment
    from memprof.core.gpus import GPU

NAME = "allocator rounding (model load)"
SIMULATE_MAX_LAYERS = 2000  # beyond this, no replay (it would take seconds): no term

Op = tuple[int, int]  # (0, nbytes): malloc; (1, k): free the k-th malloc of the sequence

# The allocator's ``max_split_size_mb`` while vLLM's worker loads the model (on CUDA; on ROCm
# from 0.31.0, ``LOAD_MAX_SPLIT_ROCM``).
LOAD_MAX_SPLIT: tuple[Rule, ...] = (
    Rule(name="load_max_split_size", changes="model-load allocator rounding (max_split_size_mb)",
         since="0.21.0", until=None, value=20,
         introduced_by="vLLM PR #41268 ('Fix OOM by setting PyTorch max_split_size_mb during "
         "model loading'; not in 0.20.0 – 0.20.2)",
         source="0.21.0 / 0.28.0 / 0.30.0 v1/worker/gpu_worker.py Worker.load_model: "
         "_scoped_allocator_max_split(max_split_size_mb=20) around model_runner.load_model, "
         "a no-op unless current_platform.is_cuda()"),
)

# The same scope on ROCm: 0.21.0 - 0.30.0 skip it there (``is_cuda()``), 0.31.0 runs it on any
# CUDA-alike platform whose allocator backend is torch's native one.
LOAD_MAX_SPLIT_ROCM: tuple[Rule, ...] = (
    Rule(name="load_max_split_size_rocm",
         changes="model-load allocator rounding (max_split_size_mb, ROCm)",
         since="0.31.0", until=None, value=20,
         introduced_by="0.31.0: _scoped_allocator_max_split checks is_cuda_alike() (0.30.0: "
         "'if not current_platform.is_cuda(): yield')",
         source="0.31.0 / 0.32.0 / 0.33.0 v1/worker/gpu_worker.py "
         "Worker._scoped_allocator_max_split: a no-op unless current_platform.is_cuda_alike() "
         "and torch.cuda.memory.get_allocator_backend() == 'native'; Worker.load_model "
         "runs model_runner.load_model under max_split_size_mb=20"),
)


def load_alloc_conf(dep: Deployment, gpu: GPU) -> str:
    """The ``PYTORCH_CUDA_ALLOC_CONF`` the model load runs under: the launch's own
    (``dep.pytorch_cuda_alloc_conf``; "" where unset, PyTorch's defaults), with vLLM's
    ``max_split_size_mb:20`` from 0.21.0 on a CUDA GPU (``LOAD_MAX_SPLIT``) and from 0.31.0 on a
    ROCm one (``LOAD_MAX_SPLIT_ROCM``). vLLM sets that one key through PyTorch's
    ``setAllocatorSettings``, whose ``parseArgs`` first resets ``max_split_size``,
    ``roundup_power2_divisions`` and ``garbage_collection_threshold`` to their defaults and
    leaves the other settings as the launch set them (PyTorch c10/core/AllocatorConfig.cpp
    ``AcceleratorAllocatorConfig::parseArgs``: "The following option will be reset to its
    default value if not explicitly set each time"): ``expandable_segments`` and
    ``max_non_split_rounding_mb`` stay. A malformed setting is refused as PyTorch refuses it
    (``memprof.alloc.config.parse_conf``)."""
    from memprof.alloc.config import LARGE_BUFFER, parse_conf

    own = dep.pytorch_cuda_alloc_conf or ""
    launch = parse_conf(own)
    rows = LOAD_MAX_SPLIT_ROCM if gpu.is_rocm else LOAD_MAX_SPLIT
    mb = value_at(rows, dep.engine_version, None, dep.engine)
    if mb is None:
        return own
    parts = [f"max_split_size_mb:{mb}"]
    if launch.expandable_segments:
        parts.append("expandable_segments:True")
    if launch.max_non_split_rounding_size != LARGE_BUFFER:
        parts.append(f"max_non_split_rounding_mb:{launch.max_non_split_rounding_size // MiB}")
    return ",".join(parts)


def load_max_split_size(dep: Deployment, gpu: GPU) -> int:
    """``load_alloc_conf``'s ``max_split_size`` in bytes (``SIZE_MAX``: none), for the replays
    that continue past the load (``memprof.core.terms.allocator``): vLLM restores PyTorch's
    default after it."""
    from memprof.alloc.config import parse_conf

    return parse_conf(load_alloc_conf(dep, gpu)).max_split_size


def rope_build_ops(c: RopeCache, first: int) -> list[Op]:
    """The allocations of one RoPE cache's construction, its temporaries freed (0.7.2
    ``rotary_embedding.py`` ``RotaryEmbedding.__init__`` / ``_compute_cos_sin_cache``): ``t``
    (positions fp32), ``freqs``, ``cos``, ``sin`` (positions × rotary/2 fp32 each), ``cat``
    (positions × rotary fp32); the frame's locals freed on return; ``cache.to(dtype)`` then a
    new tensor unless the dtype is fp32 (``.to`` returns the same tensor), which frees ``cat``.
    ``first``: the index the first malloc here has in the whole sequence."""
    half = c.positions * (c.rotary_dim // 2) * 4
    ops: list[Op] = [(0, c.positions * 4), (0, half), (0, half), (0, half),
                     (0, c.positions * c.rotary_dim * 4)]
    ops += [(1, first + k) for k in range(4)]  # t, freqs, cos, sin
    if c.dtype != "float32":
        ops += [(0, c.positions * c.rotary_dim * dtype_bytes(c.dtype)), (1, first + 4)]
    return ops


def fused(params: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """``params`` with the q and kv parts of each ``QKVParallelLinear`` parameter joined: memprof
    lists them apart (the kv part replicates past the KV heads), vLLM allocates one tensor per
    parameter (0.7.2 ``layers/linear.py::QKVParallelLinear`` → ``UnquantizedLinearMethod
    .create_weights``: ``weight`` ``[q + 2·kv, hidden]``, then ``bias`` ``[q + 2·kv]``).

    (A rank holds a few thousand parameters and few of them are QKV parts: those are found in
    one pass, and the parameters between two runs of them are copied as slices.)"""
    parts = [i for i, (name, _size) in enumerate(params)
             if "qkv_proj(" in name and ("qkv_proj(q)" in name or "qkv_proj(kv)" in name)]
    if not parts:
        return list(params)
    out: list[tuple[str, int]] = []
    done = 0  # params[:done] are in ``out``
    k = 0
    while k < len(parts):
        start = end = parts[k]
        while k + 1 < len(parts) and parts[k + 1] == end + 1:  # a run of QKV parts
            k += 1
            end += 1
        k += 1
        out += params[done:start]
        run: dict[str, int] = {}
        for name, size in params[start:end + 1]:
            key = name.replace("qkv_proj(q)", "qkv_proj").replace("qkv_proj(kv)", "qkv_proj")
            run[key] = run.get(key, 0) + size
        out += run.items()
        done = end + 1
    out += params[done:]
    return out


def load_ops(ctx: TermContext, params: list[tuple[str, int]] | None = None
             ) -> tuple[tuple[Op, ...], int]:
    """(the model-load op sequence of ``ctx``'s rank, the bytes it leaves requested).
    ``params``: the ``(name, bytes)`` weights to allocate in place of the rank's fused list
    (``memprof.core.terms.marlin_repack`` passes them as created, before a repack)."""
    from memprof.core.weights.rank import weights_in_order_params

    if params is None:
        params = fused(weights_in_order_params(ctx.spec, ctx.dep, ctx.quant, ctx.coord,
                                               ctx.gpu.arch))
    # (the per-tensor passes in C: map, zip; a rank holds a few thousand tensors)
    sizes = list(map(_second, params))
    at = model_load_position(list(map(_first, params)))
    ops: list[Op] = list(zip(repeat(0), sizes[:at]))
    mallocs = at  # the mallocs in ``ops`` so far
    caches = engine_rope_caches(ctx)
    for c in caches:
        built = rope_build_ops(c, mallocs)
        ops += built
        mallocs += sum(1 for k, _ in built if k == 0)
    extra = init_buffer_terms(ctx)
    for b in extra:
        n = max(1, b.count)
        ops += [(0, b.bytes // n)] * n
    ops += zip(repeat(0), sizes[at:])
    requested = (sum(sizes) + sum(c.bytes for c in caches)
                 + sum(b.bytes // max(1, b.count) * max(1, b.count) for b in extra))
    return tuple(ops), requested


_first, _second = itemgetter(0), itemgetter(1)


def last_free(ops: tuple[Op, ...]) -> int:
    """The index of the last free in ``ops`` (-1: none), found in C (``ops`` may hold thousands
    of mallocs after it)."""
    kinds = list(map(_first, ops))
    return len(kinds) - 1 - kinds[::-1].index(1) if 1 in kinds else -1


def simulate(ops: tuple[Op, ...], conf: str = "") -> CachingAllocator:
    """A fresh ``memprof.alloc`` replica of PyTorch's caching allocator (configured by
    ``conf``, a ``PYTORCH_CUDA_ALLOC_CONF``) with ``ops`` replayed on it, op by op (the replay
    every allocator-replaying term starts from)."""
    from memprof.alloc import CachingAllocator

    sim = CachingAllocator(conf)
    handles: list[int] = []
    for kind, n in ops:
        if kind == 0:
            handles.append(sim.malloc(n))
        else:
            sim.free(handles[n])
    return sim


@lru_cache(maxsize=256)
def replay_rounding(ops: tuple[Op, ...], conf: str = "") -> tuple[int, int]:
    """(allocated − requested, requested) after replaying ``ops`` through ``memprof.alloc``
    under ``conf`` (``load_alloc_conf``).

    Up to the last free the simulator runs op by op; the allocations after it free nothing, so
    ``memprof.alloc.monotone`` continues from the simulator's free blocks (exact: with nothing
    freed, what later allocations get depends only on the free blocks' sizes) where ``conf``
    sets at most ``max_split_size_mb``, what that shortcut models; under any other setting
    (expandable segments among them) the simulator runs every op."""
    from memprof.alloc.config import AllocatorConfig, parse_conf
    from memprof.alloc.monotone import continue_from

    parsed = parse_conf(conf)
    if parsed != AllocatorConfig(max_split_size=parsed.max_split_size):
        whole = simulate(ops, conf)
        return (whole.stats.current("allocated_bytes") - whole.stats.current("requested_bytes"),
                whole.stats.current("requested_bytes"))
    last = last_free(ops)
    sim = simulate(ops[:last + 1], conf)
    # (the two statistics read from the simulator's table, not its whole ``memory_stats``)
    rest = continue_from(sim).extend(list(map(_second, ops[last + 1:])))
    allocated = sim.stats.current("allocated_bytes") + rest.allocated
    requested = sim.stats.current("requested_bytes") + rest.requested
    return allocated - requested, requested


# The replay of a rank, kept by the values it reads: its weights (``weights_key``, the spec
# among them), its RoPE caches and DeepSeek-V4 init buffers (a bounded table, no identity
# keys). The model-load term and the allocator term of a rank share it.
_Replayed = tuple[tuple[Op, ...], int, int, tuple[Component, ...]]
_BY_LOAD: dict[tuple[object, ...], _Replayed] = {}


def _replayed(ctx: TermContext) -> _Replayed:
    """(the model-load ops, the bytes they request, the rounding after them, its component)."""
    from memprof.core.weights import weights_key

    caches = tuple(engine_rope_caches(ctx))
    extra = tuple((b.bytes, b.count) for b in init_buffer_terms(ctx))
    conf = load_alloc_conf(ctx.dep, ctx.gpu)
    key = (weights_key(ctx.spec, ctx.dep, ctx.quant, ctx.coord, ctx.gpu.arch), caches, extra,
           conf)
    hit = _BY_LOAD.get(key)
    if hit is not None:
        return hit
    if len(_BY_LOAD) >= 256:
        _BY_LOAD.clear()
    ops, requested = load_ops(ctx)
    rounding = replay_rounding(ops, conf)[0]
    value = (ops, requested, rounding, _components(ops, requested, rounding, conf))
    _BY_LOAD[key] = value
    return value


def kept_load_ops(ctx: TermContext) -> tuple[Op, ...]:
    """``load_ops(ctx)``'s ops, from the replay kept for the rank (``_replayed``): the terms that
    replay the load again (``reserved_charge``) take the same sequence without rebuilding it."""
    return _replayed(ctx)[0]


def load_rounding_bytes(ctx: TermContext) -> int:
    """``allocated − requested`` after the model-load replay (0 for SGLang and for ranks of more
    than ``SIMULATE_MAX_LAYERS`` layers, which are not replayed)."""
    if not engine_of(ctx.dep).replays_model_load or ctx.spec.num_layers > SIMULATE_MAX_LAYERS:
        return 0
    return _replayed(ctx)[2]


def load_rounding_terms(ctx: TermContext) -> list[Component]:
    """The rounding as a model-load component (category weights, in the budget): ``allocated −
    requested`` after replaying the rank's model-load allocations; none when it is 0."""
    if not engine_of(ctx.dep).replays_model_load or ctx.spec.num_layers > SIMULATE_MAX_LAYERS:
        return []
    return list(_replayed(ctx)[3])


def _components(ops: tuple[Op, ...], requested: int, rounding: int,
                conf: str) -> tuple[Component, ...]:
    if rounding <= 0:
        return ()
    n = list(map(_first, ops)).count(0)
    from memprof.alloc.config import parse_conf

    parsed = parse_conf(conf)
    if parsed.expandable_segments:
        split = (f"expandable segments: every block is split to its request rounded to 512 B "
                 f"(should_split), the load runs under {conf}")
    elif not conf:
        split = "blocks not split: ≤ 1 MiB would remain of a 2 MiB-rounded segment"
    else:
        split = (f"blocks not split: ≤ 1 MiB would remain, or the tensor is ≥ "
                 f"{parsed.max_split_size // MiB} MiB: vLLM loads under {conf}")
    return (Component(name=NAME, category="weights", bytes=rounding,
                      formula=f"memprof.alloc replay of {n} model-load allocations (RoPE "
                      f"temporaries freed): allocated {fmt_bytes(requested + rounding)} − "
                      f"requested {fmt_bytes(requested)} ({split})"),)
