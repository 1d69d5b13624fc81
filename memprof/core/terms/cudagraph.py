"""CUDA-graph memory: vLLM's estimate, which it subtracts from the KV budget, and memprof's
prediction of the pool actually used above it.

vLLM@52a31cc: capture sizes ``VllmConfig._set_cudagraph_sizes`` (vllm/config/vllm.py), modes
(vllm/config/compilation.py, vllm/v1/cudagraph_dispatcher.py), the estimate
``GPUModelRunner.profile_cudagraph_memory`` and the capture ``capture_model``
(vllm/v1/worker/gpu_model_runner.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.base.units import MiB, fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.deployment import Deployment
from memprof.core.terms.activation import activation_stages
from memprof.core.terms.common import (
    max_seqs,
    profile_tokens,
)
from memprof.core.versions import Rule, value_at

# CUDA graphs: per captured graph, driver memory for the executable. vLLM floors its per-graph
# sample at 1 MiB ("driver overhead", ``profile_cudagraph_memory``, vLLM@52a31cc gpu_model_runner.py
# profile_cudagraph_memory); measured by this project on 2× H200, torch 2.11.0+cu130, NCCL 2.28.9,
# driver 580
# measured +2 MiB non-torch for capturing and replaying one small graph. memprof uses 2 MiB
# [approximation: large piecewise graphs have one executable per piece]. Known to disagree:
# `memprof trace` on one H200 (reports/gpu/trace, FULL_AND_PIECEWISE captured as vLLM does)
# measured 0.16-0.18 MiB per graph executable over 1,514-3,350 graphs (one per piece), so this
# per-size figure is not corrected yet; see README "memprof trace".
CUDAGRAPH_MIN_PER_GRAPH = 1 * MiB
CUDAGRAPH_DRIVER_PER_GRAPH = 2 * MiB
# min(max_num_seqs·decode_query_len·2, 512), vLLM@52a31cc vllm/config/vllm.py
CUDAGRAPH_MAX_CAPTURE_DEFAULT = 512

def capture_sizes(dep: Deployment) -> list[int]:
    """vLLM ``_set_cudagraph_sizes`` (vllm/config/vllm.py @52a31cc, vLLM@52a31cc gpu_model_runner.py
    profile_cudagraph_memory)::

        dql = 1 + num_speculative_tokens
        max_capture = min(min(max_num_seqs·dql·2, 512), max_num_batched_tokens)
        sizes = [1,2,4] (≤ max) + range(8, min(max+1, 256), 8) + range(256, max+1, 16)
                + [max_num_batched_tokens] if it is ≤ max and not present
    """
    dql = 1 + dep.num_speculative_tokens
    mnbt = profile_tokens(dep)
    mx = min(min(max_seqs(dep) * dql * 2, CUDAGRAPH_MAX_CAPTURE_DEFAULT), mnbt)
    sizes = [x for x in (1, 2, 4) if x <= mx]
    sizes += list(range(8, min(mx + 1, 256), 8)) + list(range(256, mx + 1, 16))
    if mnbt <= mx and mnbt not in sizes:
        sizes.append(mnbt)
    return sorted(sizes)


def graph_modes(dep: Deployment) -> dict[str, list[int]]:
    """FULL_AND_PIECEWISE (the V1 default, vllm/config/compilation.py): a PIECEWISE graph per
    capture size; FULL graphs for uniform decode batches, sizes with dql ≤ x ≤ dql·max_num_seqs
    (vllm/v1/cudagraph_dispatcher.py)."""
    sizes = capture_sizes(dep)
    dql = 1 + dep.num_speculative_tokens
    return {"PIECEWISE": sizes,
            "FULL": [x for x in sizes if dql <= x <= dql * max_seqs(dep)]}


def decode_live_bytes(ctx: TermContext, batch: int) -> int:
    """The largest live set of one decode forward of ``batch`` tokens (no sampler, no MoE workspace:
    the WorkspaceManager buffer was sized by the profile run and is outside the graph pool)."""
    return max(st.bytes for st in activation_stages(ctx, tokens=batch, rows=0, decode=True))


@dataclass(frozen=True, slots=True)
class GraphModel:
    """CUDA-graph memory of a rank (bytes): capture sizes per mode, the first-capture sample per
    mode, vLLM's per-graph sample, its estimate, and memprof's prediction of the pool."""

    modes: dict[str, list[int]]
    first_capture: dict[str, int]  # per mode: live set of its largest graph + driver overhead
    per_graph_sample: int  # vLLM's mem_sample[1], floored at 1 MiB
    estimate: int  # what vLLM subtracts from the KV budget
    actual: int  # memprof's prediction of the pool used: live set + driver
    driver: int  # the part of ``actual`` that is driver memory for the graph executables


def cudagraph_model(ctx: TermContext, sizes: dict[str, list[int]] | None = None) -> GraphModel:
    """vLLM's estimate and memprof's prediction of the graph pool (vLLM@52a31cc gpu_model_runner.py
    profile_cudagraph_memory).

    vLLM (``profile_cudagraph_memory``)::

        first[mode]  = mem_get_info delta of capturing the mode's largest graph
        per_graph    = max(mem_get_info delta of the second largest, 1 MiB)
        estimate     = max over modes of first[mode] + Σ_modes per_graph·(n_mode − 1)

    memprof models a capture's delta as the decode live set at that batch (all graphs share one
    pool, captured largest first, so smaller ones reuse it) plus ~2 MiB of driver memory per graph;
    the second capture then costs only its driver memory::

        first[mode] = live(largest size of the mode) + 2 MiB
        actual      = max over modes of live(largest) + 2 MiB × number of graphs

    This is an approximation: PR-text actuals are ~0.65 GiB (gemma-3-4b, #21489) and ~1.3 GiB
    (Llama-4 Maverick, #21489), and vLLM's estimate often exceeds the actual pool by far (#45178:
    KV 769,888 → 245,840 tokens; #53013: 118.65 GiB estimated) because the second sample is not
    just driver memory; memprof does not model that excess, nor attention-kernel workspaces that
    FULL captures touch (``profile_seq_lens``).
    """
    modes = {m: v for m, v in (sizes or graph_modes(ctx.dep)).items() if v}
    live = {m: decode_live_bytes(ctx, max(v)) for m, v in modes.items()}
    first = {m: live[m] + CUDAGRAPH_DRIVER_PER_GRAPH for m in modes}
    per_graph = max(CUDAGRAPH_DRIVER_PER_GRAPH, CUDAGRAPH_MIN_PER_GRAPH)
    estimate = (max(first.values(), default=0)
                + sum(per_graph * (len(v) - 1) for v in modes.values()))
    n_graphs = sum(len(v) for v in modes.values())
    driver = CUDAGRAPH_DRIVER_PER_GRAPH * n_graphs
    actual = max(live.values(), default=0) + driver
    return GraphModel(modes=modes, first_capture=first, per_graph_sample=per_graph,
                      estimate=estimate, actual=actual, driver=driver)


# Whether vLLM subtracts a CUDA-graph estimate from the KV budget: "none" (no estimate; graphs
# are captured after the KV cache is sized), "off" (estimated and logged, not subtracted:
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 0), "on" (subtracted; default 1).
# The 0.20.0 log line says "default since v0.21.0", but the 0.20.0 wheel already defaults it on.
CUDAGRAPH_ESTIMATE: tuple[Rule, ...] = (
    Rule(name="cudagraph_estimate_in_budget", changes="CUDA-graph estimate", since="0.7.1",
         until="0.18.0", value="none", introduced_by="before 0.7.1",
         removed_by="profile_cudagraph_memory (first released in 0.18.0)",
         source="0.17.0 v1/worker/gpu_worker.py determine_available_memory (no CUDA-graph "
         "term); 0.7.2 worker/worker.py determine_num_available_blocks (V0: weights + "
         "activation peak + non-torch only)"),
    Rule(name="cudagraph_estimate_in_budget", changes="CUDA-graph estimate", since="0.18.0",
         until="0.20.0", value="off",
         introduced_by="profile_cudagraph_memory (first released in 0.18.0)",
         removed_by="#38284 (default on, first released in 0.20.0)",
         source="0.18.0 / 0.19.1 envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default '0'; "
         "v1/worker/gpu_worker.py determine_available_memory: "
         "cudagraph_memory_estimate_applied = 0 unless the flag is set"),
    Rule(name="cudagraph_estimate_in_budget", changes="CUDA-graph estimate", since="0.20.0",
         until=None, value="on", introduced_by="#38284 (first released in 0.20.0)",
         source="0.20.0 / 0.33.0 envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default '1'; "
         "v1/worker/gpu_worker.py determine_available_memory subtracts it"),
)


def cudagraph_terms(ctx: TermContext) -> list[Component]:
    """Two components (category "cudagraph"):

    - "CUDA-graph estimate": vLLM's own estimate (``cudagraph_model``), which it subtracts from
      the KV budget (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1, the default from 0.20.0,
      #38284; before 0.20.0 nothing is subtracted: ``cudagraph_terms_estimate_off``, rows in
      ``CUDAGRAPH_ESTIMATE``): where "budget", profiled;
    - "CUDA-graph pool above the estimate": max(0, actual − estimate), where "runtime", not
      profiled.

    ``--enforce-eager`` captures nothing: both are 0 with formula "enforce_eager".
    """
    names = ("CUDA-graph estimate", "CUDA-graph pool above the estimate")
    if (not ctx.dep.enforce_eager and not ctx.dep.sglang
            and value_at(CUDAGRAPH_ESTIMATE, ctx.dep.engine_version, "on") != "on"):
        return cudagraph_terms_estimate_off(ctx)
    if ctx.dep.enforce_eager:
        return [Component(name=names[0], category="cudagraph", bytes=0, where="budget",
                          profiled=True, formula="enforce_eager"),
                Component(name=names[1], category="cudagraph", bytes=0, where="runtime",
                          profiled=False, formula="enforce_eager")]
    g = cudagraph_model(ctx)
    counts = ", ".join(f"{m}={len(s)} (largest={max(s)})" for m, s in g.modes.items())
    firsts = " / ".join(f"{m} {fmt_bytes(b)}" for m, b in g.first_capture.items())
    n = sum(len(s) for s in g.modes.values())
    return [
        Component(name=names[0], category="cudagraph", bytes=g.estimate, count=max(1, n),
                  where="budget", profiled=True,
                  formula=f"{counts}; max first capture ({firsts}) + "
                  f"{fmt_bytes(g.per_graph_sample)} × (n−1) per mode"),
        Component(name=names[1], category="cudagraph", bytes=max(0, g.actual - g.estimate),
                  where="runtime", profiled=False,
                  formula=f"predicted pool {fmt_bytes(g.actual)} (largest decode live set + "
                  f"{fmt_bytes(CUDAGRAPH_DRIVER_PER_GRAPH)} × {n} graphs) − estimate"),
    ]


def cudagraph_terms_estimate_off(ctx: TermContext) -> list[Component]:
    """vLLM before 0.20.0 (#38284; or VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0): nothing is
    subtracted from the budget and the whole pool appears at run time. Before 0.18.0 vLLM had
    no estimate at all; the pool is memprof's V1 prediction (V0's capture sizes differ:
    approximation)."""
    if ctx.dep.enforce_eager:
        return [Component(name="CUDA-graph estimate", category="cudagraph", bytes=0,
                          where="budget", profiled=True, formula="enforce_eager"),
                Component(name="CUDA-graph pool above the estimate", category="cudagraph",
                          bytes=0, where="runtime", profiled=False, formula="enforce_eager")]
    g = cudagraph_model(ctx)
    why = {"none": f"vLLM {ctx.dep.engine_version} has no CUDA-graph estimate",
           "off": f"vLLM {ctx.dep.engine_version} estimates but does not subtract it"}.get(
        str(value_at(CUDAGRAPH_ESTIMATE, ctx.dep.engine_version, "on")),
        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0")
    return [Component(name="CUDA-graph estimate", category="cudagraph", bytes=0, where="budget",
                      profiled=True, formula=f"nothing subtracted ({why})"),
            Component(name="CUDA-graph pool above the estimate", category="cudagraph",
                      bytes=g.actual, where="runtime", profiled=False,
                      formula=f"predicted pool {fmt_bytes(g.actual)}, none of it budgeted")]
