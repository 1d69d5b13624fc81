"""A deployment: the engine settings and the parallel layout, named as vLLM names them.

Defaults are vLLM's at the release modelled (``engine_defaults``: from 0.20.0, after PR #38284,
``gpu_memory_utilization`` 0.92 and the CUDA-graph memory estimate on by default; 0.9 and no
estimate subtracted before; see 0.20.0 gpu_worker.py determine_available_memory).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import lru_cache, partial
from typing import TYPE_CHECKING

from memprof.base.errors import BadInput, LayoutError
from memprof.base.frozen import copier
from memprof.core.attention import kind_of
from memprof.core.attention_backends import BY_NAME as BACKEND_ROWS
from memprof.core.auto_fit import AUTO_FIT, check_auto_fit, takes_auto
from memprof.core.engines import ENGINES, NAMES, engine_named, engine_of
from memprof.core.engines.base import RankCoord
from memprof.core.engines.sglang import SGLANG_MAX_PREFILL_TOKENS
from memprof.core.engines.vllm import BLOCK_SIZE_CHOICES, DEFAULT_GPU_MEMORY_UTILIZATION
from memprof.core.hybrid_state import HYBRID_STATE_V1, check_mamba_cache_mode
from memprof.core.kv_dtypes import NAMES as KV_DTYPE_NAMES
from memprof.core.kv_dtypes import attention_kind, for_engine, kv_dtype
from memprof.core.models import ModelSpec
from memprof.core.models.families import is_bare_decoder
from memprof.core.models.score_heads import is_seq_cls
from memprof.core.speculative import HEAD_METHODS, MTP, check_speculative
from memprof.core.versions import Rule, resolve_version, value_at

if TYPE_CHECKING:
    from memprof.core.flags import Setting

__all__ = ["BLOCK_SIZE_CHOICES", "DEFAULT_GPU_MEMORY_UTILIZATION", "SGLANG_MAX_PREFILL_TOKENS",
           "Deployment", "RankCoord"]

# --kv-cache-dtype values: the rows of ``memprof.core.kv_dtypes`` (bytes, scales, the attention
# kinds and engines that accept each)
KV_CACHE_DTYPES = KV_DTYPE_NAMES
ENTRYPOINTS = ("serve", "llm")  # usage contexts OPENAI_API_SERVER and LLM_CLASS
SCRATCH_POLICIES = ("per-layer", "shared")
# the torch.compile cache at start-up (--compile-cache, memprof's own: the state of vLLM's
# VLLM_CACHE_ROOT, no engine flag): "cold" a first start that compiles in the profile run,
# "warm" a restart that loads what a first start saved (memprof/core/terms/runner_v2_profile.py)
COMPILE_CACHE_STATES = ("cold", "warm")
# --dtype as the engines spell it: vLLM's ModelDType and _STR_DTYPE_TO_TORCH_DTYPE
# (config/model.py; config.py before 0.10.0: "half" and "float16" float16, "float" and "float32"
# float32), SGLang's --dtype choices (srt/server_args.py; srt/configs/model_config.py reads them
# with the same table, "adapted from vLLM 0.6.4.post1")
ENGINE_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
# memprof's --dtype: the engines' spellings and two short ones of its own (bf16, fp16), which a
# pasted serve command may not use (its engine's argparse refuses them)
DTYPES = ("auto", "bfloat16", "float16", "float32", "half", "float", "bf16", "fp16")


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    """The engine settings and the parallel layout, named as the engines name them; ``None``
    means "the engine's default" until ``engine_defaults.resolve`` fills it in. Sizes in bytes."""

    engine: str = "vllm"
    engine_version: str | None = None  # None: the newest release memprof models (versions.py)
    entrypoint: str = "serve"  # "serve" (vllm serve) or "llm" (the Python LLM class)
    tp: int = 1
    pp: int = 1
    dp: int = 1
    enable_expert_parallel: bool = False
    dtype: str = "auto"
    # --hf-overrides (SGLang: --json-model-override-args): JSON merged into config.json
    hf_overrides: str | None = None
    # --assume-architecture: read an architecture memprof does not know as this generic family
    assume_architecture: str | None = None
    # vLLM --limit-mm-per-prompt / --mm-processor-kwargs (JSON, as vLLM reads them): a
    # multimodal model's items per prompt and image-size limits (memprof/core/models/multimodal.py)
    limit_mm_per_prompt: str | None = None
    mm_processor_kwargs: str | None = None
    mm_encoder_tp_mode: str = "weights"  # vLLM --mm-encoder-tp-mode: "weights" (TP) or "data"
    # vLLM --runner / --convert (0.10.1 on) and the older --task (to 0.12.x): an embedding model
    # on the pooling runner (memprof/core/engines/vllm_pooling.py); None: vLLM's auto
    runner: str = "generate"
    convert: str | None = None
    task: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    max_num_seqs: int | None = None  # None: vLLM's default for the GPU (estimate.batch_defaults)
    max_num_batched_tokens: int | None = None  # None: likewise
    gpu_memory_utilization: float | None = None  # None: vLLM's default (resolve sets 0.92)
    block_size: int | None = None  # None: what vLLM picks for the attention backend
    kv_cache_memory_bytes: int | None = None
    # --gpu-memory-in-use: memory other processes hold on each GPU before the engine starts (a
    # desktop, another server), stated by the user or read from a log (memprof/core/terms/in_use.py)
    gpu_memory_in_use: int | None = None
    enforce_eager: bool = False
    disable_custom_all_reduce: bool = False  # NCCL all-reduce instead of the engine's own kernel
    # the host's driver gives its GPUs no peer-to-peer access (a pod, a VM, PCIe cards): the
    # catalog card's ``peer_access`` turned off (memprof/core/estimate.py)
    no_gpu_peer_access: bool = False
    # --nnodes: the hosts (or pods) the ranks are spread over, evenly and in rank order; a group
    # spanning nodes gets NCCL over NET and no custom all-reduce (memprof/core/nodes.py)
    nnodes: int = 1
    # vLLM --disable-hybrid-kv-cache-manager: sliding / chunked-local layers cached as full
    # attention (memprof.core.kvcache.unify_hybrid_specs)
    disable_hybrid_kv_cache_manager: bool = False
    # vLLM --enable-prefix-caching / --no-enable-prefix-caching (None: the release's default,
    # off for hybrid models before 0.26.0) and --mamba-cache-mode (None: what vLLM derives): the
    # state pages a hybrid model's request holds (memprof/core/hybrid_state.py)
    enable_prefix_caching: bool | None = None
    mamba_cache_mode: str | None = None
    num_speculative_tokens: int = 0  # draft tokens a step; 0 = no speculative decoding
    # vLLM's --speculative-config method (memprof/core/speculative.py): "mtp" (the checkpoint's
    # MTP layer drafts), "ngram" (prompt lookup) or "eagle" / "eagle3" (a draft head,
    # speculative_model); read only with draft tokens
    speculative_method: str = "mtp"
    # vLLM's --speculative-config model for an EAGLE / EAGLE-3 method: the draft head's
    # config.json, a folder holding it or a bundled name (memprof/core/models/draft_head.py)
    speculative_model: str | None = None
    # vLLM's VLLM_USE_V1 (0 / 1; None: unset, V1 where the release's oracle accepts it):
    # engines/vllm.py V0_ENGINE, V1_FALLBACK
    vllm_use_v1: int | None = None
    # vLLM's VLLM_USE_FLASHINFER_SAMPLER (0 / 1; None: unset, and memprof assumes the PyPI wheel,
    # whose flashinfer is only an extra: the torch top-k/top-p sampler). 1 states that FlashInfer
    # is installed and samples (terms/activation.py V1_FLASHINFER_SAMPLER)
    vllm_use_flashinfer_sampler: int | None = None
    # vLLM's VLLM_ROCM_USE_AITER on ROCm (0 / 1; None: unset, 0.17.1's default off): 1 runs the
    # AITER fused MoE, whose weight shuffle the ROCm load figure sees (terms/rocm_load_cache.py)
    vllm_rocm_use_aiter: int | None = None
    # NCCL's NCCL_NVLS_ENABLE as the launch sets it (0: off; 1 or 2: NCCL's own test; None:
    # unset, NCCL's default 2): NVLS buffers on a multicast NVSwitch (terms/nccl_nvls.py)
    nccl_nvls_enable: int | None = None
    # vLLM's VLLM_ALLREDUCE_USE_SYMM_MEM (0 / 1; None: unset, the release's default, 1 from
    # 0.11.0): the TP group's symmetric-memory all-reduce buffer (terms/symm_mem.py)
    vllm_allreduce_use_symm_mem: int | None = None
    # the NVIDIA driver as nvidia-smi prints it ("580.82.07"; None: unstated, the driver of the
    # era of the release's wheel is assumed): CUDA-graph driver costs (memprof/core/
    # nvidia_driver.py, terms/cudagraph.py DRIVER_STACK)
    nvidia_driver: str | None = None
    # PyTorch's PYTORCH_CUDA_ALLOC_CONF as the launch sets it (None: unset, the allocator's
    # defaults); memprof's replay of the model load reads it (terms/load_rounding.py
    # load_alloc_conf: expandable_segments)
    pytorch_cuda_alloc_conf: str | None = None
    # vLLM --enable-lora and its sizes (memprof/core/lora.py; the buffers:
    # memprof/core/terms/lora.py); None: vLLM's defaults (max_loras 1, max_lora_rank 16,
    # lora_extra_vocab_size 256 where the release has it); read only with enable_lora
    enable_lora: bool = False
    max_loras: int | None = None
    max_lora_rank: int | None = None
    lora_extra_vocab_size: int | None = None
    lora_dtype: str = "auto"
    fully_sharded_loras: bool = False
    enable_lora_bias: bool = False
    # --specialize-active-lora (vLLM 0.16.0 on): graphs per active-LoRA count
    # (terms/lora.py LORA_GRAPH_CASES)
    specialize_active_lora: bool = False
    # the torch.compile cache at start-up (COMPILE_CACHE_STATES; vLLM only)
    compile_cache: str = "cold"
    # scratch buffers (memprof/core/scratch/)
    attention_backend: str | None = None  # None: what the engine picks (model, GPU, KV dtype)
    scratch: str | None = None  # "per-layer" | "shared"; None: what current engine releases do
    # SGLang (engine="sglang")
    mem_fraction_static: float | None = None  # None: SGLang's heuristic
    enable_dp_attention: bool = False
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    max_total_tokens: int | None = None  # SGLang --max-total-tokens: a cap on the KV pool

    @property
    def sglang(self) -> bool:
        """Kept for the modules that still ask (the allow-list of tests/test_extension_axes.py
        names them); new code asks ``engines.engine_of(dep)``."""
        return engine_of(self) is ENGINES["sglang"]

    @property
    def speculative_mtp(self) -> bool:
        """Draft tokens made by the checkpoint's MTP layer (which memprof then loads)."""
        return self.num_speculative_tokens > 0 and self.speculative_method == MTP

    @property
    def world_size(self) -> int:
        """Processes of the deployment (the engine's layout: ``Engine.world_size``)."""
        return engine_of(self).world_size(self)

    @property
    def attn_tp(self) -> int:
        """TP degree of attention (``Engine.attn_tp``)."""
        return engine_of(self).attn_tp(self)

    @property
    def copies(self) -> int:
        """Full copies of the non-expert weights in the deployment (``Engine.copies``)."""
        return engine_of(self).copies(self)

    @property
    def ep_size(self) -> int:
        """Ranks the experts are spread over with --enable-expert-parallel (1 without)."""
        return engine_of(self).ep_size(self)

    @property
    def moe_tp_size(self) -> int:
        """Ways the experts' intermediate size is split without EP (1 with)."""
        return engine_of(self).moe_tp_size(self)

    def with_(self, **changes: object) -> Deployment:
        """``dataclasses.replace`` without its per-field overhead (a sweep derives thousands):
        the same fields copied, an unknown name a TypeError as ``replace`` raises."""
        if not changes:
            return self
        if not _DEPLOYMENT_FIELDS.issuperset(changes):  # an unknown name
            return replace(self, **changes)  # type: ignore[arg-type]  # raises its TypeError
        return _copy(self, changes)


_DEPLOYMENT_FIELDS_ORDER = tuple(f.name for f in fields(Deployment))
# every field but gpu_memory_utilization, read in one call: a memo key for what only the KV
# budget (``requested``) reads it for
but_utilization = operator.attrgetter(*(n for n in _DEPLOYMENT_FIELDS_ORDER
                                        if n != "gpu_memory_utilization"))
_DEPLOYMENT_FIELDS = frozenset(_DEPLOYMENT_FIELDS_ORDER)
_copy = copier(Deployment, _DEPLOYMENT_FIELDS_ORDER)


def ranks(dep: Deployment) -> list[RankCoord]:
    """Every rank of the deployment, in the engine's global rank order."""
    return engine_of(dep).rank_coords(dep)


# Where ``get_pp_indices`` puts the layers that do not divide evenly (vllm/distributed/utils.py).
PP_REMAINDER: tuple[Rule, ...] = (
    Rule(name="pp_split_remainder", changes="PP layer split", since="0.6.0", until="0.8.0",
         value="last stage", introduced_by="before 0.6.0",
         removed_by="balanced split (first released in 0.8.0)",
         source="0.7.3 distributed/utils.py get_pp_indices: 'the last partition will have the "
         "remaining layers'; 0.6.0, 0.6.4.post1 and 0.6.6.post1 the same (end_layer = "
         "num_hidden_layers on the last rank)", applies_to="pp"),
    Rule(name="pp_split_remainder", changes="PP layer split", since="0.8.0", until=None,
         value="before the last", introduced_by="balanced split (first released in 0.8.0)",
         source="0.8.0 / 0.33.0 distributed/utils.py get_pp_indices: partitions[-i] += 1 for "
         "i in 2..remaining+1", applies_to="pp"),
)


def pp_layer_split(num_layers: int, pp: int,
                   version: str | None = None) -> list[tuple[int, int]]:
    """Layer ranges per PP stage, as ``vllm.distributed.utils.get_pp_indices`` splits them at
    ``version`` (``None``: the newest modelled; rows in ``PP_REMAINDER``).

    Each stage gets ``L // pp`` layers. From 0.8.0 the remainder goes one each to the stages
    before the last, counting back from the second-to-last (the last stage also holds the
    lm_head); before 0.8.0 the last stage takes all of it.
    """
    return list(_pp_layer_split(num_layers, pp, version))


@lru_cache(maxsize=256)
def _pp_layer_split(num_layers: int, pp: int, version: str | None) -> tuple[tuple[int, int], ...]:
    per = [num_layers // pp] * pp
    if value_at(PP_REMAINDER, version) == "last stage":
        per[-1] += num_layers % pp
    else:
        for i in range(2, num_layers % pp + 2):
            per[-i] += 1
    bounds, start = [], 0
    for n in per:
        bounds.append((start, start + n))
        start += n
    return tuple(bounds)


def experts_on_rank(num_experts: int, ep_size: int, ep_rank: int) -> int:
    """vLLM ``determine_expert_map`` (linear placement): the first ``E % ep`` ranks get one more."""
    base, rem = divmod(num_experts, ep_size)
    return base + (1 if ep_rank < rem else 0)


LONG_CONTEXT_ENV = {name: e.long_context_env for name, e in ENGINES.items()}


def long_context_allowed(engine: str) -> bool:
    """Whether the engine's override variable is set in memprof's environment, read as the
    engine reads it (vllm/envs.py: "1"/"true"; SGLang ``get_bool_env_var``: "1"/"true")."""
    return os.environ.get(LONG_CONTEXT_ENV[engine], "0").strip().lower() in ("1", "true")


def beyond_derived_len(dep: Deployment, spec: ModelSpec) -> tuple[int, str] | None:
    """(derived maximum, how) when ``dep.max_model_len`` exceeds the model's derived maximum."""
    if dep.max_model_len is None or dep.max_model_len == AUTO_FIT:
        return None
    found = engine_of(dep).derived_max_model_len(spec.raw)
    if found is None or dep.max_model_len <= found[0]:
        return None
    return found


def check_max_model_len(dep: Deployment, spec: ModelSpec) -> None:
    """Refuse a ``max_model_len`` beyond the model's derived maximum, as the engine does
    (``Engine.derived_max_model_len``), unless the engine's override variable is set."""
    over = beyond_derived_len(dep, spec)
    if over is None or long_context_allowed(dep.engine):
        return
    from memprof.core.flags import flag_name

    flag = flag_name("max_model_len", dep.engine)
    name = engine_of(dep).display
    raise BadInput(f"{flag} {dep.max_model_len:,} is longer than {spec.name}'s derived maximum "
                   f"{over[0]:,} ({over[1]}); {name} refuses it",
                   hint=f"use {flag} {over[0]} or less, or set {LONG_CONTEXT_ENV[dep.engine]}=1 "
                   f"(as {name} needs it; memprof then estimates it and says so)")


# Upper bounds of the integer settings: far above any real deployment, low enough that every
# term stays exact integer arithmetic (an integer with thousands of digits is a mistake).
MAX_PARALLEL = 1 << 20  # TP, PP, DP degree
MAX_TOKENS = 1 << 32  # max_model_len, batched tokens, block size, sequences
MAX_SPEC_TOKENS = 1024


@lru_cache(maxsize=64)
def _default(field: str) -> object:
    return getattr(Deployment(), field)


def check_engine_flags(dep: Deployment) -> None:
    """Refuse a setting the chosen engine does not have, naming the engine's own flag."""
    for s, default in _foreign_settings(dep.engine):
        if getattr(dep, s.field) == default:
            continue
        other = next(name for name in NAMES if name != dep.engine and s.flags(name))
        flag = max(s.flags(other), key=len)
        raise BadInput(f"{flag} is {engine_named(other).display}'s flag and does not apply "
                       f"under --engine {dep.engine}: {s.note}",
                       hint=f"drop {flag}, or add --engine {other}")


def _foreign_settings(engine: str) -> tuple[tuple[Setting, object], ...]:
    """The settings ``engine`` has no flag for, in ``SETTINGS`` order, each with its default:
    read once per engine object (every prepared deployment is checked against them)."""
    row = ENGINES.get(engine)
    hit = _FOREIGN.get(engine)
    if hit is not None and hit[0] is row:
        return hit[1]
    from memprof.core.flags import SETTINGS

    out = tuple((s, _default(s.field)) for s in SETTINGS if not s.flags(engine))
    _FOREIGN[engine] = (row, out)
    return out


_FOREIGN: dict[str, tuple[object, tuple[tuple[Setting, object], ...]]] = {}


def _show(value: int) -> str:
    text = str(value)
    return f"{value:,}" if len(text) <= 24 else f"a {len(text.lstrip('-'))}-digit number"


def _check_int(flag: str | Callable[[], str], value: int | None, low: int, high: int) -> None:
    if value is None or low <= value <= high:
        return
    if callable(flag):  # the flag's name, spelled only for the error
        flag = flag()
    if value < low:
        raise BadInput(f"{flag} must be at least {low}, got {_show(value)}",
                       hint=f"use a value in [{low:,}, {high:,}]")
    if value > high:
        raise BadInput(f"{flag} must be at most {high:,}, got {_show(value)}",
                       hint=f"use a value in [{low:,}, {high:,}]")


@lru_cache(maxsize=64)  # kept by the spec (whose hash is computed once): every validate asks
def _has_mixer(spec: ModelSpec) -> bool:
    """Whether a layer of the model has a token mixer beside (or instead of) attention."""
    return any(layer.attention.mixer for layer in spec.layers)


def validate(dep: Deployment, spec: ModelSpec) -> None:
    """Reject what the engine would reject, with a hint naming a layout that works."""
    from memprof.core.flags import flag_name

    if dep.engine not in ENGINES:
        raise BadInput(f"unknown --engine {str(dep.engine)[:40]!r}", hint=" or ".join(NAMES))
    check_engine_flags(dep)
    resolve_version(dep.engine_version, dep.engine)
    if (spec.vision is not None or dep.limit_mm_per_prompt is not None
            or dep.mm_processor_kwargs is not None or dep.mm_encoder_tp_mode != "weights"):
        from memprof.core.models.multimodal import check_multimodal  # kept off text models

        eng = engine_of(dep)
        # the engine's own reading of the tower (vLLM's: the model's) where it models it
        models_it = spec.vision is not None and eng.models_vision(dep, spec)
        check_multimodal(eng.vision_tower(dep, spec) if models_it else spec.vision,
                         model=spec.name, engine=eng.display, engine_models_it=models_it,
                         limit_text=dep.limit_mm_per_prompt, kwargs_text=dep.mm_processor_kwargs,
                         version=resolve_version(dep.engine_version, dep.engine),
                         tp_mode=dep.mm_encoder_tp_mode)
    if dep.entrypoint not in ENTRYPOINTS:
        raise BadInput(f"unknown --entrypoint {str(dep.entrypoint)[:40]!r}",
                       hint="serve (vllm serve, the default) or llm (the Python LLM class)")
    e = dep.engine
    if dep.max_num_batched_tokens == AUTO_FIT:
        raise BadInput(f"{flag_name('max_num_batched_tokens', dep.engine)} auto (-1) is no "
                       "token count: vLLM takes auto only for --max-model-len "
                       "(human_readable_int_or_auto)",
                       hint="give the batch a token count, e.g. 8192, or leave it out for the "
                       "engine's default")
    if dep.max_model_len == AUTO_FIT:  # vLLM's --max-model-len auto (memprof/core/auto_fit.py)
        check_auto_fit(dep.engine, resolve_version(dep.engine_version, dep.engine),
                       flag_name("max_model_len", dep.engine))
    for field, low, high in (("tp", 1, MAX_PARALLEL), ("pp", 1, MAX_PARALLEL),
                             ("dp", 1, MAX_PARALLEL), ("nnodes", 1, MAX_PARALLEL),
                             ("max_model_len", AUTO_FIT if dep.max_model_len == AUTO_FIT
                              else 1, MAX_TOKENS),
                             ("max_num_seqs", 1, MAX_TOKENS),
                             ("max_num_batched_tokens", 1, MAX_TOKENS),
                             ("block_size", 1, MAX_TOKENS),
                             ("num_speculative_tokens", 0, MAX_SPEC_TOKENS),
                             ("cuda_graph_max_bs", 1, MAX_TOKENS),
                             ("max_total_tokens", 1, MAX_TOKENS)):
        try:
            _check_int(partial(flag_name, field, e), getattr(dep, field), low, high)
        except BadInput as exc:
            if field == "max_model_len" and takes_auto(
                    e, resolve_version(dep.engine_version, e)):  # say the other form it reads
                raise BadInput(exc.message, hint=f"{exc.hint}, or auto (the longest request the "
                               "KV cache fits)") from None
            raise
    if dep.nnodes != 1:
        from memprof.core.nodes import check_nodes

        ep = dep.ep_size if dep.enable_expert_parallel else 1
        check_nodes(dep, (("TP", dep.tp), ("PP", dep.pp), ("DP", dep.dp), ("EP", ep)))
    if dep.chunked_prefill_size is not None and dep.chunked_prefill_size not in (-1, 0):
        _check_int("--chunked-prefill-size", dep.chunked_prefill_size, 1, MAX_TOKENS)
    if dep.gpu_memory_utilization is not None and not 0.0 < dep.gpu_memory_utilization <= 1.0:
        raise BadInput(
            f"--gpu-memory-utilization must be in (0, 1], got {dep.gpu_memory_utilization}",
            hint="vLLM's default is 0.92 (0.9 before 0.20.0)",
        )
    if dep.kv_cache_memory_bytes is not None and dep.kv_cache_memory_bytes <= 0:
        raise BadInput(f"--kv-cache-memory-bytes must be positive, got "
                       f"{dep.kv_cache_memory_bytes}", hint="e.g. --kv-cache-memory-bytes 16GiB")
    if dep.nvidia_driver is not None:
        from memprof.core.nvidia_driver import driver_major

        driver_major(dep.nvidia_driver)
    if dep.gpu_memory_in_use is not None and dep.gpu_memory_in_use < 0:
        raise BadInput(f"--gpu-memory-in-use must be zero or more, got {dep.gpu_memory_in_use}",
                       hint="the memory other processes hold on the GPU, e.g. "
                       "--gpu-memory-in-use 800MiB")
    kvd = kv_dtype(dep.kv_cache_dtype)  # an unknown name is BadInput naming the rows
    engine = engine_of(dep)
    if engine.name not in kvd.engines:
        owners = " and ".join(engine_named(n).display for n in NAMES if n in kvd.engines)
        *rest, last = for_engine(engine.name)
        raise BadInput(f"--kv-cache-dtype {kvd.name} is {owners}'s; {engine.display} has no such "
                       f"KV-cache dtype", hint=f"{engine.display}: {', '.join(rest)} or {last}")
    attn0 = spec.layers[0].attention
    kind0 = kind_of(attn0)
    if attention_kind(attn0.kind, attn0.has_indexer) not in kvd.kinds:
        if kvd.forces_backend is None:  # DeepSeek's sparse layouts
            raise BadInput(f"--kv-cache-dtype {kvd.name} is read only by vLLM's sparse MLA "
                           f"backends (DeepSeek-V3.2/V4); {spec.name} uses "
                           f"{kind0.dense_name or kind0.name.upper()}, for "
                           "which vLLM finds no backend", hint="use --kv-cache-dtype fp8 (or auto)")
        raise BadInput(f"--kv-cache-dtype {kvd.name} supports standard attention only "
                       f"({BACKEND_ROWS[kvd.forces_backend].vllm_class} is not an MLA backend)",
                       hint=f"{spec.name} uses {kind0.name.upper()}; use fp8")
    choices = (engine_of(dep).block_size_choices(dep.engine_version)
               if dep.block_size is not None else None)
    if choices is not None and dep.block_size not in choices:
        raise BadInput(f"--block-size {dep.block_size} is not one of "
                       f"{engine_of(dep).display}'s choices ({', '.join(map(str, choices))})",
                       hint=f"{engine_of(dep).display}'s argument parser refuses it; pick one "
                       "of those, or leave "
                       "--block-size out for the backend's own")
    if dep.compile_cache not in COMPILE_CACHE_STATES:
        raise BadInput(f"unknown --compile-cache {str(dep.compile_cache)[:40]!r}",
                       hint="cold (a first start compiles) or warm (a restart on the cache a "
                       "first start saved)")
    if dep.scratch is not None and dep.scratch not in SCRATCH_POLICIES:
        raise BadInput(f"unknown --scratch {str(dep.scratch)[:40]!r}", hint="per-layer or shared")
    if dep.mem_fraction_static is not None and not 0.0 < dep.mem_fraction_static < 1.0:
        raise BadInput(f"--mem-fraction-static must be in (0, 1), got {dep.mem_fraction_static}",
                       hint="SGLang's default is a heuristic near 0.83-0.9")
    if dep.dtype not in DTYPES:
        raise BadInput(f"unknown --dtype {str(dep.dtype)[:40]!r}",
                       hint="one of: " + ", ".join(DTYPES))
    engine_of(dep).check_layout(dep)
    if not engine.models_state_mixers and _has_mixer(spec):
        others = [n for n in NAMES if engine_named(n).models_state_mixers]
        shown = " and ".join(engine_named(n).display for n in others)
        raise BadInput(f"{spec.name} ({spec.architecture}) has recurrent-state layers, which "
                       f"memprof models only for {shown}'s hybrid KV-cache "
                       f"manager, not for {engine.display}",
                       hint=f"use --engine {' or '.join(others)}")
    if (engine.models_state_mixers and _has_mixer(spec)
            and not value_at(HYBRID_STATE_V1, dep.engine_version, False, engine=dep.engine)):
        first = HYBRID_STATE_V1[0].since
        raise BadInput(f"{spec.name} ({spec.architecture}) has recurrent-state layers, which "
                       f"{engine.display} serves on its V1 hybrid KV-cache manager from {first} "
                       f"(before, on V0's Mamba cache, which memprof does not model)",
                       hint=f"use --engine-version {first} or later")
    check_mamba_cache_mode(dep.mamba_cache_mode, dep.engine_version)
    if (dep.runner != "generate" or dep.convert is not None or dep.task is not None
            or is_bare_decoder(spec.architecture) or is_seq_cls(spec.architecture)):
        # (vLLM's --runner / --convert / --task; "auto" as a log's Namespace prints it; a bare
        # decoder, an embedding model in vLLM: models.families.is_bare_decoder; a
        # classification checkpoint, a score head on the pooling runner: models.score_heads)
        from memprof.core.engines.vllm_pooling import check_pooling, convert_of

        check_pooling(runner=dep.runner, convert=dep.convert, task=dep.task,
                      version=resolve_version(dep.engine_version, dep.engine), spec=spec,
                      lora=dep.enable_lora, engine=dep.engine,
                      quantised=spec.quant is not None or bool(dep.quantization))
        if dep.num_speculative_tokens and convert_of(dep) is not None:
            # the pooling runner's profile run warms a pooler, not a sampler (vllm_pooling.py):
            # nothing there reads draft tokens, and what a drafter beside it holds is not read
            raise BadInput("--num-speculative-tokens with --runner pooling: a pooling model "
                           "samples no tokens to draft; speculative decoding on vLLM's pooling "
                           "runner is not modelled",
                           hint="drop the speculative settings, or use --runner generate")
    check_speculative(dep.speculative_method, dep.num_speculative_tokens, dep.speculative_model,
                      version=resolve_version(dep.engine_version, dep.engine), engine=dep.engine)
    if dep.enable_lora:
        from memprof.core.lora import lora_settings  # kept off deployments without LoRA

        lora_settings(spec.family, dep.engine_version, max_loras=dep.max_loras,
                      max_lora_rank=dep.max_lora_rank,
                      lora_extra_vocab_size=dep.lora_extra_vocab_size, lora_dtype=dep.lora_dtype,
                      fully_sharded_loras=dep.fully_sharded_loras, model_dtype=spec.dtype,
                      tp=dep.tp, enable_lora_bias=dep.enable_lora_bias,
                      specialize_active_lora=dep.specialize_active_lora)
    heads = spec.layers[0].attention.num_heads
    if heads % dep.attn_tp:
        divisors = [d for d in range(1, heads + 1) if heads % d == 0 and d <= 64]
        raise LayoutError(
            f"tensor parallel size {dep.attn_tp} does not divide the {heads} attention heads "
            f"of {spec.name}",
            hint="use -tp " + "/".join(str(d) for d in divisors[-6:]),
        )
    kv = spec.layers[0].attention.num_kv_heads
    if kind0.kv_heads_replicate and dep.attn_tp > kv and dep.attn_tp % kv:
        raise LayoutError(
            f"tensor parallel size {dep.attn_tp} is above the {kv} KV heads and not a multiple "
            "of it",
            hint=f"vLLM replicates KV heads only when TP is a multiple of {kv}",
        )
    if dep.pp > spec.num_layers:
        raise LayoutError(
            f"pipeline parallel size {dep.pp} is larger than the {spec.num_layers} layers "
            f"of {spec.name}",
            hint=f"use -pp {spec.num_layers} or fewer",
        )
    if dep.enable_expert_parallel and not spec.is_moe:
        raise LayoutError(
            f"--enable-expert-parallel on {spec.name}, which has no experts (dense model)",
            hint="drop --enable-expert-parallel",
        )
    if dep.enable_expert_parallel and spec.num_experts < dep.ep_size:
        raise LayoutError(
            f"expert parallel size {dep.ep_size} exceeds the {spec.num_experts} experts",
            hint="lower -tp/-dp or drop --enable-expert-parallel",
        )
    check_max_model_len(dep, spec)
    if dep.num_speculative_tokens and dep.speculative_method in HEAD_METHODS and dep.pp > 1:
        raise LayoutError(f"--speculative-method {dep.speculative_method} with -pp {dep.pp}: "
                          "memprof does not model where pipeline stages put the draft head",
                          hint="estimate it with -pp 1")
    if dep.speculative_mtp and not spec.mtp_layers:
        raise BadInput(
            f"{spec.name} has no MTP layer memprof builds (num_nextn_predict_layers, or "
            "Qwen3.5's mtp_num_hidden_layers)",
            hint="--num-speculative-tokens with --speculative-method mtp applies to models "
            "whose checkpoint has MTP layers (--speculative-method ngram drafts without a layer)",
        )


# the settings vLLM reads only with --enable-lora, and their unset values: EngineArgs builds
# ``LoRAConfig(...) if self.enable_lora else None`` (engine/arg_utils.py
# create_engine_config), so without it they change nothing
LORA_ONLY_SETTINGS = {"max_loras": None, "max_lora_rank": None, "lora_extra_vocab_size": None,
                      "lora_dtype": "auto", "fully_sharded_loras": False,
                      "enable_lora_bias": False, "specialize_active_lora": False}


def set_without_lora(dep: Deployment) -> tuple[str, ...]:
    """The LoRA settings ``dep`` gives while ``enable_lora`` is off (fields; a note says they
    change nothing)."""
    if dep.enable_lora:
        return ()
    return tuple(f for f, unset in LORA_ONLY_SETTINGS.items() if getattr(dep, f) != unset)
