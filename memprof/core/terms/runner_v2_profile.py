"""Model Runner V2's own profile-run budget (vLLM 0.21.0-0.32.x), where no cold compile runs in
the profile window: with ``--enforce-eager`` (nothing is compiled) or on a warm compile cache
(``--compile-cache warm``: a restart that loads what a first start saved).

Where vLLM runs a model with Model Runner V2 (``memprof/core/engines/vllm_runner.py`` says which
deployments, per release), its budget differs from the V1 runner's in three terms, read in the
0.23.0-0.32.0 wheels (the module docstring there):

1. the CUDA-graph estimate (``vllm_runner.V2_GRAPH_ESTIMATE``): ``profile_cudagraph_memory``
   returns 0 through 0.28.x, so nothing is subtracted and the graphs are captured after the KV
   cache is sized, beyond the requested memory; from 0.29.0 V2 captures them once while
   profiling and charges what that capture took, its own estimate, not V1's
   (memprof/core/terms/runner_v2_graphs.py, on a cold start as well: it does not depend on what
   the profile run compiled);
2. the profile run's peak is V2's own forward of T = ``max_num_batched_tokens`` tokens, then
   ``_dummy_sampler_run`` on R = min(T, ``max_num_seqs``) rows: the hidden states [T, H] and
   [R, H], the logits [R, V] in the model dtype and ``gumbel_sample``'s argmax buffers
   (``vllm_runner.greedy_sampler_bytes``); no fp32 copy and no top-k / top-p sort. 0.33.0 adds
   a second pass with warm-up sampling settings, V1's fp32 sampler pipeline in kind
   (``vllm_runner.V2_SAMPLER_WARMUP_PASS``): from there memprof keeps V1's profile-run terms
   [approximation];
3. the sampler's persistent state (``vllm_runner.sampler_state_bytes``), made in ``load_model``
   after the weights' figure: charged by the budget line from 0.27.0 (``total_consumed``,
   ``vllm_runner.V2_SAMPLER_STATE_CHARGED``), in use but not charged before.

A cold start compiles the model inside the profile window, and vLLM charges the compile's
transient allocations as peak activation (vllm-project/vllm issue 54122, PRs 54209 and 54479:
"temporary GPU allocations from cold torch.compile / Triton compilation and autotuning are
charged as peak model activation memory"). Their size is not derived from any source memprof
reads (docs/model-runner-v2.md: the published cold V2 logs keep about an embedding table's size
beyond V2's terms; a cold Inductor compile of the first graph piece as vLLM 0.27.1 configures
it, combo kernels benchmarked, allocates no such buffer: reports/gpu/compile-peak/ and
``recorders/gpu_combo_benchmark.py``). So for a cold start memprof keeps charging the V1
runner's terms [approximation], and V2's own terms only where no compile runs in the window.
The published warm V2 logs (rows 1640-1645 and 1648 of tests/data/published.json, vLLM 0.27.1,
"torch.compile took" under 2 s) land within 0.8% with these terms (and torch's stream pool, which
V2's ``output_copy_stream`` makes after the memory snapshot: memprof/core/terms/stream_pool.py)
and 17-34% short with V1's; the one eager V2 log (row 1215) within 0.3% with either.
"""

from __future__ import annotations

from memprof.core.components import TermContext
from memprof.core.engines import engine_of
from memprof.core.engines.vllm_runner import V2_GRAPH_ESTIMATE, V2_SAMPLER_WARMUP_PASS
from memprof.core.models.families import family_row
from memprof.core.versions import split_generation, value_at

WARM = "warm"


def runs_v2(ctx: TermContext) -> bool:
    """Does the release run this model with Model Runner V2 (``Engine.runs_runner_v2``, the
    runner selection of vllm_runner.py)?"""
    dep, spec = ctx.dep, ctx.spec
    return engine_of(dep).runs_runner_v2(
        dep, architecture=spec.architecture, moe=spec.is_moe, hybrid=spec.has_state_mixer,
        quantised=ctx.quant is not None,
        runner_listed=family_row(spec.family).v2_runner_listed)


def v2_own_profile(ctx: TermContext) -> str | None:
    """Why the budget holds Model Runner V2's own profile terms (the module docstring) for this
    deployment — "--enforce-eager" or "a warm compile cache" — or ``None``: a cold compile, a
    model on the V1 runner, or a release whose profile run adds the sampler warm-up pass
    (0.33.0 on, ``V2_SAMPLER_WARMUP_PASS``)."""
    dep = ctx.dep
    if not (dep.enforce_eager or dep.compile_cache == WARM):
        return None
    if not runs_v2(ctx):
        return None
    release, _ = split_generation(dep.engine_version or "")
    if value_at(V2_SAMPLER_WARMUP_PASS, release, default=True):
        return None
    return "--enforce-eager" if dep.enforce_eager else "a warm compile cache"


def v2_estimates_nothing(ctx: TermContext) -> bool:
    """Model Runner V2 runs the model at a release whose ``profile_cudagraph_memory`` returns 0
    (before 0.29.0, ``V2_GRAPH_ESTIMATE``) and memprof charges V2's own terms there
    (``v2_own_profile``): no CUDA-graph estimate in the budget."""
    release, _ = split_generation(ctx.dep.engine_version or "")
    return (v2_own_profile(ctx) is not None
            and not value_at(V2_GRAPH_ESTIMATE, release, default=True))


def v2_estimates_graphs(ctx: TermContext) -> bool:
    """Model Runner V2 runs the model at a release that captures the graphs while profiling and
    charges that capture (0.29.0 on, ``V2_GRAPH_ESTIMATE``), and the deployment captures graphs
    (not ``--enforce-eager``): its own estimate (terms/runner_v2_graphs.py) stands in the budget,
    cold start or warm, in place of V1's (terms/cudagraph.py)."""
    dep = ctx.dep
    if dep.enforce_eager or not engine_of(dep).graph_estimate_by_release:
        return False
    release, generation = split_generation(dep.engine_version or "")
    if generation != "v1" or not value_at(V2_GRAPH_ESTIMATE, release, default=False):
        return False
    return runs_v2(ctx)
