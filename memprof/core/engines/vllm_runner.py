"""vLLM's Model Runner V2 (``vllm/v1/worker/gpu/``): which deployments each release runs on it,
and the profile-run and budget terms in which it differs from the V1 runner
(``v1/worker/gpu_model_runner.py``) whose terms memprof charges.

Which runner (``VllmConfig.use_v2_model_runner``, config/vllm.py, read in the 0.22.0, 0.22.1,
0.23.0, 0.24.0, 0.25.0, 0.26.0, 0.27.1, 0.28.0 and 0.29.0 wheels): ``VLLM_USE_V2_MODEL_RUNNER``
(envs.py, unset by default) decides when it is set; otherwise ``_is_default_v2_model_runner_model``
by release (``V2_DEFAULT``), after which a feature V2 lacks
(``_get_v2_model_runner_unsupported_features``: sequence parallelism, dual batch overlap, prompt
embeds, custom logits processors, ...) sends the model back to V1. memprof models one of those
features, n-gram speculation to 0.31.x (``V2_FALLBACK_SPECULATIVE``); the others do not enter
here.
Pipeline parallelism is not one of them: read in the 0.23.0, 0.24.0, 0.26.0, 0.27.1, 0.29.0 and
0.32.0 wheels, the list names PP only with the
``external_launcher`` (torchrun) executor (from 0.24.0) and with EAGLE3, and V2's ``GPUModelRunner``
runs PP stages itself (``use_pp``, ``PPHandler``), so an ``mp`` or ``ray`` PP deployment runs V2 on
every stage (row 903's log prints V2's ``model_runner.py:329`` load line on both). 0.32.0's
"pipeline parallelism with async scheduling" is on the V1 runner's list
(``_get_v1_model_runner_unsupported_features``), an error when V1 is forced, not a fallback.

Where V2 runs, its start-up differs from V1's in three terms (read in the 0.27.1 wheel; the same
code in 0.23.0-0.28.0):

1. ``GPUModelRunner.profile_cudagraph_memory`` returns 0 (0.23.0-0.28.0; 0.29.0 estimates the
   graphs): ``determine_available_memory`` charges no CUDA-graph estimate (``V2_GRAPH_ESTIMATE``).
2. ``_dummy_sampler_run`` adds no request: every slot keeps ``SamplingStates``' defaults
   (temperature 0, top_k = V, top_p = 1), so ``Sampler._requires_logits_processing`` is False:
   no fp32 copy, no top-k/top-p sort; ``gumbel_sample`` reads the model-dtype logits and keeps
   ``local_argmax`` int64 and ``local_max`` fp32 of [R, cdiv(V, 1024)] (``greedy_sampler_bytes``).
   0.33.0 adds a second pass with warm-up sampling settings (``V2_SAMPLER_WARMUP_PASS``,
   ``warmup_sampler_tensors``), the larger of the two.
3. ``load_model`` builds the ``Sampler`` on the last PP stage: ``PenaltiesState.output_bin_counts``
   [max_num_seqs, V] int32 and ``prompt_bin_mask`` [max_num_seqs, cdiv(V, 32)] int32, the
   logit-bias, bad-words and logprob-token-ids states (17,924 B a request), and
   ``StructuredOutputsWorker`` a ``grammar_bitmask`` [max_num_seqs × decode_query_len, cdiv(V, 32)]
   int32 and ``logits_indices`` [max_num_seqs × decode_query_len] int32 (``sampler_state_bytes``).
   They are allocated after the weights' figure and before the profile window, so the budget line
   charges them only from 0.27.0, whose ``memory_profiling`` charges ``total_consumed`` (the drop
   in free memory since the init snapshot); 0.26.0's charges weights + torch peak increase +
   non-torch increase, which does not see them (``V2_SAMPLER_STATE_CHARGED``).

Where nothing is compiled in the profile window (``--enforce-eager``, or ``--compile-cache warm``:
a restart on the compile cache a first start saved), memprof charges these three terms
(memprof/core/terms/runner_v2_profile.py): the published warm logs (rows 1640-1645, 1648) land
within 0.1-1.5%, the eager row 1215 within 0.2%. On a cold start (from 0.20.0) memprof charges
them too, with the cold compile's autotuning example arguments beside (a copy of the embedding
table: memprof/core/terms/cold_compile.py, the charge the next sentences describe; the history
below is what was ruled out before it was found). With these three terms alone the
published compiled single-GPU V2 logs of tests/data/published.json (rows 310, 901, 903, 907-909,
1104, 1205-1214) keep 0.5-1.6 GiB a GPU less KV memory than the three terms leave (0.75-0.81 GiB
for Llama-3-8B at 0.24.0 and 0.26.0 on A40 and A100 cards: fixed by the model, not the card), a
charge not found in V2's runner (row 1104 puts it in the profile run's torch peak, with a cold
compile in the window: below); V1's terms reproduce them, within 0.2% for the twelve Llama-3-8B
logs. The shortfall follows the tensor-parallel size and the compiled mode, not the runner: every
such log is TP1 (row 903 and the V1 MoE row 906 are TP1 pipelines; row 906 keeps about 2.5 GiB a
stage less than memprof's V1 terms leave); the TP2 / TP4 logs of the same host and release (row
902 under V2, rows 904 / 905 under V1) are within 0.4 GiB, and the one eager V2 log (row 1215,
--enforce-eager, the session and card of row 1211) keeps none beyond V2's own terms (-0.04 GiB).
``v2_terms`` gives the three figures, which the estimate's note states. The per-release table of
V2's terms (0.23.0-0.33.0, with every allocation's shape) and the rows by hand:
docs/model-runner-v2.md.

The TP1 shortfall: searched for, not found, so no rule charges it. Read in the 0.26.0 and 0.27.1
wheels against 0.20.0, and ruled out:

- Weight loading (model_executor/model_loader/default_loader.py, base_loader.py
  ``BaseModelLoader.load_model``, weight_utils.py ``safetensors_weights_iterator``): the same at
  every TP size. Tensors are read on the CPU (``safe_open(...).get_tensor``; the "prefetch"
  strategy only warms the page cache from a thread), narrowed on the CPU by each
  ``weight_loader`` (a no-op at TP1) and copied into parameters made under ``with
  target_device``; there is no GPU staging copy and no pinned buffer. Loaders that read onto the
  GPU (fastsafetensors, instanttensor, the Run:ai streamer when distributed) run only when asked.
- What the load leaves in torch's cache: ``Worker.load_model`` (v1/worker/gpu_worker.py) sets
  ``max_split_size_mb:20`` for the load (read in 0.22.0-0.27.1; not in 0.20.0), whatever the TP
  size, and ``memory_profiling`` (utils/mem_utils.py) runs ``gc.collect`` and ``empty_cache``
  before both of its snapshots. Freed load temporaries (``process_weights_after_loading``'s new
  layouts, fp8 block-scale processing) are given back. Only free blocks inside segments that still
  hold a tensor stay. memprof.alloc's replay of the load (``memprof.core.terms.reserved_charge``,
  without the 20 MiB split limit; on an H100) puts those at 0.7 MiB for Qwen3-32B and 17 MiB for
  Llama-3.1-8B at TP1 and TP2 alike, and at 55 / 166 / 103 MiB for Qwen2.5-7B bf16 / GPTQ / FP8 at
  TP1 against 103 / 56 / 258 MiB at TP2 (tests/test_tp1_shortfall_ruled_out.py): under a third of
  the smallest shortfall, and larger at TP1 only for GPTQ.
- The budget line: 0.26.0 charges weights + torch peak increase + non-torch increase, as
  0.19 / 0.20 do. 0.27.0 charges ``total_consumed + transient_peak_headroom``. The two differ
  by those held free blocks plus what is allocated after the init snapshot, outside the weights
  figure and before the profile run (V2's sampler state: ``V2_SAMPLER_STATE_CHARGED``; the
  runner's constructor buffers: memprof/core/terms/runner_buffers.py). The
  frontend's multimodal reservation (multimodal/gpu_ipc_memory.py ``reserve_mm_ipc_gpu_memory``:
  none without a multimodal config) and the startup plan
  (``VLLM_ENABLE_STARTUP_PLAN``, off by default) do not apply to these rows. None of it depends
  on the TP size.
- Code keyed on the TP size (config/vllm.py, config/parallel.py): sequence parallelism and
  ``fuse_gemm_comms`` are off at every optimisation level (``IS_DENSE`` is False) and refused at
  TP1. The all-reduce + RMSNorm fusion needs TP>1 on sm90 / sm100 with FlashInfer, and the
  RTX PRO 6000 rows are sm120. Async scheduling is on for the "uni" and "mp" executors alike.
  World size 1 runs the worker inside the engine-core process ("uni"), but the PP rows 903 and
  906 (world size 2 and 4, "mp") fall short too. ``VocabParallelEmbedding``'s masking is TP>1
  only and transient.
- The runners: V2's ``profile_run`` / ``_dummy_run`` (v1/worker/gpu/model_runner.py) do
  nothing by TP size. V1's ``profile_cudagraph_memory`` (v1/worker/gpu_model_runner.py) runs
  after ``memory_profiling`` has taken its last snapshot, and its figure is charged on its own
  (row 904 logs it).

The rows also argue against one TP1 mechanism. Rows 907 / 908 / 909 share the TP1 layout,
the shapes, the host and the release, and ran minutes apart. They log 1.50 / 0.61 / 0.79 GiB
above V2's terms, and 0.95 / 0.06 / 0.24 GiB above the V1 terms memprof charges. A charge keyed
on the parallel layout would be the same for all three. A charge in proportion to the weights
(about 10% here) does not fit row 901 (2.7% of 61 GiB) or row 903's first stage (5%). And the TP>1
control matches only by compensation. Row 904's own lines give 1.70 GiB persisting beyond the
weights, where memprof has 1.16 (fused-MoE workspace 1.00, cuBLAS 0.03, non-torch 0.06, the
V1 runner's constructor buffers 0.06: memprof/core/terms/runner_buffers.py); a
0.76 GiB "peak activation", which 0.27.1 prints as the transient peak plus the CUDA-graph
estimate it charges (v1/worker/gpu_worker.py ``determine_available_memory``), where memprof has
0.35 + 0.75; and 0.32 GiB of "CUDAGraph memory", the measured capture (``capture_model``'s
return in ``compile_or_warm_up_model``), where memprof predicts 0.72. So about 0.5 GiB persists
unexplained at TP4 as well, while 0.41 GiB less is in use at the worker's snapshot than memprof
places before it (tests/data/published_breakdown.json). For V2 at TP1, row 1104's 0.26.0 line
(Llama-3.1-8B on an A40, logged at INFO from 0.26.0) splits the shortfall: weights 15.00 and
non-torch 0.08 GiB agree with memprof's 14.99 and 0.05, and the profile run's torch peak is
1.01 GiB against V1's terms' 0.49, so the excess is torch memory of the profile run, not held
free blocks (0.26.0's budget line counts none).

Row 1104's torch peak (read in the 0.25.0, 0.25.1, 0.26.0 and 0.27.1 wheels; the figures below
are tests/test_v2_profile_peak_ruled_out.py's and the H200 goldens of
reports/gpu/compile-peak/, tests/test_tp1_shortfall_ruled_out.py): not in V2's own profile run
and not in a cold ``torch.compile`` of the model's graph; found since in the compile-time
autotuning of vLLM's ``standalone_compile`` path (memprof/core/terms/cold_compile.py).

- V2's profile run (v1/worker/gpu/model_runner.py ``profile_run``): ``_dummy_run`` of
  max_num_batched_tokens (T) tokens with ``skip_attn`` and ``is_profile`` (``need_eager``: no
  CUDA graph, no attention metadata) on ``InputBatch.make_dummy`` (R = min(T, max_num_seqs)
  requests, one ``logits_indices`` entry each), then ``_dummy_sampler_run`` on those R hidden
  rows: ``compute_logits`` [R, V] in the model dtype and the ``Sampler`` with every slot at its
  defaults (0.26.0: no logprobs, top-k / top-p None so ``apply_top_k_top_p`` returns its input,
  no FlashInfer call; ``gumbel_sample`` on the model-dtype logits). Nothing in it is sized
  [T, V] or by max_model_len. ``InputBuffers``, ``RequestState`` and ``LoraState`` are made
  in ``__init__``, the sampler's penalties / logit-bias / bad-words / structured-output state
  in ``load_model``: all before ``memory_profiling``'s first snapshot, so the peak increase
  does not see them (0.27.x's ``total_consumed`` does: (3) above, and
  memprof/core/terms/runner_buffers.py for the GPU tensors of ``InputBuffers`` and
  ``RequestState``); the block tables come with
  the KV cache (``initialize_kv_cache``), after the budget. For
  row 1104 (T = 2,048, R = 256) V2's own peak is the dense-MLP stage of the forward, 216 MiB
  (the sampler stage, 18 MiB of hidden states and 63 MiB of bf16 logits, is below it):
  0.21 GiB against the logged 1.01. The V1 terms memprof charges hold 0.48 GiB (V1's fp32
  top-k / top-p sampler, which V2 does not run) and a 0.39 GiB CUDA-graph estimate (which V2
  does not charge): they land within 0.7% by compensation.
- The counter: 0.26.0 ``memory_profiling`` (utils/mem_utils.py) resets the peak statistics
  and reads ``allocated_bytes.all.peak`` (allocated, not reserved) before and after
  ``profile_run``; 0.27.1's ``transient_peak_headroom`` is the same peak less what is still
  allocated after. Whatever ``profile_run`` allocates and frees counts.
- What runs in the window, and the compile cache. 0.26.0 ``determine_available_memory``
  (v1/worker/gpu_worker.py) reads ``allocated_bytes.all.peak`` right after ``profile_run``,
  inside ``memory_profiling``; 0.27.1 reads the same peak (``transient_peak_headroom``).
  ``profile_run`` holds the model's first call: under ``VLLM_USE_AOT_COMPILE`` (envs.py
  ``use_aot_compile``: on by default with torch >= 2.10 unless the compile cache is disabled;
  0.25.1-0.27.1) compilation/decorators.py runs ``aot_compile`` (Dynamo, then vLLM's backend
  compiling each piece of the graph split at attention with Inductor: "Compiling a graph for
  compile range (1, T)", compilation/backends.py), saves the artifact, then runs the forward
  (``monitor_profiling_run``) with no peak reset between, then ``_dummy_sampler_run``. V2's
  ``profile_cudagraph_memory`` returns 0, so no graph estimate is taken there. The cache: the
  AOT path points ``TORCHINDUCTOR_CACHE_DIR`` at ``VLLM_CACHE_ROOT/torch_compile_cache/
  torch_aot_compile/<hash>/inductor_cache`` (decorators.py, 0.25.1-0.27.1; the hash covers the
  model and the configuration), and a warm start logs "Directly load AOT compilation from path"
  and "Directly load the compiled graph(s) for compile range". Inductor's options
  (config/compilation.py ``__post_init__``, 0.25.1-0.27.1): ``combo_kernels`` and
  ``benchmark_combo_kernel`` on (torch >= 2.9, not on CPU), ``enable_auto_functionalized_v2``
  off, the size / alignment / scalar asserts off below torch 2.12; max-autotune and
  coordinate-descent tuning only for single-size compile ranges and only when
  ``VLLM_ENABLE_INDUCTOR_MAX_AUTOTUNE`` / ``..._COORDINATE_DESCENT_TUNING`` ask
  (compilation/compiler_interface.py ``set_inductor_config``); no ``benchmark_kernel``.
- Which rows compiled cold. Of the calibration rows only row 1104's source log prints the
  compile: cold ("Dynamo bytecode transform time: 21.43 s", "Compiling a graph for compile
  range (1, 2048) takes 15.49 s", "saved AOT compiled function", "torch.compile took 41.49 s in
  total", "Initial profiling/warmup run took 1.11 s"; a later cold start of the same deployment
  in the same repository, 2026-09-04, logs the same 1.01 GiB). Rows 901-906 quote no compile
  line, but each ran in a fresh container that mounts only the Hugging Face cache (the posts'
  docker commands), so ``VLLM_CACHE_ROOT`` started empty: all cold, the TP2 row 902 and the TP4
  rows 904 / 905, which land, as well as the short TP1 / PP rows 901, 903 and 906. Rows 907-909
  (one WSL2 desktop, the servers one after another) print no compile line and their cache state
  is unknown; their hashes differ (three checkpoints), so none reused another's cache. The
  shortfall does not follow the cold / warm split.
- What a cold compile adds, measured (recorders/gpu_compile_peak.py on an H200, torch 2.11,
  Triton 3.6: decoder stacks of Llama-3.1-8B, Qwen2.5-7B and Qwen3-32B shapes at 2,048 and
  8,192 tokens, 2 to 32 layers, split at attention or whole, plainly or through the AOT path,
  TP1 and TP2 shards, vLLM 0.27.1's Inductor options): the first call's peak is the compiled
  forward's plus one buffer of the card's L2 size (60 MiB on the H200), the flush buffer of
  Inductor's benchmarker when Triton kernels with several configs are autotuned at their first
  launch, inside the forward (torch/_inductor/runtime/triton_heuristics.py
  ``autotune_to_one_config``); the same at TP1 and TP2, and nothing on a warm cache or with
  the kernels' timings cached. The combo-kernel benchmark (scheduler.py
  ``speedup_by_combo_kernel`` -> ``benchmark_fused_nodes``, whose generated ``get_args``
  allocates every buffer a kernel touches) runs before the forward and copies activation-sized
  buffers only (160 MiB at most, for Qwen3-32B at 8,192 tokens), below the forward's own peak:
  the embedding table is never among them. The compiled forward's peak is the one memprof
  derives for V2's profile run (216 MiB for row 1104's Llama-3.1-8B at 2,048 tokens, 264 MiB for
  rows 907-909's Qwen2.5-7B). So a cold compile of these graphs accounts for about 6 MiB on row
  1104's A40, 72 MiB on rows 907-909's RTX 4090 and 128 MiB on rows 901 / 903's RTX PRO 6000
  (their L2 sizes by the vendors' specifications),
  against 0.80, 0.6-1.5 and about 1.5 GiB kept: not charged (memprof does not know the cache
  state, and the buffer is within the rows' spread). Not reproduced: the rows' torch 2.13,
  vLLM's own backend and custom ops, and sm86 / sm89 / sm120 cards.
- Published reports of cold-versus-warm budgets at these releases (vllm-project/vllm issue
  54122 and PR 54209: a cold AOT compile charged as peak activation, "tens of GiB" a GPU on RTX
  PRO 6000 cards with a "qwen38-flash-next" image, and Qwen3-30B-A3B W4A16 on an H100; issue
  54383 and PR 54479: a first boot of a new shape gets a smaller KV cache, 0.47 GiB a GPU at
  TP2 on RTX 4090s with Qwen3-32B-AWQ; 1CatAI/1Cat-vLLM PR 518: torch peak +2.59 GiB cold
  against +0.74 warm, TP1, an NVFP4 checkpoint on a Quadro RTX 8000) show excesses from a few
  hundred MiB to tens of GiB, at TP1 and TP2, on models with MoE, AWQ / W4A16 or NVFP4 kernels
  that the measured dense stacks do not have. Nothing memprof reads fixes their size per
  deployment, and the dense bf16 / GPTQ / FP8 rows here keep 0.6-1.7 GiB that the measured
  compile of their own shapes does not produce.
- The embedding table as a benchmark copy (a fit, now ruled out by the measurement as well):
  charged as max(table, V2's own peak) on the first stage beside V2's own terms, it would
  leave 1104 -0.1%, 902 -0.3%, 908 +0.7%, 909 +2.3%, but 901 -6.2%, 903 +9.7% and 907 +18.2%;
  and no benchmark copy of it is made (above).
- Read in the 0.23.0-0.33.0 wheels and measured (docs/model-runner-v2.md, "Ruled out"): what TP >
  1 allocates or frees (``init_worker_distributed_environment`` runs before the init snapshot, and
  nothing in the distributed path frees or empties the cache after it); the workspace manager
  (lazy; no dense-attention op asks for it); V2's pinned host (UVA) buffers (measured: not in
  ``mem_get_info``); an fp32 lm_head (``head_dtype`` is the model dtype for generate models);
  and reserved-but-free segments that a block allocated in the window pins past ``empty_cache``
  (the mechanism 0.31.0's profile-run ``max_split_size_mb:20`` names): 0.27.1's window
  reproduced at torch level on an H100 for Qwen3-32B shapes pins nothing when compiled, pins the
  same 48 MiB at TP1 and TP2 when eager, and gives row 902's overhead (1.59 GiB against 1.66)
  but not row 901's (2.14 against 3.86) (reports/gpu/v2-window/README.md,
  tests/test_v2_window_golden.py); 0.23.0-0.26.0's budget line reads no reserved memory, yet
  rows 1104 and 1205-1214 keep the same 0.8 GiB. And a weight copied when the model is compiled
  as vLLM compiles it (an ``nn.Module`` of ``Parameter``s, the first call under
  ``torch.inference_mode``): for Llama-3.1-8B shapes the cold first call peaks at 282 MiB with
  no allocation of 256 MiB or more, against the 0.96 GiB row 1211 implies (the same golden).
- The eager row. Row 1215 (0.24.0, --enforce-eager: CompilationMode.NONE, no graphs, 8,192
  tokens) lands at -0.2% with V2's own terms, where row 1211 of the same session, card, model
  and release (compiled, 2,048 tokens) keeps 0.75 GiB beyond them. A transient of the size 1211
  implies (its 0.21 GiB forward + 0.75) would leave 1215 at -0.9%, against a +/-0.1% spread of
  rows 1205-1214: the charge belongs to the compiled mode (tests/test_v2_profile_peak_ruled_out.py).

V2's own terms in place of the V1 terms, per published V2 row (KV error, memprof now -> V2's own
terms: peak, no graph estimate, sampler state from 0.27.0): 1104 -0.0 -> +3.5%, 901 -2.8 -> -6.7% (a
failed start: negative figures), 902 -16.7 -> +0.5%, 903 +0.6 -> +10.7%, 907 +20.6 -> +33.3%, 908
+1.5 -> +6.0%, 909 +3.4 -> +9.0% (at their WSL2 total), 1205-1214 -0.1...+0.1 -> +1.4...+4.7%, 1215
+0.17 -> +0.17%. With the cold compile's table copy beside V2's own terms (memprof now,
tests/test_v2_profile_peak_ruled_out.py): 1104 +0.2%, 901 -6.2%, 902 +0.5%, 903 +10.7%, 907
+19.2%, 908 +1.0%, 909 +2.8%, 1205-1214 +0.1...+0.2%, 1215 +0.17%.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memprof.core.versions import Rule, rule_in_force, split_generation, value_at

# ``VLLM_USE_V2_MODEL_RUNNER`` (envs.py maybe_convert_bool: "0" / "1"; unset = None): read by
# ``use_v2_model_runner`` before anything else (0.23.0 … 0.29.0 config/vllm.py).
ENV = "VLLM_USE_V2_MODEL_RUNNER"


@dataclass(frozen=True, slots=True)
class V2Default:
    """``_is_default_v2_model_runner_model`` at one release: whether a listed architecture
    (``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES``, kept on the families' rows:
    ``Family.v2_runner_listed``) runs V2 (``lists``) and when quantised, whether a generate
    model without routed experts runs V2 too (``dense``), and ``every``: every model (a hybrid
    one: ``V2_HYBRID_LISTED``)."""

    lists: bool = True
    dense: bool = False
    quantised: bool = True
    every: bool = False


_CFG = "config/vllm.py VllmConfig.use_v2_model_runner, _is_default_v2_model_runner_model"
V2_DEFAULT: tuple[Rule, ...] = (
    Rule(name="model_runner_v2_default", changes="model runner of the profile run (noted)",
         since="0.21.0", until="0.22.0", value=V2Default(lists=False),
         introduced_by="Model Runner V2 behind VLLM_USE_V2_MODEL_RUNNER=1 (read in the 0.21.0 "
         "wheel)", removed_by="0.22.0: listed architectures by default",
         source="0.21.0 " + _CFG),
    Rule(name="model_runner_v2_default", changes="model runner of the profile run (noted)",
         since="0.22.0", until="0.24.0", value=V2Default(quantised=False),
         introduced_by="0.22.0: listed architectures, not MoE and not quantised",
         removed_by="0.24.0: any listed architecture, quantised or MoE",
         source="0.22.0 / 0.22.1 / 0.23.0 " + _CFG + " ('return not model_config.is_moe and not "
         "model_config.is_quantized' after the listing; DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES = "
         "frozenset({\"Qwen3ForCausalLM\"}) in 0.22.0 and 0.22.1)"),
    Rule(name="model_runner_v2_default", changes="model runner of the profile run (noted)",
         since="0.24.0", until="0.25.0", value=V2Default(),
         introduced_by="0.24.0: any listed architecture",
         removed_by="0.25.0: every generate model without routed experts",
         source="0.24.0 " + _CFG + " ('return any(arch in DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES "
         "...)')"),
    Rule(name="model_runner_v2_default", changes="model runner of the profile run (noted)",
         since="0.25.0", until="0.29.0", value=V2Default(dense=True),
         introduced_by="0.25.0: '... or not model_config.is_moe'",
         removed_by="0.29.0: Model Runner V2 for every architecture",
         source="0.25.0 / 0.26.0 / 0.27.1 / 0.28.0 " + _CFG),
    Rule(name="model_runner_v2_default", changes="model runner of the profile run (noted)",
         since="0.29.0", until=None, value=V2Default(lists=False, every=True),
         introduced_by="0.29.0: use_v2_model_runner without _is_default_v2_model_runner_model "
         "(V1 on ROCm for ROCM_DEFAULT_MRV1_ARCHITECTURES, not modelled, and for unsupported "
         "features)", source="0.29.0 config/vllm.py VllmConfig.use_v2_model_runner"),
)

# A hybrid model (state mixers beside attention) runs V2 by default only when listed, from 0.27.0
# (0.25.0 / 0.26.0: ``if is_hybrid: return False`` first; 0.27.1: ``if is_hybrid and not
# is_default_v2_architecture: return False``).
V2_HYBRID_LISTED: tuple[Rule, ...] = (
    Rule(name="model_runner_v2_hybrid", changes="model runner of the profile run (noted)",
         since="0.25.0", until="0.27.0", value=False, applies_to="state",
         introduced_by="0.25.0: a hybrid model stays on V1",
         removed_by="0.27.0: a listed hybrid architecture runs V2 (read in the 0.27.1 wheel)",
         source="0.25.0 / 0.26.0 " + _CFG + " ('if getattr(model_config, \"is_hybrid\", "
         "False): return False')"),
    Rule(name="model_runner_v2_hybrid", changes="model runner of the profile run (noted)",
         since="0.27.0", until="0.29.0", value=True, applies_to="state",
         introduced_by="0.27.x: 'if is_hybrid and not is_default_v2_architecture: return False'",
         removed_by="0.29.0: Model Runner V2 for every architecture",
         source="0.27.1 / 0.28.0 " + _CFG),
)

# (1) V2's CUDA-graph estimate: ``profile_cudagraph_memory`` returns 0 (``value`` False) through
# 0.28.x; from 0.29.0 it captures the graphs once while profiling and charges what that capture
# took (``value`` True: memprof/core/terms/runner_v2_graphs.py).
V2_GRAPH_ESTIMATE: tuple[Rule, ...] = (
    Rule(name="model_runner_v2_graph_estimate",
         changes="CUDA-graph estimate (Model Runner V2)", since="0.21.0", until="0.29.0",
         value=False, introduced_by="Model Runner V2 (profile_cudagraph_memory: 'It is TBD "
         "whether we keep this API or not. return 0')",
         removed_by="0.29.0: profile_cudagraph_memory returns _profile_cudagraph_memory(self)",
         source="0.23.0 / 0.24.0 / 0.25.0 / 0.26.0 / 0.27.1 / 0.28.0 v1/worker/gpu/"
         "model_runner.py GPUModelRunner.profile_cudagraph_memory"),
    Rule(name="model_runner_v2_graph_estimate",
         changes="CUDA-graph estimate (Model Runner V2)", since="0.29.0", until=None,
         value=True,
         introduced_by="0.29.0: profile_cudagraph_memory returns _profile_cudagraph_memory(self)"
         ": the graphs captured once on a minimal KV cache into a throwaway pool, the capture's "
         "free-memory delta charged, the FULL graphs but the 2 largest extrapolated",
         source="0.29.0 / 0.30.0 / 0.31.0 / 0.32.0 / 0.33.0 v1/worker/gpu/cudagraph_utils.py "
         "profile_cudagraph_memory, _extrapolate_full_graph_memory "
         "(_FULL_GRAPH_PROFILING_SAMPLES = 2, _MIN_PER_GRAPH_BYTES = 1 << 20); "
         "v1/worker/gpu_worker.py determine_available_memory subtracts it "
         "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, default 1)"),
)

# (2') The profile run's sampler: one greedy pass through 0.32.x (every slot at its defaults);
# 0.33.0 adds a second pass with ``SamplingParams.for_sampler_warmup()`` on every request, on the
# same logits (``value`` True: the pass is run; ``warmup_sampler_tensors`` sizes it).
V2_SAMPLER_WARMUP_PASS: tuple[Rule, ...] = (
    Rule(name="model_runner_v2_sampler_warmup_pass",
         changes="profile-run sampler (Model Runner V2)", since="0.21.0", until="0.33.0",
         value=False, introduced_by="Model Runner V2 (_dummy_sampler_run: one greedy pass)",
         removed_by="0.33.0: _dummy_sampler_run's second pass with "
         "SamplingParams.for_sampler_warmup()",
         source="0.27.1 / 0.28.0 / 0.29.0 / 0.30.0 / 0.31.0 / 0.32.0 v1/worker/gpu/"
         "model_runner.py GPUModelRunner._dummy_sampler_run: self.sampler(logits, "
         "dummy_input_batch) once"),
    Rule(name="model_runner_v2_sampler_warmup_pass",
         changes="profile-run sampler (Model Runner V2)", since="0.33.0", until=None,
         value=True,
         introduced_by="0.33.0: 'Warmup-param pass: warmup_kernels (run after the KV cache is "
         "sized) pays for the fp32 logits pipeline, so the profiled peak must too'",
         source="0.33.0 v1/worker/gpu/model_runner.py GPUModelRunner._dummy_sampler_run, "
         "sampling_params.py SamplingParams.for_sampler_warmup, v1/worker/gpu/sample/"
         "sampler.py Sampler.apply_sampling_params / sample / _sample_random, "
         "v1/sample/ops/topk_topp_sampler.py flashinfer_sampler_supported, flashinfer_sample, "
         "topk_topp_triton.py apply_top_k_top_p_triton; flashinfer-python 0.7.2.post1 (the "
         "wheel's pin) flashinfer/sampling.py top_k_top_p_sampling_from_logits"),
)

# (3) The Sampler's state, built in ``load_model`` after the weights' figure: charged by the
# budget line from 0.27.0 (``total_consumed``), not before.
V2_SAMPLER_STATE_CHARGED: tuple[Rule, ...] = (
    Rule(name="model_runner_v2_sampler_state", changes="sampler state (Model Runner V2)",
         since="0.21.0", until="0.27.0", value=False,
         introduced_by="Model Runner V2 (PenaltiesState, StructuredOutputsWorker in load_model)",
         removed_by="0.27.0 memory_profiling: non_kv_cache_memory = total_consumed + "
         "transient_peak_headroom",
         source="0.23.0 / 0.24.0 / 0.25.0 / 0.26.0 utils/mem_utils.py memory_profiling: "
         "non_kv_cache_memory = "
         "non_torch_memory + peak_activation_memory + weights_memory"),
    Rule(name="model_runner_v2_sampler_state", changes="sampler state (Model Runner V2)",
         since="0.27.0", until=None, value=True,
         introduced_by="0.27.0 memory_profiling: total_consumed = before_create.free_memory - "
         "after_profile.free_memory",
         source="0.27.1 / 0.28.0 / 0.29.0 utils/mem_utils.py memory_profiling; 0.27.1 "
         "v1/worker/gpu/sample/penalties.py PenaltiesState.__init__, "
         "v1/worker/gpu/structured_outputs.py StructuredOutputsWorker.__init__"),
)

# The speculative methods ``_get_v2_model_runner_unsupported_features`` lists (V2 has no drafter
# for them: the model runs the V1 runner), by memprof's method name
# (memprof/core/speculative.py). Read in the 0.22.0, 0.25.0, 0.29.0, 0.30.0 and 0.31.0 wheels
# (config/vllm.py): "ngram" / "ngram_gpu" are on the list in each ('TODO: ngram / ngram_gpu are
# not supported by the v2 model runner yet' to 0.29.0; 0.30.0 and 0.31.0 list them with
# draft_model, suffix, medusa, mlp_speculator and custom_class); "mtp" (with "eagle" and
# "eagle3") is not. 0.32.0 and 0.33.0 list neither (0.32.0: suffix, medusa, mlp_speculator,
# custom_class; 0.33.0: suffix, custom_class): V2 drafts n-gram itself, with its
# ``NgramGPUSpeculator`` (v1/worker/gpu/spec_decode/__init__.py ``init_speculator``'s
# ``use_ngram()`` branch; its buffers: memprof/core/terms/ngram_speculator.py).
V2_FALLBACK_SPECULATIVE: tuple[Rule, ...] = (
    Rule(name="model_runner_v2_speculative_fallback",
         changes="model runner of the profile run (noted)", since="0.22.0", until="0.32.0",
         value=("ngram",), applies_to="ngram",
         introduced_by="0.22.0: V2 by default for listed architectures, n-gram speculation "
         "on V2's unsupported list ('ngram/ngram_gpu speculative decoding')",
         removed_by="0.32.0: ngram / ngram_gpu off the unsupported list; V2's "
         "NgramGPUSpeculator (v1/worker/gpu/spec_decode/ngram/speculator.py) drafts them",
         source="0.22.0 / 0.25.0 / 0.29.0 / 0.30.0 / 0.31.0 config/vllm.py "
         "_get_v2_model_runner_unsupported_features; 0.32.0 / 0.33.0 the same function, "
         "v1/worker/gpu/spec_decode/__init__.py init_speculator, config/speculative.py "
         "SpeculativeConfig.use_ngram"),
)


RULES: tuple[tuple[Rule, ...], ...] = (V2_DEFAULT, V2_FALLBACK_SPECULATIVE, V2_HYBRID_LISTED,
                                       V2_GRAPH_ESTIMATE, V2_SAMPLER_WARMUP_PASS,
                                       V2_SAMPLER_STATE_CHARGED)

INT32 = 4
INT64 = 8
FP32 = 4
# gumbel_sample's BLOCK_SIZE (0.27.1 v1/worker/gpu/sample/gumbel.py)
GUMBEL_BLOCK = 1024


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def listed_at(rows: Iterable[Rule], architecture: str, version: str | None) -> bool:
    """Is ``architecture`` on vLLM's ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` at ``version``
    (``rows``: its family's ``Family.v2_runner_listed``)?"""
    return architecture in tuple(value_at(rows, version, default=()))  # type: ignore[arg-type]


def runs_v2(version: str | None, *, listed: bool, moe: bool, hybrid: bool, quantised: bool,
            env: int | None = None, speculative: str | None = None) -> bool:
    """Does vLLM ``version`` run this model with Model Runner V2 (``use_v2_model_runner``)?
    ``listed``: its architecture is on the release's list (``listed_at``); ``env``:
    ``VLLM_USE_V2_MODEL_RUNNER`` (0 / 1; ``None``: unset); ``speculative``: memprof's
    speculative method where draft tokens are on (a method V2 lacks sends the model back to V1:
    ``V2_FALLBACK_SPECULATIVE``). A V0 deployment and a release before 0.21.0 never do."""
    release, generation = split_generation(version or "")
    if generation != "v1":
        return False
    rule = rule_in_force(V2_DEFAULT, release)
    if rule is None:
        return False
    if env is not None:
        return bool(env)
    if speculative and speculative in tuple(value_at(  # type: ignore[arg-type]
            V2_FALLBACK_SPECULATIVE, release, default=())):
        return False
    d = rule.value
    assert isinstance(d, V2Default)
    if d.every:
        return True
    listed = listed and d.lists
    if hybrid and not (listed and value_at(V2_HYBRID_LISTED, release, default=False)):
        return False
    if listed:
        return d.quantised or not quantised
    return d.dense and not moe


# The per-request widths of the Sampler's GPU state beside the penalties (read in the 0.22.1,
# 0.27.1, 0.28.0 and 0.30.0 wheels, v1/worker/gpu/sample/): logit_bias.py
# MAX_NUM_ALLOWED_TOKEN_IDS, MAX_NUM_LOGIT_BIAS_TOKENS (1024 each), MAX_NUM_STOP_TOKEN_IDS (128);
# bad_words.py MAX_BAD_WORDS_TOTAL_TOKENS 1024 and MAX_NUM_BAD_WORDS 128 (0.28.0 on:
# envs.VLLM_MAX_BAD_WORDS_TOTAL_TOKENS / VLLM_MAX_NUM_BAD_WORDS, the same defaults);
# sampling_params.py MAX_LOGPROB_TOKEN_IDS 128
ALLOWED_TOKEN_IDS = 1024
LOGIT_BIAS_TOKENS = 1024
STOP_TOKEN_IDS = 128
BAD_WORDS_TOTAL_TOKENS = 1024
BAD_WORDS = 128
LOGPROB_TOKEN_IDS = 128


def sampler_state_tensors(max_num_seqs: int, vocab: int,
                          decode_query_len: int = 1) -> tuple[int, ...]:
    """The bytes of V2's persistent sampler state tensors on the last PP stage, in the order
    0.27.1 ``GPUModelRunner.load_model`` makes them (R = max_num_seqs, q = decode_query_len,
    1 without speculative decoding): the ``Sampler`` (sample/sampler.py ``__init__``), whose
    ``PenaltiesState`` (penalties.py lines 32-43) makes ``prompt_bin_mask`` [R, cdiv(V, 32)] and
    ``output_bin_counts`` [R, V] int32, ``LogitBiasState`` (logit_bias.py) ``allowed_token_ids``
    and ``logit_bias_token_ids`` [R, 1024] int32, ``logit_bias`` [R, 1024] fp32 and
    ``stop_token_ids`` [R, 128] int32, ``BadWordsState`` (bad_words.py) ``bad_word_token_ids``
    [R, 1024] and ``bad_word_offsets`` [R, 129] int32, ``LogprobTokenIdsState`` (logprob.py)
    ``token_ids`` [R, 128] int32 (each a ``StagedWriteTensor``'s GPU tensor; its staging
    buffers are pinned host memory); then ``StructuredOutputsWorker`` (structured_outputs.py
    lines 14-18) ``logits_indices`` [R × q] int32 and ``grammar_bitmask`` [R × q, cdiv(V, 32)]
    int32."""
    r = max_num_seqs
    words = _cdiv(vocab, 32)
    logits = r * decode_query_len
    return (r * words * INT32, r * vocab * INT32,
            r * ALLOWED_TOKEN_IDS * INT32, r * LOGIT_BIAS_TOKENS * INT32,
            r * LOGIT_BIAS_TOKENS * FP32, r * STOP_TOKEN_IDS * INT32,
            r * BAD_WORDS_TOTAL_TOKENS * INT32, r * (BAD_WORDS + 1) * INT32,
            r * LOGPROB_TOKEN_IDS * INT32,
            logits * INT32, logits * words * INT32)


def sampler_state_bytes(max_num_seqs: int, vocab: int, decode_query_len: int = 1) -> int:
    """V2's persistent sampler state on the last PP stage (0.27.1 ``GPUModelRunner.load_model``):
    the sum of ``sampler_state_tensors``, ``output_bin_counts`` [R, V] int32 the bulk of it."""
    return sum(sampler_state_tensors(max_num_seqs, vocab, decode_query_len))


def greedy_sampler_bytes(rows: int, vocab: int, logits_itemsize: int) -> int:
    """V2's profile-run sampler stage beyond the hidden states: the logits [R, V] in the model
    dtype (``compute_logits``) and ``gumbel_sample``'s ``local_argmax`` int64 and ``local_max``
    fp32 [R, cdiv(V, 1024)]; R = min(max_num_batched_tokens, max_num_seqs)."""
    blocks = _cdiv(vocab, GUMBEL_BLOCK)
    return rows * vocab * logits_itemsize + rows * blocks * (INT64 + FP32)


# The warm-up pass's sampler (0.33.0, ``V2_SAMPLER_WARMUP_PASS``): every row has temperature
# 0.9, top_k 50 and top_p 0.9 and no seed, so ``Sampler.sample`` finds the fused sampler
# eligible and takes FlashInfer's where ``use_flashinfer`` (``flashinfer_sampler_supported``,
# v1/sample/ops/topk_topp_sampler.py): a CUDA card (not ROCm) of compute capability 8.0-12.1
# (``FlashInferBackend.supports_compute_capability``, v1/attention/backends/flashinfer.py) with
# more than 16 SMs, ``VLLM_USE_FLASHINFER_SAMPLER`` not 0 (envs.py: on by default) and
# FlashInfer able to JIT-compile for the card (flashinfer-python==0.7.2.post1 is a requirement
# of the 0.33.0 wheel, METADATA). Else Triton's ``apply_top_k_top_p_triton`` (HAS_TRITON: no
# row threshold any more) and ``gumbel_sample``.
FLASHINFER_SAMPLER_MIN_CC = 80
FLASHINFER_SAMPLER_MAX_CC = 121
FLASHINFER_SAMPLER_MAX_FEW_SMS = 16
# flashinfer/sampling.py top_k_mask_logits: ``_get_cache_buf(..., 1024 * 1024, zero_init=True)``
FLASHINFER_ROW_STATES = 1 << 20


def v2_flashinfer_samples(cc: int | None, sm_count: int | None, *, rocm: bool,
                          env: int | None) -> bool:
    """Does 0.33.0's V2 ``Sampler`` sample the warm-up pass with FlashInfer (``use_flashinfer``)?
    ``cc``: the compute capability as an int (89 for 8.9), ``None`` where unknown, as is
    ``sm_count``: both then pass (the caller states the assumption); ``env``:
    ``VLLM_USE_FLASHINFER_SAMPLER`` (``None``: unset, on)."""
    if rocm or env == 0:
        return False
    if cc is not None and not FLASHINFER_SAMPLER_MIN_CC <= cc <= FLASHINFER_SAMPLER_MAX_CC:
        return False
    return sm_count is None or sm_count > FLASHINFER_SAMPLER_MAX_FEW_SMS


def warmup_sampler_tensors(rows: int, vocab: int, logits_itemsize: int, *, flashinfer: bool,
                           buffer_rows: int = 0) -> tuple[tuple[str, int], ...]:
    """The tensors live at the peak of 0.33.0's second sampler pass
    (``GPUModelRunner._dummy_sampler_run`` with ``SamplingParams.for_sampler_warmup()``), beyond
    the hidden states, on R = ``rows`` rows: the logits [R, V] in the model dtype
    (``compute_logits``, held by ``_dummy_sampler_run`` across both passes);
    ``apply_sampling_params``' fp32 copy [R, V] (``torch.empty_like(..., float32).copy_``), which
    logit bias, penalties, bad words, temperature and min-p all change in place (Triton kernels)
    and ``Sampler.__call__`` holds to its end; then the sampling moment:

    - FlashInfer (``flashinfer``, ``v2_flashinfer_samples``): ``flashinfer_sample`` with both
      top_k and top_p calls ``top_k_top_p_sampling_from_logits``, whose top_k is a tensor, so
      not its top-k-first fast path (an int top_k only): ``top_k_mask_logits`` makes a new fp32
      [R, V] (``torch.empty_like``) with a cached 1 MiB row-state buffer, then ``torch.softmax``
      of it, a new fp32 [R, V], both live while ``top_p_sampling_from_probs`` writes [R] int32;
    - Triton: ``apply_top_k_top_p_triton`` masks the fp32 copy in place with its cached
      [buffer_rows, V] fp32 buffer (``_TRITON_BUFFER_CACHE``), then ``gumbel_sample`` keeps
      ``local_argmax`` int64 and ``local_max`` fp32 [R, cdiv(V, 1024)].

    After it, ``compute_topk_scores`` (logprobs 5, ``raw_logprobs`` by default) reads the raw
    logits: ``torch.topk`` [R, 5] and ``compute_token_logprobs`` [R, 6] fp32 beside the fp32
    copy, below the sampling moment. Not reached from ``_dummy_sampler_run``: prompt logprobs
    (``PromptLogprobsWorker``, called from the step only) and watermarking (a
    ``GPUWatermarkSampler`` only with a watermark config; the plain ``Sampler`` ignores the
    request's flag)."""
    r, v = rows, vocab
    parts = [("logits [R,V]", r * v * logits_itemsize), ("fp32 copy [R,V]", r * v * FP32)]
    if flashinfer:
        return (*parts, ("FlashInfer top-k masked logits + softmax 2×[R,V] fp32",
                         2 * r * v * FP32),
                ("FlashInfer row states", FLASHINFER_ROW_STATES))
    return (*parts, (f"Triton top-k/p buffer [{buffer_rows},V] fp32", buffer_rows * v * FP32),
            ("gumbel argmax / max [R,cdiv(V,1024)]", r * _cdiv(v, GUMBEL_BLOCK) * (INT64 + FP32)))


@dataclass(frozen=True, slots=True)
class V2Terms:
    """V2's three terms for one deployment's last PP stage: whether a CUDA-graph estimate is
    charged, the profile run's sampler stage (the greedy pass; from 0.33.0 the warm-up pass,
    ``warmup_sampler_tensors``, larger in every case) and the sampler state (and whether the
    budget charges it)."""

    graph_estimate: bool
    sampler_stage_bytes: int
    sampler_state_bytes: int
    sampler_state_charged: bool


def v2_terms(version: str, *, max_num_seqs: int, max_num_batched_tokens: int, vocab: int,
             logits_itemsize: int, decode_query_len: int = 1, flashinfer: bool = True,
             buffer_rows: int = 0) -> V2Terms:
    """The three terms of the module docstring at ``version``; ``flashinfer`` and
    ``buffer_rows``: the warm-up pass's sampler (``warmup_sampler_tensors``), from 0.33.0."""
    release, _ = split_generation(version)
    rows = min(max_num_batched_tokens, max_num_seqs)
    stage = greedy_sampler_bytes(rows, vocab, logits_itemsize)
    if value_at(V2_SAMPLER_WARMUP_PASS, release, default=True):
        stage = max(stage, sum(b for _n, b in warmup_sampler_tensors(
            rows, vocab, logits_itemsize, flashinfer=flashinfer, buffer_rows=buffer_rows)))
    return V2Terms(
        graph_estimate=bool(value_at(V2_GRAPH_ESTIMATE, release, default=True)),
        sampler_stage_bytes=stage,
        sampler_state_bytes=sampler_state_bytes(max_num_seqs, vocab, decode_query_len),
        sampler_state_charged=bool(value_at(V2_SAMPLER_STATE_CHARGED, release,
                                            default=False)))
