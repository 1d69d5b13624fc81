"""Model Runner V2's FULL uniform-decode graph sizes with draft tokens (memprof/core/terms/
cudagraph.py ``V2_FULL_DECODE_SIZES``): from vLLM 0.25.0 each capture size is rounded up to a
multiple of 1 + k and duplicates dropped (v1/worker/gpu/cudagraph_utils.py
``CudaGraphManager._init_candidates``, read in 0.25.0 - 0.33.0); 0.21.0 - 0.24.x keep V1's
dql <= x <= dql * R. The lists are hand calculations."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.models import load_model
from memprof.core.terms.cudagraph import (
    V2_FULL_DECODE_SIZES,
    capture_sizes,
    engine_graph_modes,
    v2_full_decode_sizes,
)
from memprof.core.terms.runner_v2_graphs import MIN_PER_GRAPH_BYTES, v2_graph_estimate
from memprof.core.version_diff import applies, tags

SMALL = Deployment(engine_version="0.33.0", max_num_seqs=4, max_num_batched_tokens=2048,
                   max_model_len=4096, num_speculative_tokens=2, speculative_method="ngram")


def test_small_list_by_hand() -> None:
    # dql = 3, R = 4: capture max = min(4 * 3 * 2, 512, 2048) = 24 -> [1, 2, 4, 8, 16, 24]
    assert capture_sizes(SMALL) == [1, 2, 4, 8, 16, 24]
    # round_up to 3: 3, 3, 6, 9, 18, 24; kept <= min(3 * 4, 24) = 12, duplicates dropped
    assert v2_full_decode_sizes(SMALL, capture_sizes(SMALL)) == [3, 6, 9]


@pytest.mark.parametrize("version", ["0.21.0", "0.24.0"])
def test_before_0_25_0_the_sizes_within_dql_and_dql_times_r(version: str) -> None:
    dep = SMALL.with_(engine_version=version)
    # 0.21.0 - 0.24.0 _init_candidates: decode_query_len <= num_tokens <= R * decode_query_len
    assert v2_full_decode_sizes(dep, [1, 2, 4, 8, 16, 24]) == [4, 8]


@pytest.mark.parametrize("version", ["0.24.0", "0.33.0"])
def test_without_draft_tokens_both_schemes_are_v1s(version: str) -> None:
    dep = SMALL.with_(engine_version=version, num_speculative_tokens=0, speculative_method=None)
    assert v2_full_decode_sizes(dep, [1, 2, 4, 8, 16, 24]) == [1, 2, 4]


# row 1723's deployment (Qwen2.5-7B-Instruct AWQ on an L4) with n-gram drafting at 0.33.0,
# where it runs Model Runner V2 (tests/test_speculative_ngram_v2.py)
NGRAM = Deployment(engine_version="0.33.0", max_model_len=8192, gpu_memory_utilization=0.85,
                   quantization="awq_marlin", max_num_seqs=32, max_num_batched_tokens=2048,
                   num_speculative_tokens=4, speculative_method="ngram")


def test_the_v2_runner_captures_the_rounded_sizes() -> None:
    e = estimate("qwen2.5-7b-instruct", NGRAM, gpu_name="L4")
    ctx = rank_context(e, e.ranks[0])
    modes = engine_graph_modes(ctx)
    # dql = 5, capture max = min(32 * 5 * 2, 512, 2048) = 320: [1, 2, 4] + 8..248 step 8 +
    # 256..320 step 16 = 3 + 31 + 5 = 39 PIECEWISE sizes
    assert len(modes["PIECEWISE"]) == 39
    # each rounded up to a multiple of 5, kept <= 5 * 32 = 160: 1, 2, 4 -> 5; 8 -> 10; 16 -> 20;
    # ... 160 -> 160 (V1's scheme: 8..160 step 8, 20 sizes)
    assert modes["FULL"] == [5, 10, 20, 25, 35, 40, 50, 60, 65, 75, 80, 90, 100, 105, 115,
                             120, 130, 140, 145, 155, 160]
    v = v2_graph_estimate(ctx)
    assert v is not None and v.full_graphs == 21 and v.sizes == 39 + 21
    # the figure: the window W of every graph + (21 - 1) FULL graphs extrapolated at
    # max(0, 1 MiB - d) + FlashInfer's workspace where it runs (runner_v2_graphs.py)
    assert v.estimate == v.window + 20 * max(0, MIN_PER_GRAPH_BYTES - v.per_full) + v.workspace


def test_the_rule_applies_to_speculative_deployments_only() -> None:
    spec = load_model("qwen2.5-7b-instruct")
    assert "speculative" in tags(spec, NGRAM)
    assert applies(V2_FULL_DECODE_SIZES[1], spec, NGRAM)
    plain = NGRAM.with_(num_speculative_tokens=0, speculative_method=None)
    assert not applies(V2_FULL_DECODE_SIZES[1], spec, plain)
