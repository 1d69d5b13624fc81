"""memprof.core.graph_log under vLLM's Model Runner V2: before 0.29.0 its FULL graphs are captured
on torch's default capture stream (``V2_FULL_CAPTURE_STREAM``), so their live sets take segments of
their own in the graph pool, beside that stream's cuBLAS workspace.

Hand count, Llama-3.1-8B (hidden 4096, intermediate 14336, bf16) on an A40 (sm86: cuBLAS workspace
8 MiB + 128 KiB), max_num_seqs 256: 51 PIECEWISE sizes up to 512 tokens, 35 FULL sizes up to 256.
The FULL decode live set at 256 tokens: 2 MiB hidden states, then a stage of 2, 2, 3, 2, 2 MiB, then
2, 2, 14 (gate_up: 256 x 28672 x 2 B), 7 (256 x 14336 x 2 B) and 2 MiB. Requests of 1-10 MiB get
20 MiB segments: the first stage's segment holds the second stage, and in the third 2 + 2 + 14 MiB
fill it to 18 MiB, so the 7 MiB request opens a second 20 MiB segment (which takes the last 2 MiB):
40 MiB. The PIECEWISE live set at 512 tokens reserves 68 MiB, in which the FULL live set fits
where both are captured on one stream.
"""

from __future__ import annotations

import pytest

from memprof.base.units import KiB, MiB
from memprof.core.deployment import Deployment
from memprof.core.engines import engine_of
from memprof.core.estimate import estimate, rank_context
from memprof.core.graph_log import V2_FULL_CAPTURE_STREAM, logged_graph, v2_full_apart
from memprof.core.terms.cudagraph import graph_modes
from memprof.core.version_diff import all_rules
from memprof.core.versions import value_at

PIECEWISE_POOL = 68 * MiB
FULL_POOL_APART = 40 * MiB
WORKSPACE_SM86 = 8 * MiB + 128 * KiB


def _pool(model: str, version: str) -> int:
    e = estimate(model, Deployment(engine_version=version, max_model_len=4096, max_num_seqs=256),
                 gpu_name="A40")
    g = logged_graph(e, e.ranks[0])
    assert g is not None
    return dict((n, b) for n, b, _w in g.parts)["graph pool tensors"]


def test_the_capture_lists_of_the_hand_count() -> None:
    e = estimate("llama-3.1-8b", Deployment(engine_version="0.26.0", max_model_len=4096,
                                            max_num_seqs=256), gpu_name="A40")
    modes = graph_modes(e.deployment)
    assert (len(modes["PIECEWISE"]), max(modes["PIECEWISE"])) == (51, 512)
    assert (len(modes["FULL"]), max(modes["FULL"])) == (35, 256)
    assert v2_full_apart(rank_context(e, e.ranks[0]))


@pytest.mark.parametrize("version", ["0.23.0", "0.26.0", "0.27.1", "0.28.0"])
def test_v2_full_graphs_apart_by_hand(version: str) -> None:
    assert _pool("llama-3.1-8b", version) == PIECEWISE_POOL + FULL_POOL_APART + WORKSPACE_SM86


@pytest.mark.parametrize("version", ["0.20.0", "0.22.0", "0.29.0"])
def test_one_stream_where_v1_runs_or_v2_passes_it(version: str) -> None:
    # 0.20.0 / 0.22.0: V1's runner for Llama (V2 only with VLLM_USE_V2_MODEL_RUNNER=1; 0.22.0
    # lists Qwen3ForCausalLM alone); 0.29.0: V2 passes
    # stream=current_stream(), so the FULL live set fits in the PIECEWISE one's segments
    assert _pool("llama-3.1-8b", version) == PIECEWISE_POOL


def test_moe_model_stays_on_v1_and_shares_the_stream() -> None:
    # 0.26.0 runs a model with routed experts on V1 (vllm_runner.V2_DEFAULT: dense only)
    e = estimate("qwen3-30b-a3b", Deployment(engine_version="0.26.0", max_model_len=4096,
                                             max_num_seqs=256), gpu_name="H100")
    assert not v2_full_apart(rank_context(e, e.ranks[0]))


def test_other_engines_have_one_runner() -> None:
    s = estimate("qwen3-0.6b", Deployment(engine="sglang"), gpu_name="H100")
    ctx = rank_context(s, s.ranks[0])
    assert not engine_of(s.deployment).runs_runner_v2(
        s.deployment, architecture=ctx.spec.architecture, moe=False, hybrid=False)


def test_rule_in_the_rulebook() -> None:
    book = all_rules()
    assert all(r in book and r.source.strip() for r in V2_FULL_CAPTURE_STREAM)
    assert value_at(V2_FULL_CAPTURE_STREAM, "0.21.0", "none") == "none"
    assert value_at(V2_FULL_CAPTURE_STREAM, "0.22.0") == "torch_default"
    assert value_at(V2_FULL_CAPTURE_STREAM, "0.28.0") == "torch_default"
    assert value_at(V2_FULL_CAPTURE_STREAM, "0.29.0") == "warmup"
