"""vLLM as an engine: DP replicates whole engines, the budget is ``gpu_memory_utilization ×
total``, batch defaults by GPU tier and release, the CUDA-graph estimate by release, the
``--block-size`` choices of its CLI.

Budget line (vLLM@52a31cc vllm/v1/worker/gpu_worker.py ``determine_available_memory``)::

    requested = ceil(gpu_memory_utilization × total)
    KV        = requested − weights − activation peak − non-torch increase − CUDA-graph estimate
              (or --kv-cache-memory-bytes verbatim)
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, ClassVar, NamedTuple

from memprof.base.errors import BadInput
from memprof.base.units import GiB, fmt_bytes
from memprof.core import releases
from memprof.core.dtypes import FLAG_ALIASES
from memprof.core.engines.base import (
    Budget,
    C,
    DeploymentView,
    Engine,
    RankCoord,
)
from memprof.core.engines.unified_memory import unified_memory_notes
from memprof.core.engines.vllm_compile import COLD_COMPILE_EXAMPLE_ARGS
from memprof.core.engines.vllm_pooling import convert_of, pooling_notes, pooling_runs_v2
from memprof.core.engines.vllm_registry import check_registered
from memprof.core.engines.vllm_runner import (
    V2_DEFAULT,
    V2_GRAPH_ESTIMATE,
    V2_SAMPLER_WARMUP_PASS,
    listed_at,
    runs_v2,
    v2_terms,
)
from memprof.core.gpus import GPU, arch_cc
from memprof.core.models.config import smallest_length_key_max_len
from memprof.core.speculative import HEAD_METHODS, drafting_method
from memprof.core.versions import (
    V0_SUFFIX,
    Rule,
    rule_in_force,
    split_generation,
    value_at,
    version_key,
)

# the newest releases' default: 0.20.0-0.33.0 config/cache.py Field(default=0.92), PR #38284
# (older releases: GPU_MEMORY_UTILIZATION)
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92

# gpu_memory_utilization when the flag is left out (CacheConfig.gpu_memory_utilization).
GPU_MEMORY_UTILIZATION: tuple[Rule, ...] = (
    Rule(name="gpu_memory_utilization_default", changes="budget: gpu_memory_utilization",
         since="0.6.0", until="0.20.0", value=0.9, introduced_by="before 0.6.0",
         removed_by="#38284 (first released in 0.20.0)",
         source="0.19.1 config/cache.py CacheConfig: Field(default=0.9); 0.6.0, 0.6.4.post1, "
         "0.6.6.post1 and 0.7.2 engine/arg_utils.py EngineArgs.gpu_memory_utilization: float = "
         "0.90"),
    Rule(name="gpu_memory_utilization_default", changes="budget: gpu_memory_utilization",
         since="0.20.0", until=None, value=DEFAULT_GPU_MEMORY_UTILIZATION,
         introduced_by="#38284 (first released in 0.20.0)",
         source="0.20.0 / 0.33.0 config/cache.py CacheConfig: Field(default=0.92)"),
)

# (max_num_batched_tokens, max_num_seqs) when the flags are left out: which scheme holds. Read
# in engine/arg_utils.py of every release wheel (EngineArgs._set_default_args_v1 up to 0.10.2,
# _set_default_args 0.11.0, get_batch_defaults from 0.11.1); "the name" is the device name vLLM
# reads (current_platform.get_device_name(): NVML's name on CUDA, GPU.device_name), "memory"
# its total memory (get_device_total_memory: NVML's total on CUDA). LLM = UsageContext.LLM_CLASS
# (``--entrypoint llm``), serve = OPENAI_API_SERVER.
#   v0:         V0 engine: max_num_seqs 256; max_num_batched_tokens 2048 with chunked prefill
#               (on by default for max_model_len > 32768 without sliding window or speculative
#               decoding), else max(max_model_len, 2048); no usage context
#   v0_512:     as v0, but 512 tokens with chunked prefill (0.6.0 - 0.6.4.post1)
#   v1_name:    "h100" or "h200" in the name: LLM 16384 / serve 8192, else 8192 / 2048;
#               max_num_seqs 1024 on every device
#   v1_name256: as v1_name, but max_num_seqs 256 unless "h100" or "h200" is in the name
#   v1_70g:     memory >= 70 GiB: LLM 16384 / serve 8192, seqs 1024; else 8192 / 2048, seqs 256
#   v1_a100:    as v1_70g, but a name with "a100" stays on the small tier (#17885)
#   v1_160g:    as v1_a100, and memory >= 160 GiB: 16384 / 16384, seqs 1024
#   v1_gb10:    as v1_160g, and GB10 (compute capability 12.1) stays on the small tier
BATCH_DEFAULTS: tuple[Rule, ...] = (
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.6.0", until="0.6.5", value="v0_512", introduced_by="before 0.6.0",
         removed_by="2048 tokens with chunked prefill (first released in 0.6.5)",
         source="0.6.0, 0.6.3.post1 and 0.6.4.post1 config.py SchedulerConfig.__init__: "
         "chunked prefill (one scheduler step) → max_num_batched_tokens = 512 ('the values "
         "that have the best balance between ITL and TTFT on A100'), else max(max_model_len, "
         "2048); engine/arg_utils.py EngineArgs.max_num_seqs: int = 256 and "
         "create_engine_config: use_long_context = max_model_len > 32768",
         generation="v0"),
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.6.5", until="0.11.0", value="v0", introduced_by="V0 engine (VLLM_USE_V1=0 "
         "by default before 0.8.0, on request 0.8.0 – 0.10.2)", removed_by="V0 engine removed "
         "(0.11.0)",
         source="0.6.5, 0.6.6.post1 and 0.7.2 config.py SchedulerConfig.__post_init__ (2048 "
         "with chunked prefill, else max(max_model_len, 2048)); engine/arg_utils.py "
         "create_engine_config (chunked "
         "prefill for max_model_len > 32768), EngineArgs.__post_init__ (max_num_seqs 256 "
         "when not VLLM_USE_V1); 0.8.0 – 0.10.2 EngineArgs._set_default_args_v0 (the same: "
         "use_long_context = max_model_len > 32768, 'Set max_num_seqs to 256 for VLLM_V0')",
         generation="v0"),
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.8.0", until="0.8.4", value="v1_name", introduced_by="V1 by default (0.8.0)",
         removed_by="max_num_seqs 256 off H100/H200 (first released in 0.8.4)",
         source="0.8.0 / 0.8.1 / 0.8.2 / 0.8.3 engine/arg_utils.py _set_default_args_v1: "
         "'\"h100\" in device_name or \"h200\" in device_name' (LLM_CLASS 16384, "
         "OPENAI_API_SERVER 8192; else 8192 / 2048), default_max_num_seqs = 1024 on every device",
         generation="v1"),
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.8.4", until="0.8.5", value="v1_name256",
         introduced_by="max_num_seqs 256 off H100/H200 (first released in 0.8.4)",
         removed_by="tiers by device memory (first released in 0.8.5)",
         source="0.8.4 engine/arg_utils.py _set_default_args_v1: '\"h100\" in device_name or "
         "\"h200\" in device_name': default_max_num_seqs = 1024, else 256 (tokens as 0.8.0)",
         generation="v1"),
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.8.5", until="0.9.0", value="v1_70g",
         introduced_by="tiers by device memory (first released in 0.8.5)",
         removed_by="#17885 (A100 on the small tier, first released in 0.9.0)",
         source="0.8.5 / 0.8.5.post1 engine/arg_utils.py _set_default_args_v1: "
         "device_memory >= 70 * GiB_bytes (get_device_total_memory)",
         generation="v1"),
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.9.0", until="0.28.0", value="v1_a100",
         introduced_by="#17885 (first released in 0.9.0)",
         removed_by="a >= 160 GiB tier (first released in 0.28.0)",
         source="0.9.0 – 0.10.2 _set_default_args_v1, 0.11.0 _set_default_args, 0.11.1 – "
         "0.27.1 get_batch_defaults (engine/arg_utils.py): device_memory >= 70 GiB and "
         "\"a100\" not in device_name",
         generation="v1"),
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.28.0", until="0.33.0", value="v1_160g",
         introduced_by="a >= 160 GiB tier (first released in 0.28.0)",
         removed_by="GB10 on the small tier (first released in 0.33.0)",
         source="0.28.0 – 0.32.0 engine/arg_utils.py get_batch_defaults: device_memory >= 160 "
         "GiB: LLM_CLASS 16384, OPENAI_API_SERVER 16384, max_num_seqs 1024",
         generation="v1"),
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.33.0", until=None, value="v1_gb10",
         introduced_by="GB10 on the small tier (first released in 0.33.0)",
         source="0.33.0 engine/arg_utils.py get_batch_defaults: is_gb10 = "
         "current_platform.is_device_capability((12, 1))",
         generation="v1"),
)

# The memory tiers read the device total through NVML (``NvmlCudaPlatform.get_device_total_memory``:
# ``pynvml.nvmlDeviceGetMemoryInfo(handle).total``), which raises on a card whose NVML has no
# memory query (GB10: ``GPU.nvml_memory_info``); ``get_batch_defaults`` catches it and takes
# ``device_memory = 0``, the small tier. 0.33.0 catches the NVML error inside
# ``get_device_total_memory`` and reads torch's total instead (its GB10 stays small through
# ``is_gb10``, ``v1_gb10``).
NVML_TOTAL_UNCAUGHT: tuple[Rule, ...] = (
    Rule(name="nvml_total_uncaught", changes="max_num_batched_tokens / max_num_seqs defaults: "
         "a card NVML reports no memory for", since="0.8.5", until="0.33.0", value=True,
         introduced_by="tiers by device memory (first released in 0.8.5)",
         removed_by="NVML memory fallback for integrated parts (first released in 0.33.0)",
         source="0.10.1.1, 0.13.0, 0.19.0, 0.25.0, 0.32.0 platforms/cuda.py NvmlCudaPlatform."
         "get_device_total_memory (nvmlDeviceGetMemoryInfo, no fallback) and engine/arg_utils.py "
         "(try: device_memory = current_platform.get_device_total_memory() except Exception: "
         "device_memory = 0); 0.33.0 the NVML error caught in get_device_total_memory",
         generation="v1"),
)

# How a default is bounded by the other setting (V1). Before 0.10.1 nothing: a
# --max-num-batched-tokens below the default max_num_seqs is refused (SchedulerConfig: "must be
# greater than or equal to max_num_seqs").
#   seqs_le_tokens:   max_num_seqs' default is min(default, max_num_batched_tokens)
#   both_bounded:     as seqs_le_tokens, and max_num_batched_tokens' default is
#                     min(max_num_seqs × max_model_len, default)
BATCH_DEFAULT_BOUNDS: tuple[Rule, ...] = (
    Rule(name="batch_default_bounds", changes="max_num_seqs / max_num_batched_tokens defaults "
         "bounded by each other", since="0.8.0", until="0.10.1", value="none",
         introduced_by="V1 by default (0.8.0)",
         removed_by="max_num_seqs default capped by max_num_batched_tokens (first released in "
         "0.10.1)",
         source="0.8.0 – 0.10.0 engine/arg_utils.py _set_default_args_v1: 'self.max_num_seqs "
         "= default_max_num_seqs' (no bound)", generation="v1"),
    Rule(name="batch_default_bounds", changes="max_num_seqs / max_num_batched_tokens defaults "
         "bounded by each other", since="0.10.1", until="0.11.1", value="seqs_le_tokens",
         introduced_by="max_num_seqs default capped by max_num_batched_tokens (first released "
         "in 0.10.1)",
         removed_by="get_batch_defaults, tokens bounded too (first released in 0.11.1)",
         source="0.10.1 – 0.10.2 _set_default_args_v1, 0.11.0 _set_default_args "
         "(engine/arg_utils.py): 'self.max_num_seqs = min(default_max_num_seqs[usage_context], "
         "self.max_num_batched_tokens or sys.maxsize)'", generation="v1"),
    Rule(name="batch_default_bounds", changes="max_num_seqs / max_num_batched_tokens defaults "
         "bounded by each other", since="0.11.1", until=None, value="both_bounded",
         introduced_by="get_batch_defaults, tokens bounded too (first released in 0.11.1)",
         source="0.11.1 – 0.33.0 engine/arg_utils.py (_set_default_args, then "
         "_set_default_max_num_seqs_and_batched_tokens_args): 'self.max_num_batched_tokens = "
         "min(self.max_num_seqs * model_config.max_model_len, self.max_num_batched_tokens)' "
         "when left out; 'self.max_num_seqs = min(self.max_num_seqs, "
         "self.max_num_batched_tokens)' when left out", generation="v1"),
)

V0_CHUNKED_PREFILL_ABOVE = 32768  # 0.7.2 arg_utils.py create_engine_config: use_long_context

# V0: what keeps chunked prefill off by default above 32768 tokens besides a sliding window and
# speculative decoding (which the caller passes as ``v0_chunked_prefill=False``), so that
# max_num_batched_tokens is max(max_model_len, 2048): "multimodal" (the config has a vision
# tower), "mla" (the config states kv_lora_rank: vLLM's ``use_mla``), "rocm" (not CUDA),
# "state" (Mamba state layers), "prefix_caching" (--enable-prefix-caching).
V0_CHUNKED_PREFILL_OFF: tuple[Rule, ...] = (
    Rule(name="v0_chunked_prefill_off", changes="V0: chunked prefill off by default (so "
         "max_num_batched_tokens = max(max_model_len, 2048))", since="0.6.0", until="0.6.1",
         value=("state", "prefix_caching"), introduced_by="before 0.6.0",
         removed_by="the prefix-caching check dropped (read in 0.6.1)",
         source="0.6.0 engine/arg_utils.py create_engine_config: 'not "
         "has_seqlen_agnostic_layers' (ModelConfig.contains_seqlen_agnostic_layers: Mamba "
         "state layers, refused before 0.10.2 anyway: memprof/core/hybrid_state.py) and 'not "
         "self.enable_prefix_caching' (--enable-prefix-caching)", generation="v0"),
    Rule(name="v0_chunked_prefill_off", changes="V0: chunked prefill off by default (so "
         "max_num_batched_tokens = max(max_model_len, 2048))", since="0.6.1", until="0.6.2",
         value=("state",), introduced_by="the prefix-caching check dropped (read in 0.6.1)",
         removed_by="multimodal models kept off, seqlen-agnostic check dropped (read in 0.6.2 "
         "and 0.6.3)",
         source="0.6.1 and 0.6.1.post2 engine/arg_utils.py create_engine_config: 'not "
         "has_seqlen_agnostic_layers'", generation="v0"),
    Rule(name="v0_chunked_prefill_off", changes="V0: chunked prefill off by default (so "
         "max_num_batched_tokens = max(max_model_len, 2048))", since="0.6.2", until="0.6.3",
         value=("multimodal", "state"), introduced_by="multimodal models kept off (0.6.2)",
         removed_by="seqlen-agnostic check dropped (read in 0.6.3)",
         source="0.6.2 engine/arg_utils.py create_engine_config: 'if use_long_context and not "
         "model_config.is_multimodal_model', 'not has_seqlen_agnostic_layers'",
         generation="v0"),
    Rule(name="v0_chunked_prefill_off", changes="V0: chunked prefill off by default (so "
         "max_num_batched_tokens = max(max_model_len, 2048))", since="0.6.3", until="0.6.5",
         value=("multimodal",), introduced_by="seqlen-agnostic check dropped (read in 0.6.3)",
         removed_by="not on ROCm (read in 0.6.5)",
         source="0.6.3, 0.6.3.post1 and 0.6.4.post1 engine/arg_utils.py create_engine_config: "
         "'if use_long_context and not model_config.is_multimodal_model', is_gpu = "
         "device_config.device_type == \"cuda\" (also on ROCm)", generation="v0"),
    Rule(name="v0_chunked_prefill_off", changes="V0: chunked prefill off by default (so "
         "max_num_batched_tokens = max(max_model_len, 2048))", since="0.6.5", until="0.7.0",
         value=("multimodal", "rocm"), introduced_by="not on ROCm (read in 0.6.5)",
         removed_by="the 0.7.0 row (the same checks, read in 0.7.0 – 0.7.3)",
         source="0.6.5 and 0.6.6.post1 engine/arg_utils.py create_engine_config: 'if "
         "model_config.is_multimodal_model: self.enable_chunked_prefill = "
         "bool(envs.VLLM_USE_V1)', then 'and not current_platform.is_rocm()'",
         generation="v0"),
    Rule(name="v0_chunked_prefill_off", changes="V0: chunked prefill off by default (so "
         "max_num_batched_tokens = max(max_model_len, 2048))", since="0.7.0", until="0.8.0",
         value=("multimodal", "rocm"), introduced_by="before 0.7.0",
         removed_by="EngineArgs._set_default_args_v0 (0.8.0)",
         source="0.7.0, 0.7.1, 0.7.2 and 0.7.3 engine/arg_utils.py create_engine_config: 'if "
         "model_config.is_multimodal_model: self.enable_chunked_prefill = "
         "bool(envs.VLLM_USE_V1)', then for a long context 'and not "
         "current_platform.is_rocm()' (is_gpu = device_config.device_type == \"cuda\" holds "
         "on ROCm too: platforms/rocm.py device_type = \"cuda\"); MLA turns chunked prefill "
         "off only in VllmConfig.__post_init__ (config.py), after SchedulerConfig sized the tokens",
         generation="v0"),
    Rule(name="v0_chunked_prefill_off", changes="V0: chunked prefill off by default (so "
         "max_num_batched_tokens = max(max_model_len, 2048))", since="0.8.0", until="0.11.0",
         value=("multimodal", "mla", "rocm"),
         introduced_by="EngineArgs._set_default_args_v0 (0.8.0)",
         removed_by="V0 engine removed (0.11.0)",
         source="0.8.0 – 0.10.2 engine/arg_utils.py _set_default_args_v0: 'if "
         "model_config.is_multimodal_model or model_config.use_mla: "
         "self.enable_chunked_prefill = False', then is_gpu = current_platform.is_cuda()",
         generation="v0"),
)
# V0 SchedulerConfig.__post_init__: a multimodal model's default max_num_batched_tokens is at
# least this (0.7.3 / 0.8.0 config.py _MULTIMODAL_MODEL_MAX_NUM_BATCHED_TOKENS; 0.10.2
# utils/__init__.py MULTIMODAL_MODEL_MAX_NUM_BATCHED_TOKENS = 5120)
V0_MULTIMODAL_MIN_TOKENS = 5120
V0_MULTIMODAL_MIN: tuple[Rule, ...] = (
    Rule(name="v0_multimodal_min_tokens", changes="max_num_batched_tokens default: "
         "multimodal floor", since="0.6.0", until="0.6.3", value=4096,
         introduced_by="before 0.6.0", removed_by="5120 (first released in 0.6.3)",
         source="0.6.0, 0.6.1.post2 and 0.6.2 config.py _MULTIMODAL_MODEL_MAX_NUM_BATCHED_TOKENS "
         "= 4096, read by SchedulerConfig.__init__", applies_to="multimodal",
         generation="v0"),
    Rule(name="v0_multimodal_min_tokens", changes="max_num_batched_tokens default: "
         "multimodal floor", since="0.6.3", until="0.11.0", value=V0_MULTIMODAL_MIN_TOKENS,
         introduced_by="5120 (first released in 0.6.3)", removed_by="V0 engine removed (0.11.0)",
         source="0.6.3, 0.6.4.post1, 0.6.6.post1, 0.7.3 and 0.8.0 config.py "
         "_MULTIMODAL_MODEL_MAX_NUM_BATCHED_TOKENS = 5120; 0.10.2 utils/__init__.py "
         "MULTIMODAL_MODEL_MAX_NUM_BATCHED_TOKENS", applies_to="multimodal", generation="v0"),
)

# ``--block-size`` values vLLM's CLI takes (argparse choices from ``CacheConfig.block_size``'s
# type): 0.7.x engine/arg_utils.py ``choices=[8, 16, 32, 64, 128]``; from 0.8.0
# config ``BlockSize = Literal[1, 8, 16, 32, 64, 128]``, 256 added later (v0.11.0
# vllm/config/cache.py ``BlockSize = Literal[1, 8, 16, 32, 64, 128, 256]``; memprof takes the
# 0.11.0 list for every V1 release, the release that added 256 is not identified).
BLOCK_SIZE_CHOICES: tuple[Rule, ...] = (
    Rule(name="block_size_choices", changes="--block-size accepted values", since="0.6.0",
         until="0.6.4", value=(8, 16, 32), introduced_by="before 0.6.0",
         removed_by="64 and 128 added (first released in 0.6.4)",
         source="0.6.0 and 0.6.3.post1 engine/arg_utils.py --block-size choices=[8, 16, 32]"),
    Rule(name="block_size_choices", changes="--block-size accepted values", since="0.6.4",
         until="0.8.0", value=(8, 16, 32, 64, 128), introduced_by="64 and 128 added (0.6.4)",
         removed_by="BlockSize Literal with 1 (0.8.0)",
         source="0.6.4.post1, 0.6.6.post1 and 0.7.3 engine/arg_utils.py --block-size "
         "choices=[8, 16, 32, 64, 128]"),
    Rule(name="block_size_choices", changes="--block-size accepted values", since="0.8.0",
         until=None, value=(1, 8, 16, 32, 64, 128, 256),
         introduced_by="BlockSize Literal (0.8.0; 256 by 0.11.0)",
         source="0.11.0 vllm/config/cache.py BlockSize = Literal[1, 8, 16, 32, 64, 128, 256]"),
)


# Which engine a release runs: "only V0" (0.6.x – 0.7.x: memprof does not model their opt-in V1
# alpha), "V1, V0 on request" (VLLM_USE_V1=0, or the automatic fallback below), "only V1" (V0
# removed).
V0_ENGINE: tuple[Rule, ...] = (
    Rule(name="v0_engine", changes="engine generation (V0 / V1)", since="0.6.0", until="0.8.0",
         value="v0 only", introduced_by="before 0.6.0",
         removed_by="V1 on by default (first released in 0.8.0)",
         source="0.6.0 - 0.6.4.post1: no VLLM_USE_V1 in envs.py (V0 the only engine); 0.6.5, "
         "0.6.6.post1 and 0.7.3 envs.py VLLM_USE_V1 default '0' (V1 an opt-in alpha, not "
         "modelled)"),
    Rule(name="v0_engine", changes="engine generation (V0 / V1)", since="0.8.0", until="0.11.0",
         value="v1, v0 on request", introduced_by="V1 on by default (first released in 0.8.0)",
         removed_by="V0 engine removed (0.11.0 wheel: no vllm/worker/worker.py)",
         source="0.8.0 / 0.10.2 envs.py VLLM_USE_V1 default '1'; engine/arg_utils.py "
         "create_engine_config: VLLM_USE_V1=0 → V0, unset → V1 unless "
         "_is_v1_supported_oracle falls back (V1_FALLBACK)"),
    Rule(name="v0_engine", changes="engine generation (V0 / V1)", since="0.11.0", until=None,
         value="v1 only", introduced_by="V0 engine removed (0.11.0)",
         source="0.11.0 wheel: vllm/worker/ keeps worker_base.py only; V1 is the engine"),
)

# What ``EngineArgs._is_v1_supported_oracle`` (engine/arg_utils.py) sends back to V0 when
# VLLM_USE_V1 is unset, among the settings memprof models; with VLLM_USE_V1=1 the same checks
# raise ("VLLM_USE_V1=1 is not supported with …", ``_raise_or_fallback``). One row per check and
# range; ``value`` is the check's key (``v1_fallback_reason``).
V1_FALLBACK: tuple[Rule, ...] = (
    Rule(name="v1_fallback_compute_capability", changes="engine generation (V0 / V1)",
         since="0.8.0", until="0.10.2", value="cc<8", introduced_by="V1 on by default (0.8.0)",
         removed_by="check gone in 0.10.2 (read in the 0.10.2 wheel)",
         source="0.8.0 – 0.10.1 engine/arg_utils.py _is_v1_supported_oracle: "
         "get_device_capability().major < 8 → 'Compute Capability < 8.0'"),
    Rule(name="v1_fallback_kv_cache_dtype", changes="engine generation (V0 / V1)",
         since="0.8.0", until="0.8.2", value="kv any", introduced_by="V1 on by default (0.8.0)",
         removed_by="fp8 KV with FlashAttention 3 (first released in 0.8.2)",
         source="0.8.0 / 0.8.1 engine/arg_utils.py _is_v1_supported_oracle: kv_cache_dtype != "
         "'auto' → '--kv-cache-dtype'"),
    Rule(name="v1_fallback_kv_cache_dtype", changes="engine generation (V0 / V1)",
         since="0.8.2", until="0.9.0", value="kv fp8 needs sm90",
         introduced_by="fp8 KV with FlashAttention 3 (first released in 0.8.2)",
         removed_by="ROCm accepted (read in the 0.9.0 wheel)",
         source="0.8.2 – 0.8.5 engine/arg_utils.py _is_v1_supported_oracle: supported only "
         "for fp8* with FlashAttention and flash_attn_supports_fp8() (FA version 3 and "
         "capability major 9)"),
    Rule(name="v1_fallback_kv_cache_dtype", changes="engine generation (V0 / V1)",
         since="0.9.0", until="0.10.0", value="kv fp8 needs sm90 or rocm",
         introduced_by="ROCm accepted (read in the 0.9.0 wheel)",
         removed_by="Platform.is_kv_cache_dtype_supported (first released in 0.10.0; not "
         "modelled: taken as supported)",
         source="0.9.0 / 0.9.2 engine/arg_utils.py _is_v1_supported_oracle: is_rocm() → "
         "supported, else fp8* with flash_attn_supports_fp8() (attention/utils/fa_utils.py: "
         "get_flash_attn_version() == 3 and capability major 9)"),
    Rule(name="v1_fallback_dtype", changes="engine generation (V0 / V1)",
         since="0.8.0", until="0.9.2", value="dtype fp16/bf16",
         introduced_by="V1 on by default (0.8.0)",
         removed_by="check gone in 0.9.2 (read in the 0.9.2 wheel; 0.9.1 not read)",
         source="0.8.0 – 0.9.0 engine/arg_utils.py _is_v1_supported_oracle: "
         "V1_SUPPORTED_DTYPES = [torch.bfloat16, torch.float16]"),
    Rule(name="v1_fallback_speculative", changes="engine generation (V0 / V1)",
         since="0.8.0", until="0.9.0", value="mtp", introduced_by="V1 on by default (0.8.0)",
         removed_by="deepseek_mtp accepted by the oracle (first released in 0.9.0)",
         source="0.8.5 engine/arg_utils.py _is_v1_supported_oracle: speculative methods other "
         "than ngram / eagle / eagle3 → 'Speculative Decoding'; 0.9.0 adds deepseek_mtp"),
    Rule(name="v1_fallback_eagle", changes="engine generation (V0 / V1)",
         since="0.8.0", until="0.8.5", value="eagle", introduced_by="V1 on by default (0.8.0)",
         applies_to="eagle",
         removed_by="eagle / eagle3 accepted by the oracle (0.8.5)",
         source="0.8.3 / 0.8.4 engine/arg_utils.py _is_v1_supported_oracle: 'Eagle is under "
         "development' → _warn_or_fallback('Eagle') (V0 unless VLLM_USE_V1=1); 0.8.5 accepts "
         "ngram / eagle / eagle3 (0.8.0 – 0.8.2 not read: taken as 0.8.3)"),
    Rule(name="v1_fallback_quantization", changes="engine generation (V0 / V1)",
         since="0.8.0", until="0.8.3", value="quant bnb4 gguf",
         introduced_by="V1 on by default (0.8.0)",
         removed_by="bitsandbytes on V1 (first released in 0.8.3)",
         source="0.8.0 / 0.8.1 / 0.8.2 engine/arg_utils.py _is_v1_supported_oracle: "
         "V1_UNSUPPORTED_QUANT = ['bitsandbytes', 'gguf'] ('Some quantization is not compatible "
         "with torch.compile') → '--quantization'; model_config.quantization is the flag or the "
         "checkpoint's quant_method"),
    Rule(name="v1_fallback_quantization", changes="engine generation (V0 / V1)",
         since="0.8.3", until="0.9.0", value="quant gguf",
         introduced_by="bitsandbytes on V1 (first released in 0.8.3)",
         removed_by="GGUF on V1 (first released in 0.9.0)",
         source="0.8.3 / 0.8.4 / 0.8.5 engine/arg_utils.py _is_v1_supported_oracle: "
         "V1_UNSUPPORTED_QUANT = ['gguf']; the 0.9.0 wheel has no such list"),
    Rule(name="v1_fallback_lora", changes="engine generation (V0 / V1)",
         since="0.8.0", until="0.8.3", value="lora", introduced_by="V1 on by default (0.8.0)",
         removed_by="LoRA on V1 by default (first released in 0.8.3)",
         source="0.8.0 / 0.8.1 / 0.8.2 engine/arg_utils.py _is_v1_supported_oracle: "
         "'LoRA is supported on V1, but off by default for now': enable_lora and "
         "_warn_or_fallback('LORA'), V0 unless VLLM_USE_V1=1 is set (then V1, with a warning); "
         "the 0.8.3 wheel has no such check", applies_to="lora"),
    Rule(name="v1_fallback_pipeline_parallel", changes="engine generation (V0 / V1)",
         since="0.8.0", until="0.9.0", value="pp", introduced_by="V1 on by default (0.8.0)",
         removed_by="PP on V1 with the mp executor (first released in 0.9.0)",
         source="0.8.0 – 0.8.2 engine/arg_utils.py _is_v1_supported_oracle: pipeline_parallel_size "
         "> 1 and _warn_or_fallback('PP'); 0.8.3 – 0.8.5: 'Pipeline Parallelism without Ray "
         "distributed executor' (the mp executor is the default); 0.9.0 accepts mp"),
)
# the rows of each check (``memprof versions`` diffs each as one rule)
# vLLM's Model Runner V2 (v1/worker/gpu/model_runner.py): which deployments run it per release
# (``VllmConfig.use_v2_model_runner``) and the three terms in which its profile run differs from
# the V1 runner's that memprof charges are rows of memprof/core/engines/vllm_runner.py; the
# estimate states the runner and those terms (``VLLM.runner_notes``) [approximation: V1's terms
# are charged].
MODEL_RUNNER_V2_DEFAULT: tuple[Rule, ...] = V2_DEFAULT


V1_FALLBACK_RULES: tuple[tuple[Rule, ...], ...] = tuple(
    {r.name: tuple(x for x in V1_FALLBACK if x.name == r.name) for r in V1_FALLBACK}.values())


# memprof's quantisation method -> the name vLLM's ``ModelConfig.quantization`` holds for it
_VLLM_QUANT_NAME = {"bnb4": "bitsandbytes", "gguf": "gguf"}


def v1_fallback_reason(dep: DeploymentView, arch: str | None, version: str,
                       quant_method: str | None = None) -> str | None:
    """Why V1 does not run this deployment at ``version`` (the feature vLLM's oracle names), or
    ``None``: rows of ``V1_FALLBACK``. An unknown architecture (``--gpu-memory`` alone) is not
    taken as below compute capability 8.0. ``quant_method``: the model's quantisation as memprof
    sizes it (the ``--quantization`` flag, else the checkpoint's ``quantization_config``), which
    is what vLLM's ``ModelConfig.quantization`` holds; None where the caller has no model."""
    sm = arch_cc(arch) if arch else None
    quant = _VLLM_QUANT_NAME.get(quant_method or "")
    for rows in V1_FALLBACK_RULES:
        check = value_at(rows, version)
        if (str(check).startswith("quant ") and quant_method in str(check).split()[1:]
                and quant is not None):
            return f"--quantization {quant}"
        if check == "lora" and dep.enable_lora and dep.vllm_use_v1 != 1:
            return "LORA"
        if check == "cc<8" and sm is not None and sm < 80:
            return f"Compute Capability < 8.0 ({arch})"
        if check == "kv any" and dep.kv_cache_dtype != "auto":
            return f"--kv-cache-dtype {dep.kv_cache_dtype}"
        if (str(check).startswith("kv fp8 needs sm90") and dep.kv_cache_dtype != "auto"
                and not (dep.kv_cache_dtype.startswith("fp8") and sm == 90)
                and not (check == "kv fp8 needs sm90 or rocm" and str(arch).startswith("gfx"))):
            return (f"--kv-cache-dtype {dep.kv_cache_dtype} (V1 takes fp8 with FlashAttention "
                    "3 on sm90 only)")
        if check == "dtype fp16/bf16" and FLAG_ALIASES.get(dep.dtype, dep.dtype) == "float32":
            return f"--dtype {dep.dtype}"
        if check == "mtp" and dep.speculative_mtp:
            return "Speculative Decoding (deepseek_mtp)"
        if (check == "eagle" and dep.num_speculative_tokens
                and dep.speculative_method in HEAD_METHODS):
            return "Eagle"
        if check == "pp" and dep.pp > 1:
            return "Pipeline Parallelism without Ray distributed executor"
    return None


def _v0_batched_tokens(max_model_len: int, chunked: bool, chunk: int = 2048) -> int:
    return chunk if chunked else max(max_model_len, 2048)


# V0's max_num_batched_tokens with chunked prefill, by scheme (``BATCH_DEFAULTS``)
V0_CHUNKED_TOKENS = {"v0": 2048, "v0_512": 512}


# the small and large tiers of a V1 release: (LLM tokens, serve tokens, max_num_seqs)
_SMALL = (8192, 2048, 256)
_LARGE = (16384, 8192, 1024)
_HUGE = (16384, 16384, 1024)
# the name tests of the schemes (lower-case substrings of the device name)
_NAME_LARGE = ("h100", "h200")  # 0.8.0 – 0.8.4
_NAME_SMALL = "a100"  # 0.9.0 on


def device_name(gpu: GPU) -> str:
    """The name vLLM's platform reports for ``gpu`` (NVML's name, ``GPU.device_name``), or the
    catalog name where the catalog knows none."""
    return gpu.device_name or gpu.name


class BatchDefault(NamedTuple):
    """vLLM's (max_num_batched_tokens, max_num_seqs) defaults on one device at one release, and
    ``why``: what the rule read of the device when the name, rather than the memory alone,
    decided ("" otherwise)."""

    tokens: int
    seqs: int
    why: str = ""


@lru_cache(maxsize=256)  # a pure function of its arguments; a sweep asks the same few
def batch_default(gpu: GPU, version: str | None = None, entrypoint: str = "serve",
                  max_model_len: int = 0, v0_chunked_prefill: bool = True,
                  given: tuple[int | None, int | None] = (None, None),
                  model_facts: frozenset[str] = frozenset()) -> BatchDefault:
    """vLLM's defaults for (max_num_batched_tokens, max_num_seqs) by device, release and entry
    point (``serve``: OPENAI_API_SERVER, ``llm``: LLM_CLASS): the scheme of ``BATCH_DEFAULTS``,
    then the bounds of ``BATCH_DEFAULT_BOUNDS`` against ``given`` (the
    (max_num_batched_tokens, max_num_seqs) the flags set, None where left out).
    ``model_facts``: "multimodal" / "mla" where the model is one, "prefix_caching" where
    ``--enable-prefix-caching`` is on (V0's chunked-prefill default, ``V0_CHUNKED_PREFILL_OFF``,
    and the multimodal floor ``V0_MULTIMODAL_MIN``).

    0.33.0 ``EngineArgs.get_batch_defaults`` (engine/arg_utils.py): ≥ 160 GiB: 16384 / 1024 for
    both; ≥ 70 GiB, not an A100 and not a GB10: LLM 16384 / serve 8192, 1024 sequences;
    otherwise LLM 8192 / serve 2048, 256 sequences. 0.8.0 – 0.8.4 test the device name for
    "h100" / "h200" instead of the memory. V0: 256 sequences and ``max_model_len``-dependent
    tokens (``v0_chunked_prefill``: chunked prefill would be on if ``max_model_len`` > 32768).
    """
    scheme = value_at(BATCH_DEFAULTS, version, "v1_gb10")
    if scheme in V0_CHUNKED_TOKENS:
        off = value_at(V0_CHUNKED_PREFILL_OFF, version, ())
        facts = model_facts | ({"rocm"} if gpu.is_rocm else set())
        chunked = (v0_chunked_prefill and max_model_len > V0_CHUNKED_PREFILL_ABOVE
                   and not any(f in off for f in facts))  # type: ignore[operator]
        tokens = _v0_batched_tokens(max_model_len, chunked, V0_CHUNKED_TOKENS[str(scheme)])
        if "multimodal" in model_facts:
            floor = value_at(V0_MULTIMODAL_MIN, version, V0_MULTIMODAL_MIN_TOKENS)
            tokens = max(tokens, int(floor))  # type: ignore[call-overload]
        return BatchDefault(tokens, 256)
    name = device_name(gpu)
    low = name.lower()
    gib = gpu.total_bytes / GiB
    why = ""
    if scheme in ("v1_name", "v1_name256"):
        large = any(n in low for n in _NAME_LARGE)
        tier = _LARGE if large else _SMALL
        if scheme == "v1_name":
            tier = (*tier[:2], 1024)
        held = "has" if large else "has no"
        why = f"a device named '{name}' ({held} 'h100' or 'h200' in its name)"
        if not gpu.device_name:
            why += ("; memprof knows no driver name for this card, so the name is assumed: "
                    "name a catalog card with --gpu")
    elif (not gpu.nvml_memory_info and scheme in ("v1_70g", "v1_a100", "v1_160g")
          and value_at(NVML_TOTAL_UNCAUGHT, version, False)):
        tier = _SMALL
        why = (f"{gpu.name}: NVML reports no memory total for it, so vLLM's "
               "get_device_total_memory raises and the defaults take device_memory = 0")
    elif scheme in ("v1_160g", "v1_gb10") and gib >= 160:
        tier = _HUGE
    elif gib >= 70 and scheme != "v1_70g" and _NAME_SMALL in low:
        tier = _SMALL
        why = f"a device named '{name}' ('a100' in its name keeps it below the 70 GiB tier)"
    elif gib >= 70 and scheme == "v1_gb10" and gpu.arch == "sm121":
        tier = _SMALL
        why = f"{gpu.name} (compute capability 12.1: a GB10 stays below the 70 GiB tier)"
    else:
        tier = _LARGE if gib >= 70 else _SMALL
    tokens, seqs = (tier[0] if entrypoint == "llm" else tier[1]), tier[2]
    bound = value_at(BATCH_DEFAULT_BOUNDS, version, "both_bounded")
    given_tokens, given_seqs = given
    if bound == "both_bounded" and given_tokens is None and max_model_len:
        tokens = min((given_seqs or seqs) * max_model_len, tokens)
    if bound in ("seqs_le_tokens", "both_bounded"):
        seqs = min(seqs, given_tokens or tokens)
    return BatchDefault(tokens, seqs, why)


def batch_defaults(gpu: GPU, version: str | None = None, entrypoint: str = "serve",
                   max_model_len: int = 0, v0_chunked_prefill: bool = True,
                   given: tuple[int | None, int | None] = (None, None),
                   model_facts: frozenset[str] = frozenset()) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of :func:`batch_default`."""
    d = batch_default(gpu, version, entrypoint, max_model_len, v0_chunked_prefill, given,
                      model_facts)
    return d.tokens, d.seqs


def default_utilization(version: str | None) -> float:
    """vLLM's ``gpu_memory_utilization`` default at ``version`` (rows in
    ``GPU_MEMORY_UTILIZATION``)."""
    return float(value_at(GPU_MEMORY_UTILIZATION, version,  # type: ignore[arg-type]
                          DEFAULT_GPU_MEMORY_UTILIZATION))


class VLLM(Engine):
    """vLLM (``vllm serve`` / ``LLM``), every release of its row in ``releases.py``."""

    name: ClassVar[str] = "vllm"
    display: ClassVar[str] = releases.VLLM.display
    # vllm/envs.py VLLM_ALLOW_LONG_MAX_MODEL_LEN
    long_context_env: ClassVar[str] = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
    overrides_flag: ClassVar[str] = "--hf-overrides"
    budget_by_utilization: ClassVar[bool] = True
    tiered_max_num_seqs: ClassVar[bool] = True
    graph_estimate_by_release: ClassVar[bool] = True
    replays_model_load: ClassVar[bool] = True
    quant_flag_by_release: ClassVar[bool] = True
    selects_attention_backend: ClassVar[bool] = True
    logs_budget_lines: ClassVar[bool] = True
    has_entrypoint: ClassVar[bool] = True
    dp_replicates: ClassVar[bool] = True
    registers_model_init_buffers: ClassVar[bool] = True
    has_v0_generation: ClassVar[bool] = True
    # --max-model-len auto (human_readable_int_or_auto, 0.14.0 on: memprof/core/auto_fit.py)
    takes_max_model_len_auto: ClassVar[bool] = True
    models_state_mixers: ClassVar[bool] = True
    cli_launcher: ClassVar[tuple[str, str] | None] = ("vllm", "serve")
    launcher_prefix: ClassVar[str] = "vllm serve "
    # EngineArgs.add_cli_args (vllm/engine/arg_utils.py, v0.11.0); --engine, --engine-version,
    # --scratch and --gpu-memory-in-use are memprof's own
    flags: ClassVar[dict[str, tuple[str, ...]]] = {
        "engine": ("--engine",),
        "engine_version": ("--engine-version",),
        "entrypoint": ("--entrypoint",),
        "tp": ("-tp", "--tensor-parallel-size"),
        "pp": ("-pp", "--pipeline-parallel-size"),
        "dp": ("-dp", "--data-parallel-size"),
        "enable_expert_parallel": ("--enable-expert-parallel",),
        "dtype": ("--dtype",),
        "hf_overrides": ("--hf-overrides",),
        "quantization": ("--quantization", "-q"),
        "kv_cache_dtype": ("--kv-cache-dtype",),
        "max_model_len": ("--max-model-len",),
        "max_num_seqs": ("--max-num-seqs",),
        "max_num_batched_tokens": ("--max-num-batched-tokens",),
        "gpu_memory_utilization": ("--gpu-memory-utilization",),
        "block_size": ("--block-size",),
        "kv_cache_memory_bytes": ("--kv-cache-memory-bytes", "--kv-cache-memory"),
        "enforce_eager": ("--enforce-eager",),
        "num_speculative_tokens": ("--num-speculative-tokens",),
        "speculative_method": ("--speculative-method",),
        "speculative_model": ("--speculative-model",),
        "attention_backend": ("--attention-backend",),
        "scratch": ("--scratch",),
        "gpu_memory_in_use": ("--gpu-memory-in-use",),
        "disable_custom_all_reduce": ("--disable-custom-all-reduce",),
        "no_gpu_peer_access": ("--no-gpu-peer-access",),
        "nvidia_driver": ("--nvidia-driver",),
        "nnodes": ("--nnodes",),
        "disable_hybrid_kv_cache_manager": ("--disable-hybrid-kv-cache-manager",),
        "enable_prefix_caching": ("--enable-prefix-caching",),
        "mamba_cache_mode": ("--mamba-cache-mode",),
        "assume_architecture": ("--assume-architecture",),
        "vllm_use_v1": ("--vllm-use-v1",),
        "vllm_use_flashinfer_sampler": ("--vllm-use-flashinfer-sampler",),
        "vllm_rocm_use_aiter": ("--vllm-rocm-use-aiter",),
        "nccl_nvls_enable": ("--nccl-nvls-enable",),
        "vllm_allreduce_use_symm_mem": ("--vllm-allreduce-use-symm-mem",),
        "pytorch_cuda_alloc_conf": ("--pytorch-cuda-alloc-conf",),
        "limit_mm_per_prompt": ("--limit-mm-per-prompt",),
        "mm_processor_kwargs": ("--mm-processor-kwargs",),
        "mm_encoder_tp_mode": ("--mm-encoder-tp-mode",),
        "runner": ("--runner",),
        "convert": ("--convert",),
        "task": ("--task",),
        "enable_lora": ("--enable-lora",),
        "max_loras": ("--max-loras",),
        "max_lora_rank": ("--max-lora-rank",),
        "lora_extra_vocab_size": ("--lora-extra-vocab-size",),
        "lora_dtype": ("--lora-dtype",),
        "fully_sharded_loras": ("--fully-sharded-loras",),
        "enable_lora_bias": ("--enable-lora-bias",),
        "specialize_active_lora": ("--specialize-active-lora",),
        "compile_cache": ("--compile-cache",),
    }
    positional_model: ClassVar[bool] = True  # vllm serve MODEL
    image_entrypoint_serves: ClassVar[bool] = True  # the vLLM image's entrypoint: vllm serve

    # --- rank layout: TP×PP workers per engine, DP whole engines -------------------------------

    def world_size(self, dep: DeploymentView) -> int:
        """TP×PP×DP processes."""
        return dep.tp * dep.pp * dep.dp

    def copies(self, dep: DeploymentView) -> int:
        """DP replicates the non-expert weights."""
        return dep.dp

    def ep_size(self, dep: DeploymentView) -> int:
        """Experts are spread over TP×DP ranks with --enable-expert-parallel (FusedMoE)."""
        return dep.tp * dep.dp if dep.enable_expert_parallel else 1

    def moe_tp_size(self, dep: DeploymentView) -> int:
        """Without EP, FusedMoE flattens TP across DP: experts' I is split TP×DP ways."""
        return 1 if dep.enable_expert_parallel else dep.tp * dep.dp

    def rank_coords(self, dep: DeploymentView) -> list[RankCoord]:
        """Global rank order: DP outermost, then PP, TP fastest."""
        out = []
        for dp_rank in range(dep.dp):
            for pp_stage in range(dep.pp):
                for tp_rank in range(dep.tp):
                    rank = (dp_rank * dep.pp + pp_stage) * dep.tp + tp_rank
                    ep = dp_rank * dep.tp + tp_rank if dep.enable_expert_parallel else None
                    out.append(RankCoord(rank, tp_rank, pp_stage, dp_rank, ep))
        return out

    def identical_engines(self, dep: DeploymentView) -> int:
        """Without expert parallelism every DP engine is the first one (a rank's class reads its
        PP stage and TP rank, never its DP rank)."""
        return dep.dp if not dep.enable_expert_parallel else 1

    # --- defaults -----------------------------------------------------------------------------

    def batch_defaults(self, gpu: GPU, version: str | None, entrypoint: str,
                       max_model_len: int, v0_chunked_prefill: bool = True,
                       given: tuple[int | None, int | None] = (None, None),
                       model_facts: frozenset[str] = frozenset()) -> tuple[int, int]:
        return batch_defaults(gpu, version, entrypoint, max_model_len, v0_chunked_prefill, given,
                              model_facts)

    def batch_default_notes(self, asked: DeploymentView, dep: DeploymentView,
                            gpu: GPU) -> list[str]:
        """Which default was applied and why, where the release's rule read the device's name
        (or a GB10's capability) rather than its memory alone: "vLLM 0.8.4: max_num_seqs 256 on
        a device named 'NVIDIA GeForce RTX 3090' …"."""
        left = [f for f in ("max_num_batched_tokens", "max_num_seqs")
                if getattr(asked, f) is None]
        version = dep.engine_version or ""
        if not left or split_generation(version)[1] == "v0":
            return []
        d = batch_default(gpu, version, dep.entrypoint, dep.max_model_len or 0,
                          given=(asked.max_num_batched_tokens, asked.max_num_seqs))
        if not d.why:
            return []
        rule = rule_in_force(BATCH_DEFAULTS, version)
        values = ", ".join(f"{f} {getattr(dep, f)}" for f in left)
        context = "LLM_CLASS" if dep.entrypoint == "llm" else "OPENAI_API_SERVER"
        source = rule.source.split(":")[0] if rule else "engine/arg_utils.py"
        return [f"vLLM {split_generation(version)[0]}: {values} ({context} defaults) on {d.why}; "
                f"{source}"]

    def default_utilization(self, dep: DeploymentView, version: str) -> float | None:
        return dep.gpu_memory_utilization or default_utilization(version)

    # --- budget line --------------------------------------------------------------------------

    def budget(self, dep: DeploymentView, gpu: GPU, *, requested: int, budgeted: int,
               baseline: int, loaded: int, mfs: float) -> Budget:
        if dep.kv_cache_memory_bytes:
            # vLLM returns --kv-cache-memory-bytes verbatim and then allocates it: the engine
            # holds what it budgeted plus that KV cache, whatever gpu_memory_utilization says
            return Budget(dep.kv_cache_memory_bytes, budgeted + dep.kv_cache_memory_bytes)
        return Budget(requested - budgeted, requested)

    def used(self, comps: Sequence[C], base: int, envelope: int) -> tuple[int, list[C]]:
        """The envelope (never less than what it holds) plus the runtime components."""
        runtime: list[C] = []
        held_inside = outside = 0
        for c in comps:  # (one pass: every rank of a sweep asks)
            where = c.where
            if where == "budget":
                held_inside += c.bytes
            elif where == "runtime" and c.bytes > 0:
                runtime.append(c)
                outside += c.bytes
        return base + max(envelope, held_inside) + outside, runtime

    def startup_budget_refusal(self, dep: DeploymentView, base: int, envelope: int,
                               total: int) -> bool:
        """``request_memory`` (vllm/v1/worker/utils.py): free memory below the requested."""
        return not dep.kv_cache_memory_bytes and base + envelope > total

    def derived_max_model_len(self, cfg: dict[str, Any]) -> tuple[int, str] | None:
        return smallest_length_key_max_len(cfg)

    def block_size_choices(self, version: str | None) -> tuple[int, ...] | None:
        choices = value_at(BLOCK_SIZE_CHOICES, version)
        return choices if isinstance(choices, tuple) else None

    def check_architecture(self, release: str, architecture: str, model: str) -> None:
        """The release's model registry (``memprof.core.engines.vllm_registry``)."""
        check_registered(split_generation(release)[0], architecture, model)

    def rules_release(self, dep: DeploymentView, arch: str | None, version: str,
                      quant_method: str | None = None) -> str:
        """``_rules_release``, refusing n-gram speculation on the V0 engine: V0 drafts through
        its own spec-decode worker (spec_decode/spec_decode_worker.py, batch expansion or the MQA
        scorer), which memprof does not model (memprof/core/speculative.py models V1's)."""
        out = self._rules_release(dep, arch, version, quant_method)
        if (dep.num_speculative_tokens and not dep.speculative_mtp
                and split_generation(out)[1] == "v0"):
            raise BadInput(f"--speculative-method {dep.speculative_method} on vLLM "
                           f"{split_generation(out)[0]}'s V0 engine: its spec-decode worker is "
                           "not modelled", hint="use --engine-version 0.8.0 or later on V1, or "
                           "drop the speculative settings")
        return out

    def _rules_release(self, dep: DeploymentView, arch: str | None, version: str,
                       quant_method: str | None = None) -> str:
        """``version`` + ``"+v0"`` where the V0 engine runs a release whose default is V1
        (``V0_ENGINE``): ``VLLM_USE_V1=0``, or unset and ``v1_fallback_reason`` names a
        feature. ``VLLM_USE_V1=1`` with such a feature, V1 before 0.8.0 and V0 from 0.11.0 are
        refused as vLLM refuses them (or memprof does not model them)."""
        release, _ = split_generation(version)
        use = dep.vllm_use_v1
        if use is None and version.endswith(V0_SUFFIX):  # "--engine-version 0.8.5+v0"
            use = 0
        if use not in (None, 0, 1):
            raise BadInput(f"--vllm-use-v1 {use}: VLLM_USE_V1 is 0 or 1",
                           hint="pass --vllm-use-v1 0 for the V0 engine, 1 for V1")
        era = value_at(V0_ENGINE, release)
        if era == "v0 only":
            if use == 1:
                raise BadInput(f"--vllm-use-v1 1: memprof models vLLM {release} with its default "
                               "V0 engine only (V1 was an opt-in alpha from 0.6.5 to 0.7.x)",
                               hint="drop --vllm-use-v1, or pass --engine-version 0.8.0 or later")
            return release
        if era == "v1 only":
            if use == 0:
                raise BadInput(f"--vllm-use-v1 0: vLLM {release} has no V0 engine (removed in "
                               "0.11.0)", hint="pass --engine-version 0.10.2 or earlier for V0, "
                               "or drop --vllm-use-v1")
            return release
        if use == 0:
            return release + V0_SUFFIX
        why = v1_fallback_reason(dep, arch, release, quant_method)
        if why is None:
            return release
        if use == 1:
            raise BadInput(f"VLLM_USE_V1=1 is not supported with {why} (vLLM {release})",
                           hint="drop --vllm-use-v1 (vLLM then falls back to V0), or change the "
                           "setting")
        return release + V0_SUFFIX

    def notes(self, dep: DeploymentView, mfs: float, gpu: GPU | None = None) -> list[str]:
        """On a GPU that shares the host's memory: what vLLM's budget reads there and memprof
        does not size (memprof/core/engines/unified_memory.py); on the pooling runner what it
        changes (memprof/core/engines/vllm_pooling.py)."""
        return ([] if gpu is None else unified_memory_notes(dep.engine_version, gpu)) + (
            pooling_notes(dep))

    def release_notes(self, dep: DeploymentView, arch: str | None,
                      quant_method: str | None = None) -> list[str]:
        version = dep.engine_version or ""
        release, generation = split_generation(version)
        if generation != "v0" or value_at(V0_ENGINE, release) == "v0 only":
            return []
        why = v1_fallback_reason(dep, arch, release, quant_method)
        if dep.vllm_use_v1 == 0 or why is None:
            return [f"vLLM {release} with VLLM_USE_V1=0: modelled with the V0 engine's rules "
                    "(memprof versions lists them as V0)"]
        return [f"vLLM {release} falls back to the V0 engine for {why} "
                "(engine/arg_utils.py _is_v1_supported_oracle): modelled with V0's rules"]

    def runner_notes(self, dep: DeploymentView, *, architecture: str, moe: bool,
                     hybrid: bool, quantised: bool = False, vocab: int = 0,
                     logits_itemsize: int = 2, runner_listed: Sequence[Any] = ()) -> list[str]:
        """Where vLLM runs the model with Model Runner V2 (``vllm_runner.runs_v2``) and memprof
        charges the V1 runner's profile run, one note that says so and gives V2's three terms
        (``vllm_runner.v2_terms``) for this deployment's last PP stage."""
        version = dep.engine_version or ""
        release, _ = split_generation(version)
        if convert_of(dep) is not None and pooling_runs_v2(release):
            return []  # V2's pooling runner: its note is vllm_pooling.pooling_notes (no sampler)
        # from 0.29.0 every model runs V2 (but for the features V2 does not support) and its
        # profile run charges a CUDA-graph estimate of its own (memprof/core/engines/
        # vllm_runner.py V2_GRAPH_ESTIMATE, memprof/core/terms/runner_v2_graphs.py): a note of
        # its own, asked first, so a deployment there reads no family rows
        warm = dep.compile_cache == "warm"
        every = rule_in_force(V2_DEFAULT, release)
        if (every is not None and getattr(every.value, "every", False)
                and value_at(V2_GRAPH_ESTIMATE, release, default=True)
                and self.runs_runner_v2(dep, architecture=architecture, moe=moe,
                                        hybrid=hybrid, quantised=quantised,
                                        runner_listed=runner_listed)):
            return [self._v2_own_graphs_note(dep, release, vocab, logits_itemsize)]
        if not self.runs_runner_v2(dep, architecture=architecture, moe=moe, hybrid=hybrid,
                                   quantised=quantised, runner_listed=runner_listed):
            listed = listed_at([r for r in runner_listed if isinstance(r, Rule)],
                               architecture, release)
            if dep.num_speculative_tokens and runs_v2(version, listed=listed, moe=moe,
                                                      hybrid=hybrid, quantised=quantised):
                return [f"--speculative-method {dep.speculative_method}: vLLM {release} runs "
                        "this model with the V1 runner, not Model Runner V2, which has no "
                        f"{dep.speculative_method} drafter (config/vllm.py "
                        "_get_v2_model_runner_unsupported_features; memprof/core/engines/"
                        "vllm_runner.py V2_FALLBACK_SPECULATIVE)"]
            if not (warm and dep.engine_version):
                return []
            if rule_in_force(COLD_COMPILE_EXAMPLE_ARGS, release) is not None:
                return [f"--compile-cache warm: vLLM {release} runs this model with the V1 "
                        "runner; nothing is compiled cold, so its profile run carries no "
                        "autotuning example arguments (memprof/core/terms/cold_compile.py)"]
            return [f"--compile-cache warm: vLLM {release} runs this model with the V1 runner, "
                    "whose profile-run terms memprof models the same on a cold and a warm "
                    "compile cache"]
        seqs, mnbt = dep.max_num_seqs, dep.max_num_batched_tokens
        terms = ""
        if vocab and isinstance(seqs, int) and isinstance(mnbt, int):
            t = v2_terms(release, max_num_seqs=seqs, max_num_batched_tokens=mnbt, vocab=vocab,
                         logits_itemsize=logits_itemsize)
            graph = ("" if t.graph_estimate else "charges no CUDA-graph estimate "
                     "(profile_cudagraph_memory returns 0), ")
            charged = ("charged by the budget line's total_consumed" if t.sampler_state_charged
                       else "which this release's budget line does not charge")
            stage, state = fmt_bytes(t.sampler_stage_bytes), fmt_bytes(t.sampler_state_bytes)
            terms = (f": V2's profile run {graph}samples greedily on the model-dtype logits "
                     f"({stage} for {min(seqs, mnbt)} rows; V1's warm-up sorts fp32 copies) and "
                     f"keeps the sampler's state ({state}: output_bin_counts [{seqs}, {vocab}] "
                     f"int32 and two bitmasks), {charged}")
        if dep.enforce_eager or dep.compile_cache == "warm":
            why = "--enforce-eager" if dep.enforce_eager else "--compile-cache warm"
            return [f"vLLM {release} runs {architecture} with Model Runner V2 (config/vllm.py "
                    f"use_v2_model_runner), and nothing is compiled in its profile run "
                    f"({why}): memprof charges V2's own profile terms "
                    f"(memprof/core/terms/runner_v2_profile.py){terms}"]
        if rule_in_force(COLD_COMPILE_EXAMPLE_ARGS, release) is not None:
            return [f"vLLM {release} runs {architecture} with Model Runner V2 (config/vllm.py "
                    f"use_v2_model_runner) and compiles it in its profile run on a cold start: "
                    f"memprof charges V2's own profile terms{terms}, with the cold compile's "
                    "autotuning example arguments (a copy of the embedding table and the "
                    "gather's output, charged as peak activation: "
                    "memprof/core/terms/cold_compile.py); --compile-cache warm models a restart "
                    "on the cache a first start saved"]
        return [f"vLLM {release} runs {architecture} with Model Runner V2 (config/vllm.py "
                f"use_v2_model_runner) and compiles in its profile run on a cold start: "
                f"memprof charges the V1 runner's profile run [approximation]{terms}. "
                "--compile-cache warm models a restart on the cache a first start saved; "
                "VLLM_USE_V2_MODEL_RUNNER=0 runs the V1 runner memprof models"]

    @staticmethod
    def _v2_own_graphs_note(dep: DeploymentView, release: str, vocab: int,
                            logits_itemsize: int) -> str:
        """The note of a release whose Model Runner V2 runs every model and estimates its own
        CUDA graphs (0.29.0 on): V2's graph estimate, and V2's own profile-run terms (the
        greedy sampler pass, and from 0.33.0 the warm-up pass, ``V2_SAMPLER_WARMUP_PASS``)."""
        warm = dep.compile_cache == "warm"
        warmup_pass = bool(value_at(V2_SAMPLER_WARMUP_PASS, release, default=True))
        cold = (not (warm or dep.enforce_eager)
                and rule_in_force(COLD_COMPILE_EXAMPLE_ARGS, release) is not None)
        own = dep.enforce_eager or warm or cold
        cold_args = (", with the cold compile's autotuning example arguments (a copy of the "
                     "embedding table and the gather's output, charged as peak activation: "
                     "memprof/core/terms/cold_compile.py)" if cold else "")
        graphs = ("captures no CUDA graphs" if dep.enforce_eager else
                  "charges V2's own CUDA-graph estimate (v1/worker/gpu/cudagraph_utils.py "
                  "profile_cudagraph_memory: the graphs captured once while profiling, the "
                  "FULL ones beyond the two largest extrapolated; memprof/core/terms/"
                  "runner_v2_graphs.py)")
        head = (f"vLLM {release} runs the model with Model Runner V2 (config/vllm.py "
                f"use_v2_model_runner) and {graphs}; ")
        seqs, mnbt = dep.max_num_seqs, dep.max_num_batched_tokens
        late = ("; not modelled: the allocator split limit during the profile run"
                if version_key(release) >= version_key("0.31.0") else "")
        if own:
            terms = ""
            if vocab and isinstance(seqs, int) and isinstance(mnbt, int):
                t = v2_terms(release, max_num_seqs=seqs, max_num_batched_tokens=mnbt,
                             vocab=vocab, logits_itemsize=logits_itemsize)
                rows = min(seqs, mnbt)
                passes = (f"a greedy sampler pass, then a second on the same logits with "
                          f"SamplingParams.for_sampler_warmup() on its {rows} rows (an fp32 "
                          "copy, then FlashInfer's or Triton's top-k / top-p: the activation "
                          "peak's formula gives its tensors)" if warmup_pass else
                          f"one greedy sampler pass ({fmt_bytes(t.sampler_stage_bytes)} for "
                          f"{rows} rows)")
                terms = (f": {passes} and the sampler's state "
                         f"({fmt_bytes(t.sampler_state_bytes)}), charged by the budget line")
            if cold:
                return (head + "it compiles in its profile run on a cold start: memprof charges "
                        f"V2's own profile terms (memprof/core/terms/runner_v2_profile.py)"
                        f"{terms}{cold_args}{late} (docs/model-runner-v2.md); --compile-cache "
                        "warm models a restart on the cache a first start saved")
            why = "--enforce-eager" if dep.enforce_eager else "--compile-cache warm"
            return (head + f"nothing is compiled in its profile run ({why}): memprof charges "
                    f"V2's own profile terms (memprof/core/terms/runner_v2_profile.py){terms}"
                    f"{late} (docs/model-runner-v2.md)")
        return (head + "its profile run compiles on a cold start, whose transient vLLM charges "
                "as peak activation (vLLM issue 54122), of a size no source memprof reads gives "
                "(--compile-cache warm: a restart on the cache a first start saved): memprof "
                "charges the V1 runner's profile run [approximation]" + late
                + " (docs/model-runner-v2.md); VLLM_USE_V2_MODEL_RUNNER=0 runs the V1 runner "
                "memprof models")

    def runs_runner_v2(self, dep: DeploymentView, *, architecture: str, moe: bool,
                       hybrid: bool, quantised: bool = False,
                       runner_listed: Sequence[Any] = ()) -> bool:
        """``vllm_runner.runs_v2`` at the deployment's release: the model runs Model Runner V2
        (``vllm/v1/worker/gpu/``), whose CUDA-graph capture ``memprof.core.graph_log`` reads."""
        version = dep.engine_version or ""
        release, _ = split_generation(version)
        if convert_of(dep) is not None and pooling_runs_v2(release) is False:
            return False  # a pooling model stays on V1 (vllm_pooling.POOLING_ON_V2)
        listed = listed_at([r for r in runner_listed if isinstance(r, Rule)], architecture,
                           release)
        speculative = (drafting_method(dep.speculative_method, version)
                       if dep.num_speculative_tokens else None)
        return runs_v2(version, listed=listed, moe=moe, hybrid=hybrid, quantised=quantised,
                       speculative=speculative)

    def launches(self, module: str) -> bool:
        """``python -m vllm.entrypoints.openai.api_server`` and the other entry points."""
        return module.startswith("vllm.entrypoints")

    def serve_command(self, model: str, *, tp: int, pp: int, dp: int, ep: bool,
                      max_model_len: int | None, max_num_seqs: int) -> list[str]:
        """``vllm serve`` with its short parallel flags."""
        parts = [f"vllm serve {model} -tp {tp}"]
        parts += [f"-pp {pp}"] if pp > 1 else []
        parts += [f"-dp {dp}"] if dp > 1 else []
        parts += ["--enable-expert-parallel"] if ep else []
        return [*parts, f"--max-model-len {max_model_len}", f"--max-num-seqs {max_num_seqs}"]


ENGINE = VLLM()
