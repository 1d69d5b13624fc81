"""What the engines pick when a flag is left out: vLLM's batch sizes and utilisation by GPU,
SGLang's chunked-prefill size, CUDA-graph batch and ``mem_fraction_static`` heuristic.

Below both the estimate and the scratch catalog (each needs the resolved settings), so neither
imports the other.
"""

from __future__ import annotations

import math

from memprof.base.errors import BadInput
from memprof.base.units import GiB, MiB
from memprof.core.deployment import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    SGLANG_MAX_PREFILL_TOKENS,
    Deployment,
)
from memprof.core.gpus import GPU
from memprof.core.models import ModelSpec
from memprof.core.models.config import derived_max_model_len
from memprof.core.versions import Rule, resolve_version, value_at

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


def resolve(dep: Deployment, spec: ModelSpec, gpu: GPU) -> Deployment:
    """Every default filled in: max_model_len derived from the config as the engine derives it
    (``derived_max_model_len``: RoPE scaling included), vLLM's batch defaults for the
    GPU, release and entry point, vLLM's ``gpu_memory_utilization`` default for the release
    (0.92 from 0.20.0, 0.9 before). A config that states no ``max_position_embeddings`` needs
    ``--max-model-len``: memprof does not guess a length."""
    derived = derived_max_model_len(spec.raw, dep.engine)
    mml = dep.max_model_len or (derived[0] if derived else None)
    if not mml:
        raise BadInput(f"the config of {spec.name} has no max_position_embeddings, so the "
                       "context length is unknown",
                       hint="pass --max-model-len (SGLang: --context-length), e.g. 32768")
    version = resolve_version(dep.engine_version, dep.engine)
    sliding = any(layer.attention.sliding_window for layer in spec.layers)
    mnbt, seqs = batch_defaults(gpu, None if dep.sglang else version, dep.entrypoint, mml,
                                v0_chunked_prefill=not sliding
                                and not dep.num_speculative_tokens)
    resolved = dep.with_(
        engine_version=version,
        max_model_len=mml,
        max_num_batched_tokens=dep.max_num_batched_tokens or mnbt,
        max_num_seqs=dep.max_num_seqs or seqs,
        gpu_memory_utilization=(None if dep.sglang else
                                dep.gpu_memory_utilization or default_utilization(version)),
    )
    assert resolved.max_num_batched_tokens is not None and resolved.max_num_seqs is not None
    if resolved.max_num_batched_tokens < resolved.max_num_seqs:
        raise BadInput(
            f"--max-num-batched-tokens ({resolved.max_num_batched_tokens}) is smaller than "
            f"--max-num-seqs ({resolved.max_num_seqs})",
            hint="vLLM refuses this; raise --max-num-batched-tokens or lower --max-num-seqs",
        )
    return resolved


def sglang_defaults(gpu: GPU, dep: Deployment) -> tuple[int, int, float]:
    """SGLang's (chunked_prefill_size, cuda_graph_max_bs, mem_fraction_static) heuristics.

    ``server_args.py::_handle_gpu_memory_settings`` (SGL@d315eb7), sizes in MiB::

        reserved = 512 + 1.5·max(chunked_prefill_size, 2048) + tp·pp/8·1024 + reserve_for_graph
        reserve_for_graph = 2·max_bs [+ 3·max_bs·dp (+1.5·max_bs·dp if max_bs > 300) with DP attn]
        reserved = max(reserved, 10 GiB) if the GPU has more than 60 GiB
        mem_fraction_static = round((gpu_mem − reserved) / gpu_mem, 3)
    """
    gib = gpu.total_bytes / GiB
    tiers = ((20, 2048, 8, 8), (35, 2048, 24, 80), (60, 4096, 32, 160), (90, 8192, 256, 512),
             (160, 8192, 256, 512), (math.inf, 16384, 512, 512))
    tier = next(t for t in tiers if gib < t[0])
    chunk = tier[1] if dep.chunked_prefill_size is None else dep.chunked_prefill_size
    max_bs = dep.cuda_graph_max_bs or (tier[2] if dep.tp < 4 else tier[3])
    graph: float = 2 * max_bs
    if dep.enable_dp_attention:
        graph += 3 * max_bs * dep.dp + (1.5 * max_bs * dep.dp if max_bs > 300 else 0)
    mib = gpu.total_bytes / MiB
    # chunked prefill off (-1): the reserve follows --max-prefill-tokens instead
    prefill = chunk if chunk > 0 else SGLANG_MAX_PREFILL_TOKENS
    reserved = 512 + 1.5 * max(prefill, 2048) + dep.tp * dep.pp / 8 * 1024 + graph
    if gib > 60:
        reserved = max(reserved, 10 * 1024)
    if dep.mem_fraction_static:
        return chunk, max_bs, dep.mem_fraction_static
    mfs = round((mib - reserved) / mib, 3)
    if mfs <= 0 and dep.sglang:
        # (a vLLM deployment reads only the graph batch of these; its budget is its own)
        # SGLang would start with a mem_fraction_static ≤ 0 and fail: refuse the settings instead
        fixed = reserved - graph
        per_bs = graph / max_bs
        top = max(1, int((mib * 0.999 - fixed) / per_bs)) if per_bs else 0
        raise BadInput(
            f"with --cuda-graph-max-bs {max_bs} SGLang's mem_fraction_static heuristic reserves "
            f"{reserved:,.0f} MiB for activations and CUDA graphs, more than the GPU's "
            f"{mib:,.0f} MiB (mem_fraction_static would be {mfs})",
            hint=f"lower --cuda-graph-max-bs (at most {top} here), or set --mem-fraction-static")
    return chunk, max_bs, mfs


