"""Where NCCL's graph mixing support puts its event-record node, by NCCL release, and what that
does to the graph-mixing charge of captured NCCL nodes (``cudagraph.NCCL_RECORD_PLACEMENT`` of
``nccl.nccl_version``, ``nccl_mixing_nodes``): the rule is read off the fresh-process run of
reports/gpu/graph-mixing-topology, and a FULL graph of a "leaf" release pays for two nodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.gpus import resolve_gpu
from memprof.core.releases import SGLANG_RELEASES, VLLM_RELEASES
from memprof.core.terms.cudagraph import (
    GRAPH_DRIVER_NCCL_MIXING,
    NCCL_RECORD_PLACEMENT,
    graph_driver_bytes,
    graph_nccl_nodes,
    graph_pieces,
    nccl_mixing_nodes,
    nccl_record_placement,
)
from memprof.core.terms.nccl import NCCL_VERSION, nccl_version
from memprof.core.terms.nccl_image import IMAGE_BYTES
from memprof.core.versions import value_at

TOPOLOGY = (Path(__file__).parent.parent / "reports" / "gpu" / "graph-mixing-topology"
            / "graph-mixing-topology-h100-fresh.json")
GRANULE = 2 * 1024 * 1024  # mem_get_info's step


def _per_graph() -> tuple[dict[tuple[str, int], int], int]:
    runs = json.loads(TOPOLOGY.read_text())["runs"]
    assert {r["graphs"] for r in runs} == {200}
    return {(r["case"], r["k"]): r["driver_bytes"] for r in runs}, 200


def test_records_past_a_leaf_chains_second_cost_nothing_measurable() -> None:
    d, graphs = _per_graph()
    # one and two collectives: both placements cost the same to the byte
    for k in (1, 2):
        assert d[("leaf", k)] == d[("inline", k)]
    # 2 -> 8: a leaf graph grows by what its kernels cost (the wait case, no records), within
    # one granule over the 200 graphs; an in-line one by ~115 KB a record more
    kernels = d[("wait", 8)] - d[("wait", 2)]
    assert abs((d[("leaf", 8)] - d[("leaf", 2)]) - kernels) <= GRANULE
    per_record = (d[("inline", 8)] - d[("inline", 2)] - kernels) / graphs / 6
    assert 100_000 < per_record < 130_000


@pytest.mark.parametrize(("engine", "version", "placement"), [
    ("vllm", "0.6.3", "in line"), ("vllm", "0.8.4", "in line"), ("vllm", "0.9.0", "leaf"),
    ("vllm", "0.10.1.1", "leaf"), ("vllm", "0.11.0", "leaf"), ("vllm", "0.11.1", "in line"),
    ("vllm", "0.20.0", "in line"), ("sglang", "0.4.6", "in line"), ("sglang", "0.4.7", "leaf"),
    ("sglang", "0.5.5", "leaf"), ("sglang", "0.5.6", "in line"), ("sglang", "0.5.11", "in line"),
])
def test_placement_by_release(engine: str, version: str, placement: str) -> None:
    tag = nccl_version(Deployment(engine=engine, engine_version=version))
    assert NCCL_RECORD_PLACEMENT[str(tag)] == placement


def test_every_release_memprof_models_has_a_placement() -> None:
    """Each NCCL release an engine release runs (``NCCL_VERSION``) has its record placement and
    its device-code images (``nccl_image.IMAGE_BYTES``): a release missing from either would
    fall back silently ("in line", the measured image)."""
    for engine, releases in (("vllm", VLLM_RELEASES), ("sglang", SGLANG_RELEASES)):
        for v in releases:
            release = value_at(NCCL_VERSION, v, None, engine)
            assert release is not None, (engine, v)
            assert str(release) in NCCL_RECORD_PLACEMENT, (engine, v)
            assert str(release) in IMAGE_BYTES, (engine, v)


def _ctx(version: str, gpu: str = "RTX-4090"):  # type: ignore[no-untyped-def]
    e = estimate("qwen3-30b-a3b", Deployment(engine_version=version, tp=4,
                                             disable_custom_all_reduce=True),
                 gpu=resolve_gpu(gpu, None))
    return rank_context(e, e.ranks[0])


def test_a_full_graph_of_a_leaf_release_pays_for_two_nodes() -> None:
    leaf, inline = _ctx("0.11.0"), _ctx("0.11.1")  # NCCL 2.27.3 / 2.27.5
    assert nccl_record_placement(leaf) == "leaf" and nccl_record_placement(inline) == "in line"
    nodes = graph_nccl_nodes(leaf)
    assert nodes == 2 * 48 + 1  # custom all-reduce off: every TP all-reduce an NCCL node
    assert nccl_mixing_nodes(leaf, "FULL") == 2
    assert nccl_mixing_nodes(inline, "FULL") == nodes
    # a piece holds one or two: every node of a PIECEWISE size pays in either placement
    assert graph_pieces(leaf) * 2 >= nodes
    assert nccl_mixing_nodes(leaf, "PIECEWISE") == nodes == nccl_mixing_nodes(inline, "PIECEWISE")
    # the FULL size's driver bytes: the records past the second no longer pay the mixing share
    full = graph_driver_bytes(leaf, "FULL", 1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(NCCL_RECORD_PLACEMENT, "2.27.3", "in line")
        assert graph_driver_bytes(leaf, "FULL", 1) - full == (nodes - 2) * GRAPH_DRIVER_NCCL_MIXING


def test_rocm_keeps_the_measured_placement() -> None:
    ctx = _ctx("0.11.0", "MI300X")
    assert nccl_record_placement(ctx) == "in line"
    assert nccl_mixing_nodes(ctx, "FULL") == graph_nccl_nodes(ctx) == 2 * 48 + 1


def test_the_output_states_the_spared_nodes() -> None:
    def formulas(version: str) -> str:
        e = estimate("qwen3-30b-a3b", Deployment(engine_version=version, tp=4,
                                                 disable_custom_all_reduce=True),
                     gpu=resolve_gpu("RTX-4090", None))
        return " ".join(c.formula for c in e.ranks[0].components if c.category == "cudagraph")
    # 35 FULL sizes x (97 - 2) nodes at 0.11.0 (NCCL 2.27.3); none at 0.11.1 (2.27.5)
    assert "3325 NCCL nodes past their graph's second" in formulas("0.11.0")
    assert "NCCL_RECORD_PLACEMENT" not in formulas("0.11.1")
