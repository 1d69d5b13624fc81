"""The interface every attention kind answers (``AttentionKind``) and the small records its
answers are made of: a layer's KV page (``KVLayerSpec``), a RoPE cache (``RopeCache``), the
profile-run live set of its attention (``AttentionStage``), and the weight builder it writes its
tensors into (``WeightSink``).

A kind module imports only ``memprof.base``, ``memprof.core.models``, ``memprof.core.dtypes``
and ``memprof.core.versions``, so the generic modules that ask it (``memprof.core.kvcache``,
``memprof.core.terms.activation``, ``memprof.core.terms.rope_cache``,
``memprof.core.weights.attention``) import it without a circle. What is not the kind's business
(the bytes of a KV dtype, the model dtype's size, the row-parallel output and its all-reduce)
comes in through the query objects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from memprof.base.errors import ConfigError
from memprof.core.dtypes import dtype_bytes
from memprof.core.models import Attention, Layer, ModelSpec, QuantConfig
from memprof.core.versions import Rule

Parts = list[tuple[str, int]]  # (label, bytes) of tensors alive together


class KVLayerSpec(NamedTuple):
    """The KV spec of one cache of one layer (vLLM has one spec per attention module)."""

    name: str  # e.g. "full", "sliding", "mla", "mla+indexer", "swa", "c4a", ...
    kind: str  # full | sliding | chunked (capped per request) | state (one block per request)
    block_size: int  # tokens per block
    page_bytes: int  # bytes of one block of this layer (padded)
    window: int = 0  # sliding window (tokens) for capped specs
    formula: str = ""
    # a packed slot's page counted as its elements at the KV dtype's width (DeepSeek-V3.2's
    # 656-byte fp8 slot as 576 fp8 values), what an engine that sizes its pool by element width
    # divides by (memprof/core/engines/sglang_nsa.py); 0: the same as page_bytes
    element_page_bytes: int = 0


class KVQuery(NamedTuple):
    """What a kind needs to size its KV pages on one rank: the attention TP, the KV dtype, the
    tokens per block, V0's MLA entry alignment (0: none), whether this layer is a TurboQuant
    boundary layer; ``elem_bytes(kv_dtype)`` and ``tq_slot_bytes(preset, head_dim)`` are the KV
    dtype rows' answers (``memprof.core.kvcache``)."""

    tp: int
    kv_dtype: str
    block: int
    align: int
    tq_boundary: bool
    elem_bytes: Callable[[str], int]
    tq_slot_bytes: Callable[[str, int], int]


class ActQuery(NamedTuple):
    """What a kind needs to size its attention's live set in one forward of ``t`` tokens on one
    rank: the model dtype's bytes ``s``, the TP size, decode (CUDA-graph capture) or the profile
    run, MLA's chunked-prefill rows (``mla_chunked_prefill_rows``), and how the engine's profile
    run treats attention: ``eager_prefill`` "" (attention skipped, the engine's worst-case
    buffers only), "prefill" (the prefill runs in full) or "prefill+out" (in full, into an output
    buffer ``[t, hidden]`` allocated before it)."""

    t: int
    s: int
    tp: int
    decode: bool
    chunked_prefill_rows: Callable[[], int]
    eager_prefill: str = ""
    hidden: int = 0


class AttentionStage(NamedTuple):
    """A layer type's attention in the profile run: the stage label's kind part, the tensors
    alive (without the residual stream and without the output projection), the output
    projection's name (its ``[T,H]`` output and all-reduce are added by the caller), and extra
    stages of their own (label, parts), each also on top of the residual stream."""

    label: str
    parts: Parts
    out_proj: str
    extra: tuple[tuple[str, Parts], ...] = ()


class RopeCache(NamedTuple):
    """One distinct rotary config: its cache is ``positions × rotary_dim`` of ``dtype``;
    ``mrope``: the config's rotary is multimodal (an ``mrope_section``), which vLLM builds as
    ``MRotaryEmbedding`` (``memprof/core/terms/rope_cache.py`` ``MROPE_CACHE_POSITIONS``)."""

    label: str
    positions: int
    rotary_dim: int
    dtype: str
    mrope: bool = False

    @property
    def bytes(self) -> int:
        return self.positions * self.rotary_dim * dtype_bytes(self.dtype)


def rope_scaling(spec: ModelSpec) -> dict[str, Any]:
    """The config's ``rope_scaling`` (or ``rope_parameters``) dict, ``{}`` when absent."""
    raw = spec.raw
    rs = raw.get("rope_scaling") or raw.get("rope_parameters") or {}
    return rs if isinstance(rs, dict) else {}


def rope_positions(rs: dict[str, Any], max_pos: int,
                   original: int | None = None) -> tuple[int, str]:
    """Positions of a rotary cache and how they were derived: ``yarn`` / ``deepseek_yarn``
    ``original × factor`` (``YaRNScalingRotaryEmbedding._compute_cos_sin_cache``), ``linear``
    ``max_position × factor``, ``longrope`` (``su``) ``original + max_position`` (both caches
    kept, see below), else ``max_position_embeddings`` (vLLM 0.33.0
    ``model_executor/layers/rotary_embedding/``).

    LongRoPE: ``Phi3LongRoPEScaledRotaryEmbedding.__init__``
    (``rotary_embedding/phi3_long_rope_scaled_rope.py``) builds a short cache of
    ``original_max_position_embeddings`` positions and a long one of ``max_position_embeddings``
    positions, each ``rotary_dim`` wide and cast to the model dtype, and keeps their
    concatenation (``long_short_cos_sin_cache``). ``original`` is the config's top-level
    ``original_max_position_embeddings``, which vLLM's ``llama.py`` ``LlamaDecoderLayer`` copies
    into the rope dict."""
    kind = str(rs.get("rope_type") or rs.get("type") or "default")
    if kind in ("longrope", "su"):
        orig = rs.get("original_max_position_embeddings") or original
        if not orig:
            raise ConfigError(
                f"rope_scaling type {kind!r} needs original_max_position_embeddings",
                hint="add original_max_position_embeddings to the config.json",
            )
        return int(orig) + max_pos, f"LongRoPE short {int(orig)} + long {max_pos}"
    if kind in ("yarn", "deepseek_yarn"):
        orig = int(rs.get("original_max_position_embeddings") or max_pos)
        factor = float(rs.get("factor") or 1.0)
        return int(orig * factor), f"YaRN {orig}×{factor:g}"
    if kind == "linear":
        factor = float(rs.get("factor") or 1.0)
        return int(max_pos * factor), f"linear {max_pos}×{factor:g}"
    return max_pos, kind


class WeightSink(Protocol):
    """The shard builder a kind writes its attention tensors into
    (``memprof.core.weights.attention.AttentionWeights``): linears and vectors sharded as vLLM
    shards them, raw tensors, and the two attention-specific helpers."""

    tp: int
    copies: int
    b: int
    spec: ModelSpec

    def quantised(self, module: str, expert: bool = False) -> QuantConfig | None: ...

    def linear(self, module: str, group: str, out: int, inn: int, *, shard: str,
               bias: bool = False, quantise: bool = True, replicas_extra: int = 1) -> None: ...

    def vector(self, module: str, group: str, n: int, dtype: str | None = None,
               *, sharded: bool = False) -> None: ...

    def fused_slice(self, module: str, group: str, out: int, inn: int, *, quant_of: str,
                    replicas: int, note: str) -> None: ...

    def bias(self, module: str, group: str, n: int, *, replicas: int, formula: str) -> None: ...

    def padded_vector(self, module: str, group: str, name: str, n: int, padded: int,
                      dtype: str, formula: str) -> None: ...

    def absorbed_latent(self, a: Attention, p: str, group: str) -> None: ...


class AttentionKind:
    """One attention kind's answers. A subclass per kind (``gqa``, ``mla``, ``dsv4``); the
    generic modules ask ``memprof.core.attention.kind_of(attention)`` instead of branching on
    ``Attention.kind``."""

    name: str = ""
    packed_kv_pool: bool = False  # one packed block pool of many page sizes (its own KV plan)
    aux_gemm_streams: int = 0  # CUDA streams beside the main one running its GEMMs (not ROCm)
    # the attention backend that runs it forces its block size (vLLM platforms/cuda.py
    # check_and_update_config, v0.11.0: the MLA backends); the kind's own rule otherwise
    backend_picks_block: bool = False
    # the scratch catalog's key (core/scratch) of buffers every deployment of this kind has,
    # whatever the attention backend (None: only the backend's and the engine's)
    scratch_key: str | None = None
    # modules outside ``core/attention/`` about this kind alone (repo paths), the only ones that
    # may compare a layer's kind with this kind's name (tests/test_family_axes.py)
    modules: tuple[str, ...] = ()
    # every layer of it keeps a sliding-window cache beside its others (release rules keyed
    # "sliding" apply)
    always_sliding: bool = False
    # its KV heads split over TP and are replicated above it, which vLLM does only when TP is
    # a multiple of them (memprof/core/deployment.py refuses the rest)
    kv_heads_replicate: bool = False
    # its name in a message about its dense layers ("" → the name in capitals)
    dense_name: str = ""
    # the attention block the trace replica builds for it (memprof/trace/replica.py): "qkv"
    # (per-head Q, K, V), "latent" (MLA's compressed query and KV) or "projections" (the shapes
    # of its projections only)
    replica: str = "projections"
    # its release rules (each a rule's rows), listed by memprof/core/version_diff.py
    rules: tuple[tuple[Rule, ...], ...] = ()
    # the releases whose KV layout of this kind memprof models, per engine (also one of
    # ``rules``): where rows are given and none holds at the deployment's release, the estimate
    # is refused (memprof/core/kvcache.py kv_plan), naming the first row's ``introduced_by``
    kv_layout_rows: tuple[Rule, ...] = ()
    # its models register buffers at construction beyond the indexer's (DeepSeek-V4's
    # _mtp_hidden_buffer: memprof/core/terms/init_buffers.py)
    model_init_buffers: bool = False
    # an MTP drafter of its models makes the indexer's topk_indices_buffer in each MTP layer
    # (True) or once for the drafter (False) (memprof/core/terms/init_buffers.py)
    drafter_topk_per_layer: bool = True
    # SGLang on ROCm picks the aiter attention backend for it (engines/sglang.py
    # SGLANG_ROCM_AITER_MFS): () for any head count (SGLang's MHA branch), a tuple of the head
    # counts per TP rank that get aiter (the others triton), None where memprof has not read
    # SGLang's choice for the kind
    hip_aiter_heads: tuple[int, ...] | None = ()

    def default_block_size(self, arch: str) -> int:
        """Tokens per KV block vLLM picks for this kind when ``--block-size`` is not given (V1)."""
        raise NotImplementedError

    def kv_pages(self, a: Attention, q: KVQuery) -> list[KVLayerSpec]:
        """The KV caches one layer of this kind holds on one rank, a page each."""
        raise NotImplementedError

    def packed_pool(self, specs: list[KVLayerSpec], kv_dtype: str, version: str | None,
                    engine: str, group0_concurrency: bool) -> dict[str, Any]:
        """When ``packed_kv_pool``: the fields of the rank's ``KVPlan``
        (memprof/core/kvcache.py) for its layers' pages ``specs``, at the engine release
        ``version`` (``group0_concurrency``: "Maximum concurrency" divides by group 0's page,
        ``CONCURRENCY_GROUP0_PAGE``)."""
        raise NotImplementedError

    def supports_turboquant(self) -> bool:
        """Can ``--kv-cache-dtype turboquant_*`` store this kind's KV?"""
        return False

    def activation(self, a: Attention, q: ActQuery) -> AttentionStage:
        """The attention's live set in one forward (see ``AttentionStage``)."""
        raise NotImplementedError

    def rope_caches(self, spec: ModelSpec, layers: list[Layer], model_dtype: str,
                    max_pos: int) -> list[RopeCache]:
        """The distinct RoPE caches a rank builds for ``layers`` (all of this kind)."""
        raise NotImplementedError

    def weights(self, w: WeightSink, layer: Layer, p: str) -> None:
        """Write one layer's attention tensors (module prefix ``p``) into ``w``."""
        raise NotImplementedError

    def sglang_rope_buffers(self, spec: ModelSpec, layers: list[Layer],
                            max_pos: int) -> list[tuple[str, int, str]]:
        """(name, bytes, formula) of the rotary buffers SGLang builds for ``layers`` apart from
        its ``get_rope`` (a kind that overrides this); none: SGLang's ``get_rope`` caches
        (``memprof/core/terms/rope_cache.py`` ``sglang_rope_terms``)."""
        return []
