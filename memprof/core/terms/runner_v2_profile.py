"""Model Runner V2's own profile-run budget (vLLM 0.21.0 on): with ``--enforce-eager``
(nothing is compiled), on a warm compile cache (``--compile-cache warm``: a restart that loads
what a first start saved), and on a cold one, where the compile's autotuning example arguments
join the profile run's peak (memprof/core/terms/cold_compile.py).

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
   a second pass on the same logits with ``SamplingParams.for_sampler_warmup()`` on every row
   (``vllm_runner.V2_SAMPLER_WARMUP_PASS``): an fp32 copy [R, V] that the logits processors,
   temperature and min-p change in place, then FlashInfer's fused top-k / top-p sampler (two
   more fp32 [R, V]) where the card takes it, else the Triton top-k / top-p kernel's cached
   buffer and ``gumbel_sample`` (``vllm_runner.warmup_sampler_tensors``, read in the 0.33.0
   wheel): that pass is the sampler's stage there (``activation.v2_warmup_sampler_stage``);
3. the sampler's persistent state (``vllm_runner.sampler_state_bytes``), made in ``load_model``
   after the weights' figure: charged by the budget line from 0.27.0 (``total_consumed``,
   ``vllm_runner.V2_SAMPLER_STATE_CHARGED``), in use but not charged before.

A cold start compiles the model inside the profile window, and vLLM charges the compile's
transient allocations as peak activation (vllm-project/vllm issue 54122, PRs 54209 and 54479):
Inductor's compile-time autotuning, which ``standalone_compile`` turns on, runs each Triton
kernel on generated copies of its arguments, the rank's embedding table among them
(memprof/core/terms/cold_compile.py sizes it, from 0.20.0). So a cold start is V2's own terms
with that stage beside the forward's and the sampler's. Measured against the published V2 logs
(docs/model-runner-v2.md): the warm ones (rows 1640-1645 and 1648, vLLM 0.27.1, "torch.compile
took" under 2 s) land within 0.1-1.5% with V2's own terms and 17-34% short with V1's; the cold
ones with the table's copy: 1603 +0.4%, 1607 +1.1%, 1649 +1.5%, 902 (TP2) +0.5%, 1104 and
1205-1214 +0.1..+0.2% (before V2's output-copy stream pool and the load's split limit entered
the budget: docs/model-runner-v2.md holds the current figures); the one eager V2 log (row 1215)
within 0.3% with either. No published log of 0.33.0 is in the calibration set: its warm-up
pass is sized from the source alone.
"""

from __future__ import annotations

from memprof.core.components import TermContext
from memprof.core.engines import engine_of
from memprof.core.engines.vllm_runner import V2_GRAPH_ESTIMATE
from memprof.core.models.families import family_row
from memprof.core.terms.cold_compile import compiles_cold
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
    deployment — "--enforce-eager", "a warm compile cache" or "a cold compile" (whose autotuning
    example arguments terms/cold_compile.py charges) — or ``None``: a model on the V1 runner, or
    a cold compile at a release where memprof does not charge the compile's arguments (before
    0.20.0)."""
    dep = ctx.dep
    if not (dep.enforce_eager or dep.compile_cache == WARM or compiles_cold(ctx)):
        return None
    if not runs_v2(ctx):
        return None
    if dep.enforce_eager:
        return "--enforce-eager"
    return "a warm compile cache" if dep.compile_cache == WARM else "a cold compile"


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
