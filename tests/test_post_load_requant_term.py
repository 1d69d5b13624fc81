"""The allocator blocks a post-load requantisation strands (memprof/core/terms/post_load_requant.py)
against hand counts: the tensors one rewritten module allocates, the bytes a small replay leaves
reserved, where the family's rows apply, and published rows 12 and 13 (SGLang DeepSeek-V3.2 on
B200, whose load the two logs pin about 0.9 GiB above memprof's weights)."""

from __future__ import annotations

from memprof.alloc import CachingAllocator
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, load_figure, rank_context
from memprof.core.gpus import resolve_gpu
from memprof.core.models.families.row import PostLoadRequant
from memprof.core.terms.post_load_requant import (
    NAME,
    _requant,
    _Seq,
    applies,
    rank_params,
    sequences,
    stranded,
)

MiB = 1 << 20
ROW_12 = dict(engine="sglang", engine_version="0.5.4", tp=8, dp=8, enable_dp_attention=True)


def _component(model: str, dep: Deployment, gpu: str) -> int:
    e = estimate(model, dep, gpu=resolve_gpu(gpu, None))
    return sum(c.bytes for c in e.ranks[0].components if c.name == NAME)


def test_one_module_by_hand() -> None:
    """o_proj, 7168 × 16384 (aligned: no contiguous copy): block_quant_dequant's two
    repeat_interleave, fp32 copy, product and bf16 result, then per_block_cast_to_fp8's padded
    copy, abs, fp32, scaled product and fp8 weight, the scale's row expansion and the packed
    scale; only the new weight and scale stay."""
    n, k, nk = 7168, 16384, 7168 * 16384
    seq = _Seq()
    w, s = _requant(seq, n, k, 7168 * 32 * 4)
    mallocs = [b for kind, b in seq.ops if kind == 0]
    assert mallocs == [7168 * 128 * 4, 4 * nk, 4 * nk, 4 * nk, 2 * nk,
                       2 * nk, 2 * nk, 4 * nk, 4 * nk, nk, 7168 * 128 * 4, 7168 * 32 * 4]
    freed = {b for kind, b in seq.ops if kind == 1}
    assert freed == set(range(len(mallocs))) - {w, s}


def test_a_padded_module_gets_its_contiguous_copy() -> None:
    # fused_qkv_a_proj_with_mqa: 2112 × 7168 pads to 2176 rows; the fp8 result is sliced back
    n, k = 2112, 7168
    seq = _Seq()
    w, _s = _requant(seq, n, k, 2112 * 14 * 4)
    mallocs = [b for kind, b in seq.ops if kind == 0]
    assert mallocs[9] == 2176 * 7168  # the padded fp8 weight
    assert mallocs[w] == n * k  # the contiguous copy that stays


def test_a_small_replay_by_hand() -> None:
    """One 4096 × 4096 fp8 module (16 MiB, a 4 KiB fp32 grid; listed with a 128 KiB packed
    scale). The rewrite's 64 MiB fp32 temporaries take three segments (rep2, the fp32 copy, the
    product); the bf16 result and the padded copy share the copy's; abs and its fp32 take the
    two others and are freed; the scaled product takes one again; the new 16 MiB weight is then
    split from the other, free 64 MiB segment, whose 48 MiB cannot be released while it lives.
    The old weight's own segment and the rest are released: 48 MiB more than the construction
    leaves (the small pool holds the packed scale in one 2 MiB segment either way)."""
    params = (("model.layers.0.a.weight", 16 * MiB, (4096, 4096)),
              ("model.layers.0.a.weight_scale_inv", 4096 * 8 * 4, (4096, 8)))
    how = PostLoadRequant(fused=(), split=("x", "y", 2), requant=("a",), cc_majors=(10,))
    plain, full = sequences(params, how)
    assert stranded(full) - stranded(plain) == 48 * MiB


def test_the_rewrite_keeps_the_listed_weights() -> None:
    """After the whole sequence the rank holds exactly the bytes memprof lists (every rewritten
    tensor replaced by one of its listed size, the split parameter made in two halves)."""
    e = estimate("deepseek-v3.2", Deployment(**ROW_12), gpu=resolve_gpu("B200", None))  # type: ignore[arg-type]
    ctx = rank_context(e, e.ranks[0])
    how = applies(ctx)
    assert how is not None
    params = rank_params(ctx)
    plain, full = sequences(params, how)
    held = []
    for ops in (plain, full):
        sim = CachingAllocator()
        hs: list[int] = []
        for kind, n in ops:
            if kind == 0:
                hs.append(sim.malloc(n))
            else:
                sim.free(hs[n])
        held.append(sim.memory_stats()["requested_bytes.all.current"])
    assert held[0] == held[1] == sum(b for _n, b, _s in params)


def test_where_the_rows_apply() -> None:
    b200 = _component("deepseek-v3.2", Deployment(**ROW_12), "B200")  # type: ignore[arg-type]
    assert b200 > 256 * MiB
    # Hopper: no UE8M0 requantisation (DEEPGEMM_SCALE_UE8M0 is Blackwell's)
    assert _component("deepseek-v3.2", Deployment(**ROW_12), "H200") == 0  # type: ignore[arg-type]
    # 0.5.6 requantises elsewhere (not replayed); vLLM's load figure is allocated bytes
    assert _component("deepseek-v3.2", Deployment(**{**ROW_12, "engine_version": "0.5.6"}),  # type: ignore[arg-type]
                      "B200") == 0
    assert _component("deepseek-r1", Deployment(tp=8, engine_version="0.11.0"), "B200") == 0
    # a block-fp8 checkpoint of a family without such rows
    assert _component("qwen3-235b-a22b-fp8", Deployment(engine="sglang", engine_version="0.5.4",
                                                        tp=4), "B200") == 0


def test_rows_12_and_13_load_the_component() -> None:
    """The component is part of SGLang's load drop (the budget line's ``loaded``), so the pool
    of rows 12 and 13 shrinks by it over the 43,188 / 35,136 B cells: within 2% of the logs'
    975,424 and 1,462,784 tokens (+2.9% / +2.4% without it)."""
    for version, mfs, logged in (("0.5.4", None, 975_424), ("0.5.3", 0.8, 1_462_784)):
        dep = Deployment(**{**ROW_12, "engine_version": version, "mem_fraction_static": mfs})  # type: ignore[arg-type]
        e = estimate("deepseek-v3.2", dep, gpu=resolve_gpu("B200", None))
        r = e.ranks[0]
        part = sum(c.bytes for c in r.components if c.name == NAME)
        assert part > 0
        assert load_figure(e, r) >= r.weights_bytes >= part
        assert abs(e.kv_cache_tokens / logged - 1) < 0.02, (version, e.kv_cache_tokens)
