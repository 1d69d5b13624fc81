"""Activation peak of vLLM's profile run (``torch_peak_increase``).

vLLM@52a31cc ``GPUModelRunner.profile_run`` / ``_dummy_run`` / ``_dummy_sampler_run``
(vllm/v1/worker/gpu_model_runner.py): an eager forward of ``max_num_batched_tokens`` tokens with
attention skipped (``FlashAttentionImpl.forward`` returns ``output.fill_(0)`` without metadata),
then the sampler on ``R = min(max_num_seqs, max_num_batched_tokens)`` rows on the last PP stage
(under vLLM V0 only on its TP rank 0: ``V0_DRIVER_SAMPLER``). Inside the budget, profiled.

Sizes are ``int`` bytes. "s" is the model dtype's size; "T" the tokens of the profile run (per DP
rank); local sizes are per rank: heads/tp, dense I/tp, MoE I/(tp·dp) (full I with EP).
"""

from __future__ import annotations

from functools import lru_cache

from memprof.base.errors import BadInput
from memprof.base.units import KiB, MiB, cdiv, fmt_bytes
from memprof.core.attention import ActQuery, kind_of
from memprof.core.components import Component, TermContext
from memprof.core.deployment import Deployment, RankCoord, experts_on_rank
from memprof.core.engines.vllm_pooling import convert_of, pooler_parts, score_head
from memprof.core.engines.vllm_runner import (
    V2_SAMPLER_STATE_CHARGED,
    V2_SAMPLER_WARMUP_PASS,
    greedy_sampler_bytes,
    sampler_state_bytes,
    v2_flashinfer_samples,
    warmup_sampler_tensors,
)
from memprof.core.gpus import GPU, arch_cc
from memprof.core.kvcache import rank_layer_kinds, rank_layers
from memprof.core.models import Layer
from memprof.core.models.families import family_row
from memprof.core.terms.bnb_linear import bnb_dequant_stage
from memprof.core.terms.cold_compile import cold_compile_stage, pinned_copy_note
from memprof.core.terms.common import (
    Stage,
    is_first_stage,
    max_seqs,
    model_bytes,
    profile_tokens,
)
from memprof.core.terms.dequant_linear import dequant_stage
from memprof.core.terms.draft_head import drafter_profile_stages, target_aux_parts
from memprof.core.terms.lora import lora_logits_widths
from memprof.core.terms.moe_caches import fp8_input_quant_bytes, triton_caches_per_call
from memprof.core.terms.mtp_drafter import mtp_layer_held, mtp_profile_stages
from memprof.core.terms.runner_v2_profile import runs_v2, v2_own_profile
from memprof.core.terms.v0_eager_forward import REBOUND, mlp_gate_up_form, v0_layer_input_held
from memprof.core.versions import Rule, rule_in_force, split_generation, value_at
from memprof.core.weights.mlp import moe_caches_per_call

# vLLM V1 sampler warm-up (``_dummy_sampler_run``, vLLM@52a31cc gpu_model_runner.py profile_run /
# _dummy_sampler_run) on R rows × V vocab. The first
# call may use FlashInfer; the second passes a torch.Generator, which falls back to
# ``forward_native`` (vllm/v1/sample/ops/topk_topp_sampler.py), so the native path sets the peak:
# model-dtype logits (kept alive by the caller) + their fp32 copy (4 B/elem), then
# ``apply_top_k_top_p``:
# - R ≥ 8 (``HAS_TRITON and logits.shape[0] >= 8``, from 0.17.0; before it every row count
#   sorts: ``V1_TORCH_SORT_SAMPLER``; newer vLLM: always): the Triton pivot kernel
#   masks the fp32 logits in place using a cached [programs, V] fp32 row buffer (programs ≤ SMs);
#   then ``softmax`` probs (4) and ``random_sample``'s exponential noise q (4): 12·R·V + buffer;
# - R < 8: ``apply_top_k_top_p_pytorch`` sorts: values fp32 (4) + int64 indices (8), the top-k
#   bool mask (1), ``softmax`` whose ``cumsum(out=probs_sort)`` is in place (4), the top-p bool
#   mask (1): 22·R·V with the fp32 copy; at the sort itself the fp32 copy, the outputs and the
#   sort's temporaries (``sort_temporaries_bytes``, measured: 48·R·V at 2-7 rows, 36·R·V at one).
SAMPLER_FP32_BYTES_PER_ELEM = 4
SAMPLER_TRITON_BYTES_PER_ELEM = 4 + 4  # probs + exponential noise, after the in-place mask
SAMPLER_SORT_BYTES_PER_ELEM = 4 + 8 + 1 + 4 + 1  # = 18; with the fp32 copy: 22·R·V
SAMPLER_TRITON_MIN_ROWS = 8
# Rows of the Triton kernel's cached buffer (``sampler_triton_buffer_rows``): one per program,
# programs = min(compute units, R), the buffer min(next power of 2 of the programs, compute units)
# rows (vllm 0.17.0 / 0.18.0 / 0.19.0 v1/sample/ops/topk_topp_triton.py
# ``apply_top_k_top_p_triton``: ``num_sm = num_compute_units(logits.device.index)``,
# ``NUM_PROGRAMS = min(num_sm, batch_size)``, ``size = min(next_power_of_2(NUM_PROGRAMS),
# num_sm)``, ``logits.new_empty((size, vocab_size))``; ``num_compute_units`` is
# ``torch.cuda.get_device_properties(i).multi_processor_count`` on CUDA and ROCm,
# vllm/platforms/cuda.py / rocm.py). The compute units are the catalog's ``sm_count``: SMs on
# NVIDIA, HIP's multiProcessorCount on ROCm (CUs on CDNA, workgroup processors of two CUs on RDNA;
# configs/gpus.json cites each). A card without one (described by ``--gpu-memory``) keeps the
# 132 SMs of an H100/H200 SXM, and the component says so.
SAMPLER_TRITON_BUFFER_ROWS = 132

# ``Tensor.sort`` along the vocab on CUDA: what PyTorch allocates beside the sorted values and
# their int64 indices, per element of R·V (4-byte keys). PyTorch Sort.h ``should_use_small_sort``
# (≤ 4096 elements: an in-place bitonic sort, nothing more) and SortStable.cu
# ``launch_stable_sort_kernel``: one segment → ``segmented_sort_large_segments``; fewer than 128
# segments → ``segmented_sort_pairs_by_full_sort`` (two int2 (index, segment) buffers and cub's
# radix-sort storage); 128 or more → ``segmented_sort_pairs`` (int64 reverse indices and cub's
# storage). Measured on an H100 (torch 2.11.0+cu130; reports/gpu/v0-sampler/, from
# ``recorders/gpu_v0_sampler.py``): the V0 sampler's peak above its bf16 input is 36·R·V at
# R = 1 and R ≥ 128, 48·R·V at 8 ≤ R ≤ 127 and 30·R·V at V ≤ 4096 (within 7.2 MiB: block rounding
# and cub's own storage, not counted), i.e. the fp32 copy (4) + values and indices (12) + these
# temporaries at the sort.
SORT_SMALL_MAX = 4096
SORT_FEW_SEGMENTS = 128
SORT_TEMP_BYTES_PER_ELEM = {"small": 0, "one segment": 20, "few segments": 32,
                            "many segments": 20}


def sampler_triton_buffer_rows(gpu: GPU, rows: int) -> tuple[int, str]:
    """Rows of vLLM's cached Triton top-k/top-p buffer for a batch of ``rows`` on ``gpu``, and the
    compute-unit count it used: min(next_power_of_2(min(units, rows)), units), with units the
    catalog's ``sm_count`` (``SAMPLER_TRITON_BUFFER_ROWS``, the H100's 132, where the catalog
    has none: the second value, a label suffix, then says so; empty on a 132-SM card)."""
    units = gpu.sm_count
    how = f" ({units} {'compute units' if gpu.is_rocm else 'SMs'})"
    if units is None:
        units = SAMPLER_TRITON_BUFFER_ROWS
        how = (f" ({units} SMs of an H100 [assumed: {gpu.name}'s compute units are not in the "
               "catalog])")
    elif units == SAMPLER_TRITON_BUFFER_ROWS:
        how = ""
    programs = min(units, rows)
    return min(1 << (programs - 1).bit_length(), units), how


def sort_temporaries_bytes(rows: int, vocab: int) -> int:
    """Bytes ``Tensor.sort(dim=-1)`` of an fp32 ``[rows, vocab]`` holds beside its outputs."""
    if vocab <= SORT_SMALL_MAX:
        path = "small"
    elif rows == 1:
        path = "one segment"
    elif rows < SORT_FEW_SEGMENTS:
        path = "few segments"
    else:
        path = "many segments"
    return SORT_TEMP_BYTES_PER_ELEM[path] * rows * vocab


# vLLM V0 (the default engine until 0.8.0): the profile run (``ModelRunner._dummy_run``) samples
# only on the driver worker, TP rank 0 of the last PP stage. The logits are gathered to it
# (``LogitsProcessor._gather_logits``: ``gather``, not ``all_gather``, unless TPU or V1) and every
# other worker returns after ``compute_logits`` (``ModelRunner.execute_model``: ``if not
# self.is_driver_worker: return []``). Every request has ``SamplingParams(top_p=0.99,
# top_k=vocab_size - 1)``, so ``Sampler.forward`` runs the torch ``_apply_top_k_top_p``
# (FlashInfer's sampler only with VLLM_USE_FLASHINFER_SAMPLER=1): the fp32 copy, the sort, the
# top-k and top-p boolean masks, the softmax and cumulative sum of the sorted values and the
# scatter back into a new tensor are alive together (30·R·V) or, at the sort, the fp32 copy, the
# outputs and the sort's temporaries (``sort_temporaries_bytes``), whichever is larger.
V0_DRIVER_SAMPLER: tuple[Rule, ...] = (
    Rule(name="v0_driver_sampler", changes="activation peak: sampler", since="0.6.0",
         until="0.11.0", value="driver worker, torch top-k/top-p",
         introduced_by="V0 engine (VLLM_USE_V1=0 by default before 0.8.0)",
         removed_by="V0 engine removed (0.11.0); under V1 every rank samples "
         "(gpu_model_runner.py _dummy_sampler_run)",
         source="0.6.0, 0.6.4.post1 and 0.6.6.post1 worker/model_runner.py "
         "ModelRunner.profile_run (SamplingParams(top_p=0.99, top_k=vocab_size - 1)) and "
         "execute_model ('if not self.is_driver_worker: return []'), logits_processor.py "
         "tensor_model_parallel_gather; "
         "0.7.2 worker/model_runner.py ModelRunner._dummy_run and execute_model; "
         "model_executor/layers/logits_processor.py LogitsProcessor._gather_logits; "
         "model_executor/layers/sampler.py Sampler.forward, _apply_top_k_top_p; "
         "ModelRunner.profile_run → _dummy_run still in 0.8.5 and 0.10.2",
         generation="v0"),
)
V0_SAMPLER_SCATTER_BYTES_PER_ELEM = 4 + 4 + 8 + 1 + 4 + 4 + 1 + 4  # fp32 copy … scatter = 30

# The hidden states alive at the V1 sampler warm-up, by release (v1/worker/gpu_model_runner.py
# ``_dummy_run`` / ``_dummy_sampler_run`` / ``profile_run``). ``_dummy_run`` ends with
# ``hidden_states[logit_indices]`` (advanced indexing with a NumPy array: a new [R, H] tensor).
#   0.8.0 – 0.8.5.post1: it returns only that [R, H]; the forward's [T, H] output is freed with
#   the function's locals, and ``_dummy_sampler_run`` computes the logits from that [R, H].
#   0.9.0 – 0.9.1: the same return, but ``_dummy_sampler_run`` first replaces its argument by
#   ``torch.rand_like(hidden_states)`` (the caller still holds the original): 2 × [R, H].
#   0.9.2 on: ``_dummy_run`` returns ``(hidden_states, hidden_states[logit_indices])`` and
#   ``profile_run`` keeps both through the sampler: [T, H] + 2 × [R, H].
# ``value``: ([T, H] tensors, [R, H] tensors) alive at the sampler.
V1_SAMPLER_HIDDEN: tuple[Rule, ...] = (
    Rule(name="v1_sampler_hidden", changes="activation peak: sampler", since="0.8.0",
         until="0.9.0", value=(0, 1),
         introduced_by="V1 on by default in 0.8.0 (_dummy_run returns hidden_states"
         "[logit_indices])",
         removed_by="_dummy_sampler_run's torch.rand_like (read in 0.9.0)",
         source="0.8.0, 0.8.2, 0.8.3, 0.8.4 and 0.8.5 v1/worker/gpu_model_runner.py _dummy_run "
         "(return hidden_states[logit_indices]), profile_run (hidden_states = "
         "self._dummy_run(self.max_num_tokens); self._dummy_sampler_run(hidden_states)), "
         "_dummy_sampler_run (compute_logits(hidden_states, None))", generation="v1"),
    Rule(name="v1_sampler_hidden", changes="activation peak: sampler", since="0.9.0",
         until="0.9.2", value=(0, 2),
         introduced_by="_dummy_sampler_run's torch.rand_like (read in 0.9.0)",
         removed_by="_dummy_run returns (hidden_states, hidden_states[logit_indices]) "
         "(read in 0.9.2)",
         source="0.9.0 and 0.9.1 v1/worker/gpu_model_runner.py _dummy_run (return "
         "hidden_states[logit_indices]), _dummy_sampler_run (hidden_states = "
         "torch.rand_like(hidden_states))", generation="v1"),
    Rule(name="v1_sampler_hidden", changes="activation peak: sampler", since="0.9.2",
         until=None, value=(1, 2),
         introduced_by="_dummy_run returns (hidden_states, hidden_states[logit_indices]) "
         "(read in 0.9.2)",
         source="0.9.2, 0.10.0, 0.10.1.1, 0.11.0, 0.17.0 and 0.27.1 "
         "v1/worker/gpu_model_runner.py profile_run (hidden_states, last_hidden_states = "
         "self._dummy_run(...); _dummy_sampler_run(last_hidden_states); del hidden_states), "
         "_dummy_sampler_run (torch.rand_like(hidden_states))", generation="v1"),
)


# The rejection sampler's warm-up in V1's ``_dummy_sampler_run`` with speculative decoding on:
# after the sampler, ``draft_token_ids = [[0] for _ in range(num_reqs)]`` (one dummy draft token
# a request, whatever num_speculative_tokens) and ``logits = torch.randn(num_tokens + num_reqs,
# V)``: 2 × R rows. Absent in 0.8.0. value: the dummy draft tokens a request.
V1_REJECTION_WARMUP: tuple[Rule, ...] = (
    Rule(name="v1_rejection_sampler_warmup", changes="activation peak: sampler",
         since="0.8.1", until=None, value=1,
         introduced_by="read in the 0.8.1 wheel (no rejection-sampler warm-up in 0.8.0)",
         source="0.8.1, 0.8.2, 0.8.3, 0.8.4, 0.8.5, 0.9.0, 0.11.0, 0.22.0, 0.25.0, 0.29.0, "
         "0.30.0 and 0.31.0 v1/worker/gpu_model_runner.py _dummy_sampler_run",
         generation="v1"),
)

# The per-rank logits shard is gone before the sampler runs. ``LogitsProcessor._get_logits``
# (model_executor/layers/logits_processor.py) binds the lm_head's output [R, V/tp] to ``logits``
# and rebinds that name to ``self._gather_logits(logits)``; nothing else holds the shard, so it is
# freed as soon as the gather returns (the gather's own output buffer [tp, R, V/tp] too: the
# communicator returns a reshaped copy), before ``compute_logits`` hands the gathered [R, V] to
# the sampler. ``LogitsProcessorWithLoRA._get_logits`` (lora/layers.py) rebinds it the same way.
# Without TP there is no gather and no second tensor. So the sampler stage charges no shard; the
# gather's own moment (shard + two [R, V] in the model dtype) is below the sampler's fp32 moment.
LOGITS_SHARD_FREED: tuple[Rule, ...] = (
    Rule(name="logits_shard_freed", changes="activation peak: sampler", since=None, until=None,
         value="no local logits shard at the sampler",
         introduced_by="before 0.7.3 (read from 0.7.3 on)",
         source="0.7.3, 0.8.2, 0.8.5, 0.10.1.1, 0.11.0 and 0.27.1 "
         "model_executor/layers/logits_processor.py LogitsProcessor._get_logits (logits = "
         "self._gather_logits(logits); 0.27.1: under 'if lm_head.tp_size > 1'); 0.8.2 "
         "lora/layers.py LogitsProcessorWithLoRA._get_logits (logits = "
         "self.base_layer._gather_logits(logits)); 0.8.2 distributed/parallel_state.py "
         "GroupCoordinator.all_gather, 0.27.1 distributed/device_communicators/"
         "cuda_communicator.py CudaCommunicator.all_gather (torch.empty output, movedim, "
         "reshape: a new tensor)"),
)

# How V0's ``_apply_top_k_top_p`` puts the masked, sorted logits back in vocabulary order
# (model_executor/layers/sampler.py). ``value``: bytes per R·V element alive at that moment.
#   0.6.0 – 0.6.1.post2: ``logits_idx_inv = torch.empty_like(logits_idx).scatter_(…, src=arange
#   expanded)`` (int64, 8) then ``torch.gather(logits_sort, …, logits_idx_inv)`` (a new fp32, 4)
#   beside the fp32 copy, sorted values and int64 indices, the top-k mask, softmax, cumsum and
#   top-p mask: 4 + 4 + 8 + 1 + 4 + 4 + 1 + 8 + 4 = 38;
#   from 0.6.2: ``torch.empty_like(logits_sort).scatter_(…, src=logits_sort)``: 30.
V0_SAMPLER_RESORT: tuple[Rule, ...] = (
    Rule(name="v0_sampler_resort", changes="activation peak: sampler", since="0.6.0",
         until="0.6.2", value=V0_SAMPLER_SCATTER_BYTES_PER_ELEM + 8,
         introduced_by="before 0.6.0", removed_by="scatter of the sorted logits (read in 0.6.2)",
         source="0.6.0, 0.6.1 and 0.6.1.post2 model_executor/layers/sampler.py "
         "_apply_top_k_top_p: logits_idx_inv = torch.empty_like(logits_idx).scatter_(dim=-1, "
         "index=logits_idx, src=src); logits = torch.gather(logits_sort, dim=-1, "
         "index=logits_idx_inv)", generation="v0"),
    Rule(name="v0_sampler_resort", changes="activation peak: sampler", since="0.6.2",
         until="0.11.0", value=V0_SAMPLER_SCATTER_BYTES_PER_ELEM,
         introduced_by="scatter of the sorted logits (read in 0.6.2)",
         removed_by="V0 engine removed (0.11.0)",
         source="0.6.2, 0.6.4.post1, 0.6.6.post1 and 0.7.1 model_executor/layers/sampler.py "
         "_apply_top_k_top_p: logits = torch.empty_like(logits_sort).scatter_(dim=-1, "
         "index=logits_idx, src=logits_sort)", generation="v0"),
)

# vLLM V0's profile run (``ModelRunner._dummy_run``) builds attention metadata for its dummy
# prompts, so the MLA backend runs the prefill in full instead of V1's metadata-less worst-case
# buffer: ``kv_b_proj(kv_c_normed)`` [T, h, nope+v], ``k = torch.cat((k_nope, k_pe))``
# [T, h, qk], V padded to qk (``F.pad``) [T, h, qk], ``flash_attn_varlen_func``, the output sliced
# to [T, h·v] and ``o_proj``; all but the attention output are locals alive through ``o_proj``.
# From 0.8.0 ``MLACommonImpl.forward`` first allocates the layer's output [T, hidden]
# (``output = torch.empty(num_prefill_tokens + num_decode_tokens, o_proj.output_size)``) and
# copies ``_forward_prefill``'s result into it. ``value``: the ``ActQuery.eager_prefill`` mode.
V0_MLA_PREFILL_PROFILE: tuple[Rule, ...] = (
    Rule(name="v0_mla_prefill_profile", changes="activation peak: MLA attention",
         since="0.7.1", until="0.8.0", value="prefill",
         introduced_by="V0 MLA backends (read from 0.7.1 on)",
         removed_by="MLACommonImpl.forward's output buffer (read in 0.8.0)",
         source="0.7.1, 0.7.2 and 0.7.3 attention/backends/mla/utils.py MLACommonImpl.forward, "
         "_forward_prefill_flash; worker/model_runner.py ModelRunner._dummy_run "
         "(prepare_model_input of the dummy prompts)", generation="v0"),
    Rule(name="v0_mla_prefill_profile", changes="activation peak: MLA attention",
         since="0.8.0", until="0.8.3", value="prefill+out",
         introduced_by="MLACommonImpl.forward's output buffer (read in 0.8.0)",
         removed_by="not read after 0.8.2",
         source="0.8.0, 0.8.1 and 0.8.2 attention/backends/mla/common.py MLACommonImpl.forward "
         "(output = torch.empty(..., self.o_proj.output_size)), _forward_prefill",
         generation="v0"),
)

# The Triton fused-MoE caches of these releases are ``torch.empty``'d on every call of
# ``fused_experts_impl`` and freed when the layer returns (no workspace kept across layers), so
# they add to the MoE stage only and never to another layer's stage: w13 of N = 2·I_l rows,
# M = min(T, ``VLLM_FUSED_MOE_CHUNK_SIZE``). 0.7.x: ``intermediate_cache1`` [M, k, N],
# ``intermediate_cache2`` [M·k, N/2], ``intermediate_cache3`` [M, k, H]; 0.8.x: caches 1 and 3
# share ``cache13`` [M·k·max(N, H)] beside ``intermediate_cache2`` [M·k, N/2]. V1 calls the
# same function, but its profile run also samples on up to max_num_seqs rows, a stage the
# per-call caches are never live in: V1's rows, and V0's from 0.8.3, are
# ``TRITON_MOE_CACHES_PER_CALL`` (memprof/core/terms/moe_caches.py). ``value``: "separate" /
# "cache13".
V0_MOE_CACHES_PER_CALL: tuple[Rule, ...] = (
    Rule(name="v0_moe_caches_per_call", changes="activation peak: fused-MoE caches",
         since="0.6.0", until="0.8.0", value="separate",
         introduced_by="before 0.6.0 (read from 0.6.0 on)",
         removed_by="cache13 (read in 0.8.0)",
         source="0.6.0, 0.6.3.post1, 0.6.4.post1, 0.6.6.post1, 0.7.1, 0.7.2 and 0.7.3 "
         "model_executor/layers/fused_moe/fused_moe.py "
         "fused_experts_impl: intermediate_cache1/2/3 torch.empty per call", generation="v0"),
    Rule(name="v0_moe_caches_per_call", changes="activation peak: fused-MoE caches",
         since="0.8.0", until="0.8.3", value="cache13",
         introduced_by="cache13 (read in 0.8.0)", removed_by="not read after 0.8.2",
         source="0.8.0, 0.8.1 and 0.8.2 model_executor/layers/fused_moe/fused_moe.py "
         "fused_experts_impl: cache13 = torch.empty(M * top_k_num * max(N, w2.shape[1])), "
         "intermediate_cache2 torch.empty per call", generation="v0"),
)

# vLLM V1 before the Triton top-k/top-p kernel: ``apply_top_k_top_p``
# (vllm/v1/sample/ops/topk_topp_sampler.py, read in the 0.8.0, 0.8.3, 0.10.1, 0.11.0 and 0.16.0
# wheels) sorts the fp32 logits on every row count; 0.17.0 adds topk_topp_triton.py and sorts
# only below 8 rows (``HAS_TRITON and logits.shape[0] >= 8``), then scatters in place. While this
# holds, the profile run's sampler (``_dummy_sampler_run``: top_k = V - 1, top_p = 0.9, no
# generators) holds, beside the caller's model-dtype logits: the fp32 copy (``Sampler.forward``;
# temperature divides it in place), then either the sort moment (values fp32 + int64 indices +
# ``sort_temporaries_bytes``) or the masks-and-scatter moment: fp32 copy, values, indices, the
# top-k bool mask, the softmax probs, the cumulative sum (its own tensor before 0.8.3,
# ``cumsum(out=probs_sort)`` from 0.8.3), the top-p bool mask and ``logits_sort.scatter``'s new
# tensor. ``value``: bytes per R·V element at that moment (30 / 26).
# The sampler's FlashInfer path does not sort. It is on by default when flashinfer is importable
# in 0.8.0-0.11.0 (``VLLM_USE_FLASHINFER_SAMPLER is not False``) and opt-in
# (``VLLM_USE_FLASHINFER_SAMPLER=1``) in 0.14.1-0.16.0; memprof assumes the PyPI wheel, whose
# ``flashinfer-python`` is only an extra (wheel METADATA, 0.10.1 and 0.11.0), and says so in the
# stage's label.
V1_TORCH_SORT_SAMPLER: tuple[Rule, ...] = (
    Rule(name="v1_torch_sort_sampler", changes="activation peak: sampler", since="0.8.0",
         until="0.8.3", value=4 + 4 + 8 + 1 + 4 + 4 + 1 + 4,
         introduced_by="V1 on by default in 0.8.0 (gpu_model_runner.py _dummy_sampler_run)",
         removed_by="cumsum(out=probs_sort) (first released in 0.8.3)",
         source="0.8.0 and 0.8.2 v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p: "
         "probs_sort.cumsum(dim=-1), logits_sort.scatter", generation="v1"),
    Rule(name="v1_torch_sort_sampler", changes="activation peak: sampler", since="0.8.3",
         until="0.17.0", value=4 + 4 + 8 + 1 + 4 + 1 + 4,
         introduced_by="cumsum(out=probs_sort) (first released in 0.8.3)",
         removed_by="#33538 Triton top-k/top-p kernel (first released in 0.17.0)",
         source="0.8.3, 0.10.1, 0.11.0 and 0.16.0 v1/sample/ops/topk_topp_sampler.py "
         "apply_top_k_top_p: logits.sort, cumsum(out=probs_sort), logits_sort.scatter",
         generation="v1"),
)


# The V1 sampler's FlashInfer path, where FlashInfer is installed (vLLM's Docker image ships it;
# the PyPI wheel has it only as the ``flashinfer`` extra, pinned to flashinfer-python 0.2.11 /
# 0.3.0 / 0.3.1 in the 0.10.1.1 / 0.10.2 / 0.11.0 METADATA) and ``VLLM_USE_FLASHINFER_SAMPLER``
# is not 0 (None counts as on under V1: ``TopKTopPSampler.__init__``, "Using FlashInfer for top-p
# & top-k sampling."). The profile run's warm-up sets both top_k and top_p, so
# ``flashinfer_sample`` calls
# ``flashinfer.sampling.top_k_top_p_sampling_from_logits`` on the fp32 logits that
# ``Sampler.forward`` made (``logits.to(torch.float32)``; temperature divides in place), which
# with its default ``filter_apply_order="top_k_first"`` makes ``top_k_mask_logits`` (a new fp32
# [R, V], ``torch.empty_like``) and ``torch.softmax`` of it (a new fp32 [R, V]) and samples from
# those probs into an int32 [R]: 4 + 4 + 4 = 12 bytes per R·V element beside the model-dtype
# logits, and no sort. ``value``: those bytes per element.
# 0.8.0–0.8.5.post1 (FlashInfer below 0.2.3 only: ``TopKTopPSampler.__init__`` falls back to the
# torch sort from 0.2.3 on, so the "Using FlashInfer" line names this path): ``forward_cuda``
# makes fp32 probs (``logits.softmax(dtype=float32)``) of the fp32 logits (temperature divides in
# place) and ``flashinfer_sample`` calls ``top_k_top_p_sampling_from_probs(probs,
# uniform_samples, k, p, deterministic=True)`` (32 rounds of uniform samples, a [32, R] fp32
# buffer, left out). FlashInfer 0.2.0.post2, 0.2.1.post2 (the wheel vLLM's Dockerfile of the 0.8
# series installs on x86_64) and 0.2.2.post1 (flashinfer/sampling.py) run that call with its
# default ``filter_apply_order="top_k_first"``: ``top_k_renorm_probs(probs, top_k)`` returns a new
# fp32 [R, V] (``torch.empty_like(probs)``), which ``top_p_sampling_from_probs`` then samples by
# rejection while the probs are still held: 4 + 4 + 4 bytes per element. (FlashInfer 0.1.x ran a
# fused joint kernel without that copy, but has no build for the torch 2.6 of vLLM 0.8.x.) vLLM's
# own fallback (``top_k_renorm_prob`` then ``top_p_renorm_prob``) runs only when a row rejects 32
# times in a row [assumed not in the warm-up: top_k = V − 1 and top_p = 0.9 accept a draw with
# probability ≥ 0.9 whatever the logits].
V1_FLASHINFER_SAMPLER: tuple[Rule, ...] = (
    Rule(name="v1_flashinfer_sampler", changes="activation peak: sampler (FlashInfer)",
         since="0.8.0", until="0.9.0", value=4 + 4 + 4,
         introduced_by="V1 on by default in 0.8.0 (FlashInfer < 0.2.3 installed)",
         removed_by="sampling from the logits with a top-k mask (read in 0.9.0)",
         source="0.8.0, 0.8.2 and 0.8.5.post1 v1/sample/ops/topk_topp_sampler.py "
         "TopKTopPSampler.__init__ (FlashInfer < 0.2.3, VLLM_USE_FLASHINFER_SAMPLER is not "
         "False), forward_cuda (logits.softmax(dtype=torch.float32)), flashinfer_sample "
         "(top_k_top_p_sampling_from_probs; renorm fallback when a row fails 32 rounds); 0.8.2 "
         "v1/sample/sampler.py Sampler.forward (logits.to(torch.float32)), apply_temperature "
         "(logits.div_); v1/worker/gpu_model_runner.py _dummy_sampler_run (top_k V - 1, top_p "
         "0.9); flashinfer-python 0.2.0.post2, 0.2.1.post2 and 0.2.2.post1 flashinfer/sampling.py "
         "top_k_top_p_sampling_from_probs (filter_apply_order='top_k_first': "
         "top_k_renorm_probs, torch.empty_like(probs), then top_p_sampling_from_probs)",
         generation="v1"),
    Rule(name="v1_flashinfer_sampler", changes="activation peak: sampler (FlashInfer)",
         since="0.9.0", until="0.11.1", value=4 + 4 + 4,
         introduced_by="sampling from the logits with a top-k mask (read in 0.9.0)",
         removed_by="not read after 0.11.0: --vllm-use-flashinfer-sampler is refused there",
         source="0.9.0, 0.9.1, 0.10.1.1, 0.10.2 and 0.11.0 v1/sample/ops/topk_topp_sampler.py "
         "TopKTopPSampler.__init__ (VLLM_USE_FLASHINFER_SAMPLER is not False), forward_cuda, "
         "flashinfer_sample; v1/sample/sampler.py Sampler.forward (logits.to(torch.float32)); "
         "flashinfer-python 0.2.11, 0.3.0 and 0.3.1 (the 0.10.1.1, 0.10.2 and 0.11.0 wheels' "
         "pins) flashinfer/sampling.py top_k_top_p_sampling_from_logits, top_k_mask_logits "
         "(torch.empty_like), top_p_sampling_from_probs", generation="v1"),
)


def check_flashinfer_sampler(dep: Deployment) -> None:
    """``--vllm-use-flashinfer-sampler``: 0 or 1, vLLM only, and 1 only at the releases whose
    FlashInfer path memprof read (``V1_FLASHINFER_SAMPLER``) — elsewhere a refusal, never a
    silent torch sampler."""
    use = dep.vllm_use_flashinfer_sampler
    if use not in (None, 0, 1):
        raise BadInput(f"--vllm-use-flashinfer-sampler {use}: VLLM_USE_FLASHINFER_SAMPLER is 0 "
                       "or 1", hint="pass 1 where FlashInfer samples (vLLM's Docker image), 0 "
                       "for the torch sampler")
    if use == 1 and dep.vllm_use_v1 == 0:
        raise BadInput("--vllm-use-flashinfer-sampler 1 with --vllm-use-v1 0: the V0 sampler's "
                       "FlashInfer path is not modelled", hint="drop one of the two")
    if use == 1 and rule_in_force(V1_FLASHINFER_SAMPLER, dep.engine_version or "",
                                  dep.engine) is None:
        raise BadInput(f"--vllm-use-flashinfer-sampler 1: the setting is modelled for vLLM "
                       f"0.8.0 to 0.11.0 (V1) only, not "
                       f"{dep.engine_version or 'the newest release'}",
                       hint="drop --vllm-use-flashinfer-sampler (memprof then models the "
                       "release's default sampler and says so: from 0.33.0 Model Runner V2's "
                       "warm-up pass takes FlashInfer's where the card supports it), or pass "
                       "an --engine-version from 0.8.0 to 0.11.0")


def flashinfer_sampler_bytes_per_elem(dep: Deployment) -> int | None:
    """Bytes per R·V element of the FlashInfer sampler where the deployment states it samples
    (``--vllm-use-flashinfer-sampler 1``) at a release of ``V1_FLASHINFER_SAMPLER``; else None."""
    if dep.vllm_use_flashinfer_sampler != 1:
        return None
    rule = rule_in_force(V1_FLASHINFER_SAMPLER, dep.engine_version, dep.engine)
    return None if rule is None else int(rule.value)  # type: ignore[call-overload]


@lru_cache(maxsize=64)
def v1_sort_sampler_bytes_per_elem(engine: str, version: str | None) -> int | None:
    """Bytes per R·V element of the V1 torch sort sampler's masks-and-scatter moment while
    ``V1_TORCH_SORT_SAMPLER`` holds; ``None`` from the Triton kernel's release on."""
    rule = rule_in_force(V1_TORCH_SORT_SAMPLER, version, engine)
    return None if rule is None else int(rule.value)  # type: ignore[call-overload]


@lru_cache(maxsize=64)
def v0_driver_samples(engine: str, version: str | None) -> bool:
    """Does only the driver worker sample in the profile run (``V0_DRIVER_SAMPLER``)?"""
    return rule_in_force(V0_DRIVER_SAMPLER, version, engine) is not None  # vLLM's rows


# vLLM's pipeline stages after the first run the profile forward on an ``IntermediateTensors``
# they allocate themselves (nothing is received from the previous stage): V1
# ``GPUModelRunner._dummy_run`` sets ``self.intermediate_tensors =
# self.model.make_empty_intermediate_tensors(batch_size=self.max_num_tokens, ...)`` on a non-first
# PP rank and keeps it (persistent, so also alive at the sampler), V0 ``ModelRunner.profile_run``
# makes one for ``max_num_batched_tokens`` tokens that is alive through the forward. Both sit
# inside the profile window, so the budget line charges them. Model Runner V2 makes the same
# tensors in ``load_model`` (after the weights' figure), which 0.27.0+'s budget line
# (``total_consumed``, the free-memory drop since the init snapshot) charges as well. Most
# families build it with
# ``make_empty_intermediate_tensors_factory(["hidden_states", "residual"], hidden_size)``
# (model_executor/models/utils.py; llama.py, qwen2.py, qwen3_moe.py, deepseek_v2.py,
# gpt_oss.py, ...): two zeroed [T, H] tensors in the model dtype. ``value``: the [T, H] tensors.
PP_INTERMEDIATE_TENSORS: tuple[Rule, ...] = (
    Rule(name="pp_intermediate_tensors", changes="activation: PP intermediate tensors",
         since=None, until=None, value=2, applies_to="pp",
         introduced_by="before 0.7.1 (V0 ModelRunner.profile_run; V1 GPUModelRunner._dummy_run "
         "from 0.8.0)",
         source="0.7.3 worker/model_runner.py ModelRunner.profile_run (not "
         "get_pp_group().is_first_rank: make_empty_intermediate_tensors(batch_size=batch_size)); "
         "0.8.0, 0.14.1, 0.17.0, 0.27.1 and 0.33.0 v1/worker/gpu_model_runner.py _dummy_run "
         "(self.intermediate_tensors = make_empty_intermediate_tensors(batch_size="
         "self.max_num_tokens)); Model Runner V2 (0.29.0 and 0.33.0 v1/worker/gpu/"
         "model_runner.py load_model, the same call, charged by 0.27.0+'s total_consumed); "
         "0.27.1 model_executor/models/utils.py "
         "make_empty_intermediate_tensors_factory, qwen2.py / qwen3_moe.py / llama.py "
         "[\"hidden_states\", \"residual\"]"),
)


def pp_intermediate_tensors_bytes(ctx: TermContext, tokens: int | None = None) -> int:
    """Bytes of the ``IntermediateTensors`` a non-first PP stage allocates for the profile
    forward (``PP_INTERMEDIATE_TENSORS``): hidden_states and residual, [T, H] each in the model
    dtype; 0 on the first stage, without PP, or where no row holds (another engine)."""
    dep = ctx.dep
    if dep.pp <= 1 or is_first_stage(ctx):
        return 0
    rule = rule_in_force(PP_INTERMEDIATE_TENSORS, dep.engine_version, dep.engine)
    if rule is None:
        return 0
    t = profile_tokens(dep) if tokens is None else tokens
    keys = int(rule.value)  # type: ignore[call-overload]
    return int(keys * t * ctx.spec.hidden_size * model_bytes(ctx))


def samples_in_profile_run(dep: Deployment, coord: RankCoord) -> bool:
    """Does this rank run the sampler in the profile run? V1: every rank of the last PP stage;
    V0 (``V0_DRIVER_SAMPLER``): only its TP rank 0."""
    if coord.pp_stage != dep.pp - 1:
        return False
    return coord.tp_rank == 0 or not v0_driver_samples(dep.engine, dep.engine_version)


# vLLM ``VLLM_FUSED_MOE_CHUNK_SIZE`` default 16·1024 (vllm/envs.py, 0.12.0 – 0.17.x): the modular
# fused-MoE kernel sizes its workspaces for at most this many tokens per chunk; from 0.18.0 it
# sizes them for the whole batch (``FUSED_MOE_CHUNK``).
FUSED_MOE_CHUNK_SIZE = 16 * 1024
# The default by release (``FUSED_MOE_CHUNK_SIZE`` above is the newest): 32768 tokens through
# 0.11.x. It caps the Triton fused-MoE path's token rows (``fused_experts_impl``: M =
# min(num_tokens, CHUNK_SIZE) in 0.7.3 – 0.11.x; the modular kernel's workspaces later), so a
# profile run with more than 16,384 batched tokens sizes its MoE caches for up to twice as many
# rows in those releases.
NOT_CHUNKED = "the whole batch (not chunked)"
FUSED_MOE_CHUNK: tuple[Rule, ...] = (
    Rule(name="fused_moe_chunk_size", changes="activation peak: fused-MoE rows", since="0.6.0",
         until="0.12.0", value=32768, introduced_by="before 0.6.0",
         removed_by="default 16 * 1024 (first released in 0.12.0)",
         source="0.6.0, 0.6.4.post1, 0.6.6.post1, 0.7.3, 0.8.0, 0.8.5, 0.9.2, 0.10.2, 0.11.0 "
         "and 0.11.1 envs.py: "
         "int(os.getenv('VLLM_FUSED_MOE_CHUNK_SIZE', '32768')); 0.8.5 "
         "model_executor/layers/fused_moe/fused_moe.py fused_experts_impl: M = min(num_tokens, "
         "CHUNK_SIZE)"),
    Rule(name="fused_moe_chunk_size", changes="activation peak: fused-MoE rows", since="0.12.0",
         until="0.18.0", value=FUSED_MOE_CHUNK_SIZE,
         introduced_by="default 16 * 1024 (first released in 0.12.0)",
         removed_by="the fused-MoE chunking removed (vLLM PR #34086, first released in 0.18.0)",
         source="0.12.0 – 0.17.1 envs.py: os.getenv('VLLM_FUSED_MOE_CHUNK_SIZE', "
         "str(16 * 1024)); vLLM@52a31cc"),
    Rule(name="fused_moe_chunk_size", changes="activation peak: fused-MoE rows", since="0.18.0",
         until=None, value=NOT_CHUNKED,
         introduced_by="the fused-MoE chunking removed (vLLM PR #34086, first released in "
         "0.18.0)",
         source="0.18.0 envs.py: no VLLM_FUSED_MOE_CHUNK_SIZE; fused_moe/modular_kernel.py "
         "FusedMoEModularKernel: _allocate_buffers(in_dtype, device, M_full, M_full, ...), the "
         "workspaces at the whole batch; fused_moe.py fused_experts_impl without its chunk loop"),
)


def fused_moe_chunk(version: str | None) -> int | None:
    """``VLLM_FUSED_MOE_CHUNK_SIZE``'s default at ``version`` (rows in ``FUSED_MOE_CHUNK``);
    ``None`` from 0.18.0, where the fused MoE runs the whole batch in one chunk."""
    chunk = value_at(FUSED_MOE_CHUNK, version, FUSED_MOE_CHUNK_SIZE)
    if chunk == NOT_CHUNKED:
        return None
    return chunk if isinstance(chunk, int) else FUSED_MOE_CHUNK_SIZE


def fused_moe_rows(rows: int, version: str | None) -> int:
    """The token rows one fused-MoE chunk holds: ``rows`` capped at the release's chunk size
    (``fused_moe_chunk``), all of them where the release does not chunk."""
    chunk = fused_moe_chunk(version)
    return rows if chunk is None else min(rows, chunk)

# ``moe_align_block_size``: sorted_token_ids int32 of ``topk_ids.numel() + E·(BLOCK_SIZE_M − 1)``
# (vllm/model_executor/layers/fused_moe/moe_align_block_size.py); BLOCK_SIZE_M comes from the tuned
# config (16-128); memprof takes 64 [assumption].
MOE_ALIGN_BLOCK_M = 64

# MLA profile run: ``MLAAttention.forward`` with ``attn_metadata is None`` allocates
# ``torch.empty((chunked_prefill_workspace_size, num_heads, qk_nope_head_dim + v_head_dim))`` "to
# simulate the worse case output size for kv_b_proj(kv_c_normed) in _compute_prefill_context"
# (vllm/model_executor/layers/attention/mla_attention.py, v1/attention/backends/mla/common.py).
# ``determine_chunked_prefill_workspace_size``: min(max(8·max_model_len, 4·max_num_seqs·block),
# 64·1024), then at least max_num_seqs·block (MLACommonMetadataBuilder, upstream vLLM).
MLA_CHUNKED_PREFILL_CAP = 64 * 1024

# cuBLAS workspace (PyTorch aten/src/ATen/cuda/CublasHandlePool.cpp,
# aten/src/ATen/cuda/CublasHandlePool.cpp): allocated through the
# caching allocator once per (handle, stream), so it lands in the profile run's torch peak.
CUBLAS_WORKSPACE_HOPPER_PLUS = 32 * MiB  # compute capability 9.x-12.x: ":4096:8" = 4096 KiB × 8
CUBLAS_WORKSPACE_OLDER = 8 * MiB + 128 * KiB  # ":4096:2:16:8" = 4096 KiB × 2 + 16 KiB × 8
CUBLAS_WORKSPACE_ROCM_MI300_PLUS = 128 * MiB  # gfx942 / gfx950 / gfx1250
CUBLAS_WORKSPACE_ROCM = 32 * MiB

def _base(ctx: TermContext, t: int) -> list[tuple[str, int]]:
    """What lives across a decoder layer: the residual stream and the layer's (normed) input.

    DeepSeek-V4 mHC keeps the residual as [T, hc_mult, H] (4× a hidden state, vLLM deepseek_v4.py
    @023da1fc forward)
    plus the post/comb mixes [T, hc] and [T, hc, hc] in fp32.
    """
    s, h = model_bytes(ctx), ctx.spec.hidden_size
    hc = ctx.spec.hc_mult
    if hc:
        return [("residual [T,hc,H]", t * hc * h * s), ("layer input [T,H]", t * h * s),
                ("mHC mixes fp32", t * (hc + hc * hc) * 4)]
    return [("residual [T,H]", t * h * s), ("hidden [T,H]", t * h * s)]


def _row_parallel_out(ctx: TermContext, t: int, what: str) -> list[tuple[str, int]]:
    """A row-parallel output [T,H]; with TP>1 the all-reduce is out of place
    (``_all_reduce_out_place`` returns a new tensor, vllm/distributed/parallel_state.py), so the
    reduced copy is live too."""
    s, h = model_bytes(ctx), ctx.spec.hidden_size
    out = [(f"{what} out [T,H]", t * h * s)]
    if ctx.dep.tp > 1:
        out.append(("all-reduce out [T,H]", t * h * s))
    return out


def mla_chunked_prefill_rows(ctx: TermContext) -> int:
    """``MLACommonMetadataBuilder.determine_chunked_prefill_workspace_size`` (upstream vLLM)::

        W = max(min(max(8·max_model_len, 4·max_num_seqs·block), 64·1024), max_num_seqs·block)
    """
    mml = ctx.dep.max_model_len or ctx.spec.max_position_embeddings or 1
    seqs, block = max_seqs(ctx.dep), ctx.plan.block_size
    return max(min(max(8 * mml, 4 * seqs * block), MLA_CHUNKED_PREFILL_CAP), seqs * block)


def _dense_stage(ctx: TermContext, inter: int, t: int, gated: bool = True,
                 rebound: bool = False) -> list[tuple[str, int]]:
    """Dense MLP: gate_up [T, 2·I/tp] (up [T, I/tp] without a gate) stays alive (a local) while
    act [T, I/tp] and down run. ``rebound`` (an eager V0 forward whose MLP rebinds one name,
    ``memprof.core.terms.v0_eager_forward``): gate_up is freed once act exists, so the stage is
    the larger of gate_up + act and act + down out (+ the all-reduce's output)."""
    s, i_l = model_bytes(ctx), inter // ctx.dep.tp
    first = ("gate_up [T,2I]" if gated else "up [T,I]", t * (2 if gated else 1) * i_l * s)
    act = ("act [T,I]", t * i_l * s)
    down = _row_parallel_out(ctx, t, "down_proj")
    if not rebound:
        return [first, act, *down]
    if first[1] >= sum(b for _n, b in down):
        return [(f"{first[0]} (freed before down_proj)", first[1]), act]
    return [act, *down]


def _moe_dims(ctx: TermContext, layer: Layer, t: int) -> tuple[int, int, int]:
    """(M tokens entering the experts, local intermediate, local experts).

    DP>1: vLLM's default all2all backend gathers every DP rank's tokens before the experts
    (``allgather_reducescatter``), so M = T·dp. Without EP the experts' I is split TP×DP ways.
    """
    dep, mlp = ctx.dep, layer.mlp
    m = t * dep.dp if dep.dp > 1 else t
    if dep.enable_expert_parallel:
        i_l = mlp.moe_intermediate_size
        e_l = experts_on_rank(mlp.num_experts, dep.ep_size, ctx.coord.ep_rank or 0)
    else:
        i_l = mlp.moe_intermediate_size // dep.moe_tp_size
        e_l = mlp.num_experts
    return m, i_l, e_l


def _moe_workspace(ctx: TermContext, layer: Layer, t: int) -> int:
    """Fused-MoE modular-kernel workspaces (``TritonExperts.workspace_shapes``,
    vllm/model_executor/layers/fused_moe): workspace13 = (M, top_k, max(I_l, H)) and
    workspace2 = (M, top_k, max(2·I_l, H)) in the model dtype, M capped at
    ``VLLM_FUSED_MOE_CHUNK_SIZE``. They come from the ``WorkspaceManager`` (vLLM@52a31cc
    vllm/v1/worker/workspace.py WorkspaceManager), so
    they persist after the profile run and all MoE layers share the largest.
    Other expert backends (DeepGEMM, CUTLASS, FlashInfer, Marlin) size theirs differently.
    """
    s, h, k = model_bytes(ctx), ctx.spec.hidden_size, layer.mlp.top_k
    m, i_l, _e = _moe_dims(ctx, layer, t)
    mc = fused_moe_rows(m, ctx.dep.engine_version)
    return mc * k * max(i_l, h) * s + mc * k * max(2 * i_l, h) * s


def _marlin_moe_caches(ctx: TermContext, layer: Layer, t: int) -> int:
    """``fused_marlin_moe``'s per-call caches (``moe_caches_per_call``): intermediate_cache2
    [M·k, N] + intermediate_cache13 [M·k·max(2N, K)] in the model dtype, N the local
    intermediate, K the hidden size, M not chunked [approximation: the Marlin padding of N and
    K (``mxfp4_moe_layout``) is not applied]."""
    s, h, k = model_bytes(ctx), ctx.spec.hidden_size, layer.mlp.top_k
    m, i_l, _e = _moe_dims(ctx, layer, t)
    return m * k * i_l * s + m * k * max(2 * i_l, h) * s


def _caches_per_call(ctx: TermContext) -> bool:
    """``moe_caches_per_call`` for this rank's deployment, or a release whose Triton fused-MoE
    caches live per call (``V0_MOE_CACHES_PER_CALL``, ``moe_caches.TRITON_MOE_CACHES_PER_CALL``)."""
    return (moe_caches_per_call(ctx.spec.quant, ctx.gpu.arch, ctx.dep.engine_version)
            or _triton_moe_caches(ctx) is not None)


def _triton_moe_caches(ctx: TermContext) -> str | None:
    """The per-call Triton cache layout in force (``V0_MOE_CACHES_PER_CALL`` or
    ``memprof.core.terms.moe_caches.triton_caches_per_call``), if any."""
    r = rule_in_force(V0_MOE_CACHES_PER_CALL, ctx.dep.engine_version, ctx.dep.engine)
    if r is not None:
        return str(r.value)
    return triton_caches_per_call(ctx.dep, ctx.spec.quant, ctx.gpu.arch)


def _per_call_moe_caches(ctx: TermContext, layer: Layer, t: int) -> tuple[str, int]:
    """The MoE stage's per-call caches: Marlin's (``moe_caches_per_call``) or the Triton
    fused-MoE caches of ``V0_MOE_CACHES_PER_CALL`` (w13 of N = 2·I_l rows, M chunked)."""
    layout = _triton_moe_caches(ctx)
    if layout is None or moe_caches_per_call(ctx.spec.quant, ctx.gpu.arch,
                                             ctx.dep.engine_version):
        return "Marlin MoE caches (per call)", _marlin_moe_caches(ctx, layer, t)
    s, h, k = model_bytes(ctx), ctx.spec.hidden_size, layer.mlp.top_k
    m, i_l, _e = _moe_dims(ctx, layer, t)
    mc = fused_moe_rows(m, ctx.dep.engine_version)
    n = 2 * i_l
    if layout == "cache13":
        quant = fp8_input_quant_bytes(ctx.dep, ctx.spec.quant, ctx.gpu.arch, mc, k, h, i_l)
        return ("fused-MoE cache13 [M·k·max(N,H)] + cache2 [M·k,N/2] (per call)"
                + (" + fp8 input quant [M,H] + [M·k,N/2] with scales" if quant else ""),
                mc * k * max(n, h) * s + mc * k * i_l * s + quant)
    return ("fused-MoE caches [M,k,N] + [M·k,N/2] + [M,k,H] (per call)",
            mc * k * (n + i_l + h) * s)


def _moe_stage(ctx: TermContext, layer: Layer, t: int) -> list[tuple[str, int]]:
    """MoE layer (without its persistent workspace): router logits [M, E] fp32, top-k ids int32 and
    weights fp32 [M, k], the gathered hidden states [M, H] (DP>1), moe_align's sorted ids, the
    experts' output [M, H], the reduce-scatter back to [T, H] (DP>1); the shared expert's
    gate_up/act run before the routed experts and only its output [T, H] stays alive."""
    s, h, dep, mlp = model_bytes(ctx), ctx.spec.hidden_size, ctx.dep, layer.mlp
    m, _i, e_l = _moe_dims(ctx, layer, t)
    k = mlp.top_k
    parts: list[tuple[str, int]] = []
    if ctx.spec.hc_mult:  # DSv4 NormGateLinear: the MoE input is normed inside the gate
        parts.append(("normed x", t * h * s))
    parts += [("router logits fp32 [M,E]", m * mlp.num_experts * 4),
              ("top-k ids+weights", m * k * 8)]
    if dep.dp > 1:
        parts.append(("DP-gathered hidden [M,H]", m * h * s))
    sh_i = mlp.shared_intermediate_size // dep.tp
    shared_out = t * h * s if sh_i else 0
    shared_mlp = t * 3 * sh_i * s  # gate_up [T, 2I] + act [T, I]
    routed = ((m * k + e_l * (MOE_ALIGN_BLOCK_M - 1)) * 4  # sorted_token_ids int32
              + m * h * s  # experts' output [M, H]
              + (t * h * s if dep.dp > 1 else 0))  # reduce-scatter output
    if shared_mlp > routed:
        parts += [("shared expert gate_up+act", shared_mlp)]
    else:
        parts += [("align+experts out", routed)]
    if shared_out:
        parts.append(("shared expert out [T,H]", shared_out))
    if dep.tp > 1:
        parts.append(("all-reduce out [T,H]", t * h * s))
    return parts


def _v0_eager_mlp(ctx: TermContext, t: int,
                  decode: bool) -> tuple[list[tuple[str, int]], bool, str]:
    """Under vLLM V0's eager profile run (``V0_EAGER_LAYER_INPUT``,
    memprof/core/terms/v0_eager_forward.py): the layer loop's input [T, H], alive beside the
    MLP / MoE stage, whether the family's MLP frees gate_up before down_proj (its
    ``v0_mlp_gate_up`` rows) and the dense stage's label; elsewhere nothing, False, the plain
    label. Not for the decode live sets of the CUDA-graph pool (``decode``): V0's capture runs
    the same eager code, but the pool's replay (memprof/core/terms/cudagraph.py
    ``graph_pool_tensor_bytes``) allocates each stage whole and states itself good to 0-6 MiB;
    a [T, H] of a few MiB moves its segment packing by as much, either way [not applied]."""
    if decode or not v0_layer_input_held(ctx.dep):
        return [], False, "dense MLP"
    s, h = model_bytes(ctx), ctx.spec.hidden_size
    try:
        rows = family_row(ctx.spec.family).v0_mlp_gate_up
    except KeyError:  # a spec built without a family row
        rows = ()
    form, read = mlp_gate_up_form(rows, ctx.dep)
    label = f"dense MLP (V0 eager, gate_up {form}{'' if read else ' [assumed]'})"
    return [("layer input held by the layer loop [T,H]", t * h * s)], form == REBOUND, label


def _with_held(base: list[tuple[str, int]],
               held: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The stage's base with the held layer input in the order the tensors were made: the
    residual (the oldest), the layer input (the previous layer's output), then the MLP input
    (this layer's attention output); ``base`` as is without one."""
    return base[:1] + held + base[1:] if held else base


def _mhc_stage(ctx: TermContext, t: int) -> list[tuple[str, int]]:
    """DeepSeek-V4 ``mhc_fused_post_pre``: the old and the new residual [T, hc, H] are both live,
    with the sublayer output and the next layer input [T, H] (deepseek_v4.py @023da1fc)."""
    s, h, hc = model_bytes(ctx), ctx.spec.hidden_size, ctx.spec.hc_mult
    return [("residual old+new [T,hc,H]", 2 * t * hc * h * s), ("x in+out [T,H]", 2 * t * h * s),
            ("mHC mixes fp32", 2 * t * (hc + hc * hc) * 4)]


def activation_stages(ctx: TermContext, *, tokens: int | None = None, rows: int | None = None,
                      decode: bool = False) -> list[Stage]:
    """Live sets of one forward on this rank, one per distinct (attention, MLP) layer type, plus the
    embedding (first PP stage) and the sampler (last PP stage, when ``rows`` > 0).

    ``tokens`` defaults to the profile run's T (``max_num_batched_tokens``); ``rows`` to
    R = min(max_num_seqs, T); ``decode=True`` sizes a decode step of ``tokens`` sequences (CUDA
    graphs) instead of the profile run. The persistent MoE workspace is not in these sets (see
    ``moe_workspace_bytes``).
    """
    return _activation_stages(ctx, tokens=tokens, rows=rows, decode=decode)


def _activation_stages(ctx: TermContext, *, tokens: int | None = None, rows: int | None = None,
                       decode: bool = False, moe_caches: bool = False) -> list[Stage]:
    """``activation_stages`` computed; ``moe_caches``: the MoE stages hold the backend's per-call
    caches (``moe_caches_per_call``)."""
    dep, spec = ctx.dep, ctx.spec
    t = profile_tokens(dep) if tokens is None else tokens
    r = min(max_seqs(dep), t) if rows is None else rows
    s, h = model_bytes(ctx), spec.hidden_size
    base = _base(ctx, t)
    stages: list[Stage] = []
    if not decode:  # an EAGLE-3 head's aux states, held through the target's last layers
        base = base + target_aux_parts(ctx, t)
    if is_first_stage(ctx):
        emb = [("embedding out [T,H]", t * h * s)]
        if dep.tp > 1:  # VocabParallelEmbedding: masked partial lookup, then all-reduce
            emb.append(("all-reduce out [T,H]", t * h * s))
        if spec.hc_mult:
            emb.append(("hc repeat [T,hc,H]", t * spec.hc_mult * h * s))
        stages.append(Stage("embedding", tuple(emb)))
    eager = rule_in_force(V0_MLA_PREFILL_PROFILE, dep.engine_version, dep.engine)
    held, rebound, mlp_label = _v0_eager_mlp(ctx, t, decode)
    query = ActQuery(t=t, s=s, tp=dep.tp, decode=decode,
                     chunked_prefill_rows=lambda: mla_chunked_prefill_rows(ctx),
                     eager_prefill="" if eager is None else str(eager.value), hidden=h)
    # the MTP layer drafts in the profile run beside what the drafter holds (terms/mtp_drafter.py)
    mtp_held = [] if decode else mtp_layer_held(ctx, t)
    for layer, _n in rank_layer_kinds(spec, dep, ctx.coord):
        a, mlp = layer.attention, layer.mlp
        lbase = base + mtp_held if layer.is_mtp else base
        attn = kind_of(a).activation(a, query)
        stages.append(Stage(f"attention ({attn.label})",
                            tuple(lbase + attn.parts + _row_parallel_out(ctx, t, attn.out_proj))))
        stages += [Stage(label, tuple(lbase + parts)) for label, parts in attn.extra]
        if mlp.kind == "moe":
            caches = [_per_call_moe_caches(ctx, layer, t)] if moe_caches else []
            stages.append(Stage("MoE", tuple(_with_held(lbase, held) + _moe_stage(ctx, layer, t)
                                             + caches)))
        elif mlp.kind == "dense":  # "none": a hybrid layer that is only a token mixer
            stages.append(Stage(mlp_label, tuple(
                _with_held(lbase, held) + _dense_stage(ctx, mlp.intermediate_size, t, mlp.gated,
                                                       rebound))))
    bnb = bnb_dequant_stage(ctx)  # a bitsandbytes linear's dequantised shard (bnb_linear.py)
    if bnb is not None:
        # the largest shard is an MLP one: live beside the layer input V0 keeps (v0_eager_forward)
        stages.append(Stage(bnb.name, tuple(_with_held(base, held) + list(bnb.parts))))
    # AWQ's dense path, GPTQ's temp_dq: the dequantised weight (terms/dequant_linear.py)
    dq = dequant_stage(ctx, t, _with_held(base, held))
    if dq is not None:
        stages.append(dq)
    if spec.hc_mult and rank_layers(spec, dep, ctx.coord):
        stages.append(Stage("mHC post/pre", tuple(_mhc_stage(ctx, t))))
    if not decode:  # an EAGLE head drafts once over the profile batch (terms/draft_head.py)
        stages += drafter_profile_stages(ctx, t) + mtp_profile_stages(ctx, t)
    if r > 0 and samples_in_profile_run(dep, ctx.coord) and convert_of(dep) is not None:
        # the pooling runner: _dummy_pooler_run instead of the sampler (engines/vllm_pooling.py),
        # Model Runner V2's PoolingRunner where V2 runs the model
        v2 = runs_v2(ctx)
        head = score_head(spec.raw, spec.architecture, convert_of(dep), dep.engine_version or "")
        stages.append(Stage("pooler (pooling runner" + (", Model Runner V2)" if v2 else ")"),
                            tuple(pooler_parts(dep.engine_version or "", tokens=t, rows=r,
                                               hidden=h, model_itemsize=s, v2=v2,
                                               labels=None if head is None else head[0]))))
    elif r > 0 and samples_in_profile_run(dep, ctx.coord):
        stages.append(v0_sampler_stage(ctx, t, r) if v0_driver_samples(dep.engine,
                                                                        dep.engine_version)
                      else sampler_stage(ctx, t, r))
    return list(dict.fromkeys(stages))  # layer types that differ only in routing share a stage


def sampler_stage(ctx: TermContext, t: int, r: int) -> Stage:
    """The sampler warm-up on R rows (vLLM@52a31cc gpu_model_runner.py profile_run /
    _dummy_sampler_run): the hidden states still alive (``V1_SAMPLER_HIDDEN``: [R, H] in
    0.8.x, 2 × [R, H] in 0.9.0-0.9.1, [T, H] + 2 × [R, H] from 0.9.2); logits [R, V] in the
    model dtype (with TP>1 the local shard [R, V/tp] is already freed: ``LOGITS_SHARD_FREED``);
    then the fp32 copy and top-k/top-p — FlashInfer's 12·R·V where the deployment states
    FlashInfer samples (``V1_FLASHINFER_SAMPLER``), else the torch path: 12·R·V + the
    Triton row buffer when R ≥ 8, 22·R·V (sort) below (see ``SAMPLER_*``); before vLLM 0.17.0
    the sort on every row count, with an out-of-place scatter (``V1_TORCH_SORT_SAMPLER``). With
    speculative decoding the rejection sampler's warm-up (``V1_REJECTION_WARMUP``: one dummy draft
    token a request, so 2·R rows whatever k) — logits [2R, V] fp32 + probs, plus the draft rows
    in the model dtype — replaces it when larger [approximation: the bonus pass runs the
    sampler's top-k/top-p on R of those rows]."""
    s, h, dep = model_bytes(ctx), ctx.spec.hidden_size, ctx.dep
    head, v = lora_logits_widths(ctx)  # (V, V) without LoRA's extra vocabulary
    wide = "" if head == ctx.spec.vocab_size else f" (LoRA: lm_head {head}, sampled {v})"
    parts = [*_sampler_hidden(dep, t, r, h * s), (f"logits [R,V]{wide}", r * head * s)]
    if dep.tp > 1 and rule_in_force(LOGITS_SHARD_FREED, dep.engine_version, dep.engine) is None:
        parts.append(("local logits shard [R,V/tp]", r * cdiv(head, dep.tp) * s))
    sort_scatter = v1_sort_sampler_bytes_per_elem(dep.engine, dep.engine_version)
    flashinfer = flashinfer_sampler_bytes_per_elem(dep)
    if flashinfer is not None:  # V1_FLASHINFER_SAMPLER: FlashInfer samples, no sort
        topkp = [(f"fp32 logits + FlashInfer's top-k output + probs {flashinfer}·R·V "
                  "(FlashInfer sampler)", r * v * flashinfer)]
    elif sort_scatter is not None:  # V1_TORCH_SORT_SAMPLER: the sort on every row count
        at_sort = r * v * (SAMPLER_FP32_BYTES_PER_ELEM + 4 + 8) + sort_temporaries_bytes(r, v)
        at_scatter = r * v * sort_scatter
        what = ("fp32 logits + sort + its temporaries" if at_sort >= at_scatter
                else f"fp32 logits + sort/softmax/masks/scatter {sort_scatter}·R·V")
        topkp = [(f"{what} (torch top-k/top-p; assumes no FlashInfer sampler installed)",
                  max(at_sort, at_scatter))]
    elif r >= SAMPLER_TRITON_MIN_ROWS:
        rows, units = sampler_triton_buffer_rows(ctx.gpu, r)
        topkp = [("fp32 logits + probs + noise 12·R·V",
                  r * v * (SAMPLER_FP32_BYTES_PER_ELEM + SAMPLER_TRITON_BYTES_PER_ELEM)),
                 (f"Triton top-k/p buffer [{rows},V] fp32{units}", rows * v * 4)]
    else:  # the larger of the sort moment (with its temporaries) and the masks' moment
        at_sort = r * v * (SAMPLER_FP32_BYTES_PER_ELEM + 4 + 8) + sort_temporaries_bytes(r, v)
        at_masks = r * v * (SAMPLER_FP32_BYTES_PER_ELEM + SAMPLER_SORT_BYTES_PER_ELEM)
        topkp = [("fp32 logits + sort + its temporaries" if at_sort > at_masks
                  else "fp32 logits + sort/softmax/masks 22·R·V", max(at_sort, at_masks))]
    drafts = (value_at(V1_REJECTION_WARMUP, dep.engine_version, 0, dep.engine)
              if dep.num_speculative_tokens else 0)
    spec_rows = r * (1 + int(drafts))  # type: ignore[call-overload]
    reject = spec_rows * v * (4 + 4) + (spec_rows - r) * v * s if drafts else 0
    if reject > sum(b for _n, b in topkp):
        parts.append((f"rejection sampler [{spec_rows},V] fp32+probs", reject))
    else:
        parts += topkp
    return Stage("sampler", tuple(parts))


def v2_greedy_sampler_stage(ctx: TermContext, t: int, r: int) -> Stage:
    """Model Runner V2's ``_dummy_sampler_run`` on R rows (0.23.0-0.28.x v1/worker/gpu/
    model_runner.py; terms/runner_v2_profile.py): the hidden states [T, H] and [R, H] still
    alive, the logits [R, V] in the model dtype and ``gumbel_sample``'s argmax buffers
    (``vllm_runner.greedy_sampler_bytes``): every slot keeps the sampling defaults, so there is
    no fp32 copy and no top-k / top-p sort."""
    s, h = model_bytes(ctx), ctx.spec.hidden_size
    head, _v = lora_logits_widths(ctx)  # (V, V) without LoRA's extra vocabulary
    return Stage("sampler (Model Runner V2, greedy)", (
        ("hidden [T,H] + last hidden [R,H]", (t + r) * h * s),
        ("logits [R,V] + gumbel argmax / max [R,cdiv(V,1024)]",
         greedy_sampler_bytes(r, head, s))))


def v2_warmup_sampler_stage(ctx: TermContext, t: int, r: int) -> Stage:
    """Model Runner V2's second sampler pass (0.33.0 on, ``vllm_runner.V2_SAMPLER_WARMUP_PASS``):
    ``_dummy_sampler_run`` runs the sampler again on the same logits with
    ``SamplingParams.for_sampler_warmup()`` on every row; the hidden states [T, H] and [R, H]
    still alive, then ``vllm_runner.warmup_sampler_tensors``: FlashInfer's fused sampler where
    the card takes it (``vllm_runner.v2_flashinfer_samples``: a CUDA card of compute capability
    8.0-12.1 with more than 16 SMs, ``VLLM_USE_FLASHINFER_SAMPLER`` not 0), else the Triton
    top-k / top-p kernel and ``gumbel_sample``. Larger than the greedy pass in every case, so it
    is the sampler's stage."""
    s, h, gpu = model_bytes(ctx), ctx.spec.hidden_size, ctx.gpu
    head, _v = lora_logits_widths(ctx)  # (V, V) without LoRA's extra vocabulary
    cc, units = arch_cc(gpu.arch), gpu.sm_count
    flashinfer = v2_warmup_flashinfer(ctx)
    rows, how = sampler_triton_buffer_rows(gpu, r)
    if flashinfer:
        unknown = [what for what, val in (("compute capability", cc), ("SM count", units))
                   if val is None]
        how = (f" [assumed: {gpu.name}'s {' and '.join(unknown)} not in the catalog; "
               "FlashInfer samples on a CUDA card of 8.0-12.1 with more than 16 SMs]"
               if unknown else "")
        how += " (FlashInfer sampler; assumes it JIT-compiles for the card)"
    tensors = warmup_sampler_tensors(r, head, s, flashinfer=flashinfer,
                                     buffer_rows=0 if flashinfer else rows)
    return Stage("sampler (Model Runner V2, warm-up pass)", (
        ("hidden [T,H] + last hidden [R,H]", (t + r) * h * s),
        *((name + how if name.startswith(("FlashInfer top-k", "Triton")) else name, b)
          for name, b in tensors)))


def v2_warmup_flashinfer(ctx: TermContext) -> bool:
    """Does the warm-up pass sample with FlashInfer on this rank's card
    (``vllm_runner.v2_flashinfer_samples``)?"""
    gpu = ctx.gpu
    return v2_flashinfer_samples(arch_cc(gpu.arch), gpu.sm_count, rocm=gpu.is_rocm,
                                 env=ctx.dep.vllm_use_flashinfer_sampler)


def v2_warmup_pass(ctx: TermContext) -> bool:
    """Does the release's Model Runner V2 profile run add the warm-up sampler pass
    (``vllm_runner.V2_SAMPLER_WARMUP_PASS``, 0.33.0 on)?"""
    release, _ = split_generation(ctx.dep.engine_version or "")
    return bool(value_at(V2_SAMPLER_WARMUP_PASS, release, default=True))


def v2_sampler_stage(ctx: TermContext, t: int, r: int) -> Stage:
    """Model Runner V2's profile-run sampler: the greedy pass (``v2_greedy_sampler_stage``)
    through 0.32.x, the warm-up pass (``v2_warmup_sampler_stage``) from 0.33.0."""
    if v2_warmup_pass(ctx):
        return v2_warmup_sampler_stage(ctx, t, r)
    return v2_greedy_sampler_stage(ctx, t, r)


V2_SAMPLER_STATE_ROW = "sampler state (Model Runner V2)"


def v2_sampler_state(ctx: TermContext) -> Component:
    """Model Runner V2's persistent sampler state on the last PP stage
    (``vllm_runner.sampler_state_bytes``: the ``Sampler``'s penalties, logit-bias, bad-words and
    logprob-token-ids states, ``StructuredOutputsWorker``), made
    in ``load_model`` after the weights' figure: in the budget from 0.27.0 (``total_consumed``),
    in use beyond it before (``vllm_runner.V2_SAMPLER_STATE_CHARGED``)."""
    dep = ctx.dep
    seqs, vocab = max_seqs(dep), ctx.spec.vocab_size
    state = sampler_state_bytes(seqs, vocab, 1 + dep.num_speculative_tokens)
    release, _ = split_generation(dep.engine_version or "")
    charged = bool(value_at(V2_SAMPLER_STATE_CHARGED, release, default=False))
    return Component(
        name=V2_SAMPLER_STATE_ROW, category="activation", bytes=state,
        where="budget" if charged else "runtime", profiled=charged,
        formula=f"output_bin_counts [{seqs}, {vocab}] int32 + prompt_bin_mask and "
        f"grammar_bitmask [{seqs}, cdiv({vocab}, 32)] int32 + the logit-bias, bad-words and "
        f"logprob-token-ids states ({seqs} × 17,924 B) + logits_indices; "
        + ("charged by the budget line's total_consumed (0.27.0 on)" if charged
           else "made after the weights' figure and before the profile window: in use, not "
           "charged (before 0.27.0)"))


def _sampler_hidden(dep: Deployment, t: int, r: int, row_bytes: int) -> list[tuple[str, int]]:
    """The hidden states alive at the sampler warm-up (``V1_SAMPLER_HIDDEN``): [T, H] and [R, H]
    tensors of ``row_bytes`` a row; [T, H] where no row holds (another engine)."""
    rule = rule_in_force(V1_SAMPLER_HIDDEN, dep.engine_version, dep.engine)
    if rule is None:
        return [("last hidden [T,H]", t * row_bytes)]
    n_t, n_r = (int(n) for n in rule.value)  # type: ignore[attr-defined]
    parts = [("hidden [T,H]", t * row_bytes)] if n_t else []
    what = "last hidden [R,H]" + (" + its rand_like" if n_r == 2 else "")
    return [*parts, (what, n_r * r * row_bytes)]


def v0_sampler_stage(ctx: TermContext, t: int, r: int) -> Stage:
    """The V0 driver worker's sampler in the profile run (``V0_DRIVER_SAMPLER``): the last hidden
    states [T, H] and the gathered logits [R, V] in the model dtype (held by the caller), then
    the larger of the sort moment (fp32 copy + sorted values and int64 indices + the sort's
    temporaries) and the scatter moment (30·R·V; 38·R·V before 0.6.2, ``V0_SAMPLER_RESORT``);
    with fp32 logits ``.to(float)`` copies nothing."""
    s, h = model_bytes(ctx), ctx.spec.hidden_size
    head, v = lora_logits_widths(ctx)  # (V, V) without LoRA's extra vocabulary
    copy = 0 if s == 4 else SAMPLER_FP32_BYTES_PER_ELEM
    at_sort = (copy + 4 + 8) * r * v + sort_temporaries_bytes(r, v)
    per_elem = value_at(V0_SAMPLER_RESORT, ctx.dep.engine_version,
                        V0_SAMPLER_SCATTER_BYTES_PER_ELEM)
    at_scatter = (int(per_elem) - 4 + copy) * r * v  # type: ignore[call-overload]
    label = ("sort: fp32 copy + values + int64 indices + temporaries" if at_sort >= at_scatter
             else "top-k/top-p: fp32 copy + sort + masks + softmax + cumsum + scatter")
    return Stage("sampler (V0 driver)", (("last hidden [T,H]", t * h * s),
                                         ("gathered logits [R,V]", r * head * s),
                                         (label, max(at_sort, at_scatter))))


def moe_workspace_bytes(ctx: TermContext, tokens: int | None = None) -> int:
    """The largest fused-MoE workspace of the rank's MoE layers (0 for dense models).

    It is a ``WorkspaceManager`` caller: the scratch catalog should count its own workspace
    callers as growth above this one (one buffer, max over callers, vLLM@52a31cc
    vllm/v1/worker/workspace.py WorkspaceManager).
    """
    t = profile_tokens(ctx.dep) if tokens is None else tokens
    # _moe_workspace reads only the layer's MLP: one layer of each kind stands for its kind
    return max((_moe_workspace(ctx, layer, t)
                for layer, _n in rank_layer_kinds(ctx.spec, ctx.dep, ctx.coord)
                if layer.mlp.kind == "moe"), default=0)


def cublas_workspace_bytes(gpu: GPU) -> int:
    """One cuBLAS workspace (PyTorch aten/src/ATen/cuda/CublasHandlePool.cpp): 32 MiB on compute
    capability 9.x-12.x, 8 MiB + 128 KiB
    before; ROCm 128 MiB on gfx942/gfx950/gfx1250, else 32 MiB. Unknown GPUs get 32 MiB."""
    arch = gpu.arch
    if gpu.is_rocm:
        if arch.startswith(("gfx942", "gfx950", "gfx1250")):
            return CUBLAS_WORKSPACE_ROCM_MI300_PLUS
        return CUBLAS_WORKSPACE_ROCM
    if arch.startswith(("sm8", "sm7", "sm6")):
        return CUBLAS_WORKSPACE_OLDER
    return CUBLAS_WORKSPACE_HOPPER_PLUS


def cublas_streams(ctx: TermContext) -> int:
    """Streams that run cuBLAS GEMMs in the profile run: the main one, plus the attention kind's
    aux streams on CUDA (not ROCm; ``AttentionKind.aux_gemm_streams``). Each (handle, stream)
    pair gets its own workspace (CublasHandlePool.cpp)."""
    layers = ctx.spec.layers
    if layers and not ctx.gpu.is_rocm:
        return 1 + kind_of(layers[0].attention).aux_gemm_streams
    return 1


def _profile_shape(ctx: TermContext) -> tuple[int, int, str]:
    """(T, R, note) of the profile forward: ``max_num_batched_tokens`` and ``min(max_num_seqs,
    T)``; under vLLM V0 a multimodal model's dummy sequences set both where its family's
    ``early_profile`` rows were read (``memprof/core/models/multimodal.py`` ``v0_dummy``: fewer
    sequences, each as long as its images' and videos' placeholders when they do not fit its
    share), with a note saying so."""
    dep = ctx.dep
    t = profile_tokens(dep)
    r = min(max_seqs(dep), t)
    tower = ctx.spec.vision
    if tower is None or value_at(tower.early_profile, dep.engine_version, None,
                                 engine=dep.engine) is None:  # (vLLM's rows: SGLang none)
        return t, r, ""
    from memprof.core.models.multimodal import v0_dummy  # a text model never loads it

    d = v0_dummy(tower, limit_text=dep.limit_mm_per_prompt, kwargs_text=dep.mm_processor_kwargs,
                 max_model_len=dep.max_model_len or ctx.spec.max_position_embeddings or t,
                 max_num_batched_tokens=t, max_num_seqs=max_seqs(dep),
                 version=dep.engine_version)
    if d is None:
        return t, r, ""
    return d.tokens, min(d.seqs, d.tokens), (
        f" (V0's multimodal dummy: {d.seqs} sequence{'s' if d.seqs > 1 else ''} of {d.tokens} "
        f"tokens in all, max_mm_tokens {d.mm_tokens}; V0_MM_DUMMY)")


def activation_terms(ctx: TermContext) -> list[Component]:
    """The torch peak of vLLM's profile run (``torch_peak_increase``, vLLM@52a31cc gpu_worker.py
    determine_available_memory; vLLM@52a31cc gpu_model_runner.py profile_run / _dummy_sampler_run).

    ``_dummy_run(T = max_num_batched_tokens)`` runs eager with attention skipped, on
    ``min(T, max_num_seqs)`` requests; then, on the last PP stage only, the sampler on
    R = min(max_num_seqs, T) rows. The peak is::

        peak = max over stages (embedding, each layer type's attention and MLP/MoE, DSv4 mHC,
                                the DSv4 C4 sparse indexer op, sampler) of the tensors live there
             + the fused-MoE WorkspaceManager buffer (persistent from the first MoE layer on)
             + cuBLAS workspace × streams

    Where the MoE caches live per call (Marlin's ``moe_caches_per_call``; the Triton caches of
    ``V0_MOE_CACHES_PER_CALL``) they join the MoE stage instead of the workspace term; under V0
    (``V0_MLA_PREFILL_PROFILE``) the MLA attention stage is the full prefill's.

    Each stage = residual + layer input (DSv4: [T, hc, H] + [T, H]) + the stage's outputs (see
    the ``_*_stage`` docstrings). With DP each rank runs T tokens; with DP>1 MoE experts see T·dp.
    Returns three components (category "activation", where "budget", profiled): the peak of the
    non-persistent tensors, the MoE workspace, the cuBLAS workspace. The DSv4 prefill gather
    workspace and other attention workspaces belong to ``memprof.core.scratch``.
    """
    t, r, mm = _profile_shape(ctx)
    per_call = _caches_per_call(ctx)
    own = v2_own_profile(ctx)
    if own is None or convert_of(ctx.dep) is not None:
        stages = _activation_stages(ctx, tokens=t, rows=r, moe_caches=per_call)
    else:  # Model Runner V2's own profile run (terms/runner_v2_profile.py)
        stages = _activation_stages(ctx, tokens=t, rows=0, moe_caches=per_call)
        if r > 0 and samples_in_profile_run(ctx.dep, ctx.coord):
            stages.append(v2_sampler_stage(ctx, t, r))
    cold = cold_compile_stage(ctx, t)  # a cold compile's autotuning (terms/cold_compile.py)
    if cold is not None:
        stages.append(cold)
    top = max(stages, key=lambda st: st.bytes)
    v2 = "" if own is None else f"; Model Runner V2's own profile run ({own})"
    comps = [Component(name="activation peak (profile run)", category="activation",
                       bytes=top.bytes, where="budget", profiled=True,
                       formula=f"T={t}, R={r}{mm}; max over {len(stages)} stages = "
                       f"{top.describe()}" + v2 + pinned_copy_note(ctx))]
    if (own is not None and samples_in_profile_run(ctx.dep, ctx.coord)
            and convert_of(ctx.dep) is None):  # V2 builds no Sampler for a pooling model
        comps.append(v2_sampler_state(ctx))
    # V0 sizes them by the dummy sequences' shares (batch_size), not their multimodal length
    inter = pp_intermediate_tensors_bytes(ctx, profile_tokens(ctx.dep))
    if inter:
        comps.append(Component(
            name="PP intermediate tensors (profile run)", category="activation", bytes=inter,
            where="budget", profiled=True,
            formula=f"hidden_states + residual, 2·T·H·s = 2·{t}·{ctx.spec.hidden_size}·"
            f"{model_bytes(ctx)} B (a stage after the first; make_empty_intermediate_tensors, "
            "[approximation] for a family whose vLLM class keeps other keys)"))
    ws = 0 if per_call else moe_workspace_bytes(ctx, t)
    if ws:
        comps.append(Component(
            name="fused-MoE workspace (WorkspaceManager)", category="activation", bytes=ws,
            where="budget", profiled=True,
            formula=(f"min(M,{chunk})" if (chunk := fused_moe_chunk(ctx.dep.engine_version))
                     else "M") + "·top_k·(max(I,H) + max(2I,H))·s, M = T·dp"
            + ("" if chunk else " (not chunked from 0.18.0)") + "; "
            "persistent, shared by all MoE layers"))
    n = cublas_streams(ctx)
    each = cublas_workspace_bytes(ctx.gpu)
    comps.append(Component(
        name="cuBLAS workspace", category="activation", bytes=n * each, count=n, where="budget",
        profiled=True,
        formula=f"{n} stream(s) × {fmt_bytes(each)} ({ctx.gpu.arch}); torch-allocated, in the "
        "profile's torch peak (PyTorch aten/src/ATen/cuda/CublasHandlePool.cpp)"))
    return comps
