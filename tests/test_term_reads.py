"""Each term's declared reads (``memprof.core.terms.reads.TERM_READS``) against what it reads:
every term over the bundled models × deployments × GPUs, run on a context that records each
field read (``memprof.batch.memo.recorded_run``). Every read is declared, every declaration is
read by some case. And the memo that relies on the reads raises a term's error, never hiding it
by running the term again without the recorder."""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import fields
from functools import cache
from pathlib import Path

import pytest

from memprof.base.errors import BadInput
from memprof.batch.memo import ReadMemo, recorded_run
from memprof.core.components import Component, TermContext
from memprof.core.deployment import Deployment
from memprof.core.estimate import default_terms, estimate, rank_context
from memprof.core.gpus import resolve_gpu
from memprof.core.models import ModelSpec
from memprof.core.models.load import bundled_models, load_model
from memprof.core.terms.reads import TERM_READS

HEAD = Path(__file__).parent / "data" / "draft_heads" / "eagle3-qwen3-8b-shapes"
DEPLOYMENTS = [
    Deployment(),
    Deployment(tp=2, pp=2, kv_cache_dtype="fp8"),
    Deployment(tp=4, dp=2, enable_expert_parallel=True, max_num_seqs=64, max_model_len=32768),
    Deployment(engine_version="0.7.2", enforce_eager=True),
    Deployment(engine_version="0.8.5", tp=2),  # the 0.8-era V1 budget (reserved_charge)
    # the ROCm load figure's cached blocks (rocm_load_cache), a release it holds at
    Deployment(engine_version="0.17.1", tp=2, vllm_rocm_use_aiter=1),
    Deployment(engine="sglang", tp=8),
    Deployment(tp=8, scratch="shared", num_speculative_tokens=1),
    Deployment(engine="sglang", tp=8, dp=2, enable_dp_attention=True),
    # a release whose DeepSeek model file requantises after the load (post_load_requant)
    Deployment(engine="sglang", engine_version="0.5.4", tp=8),
    # LoRA (terms/lora.py): every LoRA setting, on the families that model it
    Deployment(engine_version="0.8.2", tp=2, pp=2, enable_lora=True, max_loras=2,
               max_lora_rank=32, lora_extra_vocab_size=512, lora_dtype="float16",
               fully_sharded_loras=True, enable_lora_bias=True),
    # the V1 runner's constructor buffers at a release that charges them (MoE models run V1
    # there; terms/runner_buffers.py sizes the block table by the --block-size given)
    Deployment(engine_version="0.28.0", block_size=32),
    # n-gram speculation: the V1 runner at a release that runs V2 otherwise (the runner that
    # stream_pool, runner_buffers and the graph terms read; memprof/core/speculative.py)
    Deployment(engine_version="0.30.0", num_speculative_tokens=4, speculative_method="ngram"),
    # and on Model Runner V2 from 0.32.0, two stages: the dense token table on each, the
    # speculator's buffers on the last (terms/ngram_speculator.py)
    Deployment(engine_version="0.33.0", pp=2, num_speculative_tokens=4,
               speculative_method="ngram"),
    # an EAGLE-3 head (terms/draft_head.py): its weights, its KV layer, the proposer's buffers
    Deployment(engine_version="0.30.0", num_speculative_tokens=3, speculative_method="eagle3",
               speculative_model=str(HEAD)),
    # Model Runner V2's own graph estimate with LoRA's capture cases (terms/runner_v2_graphs.py)
    Deployment(engine_version="0.30.0", enable_lora=True, max_loras=2, max_lora_rank=32,
               lora_dtype="float16", fully_sharded_loras=True, specialize_active_lora=True),
    # the V1 runner's profiling graphs with the custom all-reduce at TP 2, whose inputs the
    # peers' IPC handles keep (terms/graph_input_handles.py)
    Deployment(engine_version="0.22.0", tp=2),
]
GPUS = ("H200", "MI300X", "B200")



def _terms() -> list[object]:
    before, after = default_terms()
    return [*before, *after]


@cache
def _spec(model: str, mtp: bool, assume: str | None) -> ModelSpec:
    return load_model(model, speculative_mtp=mtp, assume_architecture=assume)


@cache
def _observed() -> tuple[int, dict[str, list[tuple[str, frozenset[str]]]]]:
    """(estimates run, term name → [(case, fields read)] over every case)."""
    out: dict[str, list[tuple[str, frozenset[str]]]] = defaultdict(list)
    runs = 0
    for model, dep, gpu in itertools.product(sorted(bundled_models()), DEPLOYMENTS, GPUS):
        try:
            # the model as the estimate loads it for this deployment (no case overrides its
            # config), read once for all the cases that load it alike
            assert not dep.hf_overrides
            e = estimate(_spec(model, dep.speculative_mtp, dep.assume_architecture), dep,
                         gpu=resolve_gpu(gpu, None))
        except BadInput:
            continue  # a layout the model refuses (TP not dividing its heads …)
        runs += 1
        for r in e.ranks:
            ctx = rank_context(e, r)
            case = f"{model} {dep} {gpu} rank {r.coord.rank}"  # (one deployment repr a rank)
            for term in _terms():
                _out, reads = recorded_run(term, ctx)  # type: ignore[arg-type]
                out[term.__name__].append((case, frozenset(f"{k}.{n}" for k, n in reads)))  # type: ignore[attr-defined]
    return runs, out


def test_every_term_has_a_declaration_of_real_fields() -> None:
    names = [t.__name__ for t in _terms()]  # type: ignore[attr-defined]
    assert sorted(names) == sorted(TERM_READS)
    real = ({f"ctx.{f.name}" for f in fields(TermContext) if f.name != "dep"}
            | {f"dep.{f.name}" for f in fields(Deployment)})
    for name, declared in TERM_READS.items():
        assert declared <= real, (name, declared - real)
        assert "dep.gpu_memory_utilization" not in declared, name  # the KV budget's alone


def test_the_cases_cover_every_term_s_declared_reads() -> None:
    """One test over the recording (every term over the cases, about 15 s, made once: split into
    tests per term, pytest-xdist's workers each made it, as ``--dist loadgroup`` no longer groups
    under pytest 9), each term's failures reported by name: the cases cover the models and
    engines, every read is declared, and every declared read is read by some case."""
    runs, seen = _observed()
    assert runs >= len(bundled_models()) * 2 * len(GPUS)
    undeclared, unread = {}, {}
    for name in sorted(TERM_READS):
        more = [(case, sorted(reads - TERM_READS[name])) for case, reads in seen[name]
                if not reads <= TERM_READS[name]]
        if more:
            undeclared[name] = more[:3]
        read = frozenset().union(*(reads for _case, reads in seen[name]))
        if TERM_READS[name] - read:
            unread[name] = sorted(TERM_READS[name] - read)
    assert undeclared == {}, f"terms that read more than they declare: {undeclared}"
    assert unread == {}, f"terms that declare fields no case reads: {unread}"


def _ctx() -> TermContext:
    e = estimate("qwen3-0.6b", Deployment(), gpu_name="H100")
    return rank_context(e, e.ranks[0])


def test_a_term_that_fails_under_the_recorder_raises() -> None:
    """A term that works on a plain context but not on the recording one is a bug of the
    recorder or of the term: the memo raises it (it used to run the term again plainly)."""

    def picky(ctx: TermContext) -> list[Component]:
        if type(ctx) is not TermContext:
            raise TypeError("not a plain TermContext")
        return [Component(name="x", category="activation", bytes=ctx.dep.tp)]

    ctx = _ctx()
    assert picky(ctx)[0].bytes == 1
    memo = ReadMemo(picky)
    with pytest.raises(TypeError, match="not a plain TermContext"):
        memo(ctx)
    assert not memo.direct and memo.hits == 0
