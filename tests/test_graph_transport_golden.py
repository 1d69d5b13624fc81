"""The driver memory of captured PyNccl all-reduces by NCCL transport, read from the golden
``reports/gpu/graph-transport/graph-collectives-transport-2x-h100.json``
(``recorders/gpu_graph_collectives_transport.py`` on 2× H100, NCCL 2.28.9; each case in its own
processes): P2P and SHM cost the same to the byte, the per-node costs are memprof's, and NCCL's
NET transport adds one fixed cost a graph holding a collective (``GRAPH_DRIVER_NET_PER_GRAPH``),
which memprof charges where the TP group spans hosts. Also the fresh-process re-run of
``recorders/gpu_graph_mixing_topology.py``: NCCL's two placements of its graph-mixing record node
cost the same for graphs of one or two collectives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.terms import cudagraph

REPORTS = Path(__file__).resolve().parent.parent / "reports" / "gpu"
GOLD = REPORTS / "graph-transport" / "graph-collectives-transport-2x-h100.json"
TOPOLOGY = REPORTS / "graph-mixing-topology" / "graph-mixing-topology-h100-fresh.json"
GRAIN = 2 * 1024 * 1024  # the driver's allocations, as mem_get_info sees them


def _cases() -> dict[tuple[str, str, str, int], dict]:  # type: ignore[type-arg]
    doc = json.loads(GOLD.read_text())
    assert "580.159.04" in doc["nvidia_smi"] and "NV18" in doc["nvidia_smi_topo"]
    return {(c["transport"], c["cumem"], c["body"], c["n"]): c for c in doc["cases"]}


def _driver(cases: dict, key: tuple[str, str, str, int]) -> int:  # type: ignore[type-arg]
    return int(cases[key]["ranks"][0]["driver_bytes"])


def test_every_case_ran_where_it_says_and_computed_right() -> None:
    cases = _cases()
    assert len(cases) == 41  # the run's budget stopped it before net cuMem-on "back" and p2p on
    for (transport, cumem, _body, _n), c in cases.items():
        assert c["env"]["NCCL_CUMEM_ENABLE"] == cumem and c["exit_codes"][0] == 0
        ranks = c["ranks"]
        assert ranks and all(r["ok"] and r["warm_up_ok"] for r in ranks)
        assert ranks[0]["nccl_torch"] == "2.28.9" and ranks[0]["torch"] == "2.11.0+cu130"
        assert len({r["driver_bytes"] for r in ranks}) == 1  # both ranks, where both came back
        assert ranks[0]["driver_bytes"] == ranks[0]["after_replay_driver_bytes"]
        via = [ln for ln in c["nccl_log"] if " via " in ln]
        want = {"p2p": "via P2P", "shm": "via SHM", "net": "via NET/Socket"}[transport]
        assert via and all(want in ln for ln in via), (transport, cumem)


def test_p2p_and_shm_cost_the_same_to_the_byte_cumem_on_and_off() -> None:
    cases = _cases()
    for (transport, cumem, body, n), _c in cases.items():
        if transport == "p2p" or (transport == "shm" and cumem == "1"):
            assert _driver(cases, (transport, cumem, body, n)) == _driver(
                cases, ("shm", "0", body, n)), (transport, cumem, body, n)


def test_per_node_costs_are_memprofs() -> None:
    cases = _cases()
    g = 100
    # back to back: (880,804 − 398,459) B a graph over 56 all-reduces = 8,613 B
    back = (_driver(cases, ("shm", "0", "back", 64))
            - _driver(cases, ("shm", "0", "back", 8))) / 56 / g
    assert abs(back - cudagraph.GRAPH_DRIVER_PER_NCCL_NODE) <= GRAIN / 56 / g
    # an elementwise kernel node: (230,687 − 104,858) / 63 = 1,997 B
    kern = (_driver(cases, ("shm", "0", "kernels", 64))
            - _driver(cases, ("shm", "0", "kernels", 1))) / 63 / g
    assert 1_900 < kern < cudagraph.GRAPH_DRIVER_PER_KERNEL_NODE
    # between kernels, the mixing case: 126,204 − 1,997 = 124,206 B an all-reduce, the
    # chains' 123 KB of graph-collectives-scaling-2x-h100.json
    between = (_driver(cases, ("shm", "0", "between", 64))
               - _driver(cases, ("shm", "0", "between", 8))) / 56 / g - kern
    assert round(between) == 124_206
    # a graph of two kernels and one all-reduce between them costs 335,544 B; memprof charges
    # its graph, kernels and NCCL node 274,310 B, and a piece of two (vLLM's pieces hold one
    # or two) 433,670 B against the measured 335,544 + 126,204 = 461,748 B: within 7%
    one = _driver(cases, ("shm", "0", "between", 1)) / g
    assert round(one) == 335_544
    model2 = (cudagraph.GRAPH_DRIVER_PER_GRAPH + 3 * cudagraph.GRAPH_DRIVER_PER_KERNEL_NODE
              + 2 * (cudagraph.GRAPH_DRIVER_PER_NCCL_NODE + cudagraph.GRAPH_DRIVER_NCCL_MIXING))
    measured2 = one + between + kern
    assert abs(model2 - measured2) / measured2 < 0.07


def test_net_adds_a_fixed_cost_a_graph_holding_a_collective() -> None:
    cases = _cases()
    extra = {(body, n): _driver(cases, ("net", "0", body, n))
             - _driver(cases, ("shm", "0", body, n))
             for (t, c, body, n) in cases if (t, c) == ("net", "0")}
    assert extra[("between", 0)] == extra[("kernels", 1)] == extra[("kernels", 64)] == 0
    held = [v for (body, n), v in extra.items() if body != "kernels" and n > 0]
    assert len(held) == 6
    assert sorted(held) == [10 * 1024 * 1024] * 5 + [12 * 1024 * 1024]  # one granule more once
    # not per collective: 1, 8 and 64 all-reduces a graph add the same
    assert round(10 * 1024 * 1024 / 100) == cudagraph.GRAPH_DRIVER_NET_PER_GRAPH
    # cuMem on: the same
    for body, n in (("between", 1), ("between", 8), ("between", 64), ("kernels", 64)):
        assert _driver(cases, ("net", "1", body, n)) == _driver(cases, ("net", "0", body, n))


def _driver_of(nnodes: int) -> tuple[int, int]:
    dep = Deployment(tp=4, nnodes=nnodes, disable_custom_all_reduce=True,  # type: ignore[arg-type]
                     engine_version="0.10.1.1")
    e = estimate("qwen2.5-7b-instruct", dep, gpu_name="A100-80GB")
    m = cudagraph.cudagraph_model(rank_context(e, e.ranks[0]))
    return m.driver, m.graphs


def test_the_rule_charges_every_graph_where_tp_spans_hosts() -> None:
    one_host, graphs = _driver_of(1)
    four_hosts, graphs4 = _driver_of(4)
    assert graphs == graphs4 > 0
    # Qwen2.5-7B: 28 layers, 29 pieces a size, every one holding a TP all-reduce
    assert four_hosts - one_host == graphs * cudagraph.GRAPH_DRIVER_NET_PER_GRAPH


@pytest.mark.parametrize("kw", [{"tp": 4, "nnodes": 1, "disable_custom_all_reduce": True},
                                {"tp": 1, "pp": 2, "nnodes": 2}])
def test_no_net_graphs_without_a_tp_group_across_hosts(kw: dict) -> None:  # type: ignore[type-arg]
    e = estimate("qwen2.5-7b-instruct", Deployment(engine_version="0.10.1.1", **kw),  # type: ignore[arg-type]
                 gpu_name="A100-80GB")
    ctx = rank_context(e, e.ranks[0])
    assert cudagraph.graph_net_graphs(ctx, "PIECEWISE") == 0


def test_the_mixing_placements_cost_the_same_for_one_or_two_collectives() -> None:
    doc = json.loads(TOPOLOGY.read_text())
    runs = {(r["case"], r["k"]): r for r in doc["runs"]}
    assert len(runs) == 15 and "580." in doc["machine"]["nvidia_smi"]
    for (case, k), r in runs.items():  # the census: the nodes each case names
        want = {"kernel": 2 * k}
        if case in ("wait", "inline", "leaf"):
            want["wait_event"] = 1
        if case in ("inline", "leaf"):
            want["event_record"] = k
        assert r["nodes_one_graph"] == want, (case, k)
    # in line (NCCL 2.21.5, 2.27.5+) and as a leaf (2.26.2-2.27.3): the same bytes at k = 1, 2
    for k in (1, 2):
        assert runs[("inline", k)]["driver_bytes"] == runs[("leaf", k)]["driver_bytes"]
    assert runs[("leaf", 8)]["driver_bytes"] * 2 < runs[("inline", 8)]["driver_bytes"]
    # the external wait node a graph: 115,343 B a graph over the kernels alone
    assert (runs[("wait", 1)]["driver_bytes"] - runs[("plain", 1)]["driver_bytes"]) / 200 == (
        pytest.approx(115_343, abs=1))


def test_the_output_says_which_graphs_pay_the_net_cost() -> None:
    def formulas(nnodes: int) -> str:
        dep = Deployment(tp=4, nnodes=nnodes, disable_custom_all_reduce=True,  # type: ignore[arg-type]
                         engine_version="0.10.1.1")
        e = estimate("qwen2.5-7b-instruct", dep, gpu_name="A100-80GB")
        return " ".join(c.formula for c in e.ranks[0].components if c.category == "cudagraph")

    # 29 pieces × 67 capture sizes, every one holding a TP all-reduce
    assert "1943 graphs holding a TP all-reduce over NCCL's NET transport" in formulas(4)
    assert "NET transport" not in formulas(1)
