"""FlashAttention 3's split-KV accumulators in FULL CUDA graphs (``cudagraph.FULL_GRAPH_SPLITS``,
``full_graph_split_bytes``): vLLM fixes FA3's split count at 32 for graph-captured batches from
0.11.0 (FULL_AND_PIECEWISE), and FA3 allocates ``out_accum`` [splits, heads, tokens, head_dim_v]
and ``softmax_lse_accum`` [splits, heads, tokens] in fp32 inside the capture."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.graph_log import logged_graph
from memprof.core.terms import cudagraph
from memprof.core.terms.cudagraph import cudagraph_model, full_graph_split_bytes
from memprof.core.versions import value_at


def _ctx(model: str, gpu: str, **kw: object):  # type: ignore[no-untyped-def]
    e = estimate(model, Deployment(**kw), gpu_name=gpu)  # type: ignore[arg-type]
    return e, rank_context(e, e.ranks[0])


def test_llama_8b_on_h100_hand_count() -> None:
    # Llama-3.1-8B: 32 query heads of 128 at TP1; 512 tokens; 32 splits:
    # out_accum 32 × 32 × 512 × 128 × 4 B + lse 32 × 32 × 512 × 4 B
    _e, ctx = _ctx("llama-3.1-8b", "H100", engine_version="0.11.0")
    want = 32 * 32 * 512 * 128 * 4 + 32 * 32 * 512 * 4
    assert want == 270_532_608
    assert full_graph_split_bytes(ctx, 512) == {"attention (gqa)": want}


def test_heads_are_the_ranks() -> None:
    _e, ctx = _ctx("llama-3.1-8b", "H100", engine_version="0.13.0", tp=4)
    assert full_graph_split_bytes(ctx, 256) == {"attention (gqa)": 32 * 8 * 256 * 129 * 4}


@pytest.mark.parametrize(("gpu", "kw"), [
    ("A100-80GB", {"engine_version": "0.11.0"}),  # FA2 below compute capability 9
    ("B200", {"engine_version": "0.11.0"}),  # FA2 on Blackwell
    ("H100", {"engine_version": "0.10.1"}),  # before FULL graphs by default
    ("H100", {"engine_version": "0.11.0", "attention_backend": "flashinfer"}),
])
def test_none_where_fa3_does_not_run_full_graphs(gpu: str, kw: dict[str, object]) -> None:
    _e, ctx = _ctx("llama-3.1-8b", gpu, **kw)
    assert full_graph_split_bytes(ctx, 512) == {}


def test_one_split_above_992_sequences() -> None:
    _e, ctx = _ctx("llama-3.1-8b", "H100", engine_version="0.11.0")
    assert full_graph_split_bytes(ctx, 992)
    assert full_graph_split_bytes(ctx, 1000) == {}


def test_mla_has_none() -> None:
    _e, ctx = _ctx("deepseek-r1", "H200", engine_version="0.11.0", tp=8)
    assert full_graph_split_bytes(ctx, 512) == {}


def test_rule_rows() -> None:
    assert value_at(cudagraph.FULL_GRAPH_SPLITS, "0.10.2", 0) == 0
    assert value_at(cudagraph.FULL_GRAPH_SPLITS, "0.11.0", 0) == 32
    assert value_at(cudagraph.FULL_GRAPH_SPLITS, "0.19.0", 0) == 32


def test_pool_and_estimate_hold_the_accumulators(monkeypatch: pytest.MonkeyPatch) -> None:
    """The FULL mode's largest size holds them at each layer's attention: the private pool
    (and vLLM's own estimate, whose first FULL capture measures that pool) holds a segment of
    at least the accumulators, and grows by no more than them rounded to the allocator's 2 MiB
    granule (less where the later stages' tensors are carved from that freed segment instead
    of their own)."""
    _e, ctx = _ctx("llama-3.1-8b", "H100", engine_version="0.20.0")
    with_acc = cudagraph_model(ctx)
    monkeypatch.setattr(cudagraph, "FULL_GRAPH_SPLITS", ())
    without = cudagraph_model(ctx)
    acc = 32 * 32 * max(with_acc.modes["FULL"]) * 129 * 4
    assert with_acc.first_capture["FULL"] - with_acc.first_capture["FULL"] % (2 * 2**20) >= acc
    assert 0 < with_acc.first_capture["FULL"] - without.first_capture["FULL"] <= acc + 2 * 2**20
    assert 0 < with_acc.actual - without.actual <= acc + 2 * 2**20
    assert with_acc.estimate > without.estimate


def test_logged_figure_of_a_0_13_h100_log_moves_by_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM 0.13.0, Meta-Llama-3-8B at TP4 on an H100 (published row 507's deployment on an sm90
    card; the row's own card is an sm80 one, where FlashAttention 3 does not run): FULL sizes up
    to 512, 8 heads a rank: 64.5 MiB of accumulators in the logged figure."""
    e, _ctx2 = _ctx("meta-llama-3-8b", "H100", engine_version="0.13.0", tp=4)
    got = logged_graph(e, e.ranks[0])
    monkeypatch.setattr(cudagraph, "FULL_GRAPH_SPLITS", ())
    base = logged_graph(e, e.ranks[0])
    assert got is not None and base is not None
    acc = 32 * 8 * 512 * 129 * 4
    assert 0 < got.total - base.total <= acc + 2 * 2**20
    tensors = dict((n, b) for n, b, _w in got.parts)["graph pool tensors"]
    assert tensors >= acc


@pytest.mark.parametrize("model", ["qwen3-next-80b-a3b-instruct", "gpt-oss-120b",
                                   "gemma-3-27b-it", "qwen3-32b"])
def test_named_stages_exist(model: str) -> None:
    """Each accumulator lands in an attention stage the pool replays (a name no stage has would
    drop it silently)."""
    from memprof.core.terms.activation import activation_stages

    _e, ctx = _ctx(model, "H100", engine_version="0.20.0")
    got = full_graph_split_bytes(ctx, 256)
    names = {st.name for st in activation_stages(ctx, tokens=256, rows=0, decode=True)}
    assert got and set(got) <= names


def test_pool_holds_the_largest_split_size_below_a_one_split_top() -> None:
    """gpt-oss's FULL sizes reach 1,024 (``Family.max_capture``, families/gpt_oss.py) at 1,024
    sequences: the largest runs one split, the next ones (1,008, 992) ... 992 runs 32; captured
    in descending order into the one pool, 992's accumulators are in it (64 query heads of 64 at
    TP1)."""
    e, ctx = _ctx("gpt-oss-120b", "H100", engine_version="0.20.0", max_num_seqs=1024,
                  max_num_batched_tokens=8192)
    modes = cudagraph.graph_modes(e.deployment, ctx.spec.architecture)
    assert max(modes["FULL"]) == 1024 and 992 in modes["FULL"]
    assert full_graph_split_bytes(ctx, 1024) == {}
    accum = 32 * 64 * 992 * 65 * 4
    assert full_graph_split_bytes(ctx, 992) == {"attention (gqa)": accum}
    pool = cudagraph.graph_pool_tensor_bytes(ctx, modes)
    assert pool >= accum
    # the largest size's live sets alone leave it out
    alone = {"PIECEWISE": modes["PIECEWISE"], "FULL": [1024]}
    assert cudagraph.graph_pool_tensor_bytes(ctx, alone) < accum
