"""What differs between two engine releases for one deployment: the version rules (rows kept
beside their terms) whose value changes between the two, narrowed to the ones that can touch the
deployment, and the components whose bytes move (the deployment estimated at each release)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memprof.base.errors import BadInput
from memprof.core.attention import KINDS, kind_of
from memprof.core.attention.base import rope_scaling
from memprof.core.attention.state import SSM_DTYPE_FROM_CONFIG
from memprof.core.attention_backends import FA3_FP8_KV_DTYPES, FP8_KV_GQA_BACKEND
from memprof.core.auto_dtype import AUTO_DTYPE
from memprof.core.auto_fit import KV_CHECK_NULL_BLOCK, MAX_MODEL_LEN_AUTO
from memprof.core.capability import MARLIN_MIN_CC
from memprof.core.compare import DiffRow, diff
from memprof.core.deployment import PP_REMAINDER, Deployment
from memprof.core.engine_defaults import (
    BATCH_DEFAULT_BOUNDS,
    BATCH_DEFAULTS,
    GPU_MEMORY_UTILIZATION,
    V0_CHUNKED_PREFILL_OFF,
    V0_MULTIMODAL_MIN,
)
from memprof.core.engine_log import BUDGET_LOG
from memprof.core.engines.sglang import (
    SGLANG_CHUNKED_PREFILL,
    SGLANG_FIRST_KERNEL_BEFORE_LOAD,
    SGLANG_FREE_MEMORY_OVER_NCCL,
    SGLANG_GRAPH_MAX_BS,
    SGLANG_HEURISTIC_GPU_MEM,
    SGLANG_LOAD_FIGURE,
    SGLANG_MFS_HEURISTIC,
    SGLANG_MOE_GROUPS,
    SGLANG_PREFILL_GRAPH_OFF,
    SGLANG_PREFILL_GRAPH_RESERVE,
    SGLANG_ROCM_AITER_MFS,
)
from memprof.core.engines.sglang_attention import RULES as SGLANG_ATTENTION_RULES
from memprof.core.engines.sglang_dtype import SGLANG_AUTO_DTYPE, SGLANG_LEGACY_GPU
from memprof.core.engines.sglang_graph_inputs import RULES as SGLANG_GRAPH_INPUT_RULES
from memprof.core.engines.sglang_graphs import RULES as SGLANG_GRAPH_RULES
from memprof.core.engines.sglang_nsa import RULES as SGLANG_NSA_RULES
from memprof.core.engines.sglang_pool import SGLANG_POOL_TENSORS
from memprof.core.engines.sglang_req_pool import SGLANG_REQ_TO_TOKEN
from memprof.core.engines.sglang_streams import RULES as SGLANG_STREAM_RULES
from memprof.core.engines.sglang_vlm import SGLANG_VLM_CHUNK_OFF, SGLANG_VLM_FRACTION
from memprof.core.engines.unified_memory import SGLANG_UMA_FREE_MEMORY, UMA_FREE_MEMORY
from memprof.core.engines.vllm import NVML_TOTAL_UNCAUGHT, V0_ENGINE, V1_FALLBACK_RULES
from memprof.core.engines.vllm_compile import RULES as VLLM_COMPILE_RULES
from memprof.core.engines.vllm_pooling import POOLING_RULES, convert_of
from memprof.core.engines.vllm_runner import RULES as VLLM_RUNNER_RULES
from memprof.core.estimate import MXFP4_ONLINE, Estimate, estimate
from memprof.core.graph_log import GRAPH_LOG_RULES
from memprof.core.hybrid_state import HYBRID_STATE_V1, MAMBA_CACHE_RULES
from memprof.core.kv_dtypes import SPARSE_MLA, attention_kind
from memprof.core.kvcache import (
    CHUNKED_LOCAL_CACHED_AS_FULL,
    CONCURRENCY_GROUP0_PAGE,
    HYBRID_TOKEN_LINE_PER_GROUP,
    LAYER_SUM_ADMISSION,
    SLIDING_CACHED_AS_FULL,
    SWA_IN_FLIGHT_BATCHES,
    V0_BLOCK_SIZE,
    V0_MLA_ENTRY_ALIGN,
)
from memprof.core.lora import RULES as LORA_SETTING_RULES
from memprof.core.models import ModelSpec
from memprof.core.models.config import HF_OVERRIDES_NESTED
from memprof.core.models.families import ROWS as FAMILY_ROWS
from memprof.core.models.multimodal import (
    ENCODER_PROFILE,
    MAX_TOKENS_ONE_EACH,
    PIXELS_FP32,
    V0_MM_DUMMY,
    V1_EARLY_ENCODER_PROFILE,
)
from memprof.core.models.quant_config import AWQ_FLAG_FORCES_PLAIN, GPTQ_FLAG_FORCES_PLAIN
from memprof.core.releases import RELEASES
from memprof.core.speculative import NGRAM_GPU_DRAFTER, is_ngram
from memprof.core.terms.activation import (
    FUSED_MOE_CHUNK,
    LOGITS_SHARD_FREED,
    PP_INTERMEDIATE_TENSORS,
    V0_DRIVER_SAMPLER,
    V0_MLA_PREFILL_PROFILE,
    V0_MOE_CACHES_PER_CALL,
    V0_SAMPLER_RESORT,
    V1_FLASHINFER_SAMPLER,
    V1_REJECTION_WARMUP,
    V1_SAMPLER_HIDDEN,
    V1_TORCH_SORT_SAMPLER,
)
from memprof.core.terms.bnb_linear import BNB_APPLY_LOOP
from memprof.core.terms.cudagraph import (
    CAPTURE_SIZES,
    CUDAGRAPH_ESTIMATE,
    FULL_GRAPH_SPLITS,
    GRAPH_MODES,
    INDEXER_SPLIT,
    V2_FULL_DECODE_SIZES,
)
from memprof.core.terms.dequant_linear import AWQ_DENSE_MATMUL, GPTQ_GEMM_TEMP
from memprof.core.terms.draft_head import MULTI_MODULE_MTP, PROPOSER_BUFFERS
from memprof.core.terms.drafter_graphs import DRAFTER_GRAPHS_V1
from memprof.core.terms.encoder import (
    ENCODER_FIRST_STAGE,
    ENCODER_INPUTS_HELD,
    QWEN_VL_QKV_GATHER,
)
from memprof.core.terms.init_buffers import (
    MTP_HIDDEN_BUFFER,
    SPARSE_MLA_INDEX_GROUPS,
    TOPK_INDICES_BUFFER,
)
from memprof.core.terms.load_rounding import LOAD_MAX_SPLIT, LOAD_MAX_SPLIT_ROCM
from memprof.core.terms.lora import RULES as LORA_TERM_RULES
from memprof.core.terms.marlin_repack import MARLIN_MOE_WORKSPACE, MARLIN_WORKSPACE
from memprof.core.terms.moe_caches import FP8_MOE_INPUT_QUANT, TRITON_MOE_CACHES_PER_CALL
from memprof.core.terms.nccl import EP_PYNCCL, FIRST_KERNEL_AT_WARM_UP
from memprof.core.terms.nccl_nvls import NCCL_VERSION, NVLS_ENV, TORCH_TP_GATHER
from memprof.core.terms.ngram_speculator import NGRAM_V2_BUFFERS
from memprof.core.terms.non_torch import (
    FIRST_KERNEL_AT_SET_DEVICE,
    NCCL_CUMEM,
    NCCL_PLACEMENT,
    nccl_groups,
)
from memprof.core.terms.pynccl_pool import (
    LOGITS_GATHER_PROCESS_GROUP,
    LOGITS_GATHER_PROCESS_GROUP_ROCM,
    PYNCCL_NO_STREAM_POOL,
    PYNCCL_NO_STREAM_POOL_ROCM,
)
from memprof.core.terms.reserved_charge import RESERVED_CHARGED
from memprof.core.terms.rocm_load_cache import ROCM_LOAD_USED_MEMORY
from memprof.core.terms.rope_cache import MROPE_CACHE_POSITIONS
from memprof.core.terms.runner_buffers import RUNNER_BUFFERS_CHARGED
from memprof.core.terms.stream_pool import COMM_STREAM_POOL, V2_OUTPUT_COPY_STREAM
from memprof.core.terms.symm_mem import SYMM_MEM_ALL_REDUCE, SYMM_MEM_DEFAULT_ON
from memprof.core.terms.v0_eager_forward import V0_EAGER_LAYER_INPUT
from memprof.core.versions import Rule, resolve_version, rule_in_force
from memprof.core.weights.bnb_skip import BNB_SKIP_MATCH
from memprof.core.weights.mla_absorption import MLA_ABSORPTION
from memprof.core.weights.mlp import (
    MXFP4_SM90_BACKEND,
    MXFP4_TRITON_RAW_SCALES,
    SGLANG_MARLIN_STALE_SCALE_INV,
    SGLANG_ROCM_EPMOE_STALE_FP8,
    SGLANG_SHARED_EXPERTS_FUSION,
)
from memprof.core.weights.rank import LM_HEAD_EVERY_STAGE
from memprof.core.weights.shard import ROCM_FP8_BLOCK_PADDING
from memprof.core.weights.vision import TOWER_SKIPPED

# the families' own release rows (a vision-language family's model and tower rows)
_FAMILY_RULES = (*(rows for f in FAMILY_ROWS if f.release_rules for rows in f.release_rules()),
                 *(f.dp_attention_embed for f in FAMILY_ROWS if f.dp_attention_embed),
                 *(f.post_load_requant for f in FAMILY_ROWS if f.post_load_requant),
                 *(f.sglang_tower for f in FAMILY_ROWS if f.sglang_tower),
                 *(f.v2_runner_listed for f in FAMILY_ROWS if f.v2_runner_listed),
                 *(f.mtp_compiled for f in FAMILY_ROWS if f.mtp_compiled),
                 *(f.max_capture for f in FAMILY_ROWS if f.max_capture),
                 *(f.sglang_fa3_listed for f in FAMILY_ROWS if f.sglang_fa3_listed),
                 *(f.lora for f in FAMILY_ROWS if f.lora),
                 *(f.v0_mlp_gate_up for f in FAMILY_ROWS if f.v0_mlp_gate_up))

# Every version-dependent rule memprof models, by the module that keeps its rows; the attention
# kinds' own (``AttentionKind.rules``) where the packed pool's stood when kvcache kept it.
RULEBOOK: tuple[tuple[Rule, ...], ...] = (
    PP_REMAINDER, LM_HEAD_EVERY_STAGE, MLA_ABSORPTION, MTP_HIDDEN_BUFFER, TOPK_INDICES_BUFFER,
    SPARSE_MLA_INDEX_GROUPS,
    GPU_MEMORY_UTILIZATION, BATCH_DEFAULTS, NVML_TOTAL_UNCAUGHT, UMA_FREE_MEMORY,
    BATCH_DEFAULT_BOUNDS,
    V0_CHUNKED_PREFILL_OFF, V0_MULTIMODAL_MIN,
    CUDAGRAPH_ESTIMATE, V0_BLOCK_SIZE, V0_MLA_ENTRY_ALIGN, BUDGET_LOG, SWA_IN_FLIGHT_BATCHES,
    *(rows for kind in KINDS.values() for rows in kind.rules), CONCURRENCY_GROUP0_PAGE,
    LAYER_SUM_ADMISSION, MXFP4_SM90_BACKEND, MXFP4_TRITON_RAW_SCALES,
    SGLANG_MARLIN_STALE_SCALE_INV, V0_DRIVER_SAMPLER, V0_SAMPLER_RESORT, V0_MLA_PREFILL_PROFILE,
    V0_MOE_CACHES_PER_CALL, TRITON_MOE_CACHES_PER_CALL, FP8_MOE_INPUT_QUANT, V1_TORCH_SORT_SAMPLER,
    V1_FLASHINFER_SAMPLER, LOGITS_SHARD_FREED, V1_SAMPLER_HIDDEN, V1_REJECTION_WARMUP,
    PP_INTERMEDIATE_TENSORS,
    V0_EAGER_LAYER_INPUT, RUNNER_BUFFERS_CHARGED, NCCL_PLACEMENT,
    NCCL_CUMEM, EP_PYNCCL, NCCL_VERSION, NVLS_ENV, TORCH_TP_GATHER,
    PYNCCL_NO_STREAM_POOL, PYNCCL_NO_STREAM_POOL_ROCM,
    LOGITS_GATHER_PROCESS_GROUP,
    LOGITS_GATHER_PROCESS_GROUP_ROCM,
    SLIDING_CACHED_AS_FULL, HYBRID_TOKEN_LINE_PER_GROUP, CHUNKED_LOCAL_CACHED_AS_FULL,
    SGLANG_MFS_HEURISTIC, SGLANG_PREFILL_GRAPH_RESERVE, SGLANG_PREFILL_GRAPH_OFF,
    SGLANG_HEURISTIC_GPU_MEM,
    SGLANG_MOE_GROUPS, SGLANG_FREE_MEMORY_OVER_NCCL,
    SGLANG_CHUNKED_PREFILL, SGLANG_GRAPH_MAX_BS, SGLANG_SHARED_EXPERTS_FUSION,
    SGLANG_MOE_GROUPS,
    SGLANG_ROCM_EPMOE_STALE_FP8, SGLANG_ROCM_AITER_MFS, *SGLANG_NSA_RULES, SGLANG_LOAD_FIGURE,
    SGLANG_FIRST_KERNEL_BEFORE_LOAD,
    SGLANG_REQ_TO_TOKEN, SGLANG_POOL_TENSORS, SGLANG_UMA_FREE_MEMORY,
    SGLANG_VLM_FRACTION, SGLANG_VLM_CHUNK_OFF, *SGLANG_GRAPH_RULES, *SGLANG_GRAPH_INPUT_RULES,
    *SGLANG_STREAM_RULES,
    *SGLANG_ATTENTION_RULES,
    HYBRID_STATE_V1, SSM_DTYPE_FROM_CONFIG, *MAMBA_CACHE_RULES,
    V0_ENGINE, *V1_FALLBACK_RULES, CAPTURE_SIZES, GRAPH_MODES, V2_FULL_DECODE_SIZES,
    FUSED_MOE_CHUNK, RESERVED_CHARGED,
    MARLIN_WORKSPACE, MARLIN_MOE_WORKSPACE, ENCODER_PROFILE, *_FAMILY_RULES, TOWER_SKIPPED,
    ENCODER_FIRST_STAGE, ENCODER_INPUTS_HELD, QWEN_VL_QKV_GATHER, V0_MM_DUMMY, PIXELS_FP32,
    MAX_TOKENS_ONE_EACH, V1_EARLY_ENCODER_PROFILE,
    *GRAPH_LOG_RULES,
    COMM_STREAM_POOL, V2_OUTPUT_COPY_STREAM,
    FIRST_KERNEL_AT_SET_DEVICE, FIRST_KERNEL_AT_WARM_UP,
    ROCM_FP8_BLOCK_PADDING, ROCM_LOAD_USED_MEMORY,
    FULL_GRAPH_SPLITS, FP8_KV_GQA_BACKEND, FA3_FP8_KV_DTYPES, *VLLM_RUNNER_RULES,
    *VLLM_COMPILE_RULES,
    *LORA_SETTING_RULES, *LORA_TERM_RULES, BNB_SKIP_MATCH, BNB_APPLY_LOOP, AWQ_DENSE_MATMUL,
    GPTQ_GEMM_TEMP, GPTQ_FLAG_FORCES_PLAIN, AWQ_FLAG_FORCES_PLAIN, MARLIN_MIN_CC, LOAD_MAX_SPLIT,
    LOAD_MAX_SPLIT_ROCM, MROPE_CACHE_POSITIONS, MXFP4_ONLINE, MAX_MODEL_LEN_AUTO,
    KV_CHECK_NULL_BLOCK, SYMM_MEM_ALL_REDUCE, SYMM_MEM_DEFAULT_ON, AUTO_DTYPE,
    SGLANG_AUTO_DTYPE, SGLANG_LEGACY_GPU, *POOLING_RULES, *PROPOSER_BUFFERS.values(),
    MULTI_MODULE_MTP, DRAFTER_GRAPHS_V1, INDEXER_SPLIT,
    NGRAM_V2_BUFFERS, NGRAM_GPU_DRAFTER, HF_OVERRIDES_NESTED,
)


def all_rules() -> list[Rule]:
    return [r for rows in RULEBOOK for r in rows]


# ``Rule.applies_to`` keys that are not an attention kind's or a family's name
_LAYOUT_KEYS = frozenset({"all", "pp", "deepseek", "sliding", "chunked", "mxfp4", "nccl",
                          "state", "mamba2", "gdn", "multimodal", "marlin", "fp8_block",
                          "lora", "bnb", "mrope", "pooling", "eagle", "mtp", "ngram",
                          "speculative", "hf_overrides", "indexer", "sparse_mla"})


def tags(spec: ModelSpec, dep: Deployment) -> frozenset[str]:
    """The ``applies_to`` keys that hold for this deployment: its attention kind's name, its
    family's name, and the layout keys: ``pp`` (PP > 1), ``deepseek`` (PP > 1 on a family whose
    vLLM class built lm_head on every stage, ``Family.lm_head_every_pp_stage``), ``sliding``
    (a sliding-window layer, or a kind every layer of which keeps a sliding-window cache),
    ``chunked`` (a chunked-local layer), ``mxfp4`` (an MXFP4 checkpoint or ``--quantization
    mxfp4``), ``marlin`` (AWQ, GPTQ or fp8: a format some GPUs run on Marlin), ``fp8_block``
    (a block-fp8 checkpoint), ``nccl``, ``state`` (a
    layer whose recurrent mixer replaces attention, ``memprof/core/attention/state.py``),
    ``mamba2`` (a Mamba-2 one), ``gdn`` (a Gated DeltaNet one), ``multimodal`` (a vision tower),
    ``lora`` (``--enable-lora``), ``bnb`` (a bitsandbytes checkpoint: its skip list),
    ``mrope`` (a multimodal rotary: the config's ``mrope_section``), ``pooling`` (vLLM's pooling
    runner, memprof/core/engines/vllm_pooling.py), ``eagle`` (an EAGLE / EAGLE-3 draft head),
    ``ngram`` (n-gram speculation with draft tokens), ``speculative`` (any method with draft
    tokens), ``hf_overrides`` (``--hf-overrides`` given), ``indexer`` (a lightning indexer's
    ``index_topk`` in the config), ``sparse_mla`` (a layer the sparse MLA implementation runs:
    ``kv_dtypes.attention_kind``)."""
    out = {"all", spec.family}
    kind = kind_of(spec.layers[0].attention) if spec.layers else None
    if kind is not None:
        out.add(kind.name)
    row = next((r for r in FAMILY_ROWS if r.name == spec.family), None)
    if dep.pp > 1:
        out.add("pp")
        if row is not None and row.lm_head_every_pp_stage:
            out.add("deepseek")
    if (kind is not None and kind.always_sliding) or any(
            x.attention.sliding_window for x in spec.layers):
        out.add("sliding")
    if any(x.attention.chunk_size for x in spec.layers):
        out.add("chunked")
    if (spec.quant is not None and spec.quant.method == "mxfp4") or (
            str(dep.quantization or "").lower() == "mxfp4"):
        out.add("mxfp4")  # an MXFP4 checkpoint, or --quantization mxfp4 (MXFP4_ONLINE)
    if spec.quant is not None and spec.quant.method in ("awq", "gptq", "fp8", "fp8_per_tensor",
                                                        "fp8_per_channel"):
        out.add("marlin")  # a checkpoint some GPUs repack for Marlin (the GPU decides)
    if str(dep.quantization or "").lower() in ("awq", "awq_marlin", "gptq", "gptq_marlin",
                                               "fp8"):
        out.add("marlin")  # or a --quantization that quantises it so (dequant_linear.py et al.)
    if spec.quant is not None and spec.quant.method == "fp8" and spec.quant.block:
        out.add("fp8_block")
    if nccl_groups(dep):
        out.add("nccl")
    mixers = [x.attention.mixer for x in spec.layers if x.attention.mixer]
    if mixers:
        out.add("state")
        if any(m.kind == "mamba2" for m in mixers):
            out.add("mamba2")
        if any(m.kind == "gdn" for m in mixers):
            out.add("gdn")
    if spec.vision is not None:
        out.add("multimodal")
    if dep.enable_lora:
        out.add("lora")
    if convert_of(dep) is not None:
        out.add("pooling")
    if spec.draft_head is not None:
        out.add("eagle")  # an EAGLE / EAGLE-3 draft head (memprof/core/terms/draft_head.py)
    if dep.speculative_mtp and spec.mtp_layers:
        out.add("mtp")  # the checkpoint's MTP layer drafts (terms/draft_head.py, mtp_drafter.py)
    if dep.num_speculative_tokens and is_ngram(dep.speculative_method, dep.engine_version,
                                               dep.engine):
        out.add("ngram")  # n-gram speculation with draft tokens (memprof/core/speculative.py)
    if dep.num_speculative_tokens:
        out.add("speculative")  # any method with draft tokens (terms/cudagraph.py FULL sizes)
    if any(x.attention.index_topk for x in spec.layers):
        out.add("indexer")  # the indexer's topk_indices_buffer (terms/init_buffers.py)
    if any(attention_kind(x.attention.kind, x.attention.has_indexer) == SPARSE_MLA
           for x in spec.layers):
        out.add("sparse_mla")  # sparse MLA's index groups (terms/init_buffers.py)
    if dep.hf_overrides:
        out.add("hf_overrides")  # --hf-overrides (models/config.py HF_OVERRIDES_NESTED)
    if spec.quant is not None and spec.quant.method == "bnb4":
        out.add("bnb")
    if "mrope_section" in rope_scaling(spec):
        out.add("mrope")
    return frozenset(out)


def applies(rule: Rule, spec: ModelSpec, dep: Deployment) -> bool:
    """Can ``rule`` change this deployment (by the kind of model and layout it names)? A key
    memprof does not know (neither a layout key, an attention kind nor a family) may."""
    key = rule.applies_to
    known = key in _LAYOUT_KEYS or key in KINDS or any(r.name == key for r in FAMILY_ROWS)
    return not known or key in tags(spec, dep)


@dataclass(frozen=True, slots=True)
class RuleChange:
    """One rule whose value differs between the two releases (``None``: no row holds)."""

    name: str
    changes: str
    a: Rule | None
    b: Rule | None
    applies: bool


@dataclass(frozen=True, slots=True)
class VersionDiff:
    """What differs between releases ``a`` and ``b`` for one deployment. Where memprof refuses
    the deployment at one of them (an ``error:`` of its own: a model or layout the release
    does not run as memprof models it), that estimate is None, ``refused_a`` / ``refused_b``
    say why and no component is compared; the rules still are."""

    a: str
    b: str
    rules: tuple[RuleChange, ...]
    components: tuple[DiffRow, ...]
    estimate_a: Estimate | None
    estimate_b: Estimate | None
    refused_a: str = ""
    refused_b: str = ""

    @property
    def estimate(self) -> Estimate:
        """The estimate the deployment's description is read from (``a``'s, else ``b``'s)."""
        e = self.estimate_a or self.estimate_b
        assert e is not None  # version_diff refuses a deployment refused at both
        return e


def version_diff(model: str, dep: Deployment, a: str | None, b: str | None, *,
                 gpu_name: str | None = None, gpu_memory_bytes: int | None = None,
                 gpu_arch: str | None = None) -> VersionDiff:
    """Estimate ``dep`` at releases ``a`` and ``b`` and list what differs."""
    va, vb = resolve_version(a, dep.engine), resolve_version(b, dep.engine)
    ea: Estimate | None = None
    eb: Estimate | None = None
    refused_a = refused_b = ""
    first_refusal: BadInput | None = None
    try:
        ea = estimate(model, dep.with_(engine_version=va), gpu_name=gpu_name,
                      gpu_memory_bytes=gpu_memory_bytes, gpu_arch=gpu_arch)
    except BadInput as exc:
        refused_a, first_refusal = exc.message, exc
    try:
        if ea is not None:
            eb = estimate(ea.spec if dep.num_speculative_tokens == 0 else model,
                          dep.with_(engine_version=vb), gpu=ea.gpu)
        else:
            eb = estimate(model, dep.with_(engine_version=vb), gpu_name=gpu_name,
                          gpu_memory_bytes=gpu_memory_bytes, gpu_arch=gpu_arch)
    except BadInput as exc:
        if first_refusal is not None:  # refused at both: nothing to compare
            raise first_refusal from None
        refused_b = exc.message
    known = ea or eb
    assert known is not None
    changes = []
    for rows in RULEBOOK:
        ra, rb = rule_in_force(rows, va, dep.engine), rule_in_force(rows, vb, dep.engine)
        if ra is rb or (ra is not None and rb is not None and ra.value == rb.value):
            continue  # the same row, or two rows of one value (a range split where a later
            # release was read): nothing changes between the two releases
        first = rows[0]
        changes.append(RuleChange(first.name, first.changes, ra, rb,
                                  applies(first, known.spec, known.deployment)))
    compared = tuple(diff(ea, eb)) if ea is not None and eb is not None else ()
    return VersionDiff(va, vb, tuple(changes), compared, ea, eb, refused_a, refused_b)


VERSIONS_SCHEMA_VERSION = 1


def _value(v: object) -> object:
    """A rule's value as JSON: numbers, strings and booleans as they are, anything else (a
    placement) as the text the table prints."""
    return v if isinstance(v, bool | int | float | str) else str(v)


def rule_dict(r: Rule) -> dict[str, Any]:
    return {"name": r.name, "engine": r.engine, "changes": r.changes, "applies_to": r.applies_to,
            "since": r.since, "until": r.until, "span": r.span, "value": _value(r.value),
            "introduced_by": r.introduced_by, "removed_by": r.removed_by or None,
            "source": r.source}


def rulebook_dict() -> dict[str, Any]:
    """``memprof versions`` as a JSON-able document: the releases modelled per engine and every
    rule row."""
    return {"schema_version": VERSIONS_SCHEMA_VERSION,
            "releases": {engine: list(rel) for engine, rel in RELEASES.items()},
            "rules": [rule_dict(r) for r in all_rules()]}


def version_diff_dict(d: VersionDiff) -> dict[str, Any]:
    """``memprof versions --from A --to B`` as a JSON-able document: the deployment, the rules
    that differ (whether each applies, its row at each release), the components that differ and
    the KV tokens and verdict at each release."""
    e, ea, eb = d.estimate, d.estimate_a, d.estimate_b
    refused = ({"refused": {"from": d.refused_a or None, "to": d.refused_b or None}}
               if d.refused_a or d.refused_b else {})
    return {
        "schema_version": VERSIONS_SCHEMA_VERSION,
        "model": e.spec.name, "gpu": e.gpu.name, "world_size": e.deployment.world_size,
        "engine": e.deployment.engine, "from": d.a, "to": d.b, **refused,
        "rules": [{"name": c.name, "changes": c.changes, "applies": c.applies,
                   "from": None if c.a is None else rule_dict(c.a),
                   "to": None if c.b is None else rule_dict(c.b)} for c in d.rules],
        "components": [{"rank": x.rank, "name": x.component, "category": x.category,
                        "from_bytes": x.a_bytes, "to_bytes": x.b_bytes, "delta_bytes": x.delta}
                       for x in d.components],
        "kv_cache_tokens": {"from": ea.kv_cache_tokens if ea else None,
                            "to": eb.kv_cache_tokens if eb else None},
        "verdict": {"from": ea.verdict if ea else None, "to": eb.verdict if eb else None},
    }
