"""The 2x H100 measurements behind the TP graph-pool and profile-run rules (issue 25):
NCCL's graph mixing support per captured NCCL node (``cudagraph.GRAPH_DRIVER_NCCL_MIXING``) and
the first fill kernel that a TP rank's NCCL warm-up runs before its profile run
(``non_torch.CUBLAS_AFTER_FIRST_KERNEL_BYTES``), read off
reports/gpu/nccl/graph-mixing-2x-h100.json, graph-collectives-scaling-2x-h100.json and
first-kernel-2x-h100.json."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.gpus import find_gpu
from memprof.core.terms import cudagraph, non_torch

GOLD = Path(__file__).resolve().parents[1] / "reports" / "gpu" / "nccl"
DRIVER = "CUDA-graph pool: driver (graph executables)"


@cache
def _doc(name: str) -> Any:
    return json.loads((GOLD / name).read_text())


def _run(name: str) -> dict[str, Any]:
    run: dict[str, Any] = next(r for r in _doc("graph-mixing-2x-h100.json")["runs"]
                               if r["name"] == name)
    return run


def _driver(name: str) -> int:
    """The traced driver bytes of the graphs, equal on both ranks."""
    got = {next(c["traced_bytes"] for c in r["components"] if c["name"] == DRIVER)
           for r in _run(name)["ranks"]}
    assert len(got) == 1, name
    return got.pop()


def _nccl_nodes(model: str, seqs: int, overrides: str | None = None) -> int:
    """NCCL nodes the trace captured: the rank's TP all-reduces × the capture sizes."""
    dep = Deployment(tp=2, max_num_seqs=seqs, disable_custom_all_reduce=True,
                     hf_overrides=overrides)
    e = estimate(model, dep, gpu_name="H100")
    ctx = rank_context(e, e.ranks[0])
    sizes = sum(len(v) for v in cudagraph.cudagraph_model(ctx).modes.values())
    return cudagraph.graph_nccl_nodes(ctx) * sizes


def test_mixing_cost_per_node_is_the_qwen3_pair() -> None:
    on, off = _driver("replica-qwen3-0.6b-c10d"), _driver(
        "replica-qwen3-0.6b-c10d-NCCL_GRAPH_MIXING_SUPPORT=0")
    assert (on, off) == (350_224_384, 96_468_992)
    nodes = _nccl_nodes("qwen3-0.6b", 64)
    assert nodes == 57 * 30
    assert round((on - off) / nodes) == cudagraph.GRAPH_DRIVER_NCCL_MIXING


def test_mixing_cost_holds_on_two_other_models() -> None:
    """Llama-3.1-8B (GEMMs before every all-reduce) and the DeepSeek shape (fp8 linears, MLA
    and MoE modelled: hardly a kernel before its all-reduces) pay what Qwen3-0.6B pays, within
    1.5%."""
    llama = ("trace-llama-3.1-8b-tp2", _nccl_nodes("llama-3.1-8b", 256))
    ds = ("trace-deepseek-r1-tp2",
          _nccl_nodes("deepseek-r1", 256, '{"num_hidden_layers": 8}'))
    for (name, nodes), want in ((llama, 65 * 86), (ds, 17 * 86)):
        assert nodes == want
        per = (_driver(name) - _driver(f"{name}-NCCL_GRAPH_MIXING_SUPPORT=0")) / nodes
        assert abs(per - cudagraph.GRAPH_DRIVER_NCCL_MIXING) <= 0.015 * per, (name, per)


def test_the_all_reduce_implementation_does_not_matter_the_collective_does() -> None:
    """The trace's c10d all-reduce (a clone, then the collective in place) and a PyNccl-style
    out-of-place ncclAllReduce on the capture stream cost the same driver bytes but for the
    clone's kernel node: equal to the byte for Qwen3-0.6B, 16 MiB (1.5%) less without the clones
    for Llama-3.1-8B's 5,590 all-reduces; the same graphs with a local clone in place of the
    all-reduce cost a quarter of it."""
    c10d, pynccl = _driver("replica-qwen3-0.6b-c10d"), _driver("replica-qwen3-0.6b-pynccl")
    assert c10d == pynccl
    assert _driver("replica-qwen3-0.6b-local") < c10d / 4
    c10d, pynccl = _driver("replica-llama-3.1-8b-c10d"), _driver("replica-llama-3.1-8b-pynccl")
    assert 0 <= c10d - pynccl <= 0.02 * c10d


def _cases(section: str) -> dict[tuple[str, str, int], dict[str, Any]]:
    sec = next(s for s in _doc("graph-collectives-scaling-2x-h100.json")["sections"]
               if s["name"] == section)
    assert sec["ranks"][0]["cases"] == sec["ranks"][1]["cases"] or all(
        a["driver_bytes"] == b["driver_bytes"]
        for a, b in zip(sec["ranks"][0]["cases"], sec["ranks"][1]["cases"], strict=True))
    return {(c["impl"], c["between"], c["k"]): c for c in sec["ranks"][0]["cases"]}


def _slope(cases: dict[tuple[str, str, int], dict[str, Any]], impl: str, between: str,
           k0: int, k1: int) -> float:
    a, b = cases[(impl, between, k0)], cases[(impl, between, k1)]
    return (b["driver_bytes"] - a["driver_bytes"]) / (k1 - k0) / a["graphs"]


def test_recorder_chains_show_the_mechanism() -> None:
    """Chains of k nodes: an all-reduce after any other kernel costs ~120 KiB with mixing on
    (against the same chain with a local clone), ~8 KiB back to back or with mixing off."""
    cases = _cases("scaling")
    for between in ("none", "add", "mm"):
        per = _slope(cases, "c10d", between, 1, 128) - _slope(cases, "local", between, 1, 128)
        assert 120_000 < per < 126_000, (between, per)
    assert _slope(cases, "pynccl", "none", 1, 128) < 10_000  # back to back: no mixing node
    off = _cases("scaling-NCCL_GRAPH_MIXING_SUPPORT=0")
    per_off = _slope(off, "c10d", "mm", 1, 32) - _slope(cases, "local", "mm", 1, 32)
    assert per_off < 16_384
    # the c10d knob that changes how it keeps inputs alive changes nothing
    knob = _cases("scaling-TORCH_NCCL_AVOID_RECORD_STREAMS=0")
    assert abs(knob[("c10d", "mm", 32)]["driver_bytes"]
               - cases[("c10d", "mm", 32)]["driver_bytes"]) <= 2 * 2**20


def _steps(file: str, call: str) -> dict[str, int]:
    run = next(r for r in _doc("first-kernel-2x-h100.json")["runs"]
               if r["file"] == file and r["call"] == call)
    out, prev = {}, None
    for s in run["steps"]:
        if s.get("non_torch") is None:
            continue
        out[s["after"]] = s["non_torch"] - (prev if prev is not None else 0)
        prev = s["non_torch"]
    return out


def test_first_kernel_is_a_fill_kernel_and_the_warm_up_runs_it() -> None:
    one = _steps("steps-w1-rank0.json", "call 3")
    assert one["first bf16 GEMM (F.linear)"] == non_torch.CUBLAS_NON_TORCH_BYTES
    assert one["torch.zeros int64"] == non_torch.TRITON_NON_TORCH_BYTES
    assert one["first Triton kernel (torch.empty input)"] == 0
    for rank in (0, 1):
        tp = _steps(f"steps-w2-rank{rank}.json", "call 3")
        assert tp["first bf16 GEMM (F.linear)"] == non_torch.CUBLAS_AFTER_FIRST_KERNEL_BYTES
        assert tp["torch.zeros int64"] == 0
        assert tp["first Triton kernel (torch.empty input)"] == 0
        # init (no kernel before it) holds the step that the matrix's context (a torch.zeros)
        # took: the trace-like init minus the matrix's init, and rank 0's matrix context
        matrix = json.loads((GOLD / "nccl-matrix-2x-h100.json").read_text())
        p2p = next(r for r in matrix["runs"] if r["config"] == "p2p-cumem-on")["ranks"][rank]
        init = p2p["non_torch_growth_bytes"]["ncclCommInitRank (init_process_group, device_id)"]
        # (the context itself reads 552,402,944 or 552,468,480 B from run to run and rank to
        # rank, a 64 KiB page the steps after it absorb)
        first_kernel = 96_468_992
        assert abs(tp["init_process_group (bound to the GPU)"] - init - first_kernel) <= 65_536
        if rank == 0:
            ctx = p2p["steps"][0]["used_bytes"] - p2p["steps"][0]["reserved_bytes"]
            assert ctx - non_torch.CUDA_CONTEXT_BYTES == first_kernel
        assert first_kernel + non_torch.CUBLAS_AFTER_FIRST_KERNEL_BYTES == \
            non_torch.CUBLAS_NON_TORCH_BYTES + non_torch.TRITON_NON_TORCH_BYTES


def test_profile_run_row_by_rank() -> None:
    def row(gpu: str, **kw: Any) -> int:
        e = estimate("llama-3.1-8b", Deployment(**kw), gpu_name=gpu)
        return next(c.bytes for c in e.ranks[0].components
                    if c.name == "non-torch increase (profile run)")

    libs = non_torch.CUBLAS_NON_TORCH_BYTES + non_torch.TRITON_NON_TORCH_BYTES
    assert row("H100") == libs  # one GPU: the profile run runs the first kernel
    assert row("H100", tp=2) == non_torch.CUBLAS_AFTER_FIRST_KERNEL_BYTES
    # rows measured after the kernel (cuMem off, SHM) leave it in the profile run
    assert row("H100", tp=2, engine_version="0.7.3") == libs
    # (sm89's cuBLAS pool is cuBLAS's 4 MiB row: non_torch.cublas_small_pool; the first kernel's
    # step is the card's, 128 SMs × 1536 threads: non_torch.card_first_kernel)
    kernel = non_torch.card_first_kernel(find_gpu("RTX-4090"), after_gemm=True)[0]
    assert kernel == 66 * 2**20
    assert row("RTX-4090", tp=2, engine_version="0.7.3") == (
        non_torch.CUBLAS_NON_TORCH_BYTES + kernel - non_torch.CUBLAS_SMALL_POOL_SAVING_BYTES)
    # vLLM V1 from 0.18.0: PyNccl's warm-up runs the first kernel before the snapshot
    # (nccl.FIRST_KERNEL_AT_WARM_UP), so the profile run holds the cuBLAS step alone
    assert row("RTX-4090", tp=2, engine_version="0.18.1") == (
        non_torch.CUBLAS_AFTER_FIRST_KERNEL_BYTES - non_torch.CUBLAS_SMALL_POOL_SAVING_BYTES)
