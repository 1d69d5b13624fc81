"""``memprof.batch.memo``: the recorder sees every read, including those made through
properties and methods, and a sweep whose terms are remembered by what they read gives, point
for point, what a cold estimate gives."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.batch.memo import DEP_FIELDS, ReadMemo, ReadMemoFn, recorded_run
from memprof.batch.sweep import Evaluator, parse_axis, points
from memprof.core.components import Component, TermContext
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate, rank_context
from memprof.core.gpus import GPU, resolve_gpu


def _ctx(dep: Deployment = Deployment()) -> TermContext:
    e = estimate("qwen3-0.6b", dep, gpu_name="H100")
    return rank_context(e, e.ranks[0])


def _one(name: str, nbytes: int) -> list[Component]:
    return [Component(name=name, category="activation", bytes=nbytes)]


def test_a_field_read_is_recorded() -> None:
    out, reads = recorded_run(lambda c: _one("x", c.dep.tp * c.weights_bytes), _ctx())
    assert reads == {("dep", "tp"), ("ctx", "weights_bytes")}
    assert out[0].bytes == _ctx().weights_bytes


def test_a_property_records_what_it_reads() -> None:
    # world_size reads tp, pp, dp and (through the ``sglang`` property) engine
    _, reads = recorded_run(lambda c: _one("x", c.dep.world_size), _ctx())
    assert reads == {("dep", "tp"), ("dep", "pp"), ("dep", "dp"), ("dep", "engine")}


def test_hashing_or_copying_reads_everything() -> None:
    everything = {("dep", n) for n in DEP_FIELDS}
    _, reads = recorded_run(lambda c: _one("x", hash(c.dep) % 7), _ctx())
    assert everything <= reads
    _, reads = recorded_run(lambda c: _one("x", c.dep.with_(tp=2).tp), _ctx())
    assert everything <= reads


def test_the_memo_tells_apart_what_a_property_reads() -> None:
    """Two deployments that differ only in dp: a term reading ``world_size`` must not share."""
    memo = ReadMemo(lambda c: _one("x", c.dep.world_size))
    a, b = _ctx(Deployment(dp=1)), _ctx(Deployment(dp=1)).with_(dep=Deployment(dp=2))
    assert memo(a)[0].bytes == 1 and memo(b)[0].bytes == 2
    assert memo(a)[0].bytes == 1 and (memo.runs, memo.hits) == (2, 1)


def test_a_memo_inside_a_memo_passes_its_reads_on() -> None:
    """An inner memo's hit reads its key through the outer recorder, so the outer result is
    kept under the inner's reads too (the scratch memos run inside the remembered terms)."""
    inner = ReadMemoFn(lambda c: c.dep.tp)
    outer = ReadMemo(lambda c: _one("x", inner.value(c)))
    one, two = _ctx(), _ctx().with_(dep=Deployment(tp=2))
    assert inner.value(one) == 1  # the inner result is kept before the outer runs
    assert outer(one)[0].bytes == 1 and outer(two)[0].bytes == 2
    assert (outer.runs, inner.runs) == (2, 2)


def test_a_failing_run_raises_and_memo_stays_on() -> None:
    """An error of the function itself comes out as it is, and the memo keeps working."""

    def term(c: TermContext) -> list[Component]:
        if c.dep.tp == 2:
            raise BadInput("no", hint="tp=1")
        return _one("x", 1)

    memo = ReadMemo(term)
    with pytest.raises(BadInput) as exc:
        memo(_ctx().with_(dep=Deployment(tp=2)))
    assert exc.value.message == "no"
    assert not memo.direct
    assert memo(_ctx())[0].bytes == 1 and memo(_ctx())[0].bytes == 1 and memo.hits == 1


def test_reading_everything_runs_plainly_or_keeps_by_all_settings() -> None:
    """A term that hashes the deployment reads everything: a term memo then runs it plainly
    (the class memo shares it); the scratch memos keep it under every setting instead."""
    a, b = _ctx(), _ctx().with_(dep=Deployment(max_num_seqs=8))
    direct = ReadMemo(lambda c: _one("x", hash(c.dep) % 7))
    direct(a), direct(a)
    assert direct.direct and direct.runs == 1
    kept = ReadMemoFn(lambda c: hash(c.dep) % 7, direct_when_reading_everything=False)
    assert kept.value(a) == hash(a.dep) % 7 and kept.value(a) == hash(a.dep) % 7
    assert kept.value(b) == hash(b.dep) % 7
    assert not kept.direct and (kept.runs, kept.hits) == (2, 1)


def test_terms_are_shared_across_a_sweep() -> None:
    """On a grid of batch sizes and lengths, the terms that read neither run once per TP."""
    ev, g = Evaluator(), resolve_gpu("H200", None)
    for p in points([parse_axis(s) for s in ("tp=1,2", "max_model_len=8K,32K",
                                             "max_num_seqs=64,256")]):
        ev.estimate("qwen3-32b", Deployment().with_(**p), g)
    runs = {m.__name__: m.runs for m in ev.terms[0] if isinstance(m, ReadMemo)}
    assert runs["non_torch_terms"] == runs["load_rounding_terms"] == 2
    # vLLM 0.33.0 runs Qwen3-32B with Model Runner V2, whose graph estimate is its own term
    assert runs["runner_v2_graph_terms"] == 4  # TP × max_num_seqs
    assert runs["cudagraph_terms"] == 1


VALUES = {"tp": (1, 2, 4), "pp": (1, 2), "max_model_len": (4096, 40960),
          "max_num_seqs": (8, 256), "kv_cache_dtype": ("auto", "fp8"),
          "gpu_memory_utilization": (0.85, 0.95), "enforce_eager": (False, True),
          "engine_version": ("0.7.2", "0.18.0", "0.33.0"), "block_size": (None, 32)}


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(model=st.sampled_from(["qwen3-0.6b", "llama-3.1-8b", "qwen3-32b"]),
       gpu=st.sampled_from(["H100", "H200"]),
       picks=st.lists(st.fixed_dictionaries({k: st.sampled_from(v) for k, v in VALUES.items()}),
                      min_size=2, max_size=6))
def test_a_remembered_sweep_is_the_cold_estimate(model: str, gpu: str,
                                                   picks: list[dict[str, object]]) -> None:
    """Random deployments, in random order, through one evaluator (whose terms share results
    by what they read) against a cold estimate of each: every component and verdict."""
    ev, g = Evaluator(), resolve_gpu(gpu, None)
    for p in picks:
        pair = _both(ev, model, Deployment().with_(**p), g,
                     lambda m, d, gpu_: estimate(m, d, gpu=gpu_))
        if pair is not None:
            assert pair[0] == pair[1], p


def _both(ev: Evaluator, model: str, dep: Deployment, gpu: GPU,
          reference: Callable[[str, Deployment, GPU], Estimate]
          ) -> tuple[Estimate, Estimate] | None:
    """(the evaluator's estimate, the reference's); None when both refuse ``dep`` with the same
    error (an evaluator that accepts what the reference refuses fails the test)."""
    try:
        want = reference(model, dep, gpu)
    except BadInput as exc:
        with pytest.raises(BadInput) as got:
            ev.estimate(model, dep, gpu)
        assert got.value.message == exc.message
        return None
    return ev.estimate(model, dep, gpu), want


def _cold(model: str, dep: Deployment, gpu: GPU) -> Estimate:
    """The estimate with every module-level cache emptied first (the model-load replay, the
    in-order weights, a stage's layer kinds: each keyed by values), so that a wrong key in any
    of them shows."""
    from memprof.core import kvcache
    from memprof.core.terms import load_rounding
    from memprof.core.weights import rank

    load_rounding._BY_LOAD.clear()
    rank._IN_ORDER.clear()
    kvcache._stage_layer_kinds.cache_clear()
    return estimate(model, dep, gpu=gpu)


WIDE = {"tp": (1, 2, 4, 8), "pp": (1, 2), "dp": (1, 2), "enable_expert_parallel": (False, True),
        "max_model_len": (4096, 32768, 131072), "max_num_seqs": (4, 64, 512),
        "kv_cache_dtype": ("auto", "fp8"), "gpu_memory_utilization": (0.8, 0.95),
        "enforce_eager": (False, True), "scratch": (None, "per-layer", "shared"),
        "engine_version": ("0.7.2", "0.10.0", "0.24.0", "0.33.0"),
        "num_speculative_tokens": (0, 0, 1, 3), "block_size": (None, None, 16, 64),
        "max_num_batched_tokens": (None, None, 2048, 16384), "dtype": ("auto", "auto", "float16"),
        "kv_cache_memory_bytes": (None, None, None, 8 << 30),
        "attention_backend": (None, None, None, "FLASHINFER", "TRITON_MLA", "FLASHMLA"),
        "gpu": ("H100", "H200", "B200", "MI300X", "L40S")}
VLLM_ONLY = {"engine_version": None, "scratch": None, "gpu_memory_utilization": None,
             "num_speculative_tokens": 0, "max_num_batched_tokens": None,
             "kv_cache_memory_bytes": None, "attention_backend": None}


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(model=st.sampled_from(["deepseek-r1", "gpt-oss-120b", "qwen3-235b-a22b",
                              "deepseek-v4-flash", "llama-3.1-70b", "qwen3-0.6b"]),
       engine=st.sampled_from(["vllm", "vllm", "sglang"]),
       mfs=st.sampled_from([None, 0.85, 0.9]),
       picks=st.lists(st.fixed_dictionaries({k: st.sampled_from(v) for k, v in WIDE.items()}),
                      min_size=2, max_size=5))
def test_a_remembered_sweep_is_the_cold_estimate_wide(model: str, engine: str,
                                                        mfs: float | None,
                                                        picks: list[dict[str, object]]) -> None:
    """Layouts, releases, engines, GPUs (changing from point to point), scratch policies,
    speculative decoding, block sizes, attention backends and a fixed KV budget through one
    evaluator, each point against an estimate made with every module-level cache emptied: every
    component, the verdict and its reasons, and the two figures computed on demand."""
    ev = Evaluator()
    for pick in picks:
        p = dict(pick)
        g = resolve_gpu(str(p.pop("gpu")), None)  # one evaluator across GPUs, as --set gpu=…
        dep = Deployment(engine=engine).with_(**p)
        if engine == "sglang" and p["tp"] != 8:  # (one in four keeps vLLM's flags: an error)
            dep = dep.with_(**VLLM_ONLY, mem_fraction_static=mfs)
        pair = _both(ev, model, dep, g, _cold)
        if pair is None:
            continue
        got, want = pair
        assert got == want, p
        assert [(r.estimated_max_model_len, r.scratch_savings) for r in got.ranks] == \
            [(r.estimated_max_model_len, r.scratch_savings) for r in want.ranks], p
