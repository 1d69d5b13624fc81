"""vLLM 0.8.0 – 0.9.0.1 charge the allocator's unreturnable free blocks to the KV budget
(``memprof.core.terms.reserved_charge``): a hand-made load sequence through the allocator replica,
and the term's range of releases."""

from __future__ import annotations

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms.reserved_charge import NAME, holes_after_empty_cache


def test_holes_are_the_free_tails_of_segments_that_hold_a_tensor() -> None:
    # 3 MiB: a 20 MiB segment (requests of 1–10 MiB), split: 17 MiB stays free but reserved
    assert holes_after_empty_cache(((0, 3 * MiB),)) == 17 * MiB
    # 13 MiB + 0.5 MiB: a 14 MiB segment, the last 1 MiB left whole inside the block (≤ 1 MiB
    # is not split): allocated, not a hole; a 0.5 MiB request takes a 2 MiB small segment
    assert holes_after_empty_cache(((0, 13 * MiB + MiB // 2),)) == 0
    assert holes_after_empty_cache(((0, MiB // 2),)) == 2 * MiB - MiB // 2
    # a freed tensor alone in its segment is returned by empty_cache
    assert holes_after_empty_cache(((0, 40 * MiB), (0, 40 * MiB), (1, 0))) == 0


def _holes(version: str) -> int:
    e = estimate("llama-3.1-8b", Deployment(engine_version=version), gpu_name="H100")
    return sum(c.bytes for c in e.ranks[0].components if c.name == NAME)


def test_charged_from_0_8_0_to_0_9_0_1_only() -> None:
    assert _holes("0.8.0") > 0 and _holes("0.9.0.1") == _holes("0.8.0")
    assert _holes("0.7.3") == 0 and _holes("0.9.1") == 0 and _holes("0.8.5+v0") == 0
    e = estimate("llama-3.1-8b", Deployment(engine_version="0.8.5"), gpu_name="H100")
    c = next(x for x in e.ranks[0].components if x.name == NAME)
    assert c.where == "budget" and c.profiled and c.category == "allocator"


# vLLM 0.27.0 on: the budget line's total_consumed (the drop in free memory since the worker's
# init snapshot, after the window's empty_cache) holds the same free blocks again (0.27.1 / 0.28.0
# utils/mem_utils.py memory_profiling lines 300-326), and the model loads under
# max_split_size_mb:20 (load_rounding.LOAD_MAX_SPLIT)

SPLIT_20 = "max_split_size_mb:20"


def test_under_the_load_split_limit_a_small_weight_still_takes_a_20_mib_segment() -> None:
    # Qwen2.5-1.5B's qkv_proj (6 MiB) and o_proj (4.5 MiB), two layers: 6 + 4.5 + 6 = 16.5 MiB of
    # one 20 MiB segment (a 1-10 MiB request gets kLargeBuffer), the next o_proj does not fit the
    # 3.5 MiB left and opens a second segment with 15.5 MiB left: 19 MiB reserved, not allocated
    ops = ((0, 6 * MiB), (0, 9 * MiB // 2), (0, 6 * MiB), (0, 9 * MiB // 2))
    assert holes_after_empty_cache(ops, SPLIT_20) == 19 * MiB
    # a block of 20 MiB or more is never split under the limit: its rest is allocated, no hole
    assert holes_after_empty_cache(((0, 21 * MiB + MiB // 2),), SPLIT_20) == 0


def _qwen15(version: str) -> int:
    e = estimate("qwen2.5-1.5b-instruct", Deployment(engine_version=version, max_model_len=4096),
                 gpu_name="RTX-4090")
    return sum(c.bytes for c in e.ranks[0].components if c.name == NAME)


def test_charged_again_from_0_27_0() -> None:
    assert _qwen15("0.26.0") == 0 and _qwen15("0.9.1") == 0
    assert _qwen15("0.27.0") > 35 * MiB  # ten 3.5 MiB tails at least (the test above)
    assert _qwen15("0.30.0") == _qwen15("0.27.1") == _qwen15("0.27.0")


def test_model_runner_v2_sampler_state_is_replayed_after_the_weights() -> None:
    # 0.27.1 GPUModelRunner.load_model makes the sampler inside the load's allocator scope:
    # prompt_bin_mask and grammar_bitmask [256, cdiv(151936, 32)] int32 (4.64 MiB each) fit the
    # load's largest free tail, so the charge is the load's holes less at least those two
    from memprof.core.estimate import rank_context
    from memprof.core.terms.load_rounding import load_alloc_conf
    from memprof.core.terms.reserved_charge import after_load_sizes, charge_ops

    e = estimate("qwen2.5-1.5b-instruct", Deployment(engine_version="0.27.1",
                                                     max_model_len=4096), gpu_name="RTX-4090")
    ctx = rank_context(e, e.ranks[0])
    conf = load_alloc_conf(ctx.dep, ctx.gpu)
    assert conf == SPLIT_20
    sampler = after_load_sizes(ctx)
    words = 256 * -(-151936 // 32) * 4
    # penalties, logit bias (allowed ids, bias ids, bias, stop ids), bad words, logprob ids,
    # structured outputs: vllm_runner.sampler_state_tensors
    row = (1024, 1024, 1024, 128, 1024, 129, 128)
    assert sampler == (words, 256 * 151936 * 4, *(256 * n * 4 for n in row), 256 * 4, words)
    load_only = holes_after_empty_cache(charge_ops(ctx), conf)
    charged = holes_after_empty_cache(charge_ops(ctx), conf, sampler)
    assert charged == _qwen15("0.27.1")
    assert load_only - charged >= 2 * words
    # the load's replay kept for every tail gives what replaying load and tail op by op gives
    whole = charge_ops(ctx) + tuple((0, n) for n in sampler)
    assert charged == holes_after_empty_cache(whole, conf)
    for seqs in (8, 64, 1024):
        tail = tuple(n * seqs // 256 for n in sampler)
        every = charge_ops(ctx) + tuple((0, n) for n in tail)
        assert holes_after_empty_cache(charge_ops(ctx), conf, tail) == \
            holes_after_empty_cache(every, conf) == _full_replay_holes(every, conf)


def test_the_v1_runner_is_charged_too_without_a_sampler_state() -> None:
    # a routed-experts model runs the V1 runner at 0.27.1 (vllm_runner.V2_DEFAULT): the same
    # budget line, no V2 sampler state in the replay
    from memprof.core.estimate import rank_context
    from memprof.core.terms.reserved_charge import after_load_sizes

    e = estimate("qwen3-30b-a3b", Deployment(engine_version="0.27.1", max_model_len=4096),
                 gpu_name="H100")
    ctx = rank_context(e, e.ranks[0])
    assert after_load_sizes(ctx) == ()
    (c,) = [x for x in e.ranks[0].components if x.name == NAME]
    assert c.where == "budget" and c.profiled and "total_consumed" in c.formula


def _full_replay_holes(ops: tuple[tuple[int, int], ...], conf: str) -> int:
    from memprof.core.terms.load_rounding import simulate

    sim = simulate(ops, conf)
    sim.empty_cache()
    s = sim.memory_stats()
    return s["reserved_bytes.all.current"] - s["allocated_bytes.all.current"]


def test_the_holes_shortcut_equals_the_full_replay() -> None:
    """holes_after_empty_cache continues the mallocs after the last free with
    memprof.alloc.monotone once no wholly free segment can be handed out: on random load-like
    sequences (frees early, sizes around the 1 MiB / 10 MiB / max_split_size edges) and under
    each allocator setting it takes, it equals the simulator run op by op and empty_cache."""
    import random

    rng = random.Random(11)
    sizes = (512, 8192, 1 << 20, (1 << 20) + 1, 3 << 20, 6 << 20, 9 << 20, 10 << 20, 21 << 20,
             25 << 20, 40 << 20, 64 << 20)
    for case in range(200):
        conf = rng.choice(("", "max_split_size_mb:20", "max_split_size_mb:64",
                           "max_split_size_mb:20,max_non_split_rounding_mb:40",
                           "expandable_segments:True"))
        ops: list[tuple[int, int]] = []
        live: list[int] = []
        made, frees = 0, rng.choice((0, 2, 10, 40))
        for i in range(rng.randint(20, 160)):
            if live and frees and i < 60 and rng.random() < 0.3:
                ops.append((1, live.pop(rng.randrange(len(live)))))
                frees -= 1
            else:
                ops.append((0, rng.choice((*sizes, rng.randint(1, 80 << 20)))))
                live.append(made)
                made += 1
        key = tuple(ops)
        assert holes_after_empty_cache(key, conf) == _full_replay_holes(key, conf), (case, conf)


@pytest.mark.parametrize("model,gpu", [("qwen3-32b", "H200"), ("qwen3-0.6b", "H100")])
def test_the_kept_load_replay_with_each_sampler_tail_equals_a_full_replay(model: str,
                                                                           gpu: str) -> None:
    """A sweep asks the holes for each ``max_num_seqs`` of a layout: the load's replay is kept
    and each sampler-state tail goes on from it (beside the wholly free segments where a tail
    malloc may take one); every figure equals the simulator's full op-by-op replay."""
    from memprof.core.estimate import rank_context
    from memprof.core.terms.load_rounding import load_alloc_conf
    from memprof.core.terms.reserved_charge import after_load_sizes, charge_ops

    for seqs in (8, 256, 1024):
        e = estimate(model, Deployment(max_num_seqs=seqs), gpu_name=gpu)
        ctx = rank_context(e, e.ranks[0])
        ops, tail = charge_ops(ctx), after_load_sizes(ctx)
        conf = load_alloc_conf(ctx.dep, ctx.gpu)
        assert tail  # V2 at the default release: a sampler state
        assert holes_after_empty_cache(ops, conf, tail) == \
            _full_replay_holes(ops + tuple((0, n) for n in tail), conf)
