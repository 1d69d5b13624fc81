"""The allocations memprof knows the order of, for one rank: the weights tensor by tensor as the
engine constructs them, the KV-cache tensors, and the scratch as its backend allocates it.

The allocator term replays them through the caching-allocator simulator, and the tracer
allocates them on a device; both charge each allocation to the estimate's component.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

from memprof.core.components import Component, TermContext
from memprof.core.dtypes import dtype_bytes
from memprof.core.kvcache import kv_tensor_sizes
from memprof.core.scratch.terms import scratch_tensors
from memprof.core.terms.init_buffers import init_buffer_terms
from memprof.core.terms.rope_cache import rope_cache_terms
from memprof.core.weights import weights_in_order

Phase = Literal["weights", "kv_cache", "decode", "prefill"]


class Allocation(NamedTuple):
    """One tensor the engine allocates: where it is charged (component name(s) and bytes), its
    name, shape and dtype, and the phase it first appears in (``weights``: model construction
    and loading, counted as model load; ``kv_cache``: after the budget; ``decode``: lazily, at
    the first decode step)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    phase: Phase
    shares: tuple[tuple[str, int], ...]

    @property
    def bytes(self) -> int:
        return math.prod(self.shape) * dtype_bytes(self.dtype)

    @property
    def component(self) -> str:
        return self.shares[0][0]


def model_load_position(weight_names: list[str]) -> int:
    """Where the model-load buffers fall among the weights: the first attention layer builds
    the rotary embedding (``get_rope`` in its ``__init__``), so after that layer's attention
    weights (at the start when no weight is an attention one). DeepSeek-V4's init buffers are
    put there too, an approximation: its model builds them beside its layers, and only the
    allocator's segment packing, not any byte count, depends on the place."""
    first = next((i for i, n in enumerate(weight_names) if ".self_attn." in n), None)
    if first is None:
        return 0
    layer = weight_names[first].split(".self_attn.")[0] + ".self_attn."
    end = first + 1  # a module's parameters are constructed one after another
    while end < len(weight_names) and weight_names[end].startswith(layer):
        end += 1
    return end


def model_load_buffers(ctx: TermContext,
                       components: list[Component] | None = None) -> list[Allocation]:
    """The buffers a model registers at construction (RoPE cos/sin caches, DeepSeek-V4's init
    buffers): one allocation per tensor of each such component, counted in model load.
    ``components``: those terms' components of ``ctx`` where the caller has them already."""
    out: list[Allocation] = []
    if components is None:
        components = [*rope_cache_terms(ctx), *init_buffer_terms(ctx)]
    for c in components:
        n = max(1, c.count)
        each = c.bytes // n
        for k in range(n):
            out.append(Allocation(name=c.name if n == 1 else f"{c.name} #{k}", shape=(each,),
                                  dtype="int8", phase="weights", shares=((c.name, each),)))
    return out


def rank_allocation_sizes(ctx: TermContext) -> list[int]:
    """The bytes of ``rank_allocations(ctx)``, in order, without building its records: the
    weights from ``weights_in_order_params`` (each layer kind built once, kept per layout)."""
    return rank_allocation_sizes_and_load(ctx)[0]


def rank_allocation_sizes_and_load(ctx: TermContext) -> tuple[list[int], int]:
    """``rank_allocation_sizes(ctx)`` and how many of them the model load makes (the weights and
    the model-load buffers: the first ones)."""
    from memprof.core.weights.rank import weights_in_order_params

    params = weights_in_order_params(ctx.spec, ctx.dep, ctx.quant, ctx.coord, ctx.gpu.arch)
    sizes = [b for _, b in params]
    at = model_load_position([n for n, _ in params])
    sizes[at:at] = [a.bytes for a in model_load_buffers(ctx)]
    loaded = len(sizes)
    scratch = [(math.prod(s.shape) * dtype_bytes(s.dtype), s.profiled)
               for s in scratch_tensors(ctx)]
    sizes += [n for n, seen in scratch if seen]
    sizes += kv_tensor_sizes(ctx.plan, ctx.num_gpu_blocks)
    sizes += [n for n, seen in scratch if not seen]
    return sizes, loaded


def rank_allocations(ctx: TermContext) -> list[Allocation]:
    """Every allocation of ``ctx``'s rank in order: weights, scratch seen at start-up
    (registered at model construction or reserved in the profile run), the KV cache, then the
    scratch that first appears at decode, then that of the first continuation prefill."""
    out: list[Allocation] = []
    for t in weights_in_order(ctx.spec, ctx.dep, ctx.quant, ctx.coord, ctx.gpu.arch):
        for p in t.params:
            out.append(Allocation(name=f"{t.module}.{p.name}", shape=p.shape, dtype=p.dtype,
                                  phase="weights", shares=((t.group, p.bytes),)))
    at = model_load_position([a.name for a in out])
    out[at:at] = model_load_buffers(ctx)
    scratch = scratch_tensors(ctx)
    out += [Allocation(name=s.name, shape=s.shape, dtype=s.dtype, phase="weights",
                       shares=s.shares) for s in scratch if s.profiled]
    for i, size in enumerate(kv_tensor_sizes(ctx.plan, ctx.num_gpu_blocks)):
        out.append(Allocation(name=f"kv_cache[{i}]", shape=(size,), dtype="int8",
                              phase="kv_cache", shares=(("KV cache", size),)))
    out += [Allocation(name=s.name, shape=s.shape, dtype=s.dtype, phase=s.first_use,
                       shares=s.shares) for s in scratch if not s.profiled]
    return out
