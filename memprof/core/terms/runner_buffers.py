"""vLLM V1 0.8.0 – 0.9.0.x: the model runner's persistent GPU buffers, charged by the budget's
absolute torch peak.

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

The buffers, with N = ``max_num_tokens`` (= ``max_num_batched_tokens``), R = ``max_num_reqs``
(= ``max_num_seqs``), B = cdiv(``max_model_len``, ``block_size``):

- 0.8.x: ``input_ids`` int32 [N], ``positions`` int64 [N], ``inputs_embeds`` [N, H] in the model
  dtype (every model, not only multimodal ones); ``InputBatch``: ``BlockTable.block_table`` int32
  [R, B] and seven sampling vectors of [R] in 4-byte types (``temperature``, ``top_p``, ``top_k``,
  ``min_p``, ``frequency_penalties``, ``presence_penalties``, ``repetition_penalties``);
- 0.9.0 adds the runner's ``query_start_loc`` int32 [R + 1], ``seq_lens`` int32 [R] and
  ``slot_mapping`` int64 [N], and the block table's own ``slot_mapping`` int64 [N]
  (``MultiGroupBlockTable``, one group per KV-cache group; one for the models memprof runs at
  these releases).

Each is rounded to the caching allocator's 512-byte blocks. Not counted [approximation]: M-RoPE
models' ``mrope_positions`` int64 [3, N + 1] (under 0.1 MiB at 4,096 tokens), the
``allowed_token_ids_mask`` (made only when a request asks for it) and speculative decoding's
drafter buffers. Nor is the buffers' place in the load replay of
``memprof.core.terms.reserved_charge`` (the allocator holes these releases charge): allocated
before the weights, the ones under 1 MiB share a 2 MiB small-pool segment with the weights' norms
and biases and fill part of what that replay counts as a hole [approximation: at most their own
size, 0.35 MiB at a 256-request, 8,192-token shape].
"""

from __future__ import annotations

from memprof.base.units import cdiv, fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.terms.common import max_seqs, model_bytes, profile_tokens
from memprof.core.versions import Rule, rule_in_force

# ``value``: the buffer list of that release range ("0.8" / "0.9.0"), as the module docstring
# spells it out.
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
)
NAME = "model runner buffers (absolute torch peak)"
ALLOC_ROUND = 512  # PyTorch CUDACachingAllocator kMinBlockSize


def _round(n: int) -> int:
    return cdiv(n, ALLOC_ROUND) * ALLOC_ROUND


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
    blocks = cdiv(dep.max_model_len, ctx.plan.block_size)
    parts = [("input_ids int32 [N]", n * 4), ("positions int64 [N]", n * 8),
             ("inputs_embeds [N,H]", n * ctx.spec.hidden_size * model_bytes(ctx)),
             ("block_table int32 [R,B]", r * blocks * 4)]
    parts += [(f"{name} [R]", r * 4) for name in
              ("temperature", "top_p", "top_k", "min_p", "frequency_penalties",
               "presence_penalties", "repetition_penalties")]
    if rule.value == "0.9.0":
        parts += [("query_start_loc int32 [R+1]", (r + 1) * 4), ("seq_lens int32 [R]", r * 4),
                  ("slot_mapping int64 [N]", n * 8), ("block table slot_mapping int64 [N]", n * 8)]
    return [(name, _round(b)) for name, b in parts]


def runner_buffer_terms(ctx: TermContext) -> list[Component]:
    """One component in the budget (category activation: vLLM charges it in its torch peak)
    where ``RUNNER_BUFFERS_CHARGED`` holds; nothing elsewhere."""
    parts = runner_buffer_parts(ctx)
    if not parts:
        return []
    total = sum(b for _n, b in parts)
    dep = ctx.dep
    return [Component(
        name=NAME, category="activation", bytes=total, where="budget", profiled=True,
        formula=f"N={profile_tokens(dep)}, R={max_seqs(dep)}, B=cdiv({dep.max_model_len}, "
        f"{ctx.plan.block_size}): " + " + ".join(f"{name} {fmt_bytes(b)}" for name, b in parts)
        + " (GPUModelRunner.__init__; the release charges torch's absolute allocated peak)")]
