"""vLLM V1's model runner persistent GPU buffers, where the budget charges them: 0.8.0 – 0.9.0.x
(the absolute torch peak) and 0.27.0 on (``total_consumed``, measured from the worker's init
snapshot); not 0.9.1 – 0.26.x (``RUNNER_BUFFERS_CHARGED``).

Those releases' ``Worker.determine_available_memory`` (v1/worker/gpu_worker.py, read in the 0.8.0,
0.8.2, 0.8.4, 0.8.5.post1 and 0.9.0.1 wheels) calls ``torch.cuda.reset_peak_memory_stats()``,
which sets the peak to what is allocated at that moment, runs the profile and charges
``peak_memory = memory_stats()["allocated_bytes.all.peak"]``: everything torch holds at the
peak, not its increase over the profile. Besides the weights (the "Model loading took" figure:
``DeviceMemoryProfiler`` around ``load_model`` only, whose reading is ``max_memory_allocated``
after a reset, platforms/cuda.py ``get_current_memory_usage`` in 0.8.4) and the profile's
activations, that holds the buffers ``GPUModelRunner.__init__`` allocated on the GPU before the
model was loaded, which no other budget figure contains. From 0.9.1 ``memory_profiling``
(utils.py) charges ``torch_peak_increase``, the peak over the snapshot taken as the profile
starts, so they drop out of the budget (``RUNNER_BUFFERS_CHARGED``).

0.9.1 – 0.26.x: not charged. ``memory_profiling`` sets ``non_kv_cache_memory`` to the weights
figure + ``torch_peak_increase`` (``after_profile - before_profile``, both taken after the runner
was built and the model loaded) + ``non_torch_increase`` (the device's used memory less torch's
reserved memory, since the init snapshot: the buffers are torch memory, so they cancel). Read in
the wheels: 0.9.1 utils.py lines 2410-2415, 0.10.2 utils/__init__.py 2789-2797, 0.11.0
utils/__init__.py 2851-2859, 0.17.1 utils/mem_utils.py 271-279, 0.20.0 mem_utils.py 265-273,
0.24.0 and 0.26.0 mem_utils.py 303-311.

0.27.0 on: charged again. ``memory_profiling`` (utils/mem_utils.py lines 317-326 in 0.27.0,
0.27.1, 0.28.0 and 0.29.0; 312-321 in 0.30.0 – 0.33.0) sets ``total_consumed =
before_create.free_memory - after_profile.free_memory`` and ``non_kv_cache_memory =
total_consumed + transient_peak_headroom``, and ``before_create`` is the worker's init snapshot
(``determine_available_memory`` passes ``self.init_snapshot``), taken in ``Worker.init_device``
before the model runner is built (v1/worker/gpu_worker.py: snapshot line 395 / runner lines
415-423 in 0.27.0 and 0.27.1; 406 / 430-438 in 0.28.0; 439 / 468-476 in 0.29.0; 451 / 480-488 in
0.30.0; 489 / 518-526 in 0.31.0; 534 / 558 ``_make_model_runner`` in 0.32.0; 541 / 565 in
0.33.0; the snapshot is never retaken). So every GPU tensor the runner's constructor makes is in
the budget, whichever runner (``runner_v2_profile.runs_v2``; docs/model-runner-v2.md), with
N = ``max_num_batched_tokens``, R = ``max_num_seqs`` and H the hidden size:

- the V1 runner (v1/worker/gpu_model_runner.py ``GPUModelRunner.__init__``; the GPU halves of its
  ``CpuGpuBuffer``s, v1/utils.py): ``input_ids`` int32 [N], ``positions`` int64 [N],
  ``query_start_loc`` int32 [R + 1], ``seq_lens``, ``num_computed_tokens``,
  ``prev_num_draft_tokens``, ``num_scheduled_tokens``, ``encoder_seq_lens``,
  ``num_decode_draft_tokens``, ``num_accepted_tokens`` int32 [R], ``req_indices`` int64 [N],
  ``prev_positions`` int64 [R], ``inputs_embeds`` [N, H] in the model dtype (every model),
  ``is_token_ids`` bool [N], ``discard_request_mask`` bool [R], ``query_pos`` int64
  [max(R + 1, N)]; from 0.31.0 also ``is_padding`` bool [N] (read in 0.27.0 – 0.33.0).
  ``InputBatch`` (v1/worker/gpu_input_batch.py): ``temperature``, ``top_p``, ``top_k``,
  ``frequency_penalties``, ``presence_penalties``, ``repetition_penalties`` [R] of 4 bytes, and
  one ``BlockTable`` (v1/worker/block_table.py): ``block_table`` int32 [R, W] and
  ``slot_mapping`` int64 [N], with W = cdiv(max_model_len, b) blocks rounded up to a multiple of
  128 / gcd(128, b) (``get_block_table_width``). b is the constructor's placeholder,
  ``cache_config.block_size``: ``--block-size`` or ``CacheConfig.DEFAULT_BLOCK_SIZE`` = 16
  (config/cache.py ``_apply_block_size_default``), not the attention backend's size nor a hybrid
  model's page-aligned one, which ``Platform.update_block_size_for_backend`` sets after
  ``init_device`` and ``load_model`` (v1/executor/uniproc_executor.py lines 63-69 in 0.27.0 /
  0.27.1, 69-75 in 0.29.0 – 0.33.0; multiproc_executor.py 640-662 in 0.27.x, 802 in 0.33.0);
  the input batch is rebuilt for the real sizes in ``initialize_kv_cache``, after the budget.
  [approximation: where vLLM forces another size than the ``--block-size`` given, memprof sees
  the forced one.] The built-in logits processors (v1/sample/logits_processor/builtin.py):
  ``MinPLogitsProcessor.min_p_device`` fp32 [R] and ``MinTokensLogitsProcessor.neg_inf_tensor``
  (one fp32). ``Sampler`` makes none.
- Model Runner V2 (v1/worker/gpu/model_runner.py ``GPUModelRunner.__init__``, read in 0.27.0 –
  0.33.0): ``InputBuffers`` (v1/worker/gpu/input_batch.py) ``input_ids`` int32 [N],
  ``positions`` int64 [N], ``is_padding`` bool [N], ``query_start_loc`` int32 [R + 1],
  ``seq_lens`` and ``dcp_local_seq_lens`` int32 [R]; ``RequestState`` (v1/worker/gpu/states.py)
  ``total_len`` and ``num_computed_tokens`` int32 [R] (``StagedWriteTensor``; its staging
  buffers are pinned host memory), ``last_sampled_tokens`` int64 [R, 1], ``draft_tokens`` int64
  [R, speculative tokens] and ``next_prefill_tokens`` int32 [1, R]; ``all_token_ids`` [R,
  max_model_len] is UVA host memory (``uva_instead_of_gpu=True``; dense only under n-gram
  speculation, 0.32.0 on: memprof/core/terms/ngram_speculator.py). V2's sampler state is made
  in ``load_model`` and charged apart
  (``vllm_runner.V2_SAMPLER_STATE_CHARGED``); its block tables come with the KV cache, after
  the budget.

Each is rounded to the caching allocator's 512-byte blocks. 0.27.0's budget reads free memory,
which also holds whatever the segments they open keep unused; not modelled [approximation: the
buffers under 1 MiB share 2 MiB small-pool segments, which the weights' small tensors loaded
after them can fill; a buffer of 1-10 MiB (the block table at some shapes) opens a 20 MiB
segment whose rest only a later allocation that fits it uses, so up to 18 MiB of it may stay
reserved and charged; not measured].

0.8.0 – 0.9.0.x, the buffers, with N = ``max_num_tokens`` (= ``max_num_batched_tokens``),
R = ``max_num_reqs`` (= ``max_num_seqs``), B = cdiv(``max_model_len``, ``block_size``):

- 0.8.x: ``input_ids`` int32 [N], ``positions`` int64 [N], ``inputs_embeds`` [N, H] in the model
  dtype (every model, not only multimodal ones); ``InputBatch``: ``BlockTable.block_table`` int32
  [R, B] and seven sampling vectors of [R] in 4-byte types (``temperature``, ``top_p``, ``top_k``,
  ``min_p``, ``frequency_penalties``, ``presence_penalties``, ``repetition_penalties``);
- 0.9.0 adds the runner's ``query_start_loc`` int32 [R + 1], ``seq_lens`` int32 [R] and
  ``slot_mapping`` int64 [N], and the block table's own ``slot_mapping`` int64 [N]
  (``MultiGroupBlockTable``, one group per KV-cache group; one for the models memprof runs at
  these releases).

Not counted at any release [approximation]: M-RoPE models' ``mrope_positions`` int64
[3, N + 1] (under 0.1 MiB at 4,096 tokens), the ``allowed_token_ids_mask`` (made only when a
request asks for it), speculative decoding's drafter buffers in the V1 runner, and the buffers
made only under decode context parallelism, KV-sharing fast prefill or Mamba's "all" cache
mode. Nor is the buffers' place in the load replay of
``memprof.core.terms.reserved_charge`` (the allocator holes these releases charge): allocated
before the weights, the ones under 1 MiB share a 2 MiB small-pool segment with the weights' norms
and biases and fill part of what that replay counts as a hole [approximation: at most their own
size, 0.35 MiB at a 256-request, 8,192-token shape].
"""

from __future__ import annotations

from math import gcd

from memprof.base.units import cdiv, fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.deployment import Deployment
from memprof.core.terms.common import max_seqs, model_bytes, profile_tokens
from memprof.core.terms.runner_v2_profile import runs_v2
from memprof.core.versions import Rule, rule_in_force

# ``value``: the buffer list of that release range ("0.8" / "0.9.0" / "0.27" / "0.31"), as the
# module docstring spells it out.
RUNNER_BUFFERS_CHARGED: tuple[Rule, ...] = (
    Rule(name="runner_buffers_charged", changes="activation: model runner buffers in the "
         "budget", since="0.8.0", until="0.9.0", value="0.8",
         introduced_by="V1 Worker.determine_available_memory (0.8.0)",
         removed_by="the runner's query_start_loc / seq_lens / slot_mapping on the GPU (read in "
         "0.9.0)", generation="v1",
         source="0.8.0, 0.8.2 and 0.8.5 v1/worker/gpu_worker.py determine_available_memory "
         "(peak_memory = torch.cuda.memory_stats()['allocated_bytes.all.peak']); "
         "v1/worker/gpu_model_runner.py GPUModelRunner.__init__ (input_ids, positions, "
         "inputs_embeds); v1/worker/gpu_input_batch.py InputBatch.__init__ (temperature, top_p, "
         "top_k, min_p, frequency/presence/repetition_penalties); v1/worker/block_table.py "
         "BlockTable.__init__ (block_table)"),
    Rule(name="runner_buffers_charged", changes="activation: model runner buffers in the "
         "budget", since="0.9.0", until="0.9.1", value="0.9.0",
         introduced_by="the runner's query_start_loc / seq_lens / slot_mapping on the GPU (read "
         "in 0.9.0)",
         removed_by="V1 MemorySnapshot / memory_profiling: the torch peak's increase (0.9.1)",
         generation="v1",
         source="0.9.0 v1/worker/gpu_worker.py determine_available_memory (allocated_bytes.all"
         ".peak); v1/worker/gpu_model_runner.py GPUModelRunner.__init__ (query_start_loc, "
         "seq_lens, slot_mapping); v1/worker/block_table.py BlockTable.__init__ (slot_mapping), "
         "MultiGroupBlockTable; 0.9.1 v1/worker/gpu_worker.py (with memory_profiling(...))"),
    Rule(name="runner_buffers_charged", changes="activation: model runner buffers in the "
         "budget", since="0.27.0", until="0.31.0", value="0.27",
         introduced_by="0.27.0 memory_profiling: total_consumed from the init snapshot, taken "
         "before the model runner is built",
         removed_by="the V1 runner's is_padding on the GPU (read in 0.31.0)", generation="v1",
         source="0.27.0 / 0.27.1 / 0.28.0 / 0.29.0 / 0.30.0 utils/mem_utils.py memory_profiling "
         "(total_consumed = before_create.free_memory - after_profile.free_memory); "
         "v1/worker/gpu_worker.py init_device (self.init_snapshot before GPUModelRunner(...)), "
         "determine_available_memory (memory_profiling(self.init_snapshot, ...)); "
         "v1/worker/gpu_model_runner.py GPUModelRunner.__init__, v1/worker/gpu_input_batch.py "
         "InputBatch.__init__, v1/worker/block_table.py BlockTable.__init__, "
         "get_block_table_width, v1/sample/logits_processor/builtin.py MinPLogitsProcessor / "
         "MinTokensLogitsProcessor; Model Runner V2: v1/worker/gpu/input_batch.py "
         "InputBuffers, v1/worker/gpu/states.py RequestState"),
    Rule(name="runner_buffers_charged", changes="activation: model runner buffers in the "
         "budget", since="0.31.0", until=None, value="0.31",
         introduced_by="the V1 runner's is_padding on the GPU (read in 0.31.0)", generation="v1",
         source="0.31.0 / 0.32.0 / 0.33.0 utils/mem_utils.py memory_profiling (total_consumed); "
         "v1/worker/gpu_worker.py init_device (init snapshot before the runner; 0.32.0 "
         "_make_model_runner); v1/worker/gpu_model_runner.py GPUModelRunner.__init__ "
         "(is_padding = torch.zeros(max_num_tokens, dtype=torch.bool)); Model Runner V2 as at "
         "0.27.0"),
)
NAME = "model runner buffers"
ALLOC_ROUND = 512  # PyTorch CUDACachingAllocator kMinBlockSize


def _round(n: int) -> int:
    return cdiv(n, ALLOC_ROUND) * ALLOC_ROUND


def _sampling_vectors(names: tuple[str, ...], r: int) -> list[tuple[str, int]]:
    return [(f"{name} [R]", r * 4) for name in names]


def v1_runner_parts(rule: Rule, n: int, r: int, h_bytes: int,
                    width: int) -> list[tuple[str, int]]:
    """The V1 runner's list at 0.27.0 on (the module docstring), unrounded: ``rule`` the
    ``RUNNER_BUFFERS_CHARGED`` row in force, ``width`` the block table's int32 columns,
    ``h_bytes`` one token's ``inputs_embeds`` row."""
    parts = [("input_ids int32 [N]", n * 4), ("positions int64 [N]", n * 8),
             ("query_start_loc int32 [R+1]", (r + 1) * 4),
             ("req_indices int64 [N]", n * 8), ("prev_positions int64 [R]", r * 8),
             ("inputs_embeds [N,H]", n * h_bytes), ("is_token_ids bool [N]", n),
             ("discard_request_mask bool [R]", r),
             ("query_pos int64 [max(R+1,N)]", max(r + 1, n) * 8)]
    parts += [(f"{name} int32 [R]", r * 4) for name in
              ("seq_lens", "num_computed_tokens", "prev_num_draft_tokens",
               "num_scheduled_tokens", "encoder_seq_lens", "num_decode_draft_tokens",
               "num_accepted_tokens")]
    if rule.value == "0.31":
        parts.append(("is_padding bool [N]", n))
    parts += _sampling_vectors(("temperature", "top_p", "top_k", "frequency_penalties",
                                "presence_penalties", "repetition_penalties", "min_p_device"), r)
    return [*parts, ("min-tokens neg_inf fp32 [1]", 4),
            ("block_table int32 [R,W]", r * width * 4),
            ("block table slot_mapping int64 [N]", n * 8)]


def _v2_parts(n: int, r: int, spec_tokens: int) -> list[tuple[str, int]]:
    """Model Runner V2's list at 0.27.0 on (the module docstring)."""
    parts = [("input_ids int32 [N]", n * 4), ("positions int64 [N]", n * 8),
             ("is_padding bool [N]", n), ("query_start_loc int32 [R+1]", (r + 1) * 4),
             ("last_sampled_tokens int64 [R,1]", r * 8),
             ("next_prefill_tokens int32 [1,R]", r * 4)]
    parts += [(f"{name} int32 [R]", r * 4) for name in
              ("seq_lens", "dcp_local_seq_lens", "total_len", "num_computed_tokens")]
    if spec_tokens:
        parts.append(("draft_tokens int64 [R,k]", r * spec_tokens * 8))
    return parts


# config/cache.py ``CacheConfig.DEFAULT_BLOCK_SIZE`` (0.27.0 – 0.33.0): the block size the V1
# runner's constructor sizes its block table by when ``--block-size`` is not given.
CONSTRUCTION_BLOCK_SIZE = 16


def block_table_width(max_model_len: int, block_size: int) -> int:
    """``get_block_table_width`` (v1/worker/block_table.py, 0.27.0 on): cdiv(max_model_len,
    block_size) blocks rounded up to a multiple of 128 / gcd(128, block_size)."""
    align = 128 // gcd(128, block_size)
    return cdiv(cdiv(max_model_len, block_size), align) * align


def runner_buffer_parts(ctx: TermContext) -> list[tuple[str, int]]:
    """The persistent buffers ``RUNNER_BUFFERS_CHARGED`` charges at the deployment's release, as
    (name, bytes) each rounded to 512 B; empty where no row holds."""
    dep = ctx.dep
    rule = rule_in_force(RUNNER_BUFFERS_CHARGED, dep.engine_version, dep.engine)
    if rule is None:
        return []
    n, r = profile_tokens(dep), max_seqs(dep)
    if dep.max_model_len is None:
        raise ValueError("terms need a resolved deployment (max_model_len is None)")
    h_bytes = ctx.spec.hidden_size * model_bytes(ctx)
    if rule.value in ("0.27", "0.31"):
        if runs_v2(ctx):
            parts = _v2_parts(n, r, dep.num_speculative_tokens)
        else:
            width = block_table_width(dep.max_model_len,
                                      dep.block_size or CONSTRUCTION_BLOCK_SIZE)
            parts = v1_runner_parts(rule, n, r, h_bytes, width)
        return [(name, _round(b)) for name, b in parts if b]
    blocks = cdiv(dep.max_model_len, ctx.plan.block_size)
    parts = [("input_ids int32 [N]", n * 4), ("positions int64 [N]", n * 8),
             ("inputs_embeds [N,H]", n * h_bytes), ("block_table int32 [R,B]", r * blocks * 4)]
    parts += _sampling_vectors(("temperature", "top_p", "top_k", "min_p", "frequency_penalties",
                                "presence_penalties", "repetition_penalties"), r)
    if rule.value == "0.9.0":
        parts += [("query_start_loc int32 [R+1]", (r + 1) * 4), ("seq_lens int32 [R]", r * 4),
                  ("slot_mapping int64 [N]", n * 8), ("block table slot_mapping int64 [N]", n * 8)]
    return [(name, _round(b)) for name, b in parts]


def charged_from_init_snapshot(dep: Deployment) -> bool:
    """Does the release charge what the runner's constructor allocates through
    ``total_consumed``, from the worker's init snapshot (``RUNNER_BUFFERS_CHARGED``'s rows from
    0.27.0)? The buffers a speculator's constructor makes beside the runner's are charged the
    same way (``draft_head``, ``ngram_speculator``)."""
    rule = rule_in_force(RUNNER_BUFFERS_CHARGED, dep.engine_version, dep.engine)
    return rule is not None and rule.value in ("0.27", "0.31")


def runner_buffer_terms(ctx: TermContext) -> list[Component]:
    """One component in the budget (category activation: vLLM charges it in its torch peak, or
    from 0.27.0 in ``total_consumed``) where ``RUNNER_BUFFERS_CHARGED`` holds; nothing
    elsewhere."""
    parts = runner_buffer_parts(ctx)
    if not parts:
        return []
    total = sum(b for _n, b in parts)
    dep = ctx.dep
    late = charged_from_init_snapshot(dep)
    runner = ("Model Runner V2's GPUModelRunner.__init__" if late and runs_v2(ctx)
              else "GPUModelRunner.__init__")
    why = ("made after the worker's init snapshot: the release charges total_consumed" if late
           else "the release charges torch's absolute allocated peak")
    shape = f"N={profile_tokens(dep)}, R={max_seqs(dep)}"
    if not late:
        shape += f", B=cdiv({dep.max_model_len}, {ctx.plan.block_size})"
    elif not runs_v2(ctx):
        block = dep.block_size or CONSTRUCTION_BLOCK_SIZE
        shape += f", W={block_table_width(dep.max_model_len or 0, block)} (block size {block})"
    return [Component(
        name=NAME, category="activation", bytes=total, where="budget", profiled=True,
        formula=shape + ": " + " + ".join(f"{name} {fmt_bytes(b)}" for name, b in parts)
        + f" ({runner}; {why})")]
