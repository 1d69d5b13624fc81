"""``memprof trace --engine sglang`` builds what the estimate sizes for SGLang's decode CUDA graphs
(memprof/trace/sglang_capture.py): the replica's logits processor, run on the fake device,
allocates inside each graph the tensors whose bytes the estimate's graph term sums
(``sglang_graphs.lm_head_stages`` and ``kept_logits``), in the same live sets; and on a GPU the
trace's private pool and the tensors beside it are the estimate's (reports/gpu/
sglang-trace-graphs, an H200)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import torch

from memprof.core.components import TermContext
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang_graphs import kept_logits, lm_head_stages
from memprof.core.estimate import estimate, rank_context
from memprof.core.terms.common import model_bytes
from memprof.core.terms.cudagraph import engine_graph_modes
from memprof.trace.replica import Replica
from memprof.trace.sglang_capture import logits_plan
from memprof.trace.tracker import Counter, Tracker

GOLDEN = Path(__file__).resolve().parents[1] / "reports" / "gpu" / "sglang-trace-graphs"

# (model, release, TP): a tied lm_head and an untied one; the per-graph fp32 logits (0.4.x) and
# the shared buffer (0.5.x); the TP all-gather and its copy
CASES = [("qwen3-0.6b", "0.5.9", 1), ("qwen3-0.6b", "0.4.10", 1), ("llama-3.1-8b", "0.4.6", 1),
         ("llama-3.1-8b", "0.5.9", 4), ("qwen3-8b", "0.4.10", 2), ("qwen3-8b", "0.5.3", 8)]


def _ctx(model: str, version: str, tp: int) -> TermContext:
    e = estimate(model, Deployment(engine="sglang", engine_version=version, tp=tp),
                 gpu_name="H200")
    return rank_context(e, e.ranks[0])


def _live_sets(events: list[tuple[str, int, int]]) -> list[tuple[int, ...]]:
    """The live bytes after each allocation, in allocation order."""
    live: dict[int, int] = {}
    out = []
    for kind, handle, nbytes in events:
        if kind == "a":
            live[handle] = nbytes
            out.append(tuple(live.values()))
        else:
            live.pop(handle, None)
    return out


@pytest.mark.parametrize(("model", "version", "tp"), CASES)
def test_the_replicas_logits_processor_allocates_the_estimates_bytes(
        model: str, version: str, tp: int) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    ctx = _ctx(model, version, tp)
    sizes = engine_graph_modes(ctx)["FULL"]
    bs, h, v = max(sizes), ctx.spec.hidden_size, ctx.spec.vocab_size
    stages, _ = lm_head_stages(ctx.dep, v, h, bs, model_bytes(ctx))
    kept, buffer, _ = kept_logits(ctx.dep, sizes, v)
    counter = Counter(record_events=True)
    with FakeTensorMode():
        x = torch.empty(bs, h, dtype=torch.bfloat16, device="cuda")
        with Tracker([counter]) as tracker:
            replica = Replica(ctx=ctx, device=torch.device("cuda"), charge=tracker.charge)
            out = replica.sglang_logits(x, bs)
    # the final norm's output, the first block of each estimate stage, is the hidden states
    assert all(st[0] == x.nbytes for st in stages)
    live = _live_sets(counter.events)
    # the first stage: the lm_head output, and at TP > 1 the gather's output and its copy, all
    # live at once when the copy is made
    first = stages[0][1:]
    assert live[len(first) - 1] == first
    if kept:  # through 0.4.10: the fp32 logits made beside the last stage and returned (kept)
        assert out is not None and out.nbytes == kept[sizes.index(bs)] == bs * v * 4
        assert live[-1] == (*stages[-1][1:], out.nbytes)
        assert buffer == 0
    else:  # from 0.5.1: copied into the runner's buffer, nothing new kept
        assert out is None and len(live) == len(first)
        assert logits_plan(ctx, bs, bs).buffer is not None
        assert logits_plan(ctx, bs, bs).buffer.nbytes == buffer  # type: ignore[union-attr]


def test_each_graph_keeps_its_own_logits_through_0_4_10() -> None:
    # a smaller graph's output is [bs, vocab] fp32 for its own bs: the estimate's kept tuple
    ctx = _ctx("qwen3-0.6b", "0.4.10", 1)
    sizes = engine_graph_modes(ctx)["FULL"]
    kept, _, _ = kept_logits(ctx.dep, sizes, ctx.spec.vocab_size)
    plans = [logits_plan(ctx, n, max(sizes)).kept for n in sizes]
    assert tuple(p.nbytes for p in plans if p is not None) == kept and len(kept) == len(sizes)


def test_no_logits_processor_on_an_earlier_pipeline_stage() -> None:
    # the model classes call the logits processor on the last PP rank only
    from memprof.trace.sglang_capture import logits_in_graph

    e = estimate("llama-3.1-8b", Deployment(engine="sglang", engine_version="0.5.9", pp=2),
                 gpu_name="H200")
    assert [logits_in_graph(rank_context(e, r)) for r in e.ranks] == [False, True]


def test_an_earlier_stage_keeps_its_hidden_states_and_residual() -> None:
    # 0.4.10 at PP 2: the first stage's captured forward returns its PPProxyTensors (hidden
    # states and residual, the estimate's stage_outputs_kept), the last stage its fp32 logits
    from torch._subclasses.fake_tensor import FakeTensorMode

    from memprof.core.engines.sglang_graphs import stage_outputs_kept

    e = estimate("qwen3-0.6b", Deployment(engine="sglang", engine_version="0.4.10", pp=2),
                 gpu_name="H200")
    outs = []
    for r in e.ranks:
        ctx = rank_context(e, r)
        with FakeTensorMode(), Tracker([Counter()]) as tracker:
            replica = Replica(ctx=ctx, device=torch.device("cuda"), charge=tracker.charge)
            outs.append(replica.forward(8, 0, decode=True, logits_max_bs=8))
    first, last = outs
    assert isinstance(first, tuple)
    kept, _ = stage_outputs_kept([8], 1024, 2)
    assert tuple(t.nbytes for t in first) == kept[0]
    assert isinstance(last, torch.Tensor) and tuple(last.shape) == (8, 151_936)
    assert last.dtype == torch.float32


def _recording(name: str) -> list[dict[str, Any]]:
    """The runs of a committed H200 reading (a missing file fails: the goldens are in the tree)."""
    runs: list[dict[str, Any]] = json.loads((GOLDEN / name).read_text())["runs"]
    assert runs, name
    return runs


def _golden() -> list[dict[str, Any]]:
    return _recording("sglang-trace-graphs-h200.json")


def test_the_h200_recording_matches_the_estimate_term_by_term() -> None:
    """On the H200 the trace's graph pool and the tensors beside it equal the estimate's within
    the caching allocator's rounding (the replica's decode live set is memprof's own: its
    attention kernels are modelled), recorded after the change; before it the replica built
    neither the logits processor nor the runner's buffers."""
    for run in _golden():
        rows = {c["name"]: c for c in run["after"]["components"]}
        for name in ("CUDA-graph pool: the graphs' private pool",
                     "CUDA-graph pool: tensors outside the private pool"):
            c = rows[name]
            assert abs(c["traced_bytes"] - c["estimated_bytes"]) <= 0.05 * c["estimated_bytes"], \
                (run["label"], name)


def _second_reading() -> list[dict[str, Any]]:
    return _recording("sglang-trace-graphs-h200-inputs.json")


_DEPLOYMENTS = {"qwen3-0.6b-sglang-0.5.9": ("qwen3-0.6b", "0.5.9"),
                "qwen3-0.6b-sglang-0.4.10": ("qwen3-0.6b", "0.4.10"),
                "llama-3.1-8b-sglang-0.5.9": ("llama-3.1-8b", "0.5.9"),
                "llama-3.1-8b-sglang-0.4.10": ("llama-3.1-8b", "0.4.10")}


def test_the_capture_streams_small_segment_is_the_generators_graph_state() -> None:
    """The second H200 reading lists the capture stream's ordinary-pool segments block by
    block: beside the 32 MiB cuBLAS workspace, one 2 MiB small segment holding two live blocks
    of 8 requested bytes, torch's generator state (``GENERATOR_GRAPH_STATE``), in every case."""
    from memprof.core.terms.cudagraph import GENERATOR_GRAPH_STATE

    for run in _second_reading():
        segs = run["after"]["side_stream_blocks"]
        small = [s for s in segs if s["segment_type"] == "small"]
        assert [s["total_size"] for s in small] == [2 * 1024 * 1024], run["label"]
        live = [b["requested_size"] for b in small[0]["blocks"]
                if b["state"] == "active_allocated"]
        assert tuple(live) == GENERATOR_GRAPH_STATE, run["label"]


def test_the_estimate_now_holds_every_tensor_the_h200_trace_held_outside_the_pool() -> None:
    """The trace's tensors outside the private pool, recorded on the H200 with the runner's
    input buffers built, equal today's estimate to the byte (the generator's 2 MiB small
    segment was the difference), and the private pool within the allocator's rounding."""
    from memprof.core.terms.cudagraph import cudagraph_model

    for run in _second_reading():
        model, version = _DEPLOYMENTS[run["label"]]
        ctx = _ctx(model, version, 1)
        rows = {c["name"]: c for c in run["after"]["components"]}
        sizes = engine_graph_modes(ctx)["FULL"]
        assert sorted(sizes) == sorted(run["after"]["graph_sizes"]), run["label"]
        g = cudagraph_model(ctx, sizes={"FULL": sizes})
        outside = rows["CUDA-graph pool: tensors outside the private pool"]["traced_bytes"]
        assert g.actual - g.driver - g.pool == outside, run["label"]
        pool = rows["CUDA-graph pool: the graphs' private pool"]["traced_bytes"]
        assert abs(pool - g.pool) <= 0.005 * g.pool, run["label"]


@pytest.mark.gpu
def test_trace_and_estimate_agree_on_a_gpu() -> None:
    from memprof.core.deployment import Deployment as Dep
    from memprof.trace.run import run_trace

    if "H200" not in torch.cuda.get_device_name():
        pytest.skip("the deployment is sized for an H200 (its KV cache fills the card)")
    t = run_trace("qwen3-0.6b", Dep(engine="sglang", engine_version="0.5.9"), gpu_name="H200",
                  device="cuda", decode_steps=1)
    rows = {c.name: c for c in t.components}
    for name in ("CUDA-graph pool: the graphs' private pool",
                 "CUDA-graph pool: tensors outside the private pool"):
        c = rows[name]
        assert c.traced is not None and abs(c.traced - c.estimated) <= 0.05 * c.estimated, name
