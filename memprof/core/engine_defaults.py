"""Every default of a deployment filled in (``resolve``), each engine's own defaults asked of its
module in ``memprof/core/engines/`` (vLLM's batch sizes and utilisation by GPU and release in
``engines/vllm.py``; SGLang's chunked-prefill size, CUDA-graph batch and ``mem_fraction_static``
heuristic in ``engines/sglang.py``, re-exported here).

Below both the estimate and the scratch catalog (each needs the resolved settings), so neither
imports the other.
"""

from __future__ import annotations

from functools import lru_cache

from memprof.base.errors import BadInput
from memprof.core.auto_fit import AUTO_FIT
from memprof.core.deployment import Deployment
from memprof.core.engines import engine_of
from memprof.core.engines.sglang import sglang_defaults
from memprof.core.engines.vllm import (
    BATCH_DEFAULT_BOUNDS,
    BATCH_DEFAULTS,
    GPU_MEMORY_UTILIZATION,
    V0_CHUNKED_PREFILL_ABOVE,
    V0_CHUNKED_PREFILL_OFF,
    V0_MULTIMODAL_MIN,
    batch_defaults,
    default_utilization,
)
from memprof.core.gpus import GPU
from memprof.core.models import ModelSpec
from memprof.core.models.families import ASSUMED, family_row
from memprof.core.models.quant_config import quant_from_flag
from memprof.core.versions import resolve_version

__all__ = ["BATCH_DEFAULTS", "BATCH_DEFAULT_BOUNDS", "GPU_MEMORY_UTILIZATION",
           "V0_CHUNKED_PREFILL_ABOVE", "V0_CHUNKED_PREFILL_OFF", "V0_MULTIMODAL_MIN",
           "batch_defaults",
           "default_utilization", "model_facts", "resolve", "sglang_defaults"]

@lru_cache(maxsize=64)  # kept by the spec (whose hash is computed once): every resolve asks
def model_facts(spec: ModelSpec) -> frozenset[str]:
    """What an engine's batch defaults read of the model: "multimodal" (a vision tower),
    "mla" (the config states ``kv_lora_rank``, as vLLM's ``ModelConfig.use_mla`` reads it)."""
    facts = {"multimodal"} if spec.vision is not None else set()
    if any(layer.attention.kv_lora_rank for layer in spec.layers):
        facts.add("mla")
    return frozenset(facts)


@lru_cache(maxsize=64)  # kept by the spec, as ``model_facts``
def _has_sliding_window(spec: ModelSpec) -> bool:
    """Whether a layer of the model attends through a sliding window."""
    return any(layer.attention.sliding_window for layer in spec.layers)


def quant_method(dep: Deployment, spec: ModelSpec) -> str | None:
    """The model's quantisation method as memprof sizes it: the ``--quantization`` flag as vLLM
    takes it, else what the checkpoint's ``quantization_config`` declares (vLLM's
    ``ModelConfig.quantization``, which its V1 oracle reads: ``engines/vllm.py``
    ``V1_FALLBACK``)."""
    quant = (quant_from_flag(dep.quantization, spec, dep.engine_version,
                             engine_of(dep).quant_flag_by_release)
             if dep.quantization else spec.quant)
    return quant.method if quant is not None else None


def registry_architecture(spec: ModelSpec) -> str | None:
    """The architecture an engine's model registry is asked for: the config's
    ``architectures[0]``; a config that states none (found by ``model_type``) is its family's
    class where the family row names exactly one (else None: not checked). An architecture
    read as a generic family by ``--assume-architecture`` is not checked either: the user
    states that it loads (an out-of-tree model a plugin registers), and the estimate says so."""
    if spec.family in ASSUMED:
        return None
    if spec.raw.get("architectures"):
        return spec.architecture
    named = family_row(spec.family).architectures
    return named[0] if len(named) == 1 else None


def resolve(dep: Deployment, spec: ModelSpec, gpu: GPU) -> Deployment:
    """Every default filled in: max_model_len derived from the config as the engine derives it
    (``Engine.derived_max_model_len``: RoPE scaling included), vLLM's batch defaults for the
    GPU, release and entry point, vLLM's ``gpu_memory_utilization`` default for the release
    (0.92 from 0.20.0, 0.9 before). A config that states no ``max_position_embeddings`` needs
    ``--max-model-len``: memprof does not guess a length."""
    derived = engine_of(dep).derived_max_model_len(spec.raw)
    # --max-model-len auto (-1): vLLM profiles at the derived length and fits after
    # (memprof.core.auto_fit)
    given = None if dep.max_model_len == AUTO_FIT else dep.max_model_len
    mml = given or (derived[0] if derived else None)
    if not mml:
        raise BadInput(f"the config of {spec.name} has no max_position_embeddings, so the "
                       "context length is unknown",
                       hint="pass --max-model-len (SGLang: --context-length), e.g. 32768")
    engine = engine_of(dep)
    version = engine.rules_release(dep, gpu.arch, resolve_version(dep.engine_version, dep.engine),
                                   quant_method(dep, spec))
    registry_arch = registry_architecture(spec)
    if registry_arch is not None:
        engine.check_architecture(version, registry_arch, spec.name)
    sliding = _has_sliding_window(spec)
    # V0's long-context default leaves chunked prefill off with a sliding window, speculative
    # decoding or LoRA ('not use_sliding_window and not use_spec_decode and not
    # self.enable_lora': engine/arg_utils.py create_engine_config, read in 0.6.0, 0.6.5 and
    # 0.7.2; _set_default_args_v0 in 0.8.4 and 0.10.2)
    mnbt, seqs = engine.batch_defaults(gpu, version, dep.entrypoint, mml,
                                       v0_chunked_prefill=not sliding
                                       and not dep.num_speculative_tokens
                                       and not dep.enable_lora,
                                       given=(dep.max_num_batched_tokens, dep.max_num_seqs),
                                       model_facts=model_facts(spec) | (
                                           {"prefix_caching"} if dep.enable_prefix_caching
                                           else frozenset()))
    resolved = dep.with_(
        engine_version=version,
        max_model_len=mml,
        max_num_batched_tokens=dep.max_num_batched_tokens or mnbt,
        max_num_seqs=dep.max_num_seqs or seqs,
        gpu_memory_utilization=engine.default_utilization(dep, version),
    )
    assert resolved.max_num_batched_tokens is not None and resolved.max_num_seqs is not None
    if resolved.max_num_batched_tokens < resolved.max_num_seqs:
        raise BadInput(
            f"--max-num-batched-tokens ({resolved.max_num_batched_tokens}) is smaller than "
            f"--max-num-seqs ({resolved.max_num_seqs})",
            hint="vLLM refuses this; raise --max-num-batched-tokens or lower --max-num-seqs",
        )
    return resolved
