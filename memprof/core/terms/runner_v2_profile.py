"""Model Runner V2's own profile-run budget (vLLM 0.21.0-0.28.x), where no cold compile runs in
the profile window: with ``--enforce-eager`` (nothing is compiled) or on a warm compile cache
(``--compile-cache warm``: a restart that loads what a first start saved).

Where vLLM runs a model with Model Runner V2 (``memprof/core/engines/vllm_runner.py`` says which
deployments, per release), its budget differs from the V1 runner's in three terms, read in the
0.23.0-0.28.0 wheels (the module docstring there):

1. ``GPUModelRunner.profile_cudagraph_memory`` returns 0 through 0.28.x
   (``vllm_runner.V2_GRAPH_ESTIMATE``): no CUDA-graph estimate is subtracted, and the graphs are
   captured after the KV cache is sized, beyond the requested memory;
2. the profile run's peak is V2's own forward of T = ``max_num_batched_tokens`` tokens, then
   ``_dummy_sampler_run`` on R = min(T, ``max_num_seqs``) rows: the hidden states [T, H] and
   [R, H], the logits [R, V] in the model dtype and ``gumbel_sample``'s argmax buffers
   (``vllm_runner.greedy_sampler_bytes``); no fp32 copy and no top-k / top-p sort;
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
``recorders/gpu_combo_benchmark.py``; nor does the whole profile window of a cold compile of
Qwen3-8B / Qwen3-1.7B shapes keep any non-torch or free memory: reports/gpu/cold-compile-window/;
and the published cold / warm pairs lose 0.47-2.5 GiB, no one term across them:
docs/model-runner-v2.md, "Every published cold / warm pair"). So for a cold start memprof keeps
charging the V1
runner's terms [approximation], and V2's own terms only where no compile runs in the window.
The published warm V2 logs (rows 1640-1645 and 1648 of tests/data/published.json, vLLM 0.27.1,
"torch.compile took" under 2 s) land within 0.1-1.5% with these terms and 17-34% short with
V1's; the one eager V2 log (row 1215) within 0.2% with either.
"""

from __future__ import annotations

from memprof.core.components import TermContext
from memprof.core.engines import engine_of
from memprof.core.engines.vllm_runner import V2_GRAPH_ESTIMATE
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
    deployment — "--enforce-eager" or "a warm compile cache" — or ``None``: a release whose V2
    estimates its own graphs (0.29.0 on) or that runs the V1 runner, or a cold compile."""
    dep = ctx.dep
    if not (dep.enforce_eager or dep.compile_cache == WARM):
        return None
    if not runs_v2(ctx):
        return None
    release, _ = split_generation(dep.engine_version or "")
    if value_at(V2_GRAPH_ESTIMATE, release, default=True):
        return None
    return "--enforce-eager" if dep.enforce_eager else "a warm compile cache"
