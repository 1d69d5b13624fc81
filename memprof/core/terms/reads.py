"""What each memory term reads: the ``TermContext`` fields (``ctx.…``) and the ``Deployment``
fields (``dep.…``) a term's result may depend on, declared per term (by function name).

A term is a pure function of these and nothing else, so two contexts that agree on them get the
same components: a cache of a term's result needs no other key (``memprof.batch.memo`` records
the reads of each run and keys by them, finer than this union). ``tests/test_term_reads.py``
runs every term over the bundled models × a set of deployments and GPUs with a context that
records each read, and checks both ways: every read is declared, and every declared field is
read by some case. A term that starts reading a new setting fails that test until its line here
says so. No term reads ``gpu_memory_utilization``: only the KV budget does (``estimate``).
"""

from __future__ import annotations

# the fields every term of one rank's model reads
_MODEL = ("ctx.spec", "ctx.coord", "ctx.model_dtype", "dep.engine", "dep.engine_version",
          "dep.pp")
# the pooling runner (--runner / --convert / --task, memprof/core/engines/vllm_pooling.py
# convert_of): no untied lm_head, the pooler instead of the sampler, PIECEWISE graphs only
_POOLING = ("dep.runner", "dep.convert", "dep.task")
# what the weights of a rank are built from (``memprof.core.weights.weights_key``)
_WEIGHTS = (*_POOLING, "ctx.gpu", "ctx.quant", "dep.tp", "dep.dp", "dep.enable_expert_parallel",
            "dep.enable_dp_attention", "dep.dtype", "dep.max_num_batched_tokens",
            "dep.num_speculative_tokens", "dep.limit_mm_per_prompt",
            "dep.mm_encoder_tp_mode")
# what the scratch catalog reads (backend, policy, batch, context, KV pool)
_SCRATCH = ("ctx.gpu", "ctx.plan", "ctx.num_gpu_blocks", "dep.attention_backend",
            "dep.chunked_prefill_size", "dep.cuda_graph_max_bs", "dep.dp",
            "dep.enable_dp_attention", "dep.entrypoint", "dep.kv_cache_dtype",
            "dep.max_model_len", "dep.max_num_batched_tokens", "dep.max_num_seqs",
            "dep.mem_fraction_static", "dep.num_speculative_tokens", "dep.scratch", "dep.tp")

TERM_READS: dict[str, frozenset[str]] = {
    "scratch_budget_terms": frozenset((*_MODEL, *_SCRATCH)),
    # the GPU: SGLang keeps its get_rope caches in fp32 on CUDA only
    "rope_cache_terms": frozenset((*_MODEL, "ctx.gpu")),
    # the rank's weights (which layers run Marlin: the tensors, not their scratch-sizing
    # settings) and the GPU (arch, SM count)
    # (a multimodal tower's settings too: no bundled multimodal checkpoint runs Marlin kernels)
    "marlin_workspace_terms": frozenset((*_MODEL, *_WEIGHTS)) - {
        "ctx.model_dtype", "dep.max_num_batched_tokens", "dep.num_speculative_tokens",
        "dep.limit_mm_per_prompt", "dep.mm_encoder_tp_mode"},
    # the GPU's platform and max_num_seqs: sparse MLA's index groups (ROCm from 0.32.0; rows)
    "init_buffer_terms": frozenset((*_MODEL, "ctx.gpu", "dep.max_num_batched_tokens",
                                    "dep.max_num_seqs", "dep.num_speculative_tokens",
                                    "dep.speculative_method")),
    # PYTORCH_CUDA_ALLOC_CONF: the load's allocator settings (load_alloc_conf)
    # the speculative method: which runner (n-gram runs V1, engines/vllm_runner.py)
    # max_num_seqs: the init buffers it replays (sparse MLA's index groups' rows)
    "load_rounding_terms": frozenset((*_MODEL, *_WEIGHTS, "dep.pytorch_cuda_alloc_conf",
                                      "dep.speculative_method", "dep.max_num_seqs")),
    # the family's rows at the release, the card's compute capability, the block-fp8 weights
    "post_load_requant_terms": frozenset((*_MODEL, *_WEIGHTS)) - {*_POOLING,
        "ctx.model_dtype", "dep.max_num_batched_tokens", "dep.num_speculative_tokens",
        "dep.limit_mm_per_prompt", "dep.mm_encoder_tp_mode"},
    # (less the batch settings of _WEIGHTS: no case of an engine whose load figure holds its
    # segments reads them)
    "load_segments_terms": frozenset((*_MODEL, *_WEIGHTS)) - {*_POOLING,
                                                              "dep.max_num_batched_tokens",
                                                              "dep.num_speculative_tokens"},
    # the rank's fp8 experts, the GPU (ROCm, arch) and VLLM_ROCM_USE_AITER (the multimodal
    # settings: whether a block-FP8 checkpoint's vision tower is on the rank, Qwen3.5/3.6-FP8)
    "rocm_load_cache_terms": frozenset((*_MODEL, *_WEIGHTS, "dep.vllm_rocm_use_aiter")) - {
        "ctx.model_dtype", "dep.max_num_batched_tokens", "dep.num_speculative_tokens",
        "dep.enable_dp_attention"},
    # --enable-lora and its sizes; the batch sizes size the punica metadata
    "lora_terms": frozenset((*_MODEL, "dep.tp", "dep.enable_lora", "dep.max_loras",
                             "dep.max_lora_rank", "dep.lora_extra_vocab_size", "dep.lora_dtype",
                             "dep.fully_sharded_loras", "dep.enable_lora_bias",
                             "dep.specialize_active_lora", "dep.max_num_batched_tokens",
                             "dep.max_num_seqs")),
    # ctx.quant: a bitsandbytes linear's dequantised shard (terms/bnb_linear.py)
    "activation_terms": frozenset((*_MODEL, *_POOLING, "ctx.gpu", "ctx.plan", "ctx.quant",
                                   "dep.tp", "dep.dp",
                                   "dep.enable_expert_parallel", "dep.max_model_len",
                                   "dep.max_num_batched_tokens", "dep.max_num_seqs",
                                   "dep.num_speculative_tokens", "dep.speculative_method",
                                   "dep.vllm_use_flashinfer_sampler",
                                   # the sampler's logits width (terms/lora.py
                                   # lora_logits_widths)
                                   "dep.enable_lora", "dep.max_loras", "dep.max_lora_rank",
                                   "dep.lora_extra_vocab_size", "dep.lora_dtype",
                                   "dep.fully_sharded_loras", "dep.enable_lora_bias",
                                   "dep.specialize_active_lora",
                                   # Model Runner V2's own profile run where nothing is
                                   # compiled in it (terms/runner_v2_profile.py)
                                   "dep.enforce_eager", "dep.compile_cache",
                                   # a multimodal profile run feeds inputs_embeds: no table
                                   # copy on a cold compile (terms/cold_compile.py); V0's
                                   # multimodal dummy sequences (multimodal.py v0_dummy)
                                   "dep.limit_mm_per_prompt", "dep.mm_processor_kwargs")),
    # with the text peak it compares against (activation_terms: dp and EP for a MoE model)
    "encoder_terms": frozenset((*_MODEL, *_POOLING, "ctx.gpu", "ctx.quant", "dep.tp", "dep.dp",
                                "dep.enable_expert_parallel", "dep.max_model_len",
                                "dep.max_num_batched_tokens", "dep.max_num_seqs",
                                "dep.num_speculative_tokens", "dep.speculative_method",
                                "dep.limit_mm_per_prompt",
                                "dep.mm_processor_kwargs", "dep.mm_encoder_tp_mode",
                                "dep.vllm_use_flashinfer_sampler",
                                # the text peak's sampler width where the wrapper's language
                                # model carries LoRA (terms/lora.py lora_logits_widths)
                                "dep.enable_lora", "dep.max_loras", "dep.max_lora_rank",
                                "dep.lora_extra_vocab_size", "dep.lora_dtype",
                                "dep.fully_sharded_loras", "dep.enable_lora_bias",
                                "dep.specialize_active_lora",
                                # the text peak's runner (terms/runner_v2_profile.py)
                                "dep.enforce_eager", "dep.compile_cache")),
    # ctx.quant: bitsandbytes' kernel nodes and dequantised shard (terms/bnb_linear.py)
    "cudagraph_terms": frozenset((*_MODEL, *_POOLING, "ctx.gpu", "ctx.quant", "dep.tp",
                                  "dep.pp", "dep.dp",
                                  "dep.disable_custom_all_reduce", "dep.nnodes",
                                  "dep.enable_expert_parallel", "dep.enforce_eager",
                                  "dep.max_num_batched_tokens", "dep.max_num_seqs",
                                  "dep.num_speculative_tokens", "dep.speculative_method",
                                  "dep.attention_backend", "dep.kv_cache_dtype",
                                  # LoRA's kernel nodes (terms/lora.py lora_graph_nodes)
                                  "dep.enable_lora", "dep.max_loras", "dep.max_lora_rank",
                                  "dep.lora_extra_vocab_size", "dep.lora_dtype",
                                  "dep.fully_sharded_loras", "dep.enable_lora_bias",
                                  "dep.specialize_active_lora",
                                  # Model Runner V2 before 0.29.0 estimates no graphs
                                  # (terms/runner_v2_profile.py)
                                  "dep.compile_cache",
                                  # an engine's own decode graphs (SGLang: the graph batch
                                  # heuristic and the request pool, engines/sglang_graphs.py;
                                  # the attention backend's page table,
                                  # engines/sglang_attention.py; whether the prefill graphs
                                  # are captured first, sglang.py prefill_graph_reserve_mib,
                                  # whose sizes --max-total-tokens caps from 0.5.10)
                                  "dep.cuda_graph_max_bs", "dep.enable_dp_attention",
                                  "dep.entrypoint", "dep.max_model_len", "dep.block_size",
                                  "dep.chunked_prefill_size", "dep.mem_fraction_static",
                                  "dep.max_total_tokens",
                                  # the kernel nodes' driver cost (cudagraph.driver_stack)
                                  "dep.nvidia_driver")),
    # Model Runner V2's own graph estimate (0.29.0 on): the capture cudagraph_terms models, the
    # runner the release and model select, whether graphs are captured
    "runner_v2_graph_terms": frozenset((*_MODEL, *_POOLING, "ctx.gpu", "ctx.quant", "dep.tp",
                                        "dep.dp",
                                        "dep.disable_custom_all_reduce", "dep.nnodes",
                                        "dep.enable_expert_parallel", "dep.enforce_eager",
                                        "dep.max_num_batched_tokens", "dep.max_num_seqs",
                                        "dep.num_speculative_tokens", "dep.speculative_method",
                                        "dep.attention_backend", "dep.kv_cache_dtype",
                                        "dep.enable_lora", "dep.max_loras",
                                        "dep.max_lora_rank", "dep.lora_extra_vocab_size",
                                        "dep.lora_dtype", "dep.fully_sharded_loras",
                                        "dep.enable_lora_bias", "dep.specialize_active_lora",
                                        "dep.nvidia_driver")),
    "non_torch_terms": frozenset(("ctx.gpu", "dep.engine", "dep.engine_version", "dep.tp",
                                  "dep.disable_custom_all_reduce", "dep.nnodes",
                                  "dep.pp", "dep.dp", "dep.enable_expert_parallel",
                                  "dep.vllm_allreduce_use_symm_mem")),
    "nccl_nvls_terms": frozenset(("ctx.gpu", "ctx.coord", "dep.engine", "dep.engine_version",
                                  "dep.tp", "dep.nnodes", "dep.pp", "dep.dp",
                                  "dep.enable_expert_parallel", "dep.nccl_nvls_enable")),
    "warm_up_first_kernel": frozenset(("ctx.gpu", "dep.engine", "dep.engine_version",
                                       "dep.tp", "dep.nnodes", "dep.pp", "dep.dp",
                                       "dep.enable_expert_parallel")),
    # ctx.spec, ctx.quant, the pooling runner: whether Model Runner V2 runs the model
    # (terms/runner_v2_profile.py; a pooling model stays on V1 through 0.28.x; the speculative
    # method: n-gram runs V1, memprof/core/engines/vllm_runner.py)
    # the custom all-reduce's hold on the profiling graphs' inputs (terms/graph_input_handles.py)
    "graph_input_handle_terms": frozenset((*_MODEL, *_POOLING, "ctx.gpu", "ctx.quant",
                                           "dep.tp", "dep.disable_custom_all_reduce",
                                           "dep.nnodes", "dep.enforce_eager",
                                           "dep.num_speculative_tokens",
                                           "dep.speculative_method",
                                           # the profiled sizes and their live sets
                                           "dep.max_num_batched_tokens", "dep.max_num_seqs",
                                           "dep.attention_backend", "dep.kv_cache_dtype",
                                           "dep.dp", "dep.enable_expert_parallel",
                                           # the custom all-reduce's max_size beside the
                                           # symmetric-memory all-reduce (terms/symm_mem.py)
                                           "dep.vllm_allreduce_use_symm_mem")),
    "stream_pool_terms": frozenset(("ctx.coord", "ctx.gpu", "ctx.spec", "ctx.quant", *_POOLING,
                                    "dep.engine", "dep.engine_version",
                                    "dep.tp", "dep.pp", "dep.dp",
                                    "dep.enable_expert_parallel", "dep.num_speculative_tokens",
                                    "dep.speculative_method")),
    # the load's allocator settings (load_alloc_conf); Model Runner V2's sampler state, made
    # after the weights in the load's scope: which runner and profile terms (the compile cache,
    # --enforce-eager), its rows (max_num_seqs)
    "reserved_charge_terms": frozenset((*_MODEL, *_WEIGHTS, "dep.pytorch_cuda_alloc_conf",
                                        "dep.compile_cache", "dep.enforce_eager",
                                        "dep.max_num_seqs", "dep.speculative_method")),
    # the runner's batch sizes and the block table's width (max_model_len / block size, the
    # constructor's --block-size from 0.27.0); ctx.quant, ctx.spec, the pooling runner: which
    # runner (V1 or V2); V2's draft_tokens [R, speculative tokens]
    "runner_buffer_terms": frozenset(("ctx.spec", "ctx.model_dtype", "ctx.plan", "ctx.quant",
                                      *_POOLING,
                                      "dep.engine", "dep.engine_version",
                                      "dep.max_num_batched_tokens", "dep.max_num_seqs",
                                      "dep.max_model_len", "dep.block_size",
                                      "dep.num_speculative_tokens", "dep.speculative_method")),
    # the EAGLE head (ctx.spec.draft_head) on the last stage, split over TP
    "draft_head_weight_terms": frozenset(("ctx.spec", "ctx.coord", "ctx.model_dtype", "dep.pp",
                                          "dep.tp")),
    # the release's buffer list, charged as the runner's (runner_buffer_terms), per runner and
    # drafter (an EAGLE head, an MTP layer)
    "proposer_buffer_terms": frozenset(("ctx.spec", "ctx.coord", "ctx.model_dtype", "ctx.quant",
                                        *_POOLING, "dep.engine", "dep.engine_version",
                                        "dep.pp", "dep.max_num_batched_tokens",
                                        "dep.max_num_seqs", "dep.num_speculative_tokens",
                                        "dep.speculative_method",
                                        # an MTP drafter of a multimodal target (V2 inputs_embeds)
                                        "dep.limit_mm_per_prompt")),
    # V2's n-gram buffers (all_token_ids [R, L] on every stage, the speculator's on the last),
    # charged as the runner's (runner_buffer_terms); which runner reads the model (ctx.spec,
    # ctx.quant, the pooling runner)
    "ngram_buffer_terms": frozenset(("ctx.spec", "ctx.coord", "ctx.quant", *_POOLING,
                                     "dep.engine", "dep.engine_version", "dep.pp",
                                     "dep.max_num_seqs", "dep.max_model_len",
                                     "dep.num_speculative_tokens", "dep.speculative_method")),
    "in_use_terms": frozenset(("ctx.gpu", "dep.gpu_memory_in_use", "dep.engine",
                               "dep.engine_version")),
    "scratch_runtime_terms": frozenset((*_MODEL, *_SCRATCH)),
    # (PYTORCH_CUDA_ALLOC_CONF: the load's max_split_size its replay continues under)
    "allocator_runtime_terms": frozenset((*_MODEL, *_WEIGHTS, *_SCRATCH,
                                          "dep.pytorch_cuda_alloc_conf", "dep.speculative_method")),
    # the engine's table beside its KV pool (SGLang: engines/sglang_req_pool.py): the pool's
    # tokens, the context, --max-running-requests against the stand-in the GPU's defaults give
    "request_table_terms": frozenset(("ctx.gpu", "ctx.plan", "ctx.num_gpu_blocks", "dep.engine",
                                      "dep.engine_version", "dep.entrypoint",
                                      "dep.max_model_len", "dep.max_num_seqs",
                                      "dep.max_total_tokens", "dep.num_speculative_tokens")),
}
"""Term function name → the fields it reads (``ctx.<TermContext field>``,
``dep.<Deployment field>``)."""
