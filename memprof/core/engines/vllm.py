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
from typing import Any, ClassVar

from memprof.base.units import GiB
from memprof.core import releases
from memprof.core.engines.base import (
    Budget,
    C,
    DeploymentView,
    Engine,
    RankCoord,
)
from memprof.core.gpus import GPU
from memprof.core.models.config import smallest_length_key_max_len
from memprof.core.versions import Rule, value_at

# the newest releases' default: 0.20.0-0.33.0 config/cache.py Field(default=0.92), PR #38284
# (older releases: GPU_MEMORY_UTILIZATION)
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92

# gpu_memory_utilization when the flag is left out (CacheConfig.gpu_memory_utilization).
GPU_MEMORY_UTILIZATION: tuple[Rule, ...] = (
    Rule(name="gpu_memory_utilization_default", changes="budget: gpu_memory_utilization",
         since="0.7.1", until="0.20.0", value=0.9, introduced_by="before 0.7.1",
         removed_by="#38284 (first released in 0.20.0)",
         source="0.19.1 config/cache.py CacheConfig: Field(default=0.9); 0.7.2 "
         "engine/arg_utils.py EngineArgs.gpu_memory_utilization: float = 0.90"),
    Rule(name="gpu_memory_utilization_default", changes="budget: gpu_memory_utilization",
         since="0.20.0", until=None, value=DEFAULT_GPU_MEMORY_UTILIZATION,
         introduced_by="#38284 (first released in 0.20.0)",
         source="0.20.0 / 0.33.0 config/cache.py CacheConfig: Field(default=0.92)"),
)

# (max_num_batched_tokens, max_num_seqs) when the flags are left out: which scheme holds.
#   v0:        V0 engine: max_num_seqs 256; max_num_batched_tokens 2048 with chunked prefill
#              (on by default for max_model_len > 32768 without sliding window or speculative
#              decoding), else max(max_model_len, 2048); no usage context
#   v1_name:   H100/H200 by device name: LLM 16384 / serve 8192, else 8192 / 2048; seqs 1024
#   v1_70g:    >= 70 GiB: LLM 16384 / serve 8192, seqs 1024; else 8192 / 2048, seqs 256
#   v1_a100:   as v1_70g, but an A100 stays on the small tier (#17885)
#   v1_160g:   as v1_a100, and >= 160 GiB: 16384 / 16384, seqs 1024
#   v1_gb10:   as v1_160g, and GB10 (compute capability 12.1) stays on the small tier
BATCH_DEFAULTS: tuple[Rule, ...] = (
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.7.1", until="0.8.0", value="v0", introduced_by="V0 engine (VLLM_USE_V1=0 "
         "by default)", removed_by="V1 on by default in 0.8.0 (envs.py VLLM_USE_V1 default 1)",
         source="0.7.2 config.py SchedulerConfig.__post_init__ (2048 with chunked prefill, "
         "else max(max_model_len, 2048)); engine/arg_utils.py create_engine_config (chunked "
         "prefill for max_model_len > 32768), EngineArgs.__post_init__ (max_num_seqs 256 "
         "when not VLLM_USE_V1)"),
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.8.0", until="0.8.5", value="v1_name", introduced_by="V1 by default (0.8.0)",
         removed_by="tiers by device memory (first released in 0.8.5)",
         source="0.8.0 / 0.8.4 engine/arg_utils.py _set_default_args_v1: '\"h100\" in "
         "device_name or \"h200\" in device_name', default_max_num_seqs = 1024"),
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.8.5", until="0.9.0", value="v1_70g",
         introduced_by="tiers by device memory (first released in 0.8.5)",
         removed_by="#17885 (A100 on the small tier, first released in 0.9.0)",
         source="0.8.5 engine/arg_utils.py _set_default_args_v1: device_memory >= 70 GiB"),
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.9.0", until="0.28.0", value="v1_a100",
         introduced_by="#17885 (first released in 0.9.0)",
         removed_by="a >= 160 GiB tier (first released in 0.28.0)",
         source="0.9.0 _set_default_args_v1 / 0.27.0 engine/arg_utils.py get_batch_defaults: "
         "device_memory >= 70 GiB and \"a100\" not in device_name"),
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.28.0", until="0.33.0", value="v1_160g",
         introduced_by="a >= 160 GiB tier (first released in 0.28.0)",
         removed_by="GB10 on the small tier (first released in 0.33.0)",
         source="0.28.0 engine/arg_utils.py get_batch_defaults: device_memory >= 160 GiB: "
         "LLM_CLASS 16384, OPENAI_API_SERVER 16384, max_num_seqs 1024"),
    Rule(name="batch_defaults", changes="max_num_batched_tokens / max_num_seqs defaults",
         since="0.33.0", until=None, value="v1_gb10",
         introduced_by="GB10 on the small tier (first released in 0.33.0)",
         source="0.33.0 engine/arg_utils.py get_batch_defaults: is_gb10 = "
         "current_platform.is_device_capability((12, 1))"),
)

V0_CHUNKED_PREFILL_ABOVE = 32768  # 0.7.2 arg_utils.py create_engine_config: use_long_context

# ``--block-size`` values vLLM's CLI takes (argparse choices from ``CacheConfig.block_size``'s
# type): 0.7.x engine/arg_utils.py ``choices=[8, 16, 32, 64, 128]``; from 0.8.0
# config ``BlockSize = Literal[1, 8, 16, 32, 64, 128]``, 256 added later (v0.11.0
# vllm/config/cache.py ``BlockSize = Literal[1, 8, 16, 32, 64, 128, 256]``; memprof takes the
# 0.11.0 list for every V1 release, the release that added 256 is not identified).
BLOCK_SIZE_CHOICES: tuple[Rule, ...] = (
    Rule(name="block_size_choices", changes="--block-size accepted values", since="0.7.1",
         until="0.8.0", value=(8, 16, 32, 64, 128), introduced_by="before 0.7.1",
         removed_by="BlockSize Literal with 1 (0.8.0)",
         source="0.7.3 engine/arg_utils.py --block-size choices=[8, 16, 32, 64, 128]"),
    Rule(name="block_size_choices", changes="--block-size accepted values", since="0.8.0",
         until=None, value=(1, 8, 16, 32, 64, 128, 256),
         introduced_by="BlockSize Literal (0.8.0; 256 by 0.11.0)",
         source="0.11.0 vllm/config/cache.py BlockSize = Literal[1, 8, 16, 32, 64, 128, 256]"),
)


def _v0_batched_tokens(max_model_len: int, chunked: bool) -> int:
    return 2048 if chunked else max(max_model_len, 2048)


def batch_defaults(gpu: GPU, version: str | None = None, entrypoint: str = "serve",
                   max_model_len: int = 0, v0_chunked_prefill: bool = True
                   ) -> tuple[int, int]:
    """vLLM's defaults for (max_num_batched_tokens, max_num_seqs) by GPU, release and entry
    point (``serve``: OPENAI_API_SERVER, ``llm``: LLM_CLASS); rows in ``BATCH_DEFAULTS``.

    0.33.0 ``EngineArgs.get_batch_defaults`` (engine/arg_utils.py): ≥ 160 GiB: 16384 / 1024 for
    both; ≥ 70 GiB, not an A100 and not a GB10: LLM 16384 / serve 8192, 1024 sequences;
    otherwise LLM 8192 / serve 2048, 256 sequences. V0 (0.7.x): 256 sequences and
    ``max_model_len``-dependent tokens (``v0_chunked_prefill``: chunked prefill would be on
    if ``max_model_len`` > 32768).
    """
    scheme = value_at(BATCH_DEFAULTS, version, "v1_gb10")
    if scheme == "v0":
        chunked = v0_chunked_prefill and max_model_len > V0_CHUNKED_PREFILL_ABOVE
        return _v0_batched_tokens(max_model_len, chunked), 256
    llm = entrypoint == "llm"
    gib = gpu.total_bytes / GiB
    name = gpu.name.upper()
    if scheme == "v1_name":
        big = "H100" in name or "H200" in name
        return (16384 if llm else 8192) if big else (8192 if llm else 2048), 1024
    if scheme in ("v1_160g", "v1_gb10") and gib >= 160:
        return 16384, 1024
    large = gib >= 70
    if scheme != "v1_70g":
        large = large and not name.startswith("A100")
    if scheme == "v1_gb10":
        large = large and gpu.arch != "sm121"
    if large:
        return (16384 if llm else 8192), 1024
    return (8192 if llm else 2048), 256


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
    selects_attention_backend: ClassVar[bool] = True
    logs_budget_lines: ClassVar[bool] = True
    has_entrypoint: ClassVar[bool] = True
    dp_replicates: ClassVar[bool] = True
    registers_model_init_buffers: ClassVar[bool] = True
    has_v0_generation: ClassVar[bool] = True
    cli_launcher: ClassVar[tuple[str, str] | None] = ("vllm", "serve")
    launcher_prefix: ClassVar[str] = "vllm serve "
    # EngineArgs.add_cli_args (vllm/engine/arg_utils.py, v0.11.0); --engine, --engine-version
    # and --scratch are memprof's own
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
        "attention_backend": ("--attention-backend",),
        "scratch": ("--scratch",),
        "disable_custom_all_reduce": ("--disable-custom-all-reduce",),
        "disable_hybrid_kv_cache_manager": ("--disable-hybrid-kv-cache-manager",),
        "assume_architecture": ("--assume-architecture",),
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
                       max_model_len: int, v0_chunked_prefill: bool = True) -> tuple[int, int]:
        return batch_defaults(gpu, version, entrypoint, max_model_len, v0_chunked_prefill)

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
        runtime = [c for c in comps if c.where == "runtime" and c.bytes > 0]
        held_inside = sum(c.bytes for c in comps if c.where == "budget")
        return base + max(envelope, held_inside) + sum(c.bytes for c in runtime), runtime

    def startup_budget_refusal(self, dep: DeploymentView, base: int, envelope: int,
                               total: int) -> bool:
        """``request_memory`` (vllm/v1/worker/utils.py): free memory below the requested."""
        return not dep.kv_cache_memory_bytes and base + envelope > total

    def derived_max_model_len(self, cfg: dict[str, Any]) -> tuple[int, str] | None:
        return smallest_length_key_max_len(cfg)

    def block_size_choices(self, version: str | None) -> tuple[int, ...] | None:
        choices = value_at(BLOCK_SIZE_CHOICES, version)
        return choices if isinstance(choices, tuple) else None

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
