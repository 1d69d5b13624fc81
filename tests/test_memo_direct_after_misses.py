"""``ReadMemoFn(direct_after_misses=N)``: a memo that has found nothing in N runs runs its
function plainly from then on (the sweep's class memo of the budget terms,
``memprof.batch.sweep.CLASS_MEMO_TRIES``), with the same results; one that has found something
keeps remembering."""

from __future__ import annotations

from memprof.batch.memo import ReadMemoFn
from memprof.batch.sweep import CLASS_MEMO_TRIES, Evaluator, parse_axis, sweep
from memprof.core.components import TermContext
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context


def _ctx(dep: Deployment) -> TermContext:
    e = estimate("qwen3-0.6b", dep, gpu_name="H100")
    return rank_context(e, e.ranks[0])


def test_nothing_found_in_n_runs_runs_plainly() -> None:
    memo = ReadMemoFn(lambda c: c.dep.max_num_seqs * 3, direct_after_misses=2)
    for seqs in (8, 16, 32, 64):
        assert memo.value(_ctx(Deployment(max_num_seqs=seqs))) == seqs * 3
    assert memo.direct and memo.hits == 0 and memo.runs == 3


def test_a_memo_that_found_something_keeps_remembering() -> None:
    memo = ReadMemoFn(lambda c: c.dep.max_num_seqs * 3, direct_after_misses=2)
    a = _ctx(Deployment(max_num_seqs=8))
    assert memo.value(a) == memo.value(a) == 24
    for seqs in (16, 32, 64):
        assert memo.value(_ctx(Deployment(max_num_seqs=seqs))) == seqs * 3
    assert not memo.direct and memo.hits == 1 and memo.runs == 4


def test_the_class_memo_gives_up_on_a_grid_whose_classes_share_nothing() -> None:
    """DeepSeek-R1's activations read the length: no two of its classes share the budget
    terms, and after ``CLASS_MEMO_TRIES`` classes the terms' own memos are asked directly."""
    ev = Evaluator()
    sweep("deepseek-r1", Deployment(tp=8), "H200", None,
          [parse_axis("max_model_len=4K,8K,16K,32K,64K,128K"), parse_axis("dp=1,2"),
           parse_axis("max_num_seqs=64,128")], evaluator=ev)
    (outer,) = ev._run_terms[0]
    assert outer.hits == 0 and outer.direct  # type: ignore[attr-defined]
    assert outer.runs == CLASS_MEMO_TRIES + 1  # type: ignore[attr-defined]
