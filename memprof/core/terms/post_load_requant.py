"""Allocator blocks a post-load requantisation leaves behind, in an engine's load figure.

Some model files rewrite a block-fp8 checkpoint's weights after loading them: each rewritten
weight is dequantised (fp32 and bf16 temporaries several times its size), requantised, and the
new tensor replaces the old. The new tensors are allocated while those temporaries sit freed in
the caching allocator, so they are split out of the temporaries' segments (best fit,
``DeviceCachingAllocator::malloc``), and the rest of such a segment cannot go back to the driver
while the weight lives: ``empty_cache`` returns whole free segments only. An engine that reads
its model load as the drop in free memory (``Engine.load_figure``) counts those stranded blocks
as load, and sizes its KV pool after them.

What the model file does is the family's ``post_load_requant`` rows (``PostLoadRequant``: the
fused projections it builds, the weight it dequantises and splits into a new parameter, the
modules it requantises in order, the compute capabilities where it runs), by release; the term
applies to a block-fp8 (128 × 128) checkpoint on such a card. It replays the rank's weights in
construction order (``weights_in_order``; fused groups as one tensor, the split
parameter left out) and then the post-load sequence through ``memprof.alloc``, releases the
cache and charges the bytes reserved beyond those requested, less the same after the
construction alone (the replay of the weights as memprof lists them, which this term does not
charge)::

    stranded = (reserved − requested after load + post-load + empty_cache)
             − (reserved − requested after the construction + empty_cache)

Per rewritten module of ``n × k`` fp8 weights with ``s`` fp32 scales (``p = s · 128 · 128``
padded elements), the replayed tensors are those of the engine's functions: the scale's two
``repeat_interleave`` (s·128·4 B, then p·4 B), the fp32 copy and the scaled product (n·k·4 B
each), the bf16 result (n·k·2 B), then the padded bf16 copy (p·2), its ``abs`` (p·2) and fp32
(p·4), the scaled fp32 product (p·4), the new fp8 weight (p, or a contiguous n·k copy when
padded), the scale's row expansion (n·⌈k/128⌉·4) and the packed new scale
(⌈n/4⌉·⌈k/128⌉·4); the freed ones in the order Python drops them. Scalar-sized temporaries
(the per-block amax and its powers of two, under 1 MiB) and DeepGEMM's own layout temporaries
are left out.
"""

from __future__ import annotations

from functools import lru_cache

from memprof.base.units import fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.engines import engine_of
from memprof.core.models.families import family_row
from memprof.core.models.families.row import PostLoadRequant
from memprof.core.terms.load_rounding import Op, simulate
from memprof.core.versions import rule_in_force

NAME = "allocator blocks left by post-load requantisation"
BLOCK = 128  # the requantised block (the engine asserts weight_block_size == [128, 128])
SIMULATE_MAX_LAYERS = 2000



def applies(ctx: TermContext) -> PostLoadRequant | None:
    """The rows' value in force for ``ctx``, or None: the engine counts its load as a drop in
    free memory, the family has a row at the release, the card's compute capability is one it
    lists, and the checkpoint is block-fp8 128 × 128."""
    rows = family_row(ctx.spec.family).post_load_requant
    if not rows or not engine_of(ctx.dep).load_is_free_memory_drop:
        return None
    rule = rule_in_force(rows, ctx.dep.engine_version, ctx.dep.engine)
    if rule is None or not isinstance(rule.value, PostLoadRequant):
        return None
    cc = ctx.gpu.compute_capability
    if cc is None or int(cc.split(".")[0]) not in rule.value.cc_majors:
        return None
    q = ctx.quant
    if q is None or q.method != "fp8" or q.block != (BLOCK, BLOCK):
        return None
    return rule.value


class _Seq:
    """An op sequence under construction: ``new`` returns the malloc's index, ``drop`` frees."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.n = 0

    def new(self, nbytes: int) -> int:
        self.ops.append((0, nbytes))
        self.n += 1
        return self.n - 1

    def drop(self, *handles: int) -> None:
        self.ops += [(1, h) for h in handles]


def _dequant(seq: _Seq, nk: int, scales: int) -> int:
    """block_quant_dequant of an ``nk``-element fp8 weight with ``scales`` fp32 scales: returns
    the bf16 result's handle, the temporaries freed."""
    padded = scales * BLOCK * BLOCK
    rep1 = seq.new(scales * BLOCK * 4)
    rep2 = seq.new(padded * 4)
    seq.drop(rep1)
    xf = seq.new(nk * 4)
    prod = seq.new(nk * 4)
    seq.drop(xf)
    out = seq.new(nk * 2)
    seq.drop(prod, rep2)
    return out


def _requant(seq: _Seq, n: int, k: int, packed_bytes: int) -> tuple[int, int]:
    """requant_weight_ue8m0_inplace of an ``n × k`` fp8 weight with its fp32 block scales:
    returns the new (weight, scale) handles, the temporaries freed; ``packed_bytes``: the
    new scale's size as the rank's weights list it."""
    grid = _scale_count(n, k)
    padded = grid * BLOCK * BLOCK
    deq = _dequant(seq, n * k, grid)
    xp = seq.new(padded * 2)  # x_padded (zeros), the bf16 weight copied in
    ab = seq.new(padded * 2)  # x_view.abs()
    fl = seq.new(padded * 4)  # .float()
    seq.drop(ab, fl)
    prod = seq.new(padded * 4)  # x_view * (1 / sf): fp32
    w = seq.new(padded)  # .to(float8_e4m3fn)
    seq.drop(prod)
    if padded != n * k:  # [:m, :n].contiguous() copies a padded weight
        c = seq.new(n * k)
        seq.drop(w)
        w = c
    seq.drop(xp)
    expanded = seq.new(n * -(-k // BLOCK) * 4)  # sf.index_select(-2, arange(mn) // 128)
    packed = seq.new(packed_bytes)  # get_mn_major_tma_aligned_packed_ue8m0_tensor
    seq.drop(expanded, deq)
    return w, packed


def _scale_count(n: int, k: int) -> int:
    """The checkpoint's fp32 block scales of an ``n × k`` weight: ⌈n/128⌉·⌈k/128⌉."""
    return -(-n // BLOCK) * -(-k // BLOCK)


def _layer_of(name: str) -> tuple[str, str] | None:
    """("model.layers.N.", the rest) of a per-layer parameter name; None for others."""
    head, sep, rest = name.partition("layers.")
    if not sep:
        return None
    idx, dot, tail = rest.partition(".")
    return (head + sep + idx + dot, tail) if dot and idx.isdigit() else None


Param = tuple[str, int, tuple[int, ...]]  # (name, bytes, shape)


def sequences(params: tuple[Param, ...], how: PostLoadRequant
              ) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """(the construction as memprof lists it, the engine's construction then its post-load
    sequence) for ``params`` (``(name, bytes, shape)`` in construction order). The engine
    builds the modules it rewrites with the checkpoint's fp32 block scales; the rewrite leaves
    the scales memprof lists (their final layout)."""
    plain = tuple((0, b) for _n, b, _s in params)
    sizes: dict[tuple[str, str], int] = {}  # (layer, the rest of the name) → bytes
    dims: dict[tuple[str, str], tuple[int, ...]] = {}  # … → shape
    for pname, b, sh in params:
        lay = _layer_of(pname)
        if lay is not None:
            sizes[lay] = b
            dims[lay] = sh
    groups = {g[0]: g for g in how.fused}
    members = {m for g in how.fused for m in g[1:]}
    rewritten = {m for head in how.requant for m in groups.get(head, (head,))}
    rewritten.add(how.split[0])

    def shape(layer: str, group: tuple[str, ...]) -> tuple[int, int]:
        """(rows, columns) of a module's weight, a fused group's rows summed."""
        got = [dims[(layer, f"{m}.weight")] for m in group if (layer, f"{m}.weight") in dims]
        return sum(d[0] for d in got), got[0][-1]

    seq = _Seq()
    split_src, split_param, split_parts = how.split
    handles: dict[str, dict[str, list[int]]] = {}  # layer → module → [weight, scale]
    split_bytes: dict[str, int] = {}
    for name, nbytes, _shape in params:
        lay = _layer_of(name)
        if lay is None:
            seq.new(nbytes)
            continue
        layer, tail = lay
        module, _dot, leaf = tail.rpartition(".")
        quantised = leaf in ("weight", "weight_scale_inv")
        if tail == split_param:
            split_bytes[layer] = nbytes
            continue
        if quantised and module in members:
            continue  # allocated with its group's head
        if quantised and module in rewritten:
            n, k = shape(layer, groups.get(module, (module,)))
            nbytes = n * k if leaf == "weight" else 4 * _scale_count(n, k)
        h = seq.new(nbytes)
        if quantised:
            slot = handles.setdefault(layer, {}).setdefault(module, [-1, -1])
            slot[0 if leaf == "weight" else 1] = h
    # the dequantised weight split into the new parameter, layer after layer; the previous
    # layer's bf16 copy lives until the next one is made (the loop's locals)
    prev = None
    for layer in handles:
        if layer not in split_bytes or (layer, f"{split_src}.weight") not in sizes:
            continue
        n, k = shape(layer, (split_src,))
        deq = _dequant(seq, n * k, _scale_count(n, k))
        if prev is not None:
            seq.drop(prev)
        for _ in range(split_parts):
            seq.new(split_bytes[layer] // split_parts)
        prev = deq
    if prev is not None:
        seq.drop(prev)
    for layer, mods in handles.items():
        for module in how.requant:
            old = mods.get(module)
            if old is None or -1 in old:
                continue
            group = groups.get(module, (module,))
            n, k = shape(layer, group)
            packed = sum(sizes.get((layer, f"{m}.weight_scale_inv"), 0) for m in group)
            mods[module] = list(_requant(seq, n, k, packed))
            seq.drop(*old)
    return plain, tuple(seq.ops)


@lru_cache(maxsize=64)
def stranded(ops: tuple[Op, ...]) -> int:
    """Bytes reserved beyond those requested after replaying ``ops`` and ``empty_cache``."""
    sim = simulate(ops)
    sim.empty_cache()
    s = sim.memory_stats()
    return s["reserved_bytes.all.current"] - s["requested_bytes.all.current"]


def rank_params(ctx: TermContext) -> tuple[Param, ...]:
    """The rank's parameters in construction order, with their shapes
    (``memprof.core.weights.weights_in_order``)."""
    from memprof.core.weights import weights_in_order

    return tuple((f"{t.module}.{p.name}", p.bytes, tuple(p.shape))
                 for t in weights_in_order(ctx.spec, ctx.dep, ctx.quant, ctx.coord, ctx.gpu.arch)
                 for p in t.params)


def post_load_requant_terms(ctx: TermContext) -> list[Component]:
    """One model-load component (category weights): the stranded bytes the post-load sequence
    adds; none where the family's rows, the engine, the card or the checkpoint do not apply."""
    how = applies(ctx)
    if how is None or ctx.spec.num_layers > SIMULATE_MAX_LAYERS:
        return []
    plain, full = sequences(rank_params(ctx), how)
    extra = stranded(full) - stranded(plain)
    if extra <= 0:
        return []
    n = sum(1 for k, _ in full if k == 0) - len(plain)
    return [Component(
        name=NAME, category="weights", bytes=extra,
        formula=f"memprof.alloc replay of the construction then {n} post-load allocations "
        f"(dequantised copies, requantised weights, {len(how.requant)} module kinds a layer "
        f"on compute capability {ctx.gpu.compute_capability}): reserved − requested after "
        f"empty_cache, less the construction's own, {fmt_bytes(extra)}")]
