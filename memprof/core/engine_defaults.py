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
from memprof.core.versions import resolve_version


def batch_defaults(gpu: GPU) -> tuple[int, int]:
    """``vllm serve`` defaults for (max_num_batched_tokens, max_num_seqs) by GPU memory.

    vLLM 0.33.0 ``EngineArgs.get_batch_defaults`` (engine/arg_utils.py, OPENAI_API_SERVER):
    ≥ 160 GiB: 16384 / 1024; ≥ 70 GiB and not an A100: 8192 / 1024; otherwise 2048 / 256.
    """
    gib = gpu.total_bytes / GiB
    if gib >= 160:
        return 16384, 1024
    if gib >= 70 and not gpu.name.upper().startswith("A100"):
        return 8192, 1024
    return 2048, 256


def resolve(dep: Deployment, spec: ModelSpec, gpu: GPU) -> Deployment:
    """Every default filled in: max_model_len from the config, vLLM's batch defaults for the
    GPU, vLLM's ``gpu_memory_utilization`` 0.92. A config that states no
    ``max_position_embeddings`` needs ``--max-model-len``: memprof does not guess a length."""
    mnbt, seqs = batch_defaults(gpu)
    mml = dep.max_model_len or spec.max_position_embeddings
    if not mml:
        raise BadInput(f"the config of {spec.name} has no max_position_embeddings, so the "
                       "context length is unknown",
                       hint="pass --max-model-len (SGLang: --context-length), e.g. 32768")
    resolved = dep.with_(
        engine_version=resolve_version(dep.engine_version, dep.engine),
        max_model_len=mml,
        max_num_batched_tokens=dep.max_num_batched_tokens or mnbt,
        max_num_seqs=dep.max_num_seqs or seqs,
        gpu_memory_utilization=(None if dep.sglang else
                                dep.gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION),
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
    if mfs <= 0:
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


