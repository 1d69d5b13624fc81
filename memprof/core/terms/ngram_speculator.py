"""Model Runner V2's n-gram speculation's GPU buffers (vLLM 0.32.0 on), in the budget where the
release charges the runner's constructor buffers (``runner_buffers.RUNNER_BUFFERS_CHARGED``'s
0.27.0-on rows: ``total_consumed`` from the worker's init snapshot).

Which runner: to 0.31.x n-gram sends the model to the V1 runner, whose ``NgramProposer`` works on
the CPU (memprof/core/engines/vllm_runner.py ``V2_FALLBACK_SPECULATIVE``): nothing here. From
0.32.0 ``init_speculator`` builds V2's ``NgramGPUSpeculator`` for ``method`` "ngram" or
"ngram_gpu" (v1/worker/gpu/spec_decode/__init__.py, config/speculative.py ``use_ngram``), and
``GPUModelRunner.__init__`` (v1/worker/gpu/model_runner.py) makes, with R = ``max_num_seqs``,
L = ``max_model_len``, k = ``num_speculative_tokens`` (read in the 0.32.0 and 0.33.0 wheels; the
speculator's file is the same in both):

- ``RequestState.all_token_ids`` int32 [R, L] on the GPU: ``use_dense_all_token_ids`` is
  ``speculative_config.use_ngram()``, and ``StagedWriteTensor`` makes it with ``torch.zeros``
  on the device instead of in UVA host memory (v1/worker/gpu/states.py ``RequestState.__init__``:
  'ngram_gpu benefits from dense device residency'; buffer_utils.py ``StagedWriteTensor``). The
  request state is built on every pipeline stage;
- the speculator, on the last stage only (ngram/speculator.py ``NgramGPUSpeculator.__init__``):
  ``scratch`` int64 [R, cdiv(L, BLOCK_L)], each request's best match per block of BLOCK_L
  positions (256 from L = 1,024, 128 from 256, 64 from 64, else the power of two at or above L,
  at least 16), and ``drafts`` int64 [R, k]. No n-gram index: the Triton kernels scan
  ``all_token_ids`` itself.

Its other memory: the draft tokens the runner keeps (``RequestState.draft_tokens`` int64 [R, k],
memprof/core/terms/runner_buffers.py), the bitmask the structured-output worker sizes by R × (1 +
k) (vllm_runner.py ``sampler_state_tensors``) and the CUDA-graph sizes of the 1 + k-token uniform
decode (terms/cudagraph.py) are those of every V2 speculator. The speculator captures no graph
(``capture`` returns None) and the rejection sampler keeps no tensor at the default method
(spec_decode/rejection_sampler.py ``RejectionSampler.__init__``: only "synthetic" makes one). The
profile run drafts nothing: ``_dummy_run`` calls ``propose(dummy_run=True)``, which returns the
``drafts`` slice before any kernel, and ``_dummy_sampler_run`` samples one row a request
(``InputBatch.make_dummy``), with no rejection sampler. Not modelled: the two int32 [R] tensors
(``num_sampled``, ``num_rejected``) ``_dummy_run`` passes to it, freed before the sampler runs
(R × 4 bytes each), and the allocator's segment for ``all_token_ids`` beyond its 512-byte
rounding (a tensor above 10 MiB takes a segment rounded to 2 MiB, whose rest a later allocation
can use) [approximation].
"""

from __future__ import annotations

from memprof.base.units import cdiv, fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.speculative import is_ngram
from memprof.core.terms.common import is_last_stage, max_seqs
from memprof.core.terms.runner_buffers import ALLOC_ROUND, charged_from_init_snapshot
from memprof.core.terms.runner_v2_profile import runs_v2
from memprof.core.versions import Rule, rule_in_force

NAME = "n-gram speculator buffers"

# ``value``: the scan's block widths, as (L at least, BLOCK_L) from the widest (the speculator's
# ``block_l`` ladder); below the last, the power of two at or above L, at least 16.
NGRAM_V2_BUFFERS: tuple[Rule, ...] = (
    Rule(name="ngram_speculator_buffers",
         changes="activation: the n-gram speculator's buffers (Model Runner V2)",
         since="0.32.0", until=None, value=((1024, 256), (256, 128), (64, 64)),
         applies_to="ngram",
         introduced_by="0.32.0: NgramGPUSpeculator on Model Runner V2 for ngram / ngram_gpu "
         "(init_speculator's use_ngram branch); RequestState.all_token_ids dense on the GPU "
         "(use_dense_all_token_ids = speculative_config.use_ngram())",
         source="0.32.0 / 0.33.0 v1/worker/gpu/spec_decode/ngram/speculator.py "
         "NgramGPUSpeculator.__init__ (scratch, drafts, block_l); v1/worker/gpu/states.py "
         "RequestState.__init__ (all_token_ids, uva_instead_of_gpu=not "
         "use_dense_all_token_ids); v1/worker/gpu/buffer_utils.py StagedWriteTensor; "
         "v1/worker/gpu/model_runner.py GPUModelRunner.__init__"),
)


def scan_block(max_model_len: int, ladder: tuple[tuple[int, int], ...]) -> int:
    """The speculator's ``block_l`` for L = ``max_model_len``: the first rung of ``ladder``
    (L at least, width) L reaches, else the power of two at or above L, at least 16."""
    for least, width in ladder:
        if max_model_len >= least:
            return width
    return max(16, 1 << (max(max_model_len, 1) - 1).bit_length())


def ngram_buffer_parts(ctx: TermContext) -> list[tuple[str, int]]:
    """The n-gram buffers of this rank at the release (``NGRAM_V2_BUFFERS``), each rounded to the
    allocator's 512 B: ``all_token_ids`` on every stage, the speculator's two on the last; empty
    without n-gram draft tokens, on the V1 runner or at a release before 0.32.0."""
    dep = ctx.dep
    rule = rule_in_force(NGRAM_V2_BUFFERS, dep.engine_version, dep.engine)
    if (rule is None or not dep.num_speculative_tokens
            or not is_ngram(dep.speculative_method, dep.engine_version, dep.engine)
            or not runs_v2(ctx)):
        return []
    if dep.max_model_len is None:
        raise ValueError("terms need a resolved deployment (max_model_len is None)")
    r, length, k = max_seqs(dep), dep.max_model_len, dep.num_speculative_tokens
    ladder = rule.value
    assert isinstance(ladder, tuple)
    parts = [("all_token_ids int32 [R,L] (dense on the GPU)", r * length * 4)]
    if is_last_stage(ctx):
        blocks = cdiv(length, scan_block(length, ladder))
        parts += [(f"scratch int64 [R,cdiv(L,{scan_block(length, ladder)})]", r * blocks * 8),
                  ("drafts int64 [R,k]", r * k * 8)]
    return [(name, cdiv(b, ALLOC_ROUND) * ALLOC_ROUND) for name, b in parts]


def ngram_buffer_terms(ctx: TermContext) -> list[Component]:
    """One component where the release charges the runner's constructor buffers
    (``RUNNER_BUFFERS_CHARGED`` from 0.27.0: all of 0.32.0 on); nothing elsewhere."""
    dep = ctx.dep
    if not charged_from_init_snapshot(dep):
        return []
    parts = ngram_buffer_parts(ctx)
    if not parts:
        return []
    return [Component(
        name=NAME, category="activation", bytes=sum(b for _n, b in parts),
        formula=f"R={max_seqs(dep)}, L={dep.max_model_len}, k={dep.num_speculative_tokens}: "
        + " + ".join(f"{name} {fmt_bytes(b)}" for name, b in parts)
        + " (Model Runner V2's RequestState and NgramGPUSpeculator, made in the runner's "
        "constructor after the worker's init snapshot)")]
