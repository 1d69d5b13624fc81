"""KV cache of each rank: per-layer page sizes, KV cache groups, blocks, tokens, concurrency.

Formulas follow vLLM@52a31cc:
- ``vllm/v1/kv_cache_interface.py``: page size of one block of one layer per spec class;
- ``vllm/v1/core/kv_cache_utils.py``: grouping layers, ``num_blocks = available // page //
  group_size``, "GPU KV cache size" = ``int(max_concurrency × max_model_len)`` (per group for a
  hybrid pool from 0.9.1 to 0.20.0: ``HYBRID_TOKEN_LINE_PER_GROUP``);
- TurboQuant slots: ``vllm/model_executor/layers/quantization/turboquant/config.py`` (vLLM@52a31cc);
- a packed pool of many page sizes: its attention kind lays it out (``AttentionKind.packed_pool``).

Each layer's pages come from its attention kind (``memprof.core.attention``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache

from memprof.base.errors import BadInput
from memprof.base.frozen import fast_init
from memprof.base.units import cdiv
from memprof.core.attention import KVLayerSpec, KVQuery, kind_of
from memprof.core.attention.state import attention_of, pad_state_pages, state_bytes
from memprof.core.attention_backends import AttentionBackend, chosen
from memprof.core.auto_fit import longest_fitting
from memprof.core.deployment import Deployment, RankCoord, pp_layer_split
from memprof.core.engines import engine_of
from memprof.core.hybrid_state import (
    ATTENTION_BLOCK_ALIGNMENT,
    MLA_BLOCK_ALIGNMENT,
    AlignedPages,
    align_attention_block,
    resolve_mamba_cache_mode,
    state_pages_per_request,
)
from memprof.core.kv_dtypes import BY_NAME as KV_DTYPES
from memprof.core.kv_dtypes import DEFAULT as DEFAULT_KV_DTYPE
from memprof.core.kv_dtypes import ROWS as KV_DTYPE_ROWS
from memprof.core.kv_dtypes import attention_kind
from memprof.core.models import Attention, Layer, ModelSpec, layer_kinds
from memprof.core.releases import DISPLAY_NAMES
from memprof.core.versions import Rule, rule_in_force, value_at

# The V0 engine (VLLM_USE_V1 default 0 until 0.8.0) picks 16-token blocks for every model, MLA
# included (its only MLA backend, Triton MLA, takes any multiple of 16).
V0_BLOCK_SIZE: tuple[Rule, ...] = (
    Rule(name="v0_block_size", changes="KV block size", since="0.6.0", until="0.8.0", value=16,
         introduced_by="V0 engine (VLLM_USE_V1=0 by default)",
         removed_by="V1 on by default in 0.8.0 (envs.py VLLM_USE_V1 default 1)",
         source="0.7.3 platforms/cuda.py CudaPlatform.check_and_update_config: block_size "
         "None → 16; get_attn_backend_cls: use_mla → TritonMLABackend; 0.6.0 – 0.6.4.post1 "
         "engine/arg_utils.py EngineArgs.block_size: int = 16 (not on HPU), 0.6.5 / "
         "0.6.6.post1 platforms/cuda.py block_size None → 16"),
)
# V0 pads one MLA KV entry (one token's latent of one layer) to a multiple of 256 bytes.
V0_MLA_ENTRY_ALIGN: tuple[Rule, ...] = (
    Rule(name="v0_mla_entry_align_256", changes="KV cache: MLA entry", since="0.7.2",
         until="0.8.0", value=256, introduced_by="VLLM_CUDA_MEM_ALIGN_KV_CACHE (0.7.2)",
         removed_by="V1 on by default in 0.8.0 (V1 MLAAttentionSpec pages are unpadded)",
         source="0.7.2 / 0.7.3 worker/cache_engine.py CacheEngine.get_cache_block_size: "
         "key_cache_entry = align_to_256bytes(...) when _align_cache (use_mla and CUDA and "
         "envs.VLLM_CUDA_MEM_ALIGN_KV_CACHE, default '1'); utils.py align_to_256bytes",
         applies_to="mla"),
)

# KV admission (``SlidingWindowSpec.max_admission_blocks_per_request``): a sliding-window layer
# holds ``min(window − 1 + in-flight tokens, max_model_len)`` tokens, + 1 block. 0.7.1–0.25.x: the
# in-flight tokens are ``max_num_batched_tokens``; from 0.26.0 ``VllmConfig.max_in_flight_tokens``
# = ``max_concurrent_batches × max_num_batched_tokens``. Async scheduling is on by default
# (``VllmConfig.__post_init__``), so ``max_concurrent_batches`` is 2 at PP=1 with either model
# runner; at PP>1 the V1 runner turns async scheduling off (``v1_async_sched_incompat =
# "pipeline parallelism"``) → ``pp``, the V2 runner gives ``pp + 1``. The V2 runner is the
# default for every architecture from 0.29.0 (``use_v2_model_runner``); 0.25.0–0.28.x for every
# non-MoE, non-hybrid generate model and the listed ``default_v2_model_runner_architectures()``
# (``_is_default_v2_model_runner_model``: ``... or not model_config.is_moe``, read in the 0.25.0,
# 0.26.0, 0.27.0, 0.27.1 and 0.28.0 wheels) [approximation: memprof takes V1 there].
# ``value``: the batches added to ``pp`` at PP>1.
_SWA_SOURCE = ("v1/kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes → "
               "max_admission_blocks_per_request(max_in_flight_tokens=vllm_config."
               "max_in_flight_tokens); config/vllm.py VllmConfig.max_in_flight_tokens, "
               "max_concurrent_batches, use_v2_model_runner")
SWA_IN_FLIGHT_BATCHES: tuple[Rule, ...] = (
    Rule(name="swa_admission_in_flight_batches", changes="KV admission: sliding-window blocks",
         since="0.26.0", until="0.29.0", value=0,
         introduced_by="read in the 0.26.0 wheel (0.25.0 passes max_num_batched_tokens; PR not "
         "identified)", removed_by="0.29.0: the V2 model runner by default (pp + 1 at PP>1)",
         source=f"0.26.0 / 0.28.0 {_SWA_SOURCE}", applies_to="sliding"),
    Rule(name="swa_admission_in_flight_batches", changes="KV admission: sliding-window blocks",
         since="0.29.0", until=None, value=1,
         introduced_by="0.29.0 use_v2_model_runner defaults to True (read in the wheel)",
         source=f"0.29.0 / 0.33.0 {_SWA_SOURCE}", applies_to="sliding"),
)
# "Maximum concurrency", 0.7.1–0.26.x (``get_max_concurrency_for_kv_cache_config``): blocks per
# request = cdiv(Σ_g max_memory_usage_bytes(g), page of group 0) — for DeepSeek-V4, whose groups'
# pages differ, that is cdiv(Σ_g pages_g × page_g, page_0); from 0.27.0 Σ_g cdiv(bytes_g, page_g).
CONCURRENCY_GROUP0_PAGE: tuple[Rule, ...] = (
    Rule(name="concurrency_group0_page", changes="KV: maximum concurrency",
         since=None, until="0.27.0", value=True,
         introduced_by="V1 get_max_concurrency_for_kv_cache_config",
         removed_by="0.27.0 (per-group cdiv; read in the 0.27.0 wheel, PR not identified)",
         source="0.26.0 v1/core/kv_cache_utils.py get_max_concurrency_for_kv_cache_config: "
         "num_layer_per_group × Σ max_memory_usage_bytes / (kv_cache_groups[0] page × "
         "num_layer_per_group); 0.27.0: Σ cdiv(max_memory_usage_bytes, page_size_bytes)",
         applies_to="dsv4"),
)

# "KV cache needed for one max_model_len request" and the estimated maximum model length: up to
# 0.13.x ``check_enough_kv_cache_memory`` sums each layer's own ``max_memory_usage_bytes`` (no
# group padding: 8 full + 9 sliding layers count 8 + 9 pages); from 0.14.0
# ``_max_memory_usage_bytes_from_groups`` counts the groups' padded layout (9 + 9).
LAYER_SUM_ADMISSION: tuple[Rule, ...] = (
    Rule(name="admission_per_layer_sum", changes="KV admission: one max_model_len request",
         since=None, until="0.14.0", value=True,
         introduced_by="V1 check_enough_kv_cache_memory",
         removed_by="0.14.0 _max_memory_usage_bytes_from_groups (read in the 0.14.0 wheel; PR "
         "not identified)",
         source="0.13.0 v1/core/kv_cache_utils.py check_enough_kv_cache_memory: needed_memory = "
         "max_memory_usage_bytes(vllm_config, kv_cache_spec.values()) (Σ per layer); "
         "estimate_max_model_len likewise; 0.14.0 get_kv_cache_configs → "
         "_check_enough_kv_cache_memory(_max_memory_usage_bytes_from_groups)",
         applies_to="sliding"),
)

# Sliding-window layers beside full-attention ones (Gemma 2 / 3, gpt-oss) before the hybrid
# KV-cache manager (0.9.1): ``get_kv_cache_config`` always ran ``unify_hybrid_kv_cache_specs``,
# which turns every ``SlidingWindowSpec`` into a ``FullAttentionSpec`` (one group, no window
# cap on a request's blocks). The V0 engine before 0.8.0 likewise cached every layer in full.
SLIDING_CACHED_AS_FULL: tuple[Rule, ...] = (
    Rule(name="sliding_cached_as_full", changes="KV cache: sliding-window layers",
         since=None, until="0.9.1", value=True,
         introduced_by="V1 unify_hybrid_kv_cache_specs (read in the 0.9.0 wheel)",
         removed_by="the hybrid KV-cache manager, first released in 0.9.1 "
         "(SchedulerConfig.disable_hybrid_kv_cache_manager, default False)",
         source="0.9.0 v1/core/kv_cache_utils.py get_kv_cache_config → "
         "unify_hybrid_kv_cache_specs (always); 0.9.1 the same call only 'if vllm_config."
         "scheduler_config.disable_hybrid_kv_cache_manager'", applies_to="sliding"),
)
# "GPU KV cache size" of a hybrid pool (full-attention groups beside sliding-window or
# chunked-local ones, ``_grouped_plan``'s "hybrid" layout): from the hybrid KV-cache manager's
# first release the line divides the pool's blocks among the groups, ``num_blocks //
# len(kv_cache_groups) × min block size`` — every layer priced, windowed or not (0.9.1 and
# 0.10.1.1 v1/core/kv_cache_utils.py get_kv_cache_config (hybrid branch) / get_kv_cache_config_
# from_groups: ``num_tokens = num_blocks // len(grouped_layers) * min_block_size``; the same
# expression in ``_report_kv_cache_config`` of the later releases read for state groups, see
# ``capacity_from_blocks``). vLLM@52a31cc prints ``int(max_concurrency × max_model_len)``
# instead ("a naive num_blocks // num_groups * block_size formula underestimates capacity"), as
# every release from 0.20.1 on does (read in the 0.20.1 – 0.25.0 wheels).
HYBRID_TOKEN_LINE_PER_GROUP: tuple[Rule, ...] = (
    Rule(name="hybrid_token_line_per_group", changes="KV: 'GPU KV cache size' of a hybrid pool",
         since="0.9.1", until="0.20.1", value=True,
         introduced_by="the hybrid KV-cache manager (first released in 0.9.1)",
         removed_by="int(max_concurrency * max_model_len) (first released in 0.20.1; PR not "
         "identified)",
         source="0.9.1 v1/core/kv_cache_utils.py _get_kv_cache_config_uniform_page_size: "
         "num_blocks // len(grouped_layers) * block_size; 0.10.1.1 "
         "get_kv_cache_config_from_groups and 0.19.0 / 0.19.1 / 0.20.0 _report_kv_cache_config: "
         "num_blocks // len(kv_cache_groups) * min_block_size; 0.20.1, 0.20.2, 0.21.0, 0.23.0, "
         "0.25.0: num_tokens = int(max_concurrency * max_model_len)",
         applies_to="sliding", generation="v1"),
)
# Chunked local attention (Llama 4): 0.9.2 gives those layers a ``FullAttentionSpec``
# (gpu_model_runner.py get_kv_cache_spec has no chunked spec); 0.10.1–0.13.0 have
# ``ChunkedLocalAttentionSpec`` but ``VllmConfig.__post_init__`` turns the hybrid manager off
# for a model with ``attention_chunk_size`` unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_
# CACHE=1 (envs.py default "0": "There is a latency regression ..."), so every layer is cached
# in full; from 0.14.0 the variable defaults to "1" and the chunked layers keep their groups.
CHUNKED_LOCAL_CACHED_AS_FULL: tuple[Rule, ...] = (
    Rule(name="chunked_local_cached_as_full", changes="KV cache: chunked-local layers",
         since=None, until="0.14.0", value=True,
         introduced_by="no chunked spec (0.9.2 gpu_model_runner.py get_kv_cache_spec); 0.10.1 "
         "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE default '0'",
         removed_by="0.14.0: the variable defaults to '1' (read in the 0.14.0 and 0.14.1 "
         "wheels; 0.13.0 still '0')",
         source="0.10.1 / 0.12.0 / 0.13.0 envs.py and config VllmConfig.__post_init__ "
         "(disable_hybrid_kv_cache_manager = True for attention_chunk_size); 0.14.0 envs.py",
         applies_to="chunked"),
)

# preset: (key bits, value bits, key is fp8): the ``tq_bits`` of the kv_dtypes rows
TURBOQUANT = {r.name: r.tq_bits for r in KV_DTYPE_ROWS if r.tq_bits is not None}
TQ_BOUNDARY_LAYERS = 2  # get_boundary_skip_layers(n=2): first 2 and last 2 stay in model dtype

@dataclass(frozen=True, slots=True, kw_only=True)
class KVPlan:
    """How one rank's KV pool is laid out."""

    layers: tuple[KVLayerSpec, ...]
    block_size: int
    block_bytes: int  # bytes one block id costs across all layers of the rank
    bytes_per_token: int  # marginal bytes per token of context (ceil for sub-token layouts)
    layout: str  # uniform | hybrid | dsv4_packed
    kv_dtype: str
    formula: str
    # per request: blocks needed for ``tokens`` of context (vLLM admission rule)
    group_blocks: tuple[tuple[str, int, int, int], ...] = ()  # (name, block, window, groups)
    # sliding-window admission counts this many batches of max_num_batched_tokens in flight
    # (``SWA_IN_FLIGHT_BATCHES``)
    in_flight_batches: int = 1
    # bytes of one block in "KV cache needed for one request" (0: block_bytes); a packed pool's
    # release rule (``AttentionKind.packed_pool``) may set it
    request_block_bytes: int = 0
    # ``CONCURRENCY_GROUP0_PAGE``: Σ page bytes of all the groups of each group_blocks entry, the
    # divisor being the first's; () = the per-group count (0.27.0 on)
    concurrency_group_bytes: tuple[int, ...] = ()
    # ``LAYER_SUM_ADMISSION``: the layers behind each group_blocks entry and their page, so a
    # request needs Σ layers × page × blocks (no group padding); () = the groups' layout
    layer_sum_pages: tuple[tuple[int, int], ...] = ()  # (layers, page bytes) per entry
    # the bytes of one block the engine divides its KV budget by, where that is not what a
    # block stores (``Engine.sized_block_bytes``: SGLang's cell of a DeepSeek NSA model before
    # it counted the stored slot); 0: block_bytes
    sized_block_bytes: int = 0
    # pages one request holds in each state group (``memprof.core.hybrid_state``'s
    # ``state_pages_per_request``: 1 without prefix caching, 2 or 3 in vLLM's "align" mode, 0:
    # one per block of context, its "all" mode)
    state_pages: int = 1
    # the engine's own pool tensors, each (bytes per block, bytes beyond the blocks), where they
    # are not one per layer cache (``Engine.pool_tensors``: SGLang's K and V apart, each a page
    # longer); (): vLLM's (``kv_tensor_sizes``)
    pool_tensors: tuple[tuple[int, int], ...] = ()

    # the hash of the compared fields, computed once (as ``ModelSpec`` keeps its own): a plan is
    # part of the value key of ``_request_figures``, which every rank estimate looks up
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(tuple(
            getattr(self, f.name) for f in fields(self) if f.compare)))

    def __hash__(self) -> int:
        return self._hash

    def group_pages(self, tokens: int, max_num_batched_tokens: int) -> list[int]:
        """Blocks one request of ``tokens`` takes in one group of each ``group_blocks`` entry:
        ``cdiv(tokens, block)`` (full), ``cdiv(min(window − 1 + in-flight, tokens), block) + 1``
        (sliding; 0.33.0 v1/kv_cache_interface.py SlidingWindowSpec.
        max_admission_blocks_per_request)."""
        flight = self.in_flight_batches * max_num_batched_tokens
        return [_group_need(name, block, window, tokens, flight, max_num_batched_tokens,
                            self.state_pages)
                for name, block, window, _n in self.group_blocks]

    def blocks_per_request(self, tokens: int, max_num_batched_tokens: int) -> int:
        return sum(n * need for (_nm, _b, _w, n), need in
                   zip(self.group_blocks, self.group_pages(tokens, max_num_batched_tokens),
                       strict=True))

    def request_bytes(self, tokens: int, max_num_batched_tokens: int) -> int:
        """vLLM "KV cache needed for one max_model_len request"
        (``_max_memory_usage_bytes_from_groups``): blocks per request × bytes of a block."""
        if self.layer_sum_pages:
            pages = self.group_pages(tokens, max_num_batched_tokens)
            return sum(n * page * need for (n, page), need in
                       zip(self.layer_sum_pages, pages, strict=True))
        return (self.blocks_per_request(tokens, max_num_batched_tokens)
                * (self.request_block_bytes or self.block_bytes))

    def concurrency_blocks(self, tokens: int, max_num_batched_tokens: int) -> int:
        """The blocks per request "Maximum concurrency" divides by
        (``get_max_concurrency_for_kv_cache_config``, ``CONCURRENCY_GROUP0_PAGE``)."""
        if not self.concurrency_group_bytes:
            return self.blocks_per_request(tokens, max_num_batched_tokens)
        pages = self.group_pages(tokens, max_num_batched_tokens)
        total = sum(p * b for p, b in zip(pages, self.concurrency_group_bytes, strict=True))
        first = self.concurrency_group_bytes[0] // self.group_blocks[0][3]
        return cdiv(total, first)


def _group_need(name: str, block: int, window: int, tokens: int, flight: int,
                max_num_batched_tokens: int, state_pages: int = 1) -> int:
    """Blocks one request of ``tokens`` takes in one group, by the group's spec kind (the part
    of ``name`` before ``/``):

    - ``state`` (Mamba / linear-attention state): ``state_pages`` blocks per request, whatever
      its length — one without prefix caching (``MambaSpec.max_memory_usage_bytes`` =
      ``page_size_bytes``; read in vLLM v0.10.2 v1/kv_cache_interface.py, confirmed by the
      v0.10.2 Qwen3-Next log quoted in tests/test_hybrid_kv_groups.py), 2 or 3 in the "align"
      mode of prefix caching (``memprof.core.hybrid_state.state_pages_per_request``), and
      ``cdiv(tokens, block)`` (``state_pages`` 0) in its "all" mode;
    - ``chunked`` (chunked local attention, ``window`` = ``attention_chunk_size``):
      ``cdiv(min(chunk + max_num_batched_tokens, tokens), block)``
      (``ChunkedLocalAttentionSpec.max_memory_usage_bytes``, v1/kv_cache_interface.py);
    - any other spec with a window (sliding): ``cdiv(min(window − 1 + in-flight, tokens),
      block) + 1``; without one (full): ``cdiv(tokens, block)``.
    """
    kind = name.split("/", 1)[0]
    if kind == "state":
        return state_pages or cdiv(tokens, block)
    if kind == "chunked":
        return cdiv(min(window + max_num_batched_tokens, tokens), block)
    if window:
        return cdiv(min(window - 1 + flight, tokens), block) + 1
    return cdiv(tokens, block)


def unify_page_sizes(specs: list[KVLayerSpec]) -> list[KVLayerSpec]:
    """Layer types of different page sizes made one page size, as vLLM's
    ``unify_kv_cache_spec_page_size`` does before grouping them (read in the 0.19.0 wheel,
    v1/core/kv_cache_utils.py; ``get_kv_cache_groups`` calls it for a pool of several types):
    a smaller page's block size is multiplied by ``largest page / its page`` (Gemma 4: a global
    layer of 2 KV heads × 512 at block 32 beside a sliding one of 8 × 256 at block 16); a page
    that does not divide the largest is refused there (``NotImplementedError``)."""
    pages = {s.page_bytes for s in specs}
    if len(pages) <= 1:
        return specs
    top = max(pages)
    out = []
    for s in specs:
        if s.page_bytes != top:
            if top % s.page_bytes:
                raise BadInput(f"the KV pages of this model's layer types ({sorted(pages)} B) "
                               "do not divide one another: vLLM cannot unify them "
                               "(unify_kv_cache_spec_page_size raises NotImplementedError)",
                               hint="use a uniform --kv-cache-dtype")
            s = s._replace(block_size=s.block_size * (top // s.page_bytes), page_bytes=top)
        out.append(s)
    return out


def unify_hybrid_specs(specs: list[KVLayerSpec]) -> list[KVLayerSpec]:
    """``--disable-hybrid-kv-cache-manager``: vLLM's ``unify_hybrid_kv_cache_specs``
    (v1/core/kv_cache_utils.py, v0.10.2): when full-attention layers sit beside sliding-window or
    chunked-local ones, those become full-attention specs (their window no longer caps the
    blocks a request holds; the compute is still windowed), so every layer is one group. A
    model whose specs still differ after that (a Mamba / linear-attention state beside
    attention) cannot run with the manager off: vLLM raises "Hybrid KV cache manager is
    disabled but failed to convert the KV cache specs to one unified type"; memprof refuses it
    the same way."""
    kinds = {s.kind for s in specs}
    if len({(s.kind, s.window) for s in specs}) <= 1:
        return list(specs)
    if "full" in kinds and kinds & {"sliding", "chunked"}:
        specs = [s._replace(kind="full", window=0, name="full")
                 if s.kind in ("sliding", "chunked") else s for s in specs]
    if len({(s.kind, s.window) for s in specs}) > 1:
        raise BadInput("--disable-hybrid-kv-cache-manager cannot unify this model's KV cache "
                       f"specs ({', '.join(sorted({s.kind for s in specs}))})",
                       hint="drop --disable-hybrid-kv-cache-manager: vLLM refuses this "
                       "model with the hybrid manager off")
    return specs


def logged_tokens_per_group(plan: KVPlan, num_blocks: int) -> int:
    """"GPU KV cache size: N tokens" as vLLM v0.10.2 prints it (v1/core/kv_cache_utils.py
    ``_report_kv_cache_config``): ``num_blocks // len(kv_cache_groups) × min block size`` —
    every group counted, state groups included (later releases print
    ``int(max_concurrency × max_model_len)``, ``capacity``'s ``tokens``)."""
    groups = sum(n for _name, _b, _w, n in plan.group_blocks)
    block = min(b for _name, b, _w, _n in plan.group_blocks)
    return num_blocks // groups * block


def kv_dtype_bytes(kv_dtype: str, model_dtype: str) -> int:
    """Bytes of one cached element (the row's ``element_bytes``)."""
    return KV_DTYPES[kv_dtype].element_bytes(model_dtype)


def tq_slot_bytes(preset: str, head_dim: int) -> int:
    """TurboQuant bytes per head per token (K and V interleaved), ``slot + slot % 2``."""
    kb, vb, key_fp8 = TURBOQUANT[preset]
    key = head_dim if key_fp8 else cdiv(head_dim * kb, 8) + 2  # + fp16 vector norm
    value = cdiv(head_dim * vb, 8) + 4  # + fp16 scale + fp16 zero
    slot = key + value
    return slot + slot % 2


def default_block_size(spec: ModelSpec, arch: str, version: str | None = None,
                       backend: AttentionBackend | None = None) -> int:
    """The block size vLLM picks when ``--block-size`` is not given.

    The attention kind's (``AttentionKind.default_block_size``: GQA takes
    ``CacheConfig.DEFAULT_BLOCK_SIZE``, DeepSeek-V4 its 256-token logical blocks); for a kind whose
    backend picks the block (MLA, ``AttentionKind.backend_picks_block``), the block vLLM forces
    for the backend that runs (its row's ``default_block`` / ``sparse_block``: vLLM starts from 16
    and platforms/cuda.py ``check_and_update_config`` forces FlashMLA 64, CUTLASS MLA 128,
    FlashInfer MLA 64, sparse MLA 64 — whatever the GPU); a backend without one (and ``backend``
    None) keeps the kind's rule by GPU. The V0 engine (before 0.8.0, ``V0_BLOCK_SIZE``): 16.
    """
    v0 = value_at(V0_BLOCK_SIZE, version)
    if isinstance(v0, int):
        return v0
    a = spec.layers[0].attention
    kind = kind_of(a)
    if backend is not None and kind.backend_picks_block:
        if a.has_indexer and backend.sparse_block:
            return backend.sparse_block
        if backend.default_block:
            return backend.default_block
    return kind.default_block_size(arch)


def rank_layers(spec: ModelSpec, dep: Deployment, coord: RankCoord) -> list[Layer]:
    """The layers of ``coord``'s PP stage (the MTP layers on the last)."""
    return _stage_layers(spec, dep.pp, dep.engine_version, coord.pp_stage)


def _stage_layers(spec: ModelSpec, pp: int, version: str | None, stage: int) -> list[Layer]:
    start, end = pp_layer_split(spec.num_layers, pp, version)[stage]
    out = list(spec.layers[start:end])
    if stage == pp - 1:
        out += list(spec.mtp_layers)
    return out


def draft_kv_layers(spec: ModelSpec, dep: Deployment, coord: RankCoord) -> list[Layer]:
    """An EAGLE / EAGLE-3 head's decoder layers, on the last stage: their attention registers
    beside the target's (the head is built under the same ``VllmConfig``, its layers named
    ``model.layers.{n + i}``: llama_eagle3.py ``start_layer_id``), so the KV cache spec of
    every layer, the head's included, shares one pool (v1/worker/gpu/model_runner.py
    ``get_kv_cache_spec``; the V1 runner the same) and a token's KV grows by the head's layers.
    Only the KV cache reads them: the target's activation, graph and rotary terms do not."""
    head = spec.draft_head
    if head is None or coord.pp_stage != dep.pp - 1:
        return []
    return list(head.kv_layers(spec.num_layers))


def rank_layer_kinds(spec: ModelSpec, dep: Deployment, coord: RankCoord) -> list[tuple[Layer, int]]:
    """``layer_kinds(rank_layers(spec, dep, coord))``, kept by the values it reads (the spec,
    PP size, release and stage; hashing the spec costs less than grouping its layers)."""
    return list(_stage_layer_kinds(spec, dep.pp, dep.engine_version, coord.pp_stage))


@lru_cache(maxsize=256)
def _stage_layer_kinds(spec: ModelSpec, pp: int, version: str | None, stage: int
                       ) -> tuple[tuple[Layer, int], ...]:
    return tuple(layer_kinds(_stage_layers(spec, pp, version, stage)))


def _kv_query(tp: int, kv: str, model_dtype: str, block: int, align: int,
              tq_boundary: bool) -> KVQuery:
    """What an attention kind needs to size its pages, with the KV dtype rows' answers."""
    return KVQuery(tp=tp, kv_dtype=kv, block=block, align=align, tq_boundary=tq_boundary,
                   elem_bytes=lambda d: kv_dtype_bytes(d, model_dtype),
                   tq_slot_bytes=tq_slot_bytes)


def _backend(spec: ModelSpec, dep: Deployment, arch: str) -> AttentionBackend | None:
    """The attention backend row of a validated deployment (None: the engine does not select
    vLLM's backends)."""
    if not engine_of(dep).selects_attention_backend:
        return None
    a = spec.layers[0].attention
    return chosen(attention_kind(a.kind, a.has_indexer), arch, arch.startswith("gfx"),
                  dep.kv_cache_dtype, dep.attention_backend, dep.engine_version)


def kv_plan(spec: ModelSpec, dep: Deployment, coord: RankCoord, model_dtype: str,
            arch: str = "sm90") -> KVPlan:
    """The KV layout of one rank (with an EAGLE head's layers: ``draft_kv_layers``)."""
    layers = rank_layers(spec, dep, coord) + draft_kv_layers(spec, dep, coord)
    kind = kind_of(spec.layers[0].attention)
    kv = dep.kv_cache_dtype
    block = dep.block_size or default_block_size(spec, arch, dep.engine_version,
                                                 _backend(spec, dep, arch))
    align = int(value_at(V0_MLA_ENTRY_ALIGN, dep.engine_version, 0))  # type: ignore[call-overload]
    layout = kind.kv_layout_rows
    if layout and rule_in_force(layout, dep.engine_version, dep.engine) is None:
        spans = ", ".join(r.span for r in layout if r.engine == dep.engine) or "no release"
        raise BadInput(f"{spec.name}: memprof does not model the {kind.name.upper()} KV cache "
                       f"of {DISPLAY_NAMES.get(dep.engine, dep.engine)} {dep.engine_version}: "
                       f"{layout[0].introduced_by}",
                       hint=f"pass an --engine-version in {spans}")
    if KV_DTYPES[kv].turboquant and not kind.supports_turboquant():
        raise BadInput(f"--kv-cache-dtype {kv} supports standard attention only",
                       hint=f"{spec.name} uses {kind.name.upper()}; use fp8")
    mode = _mamba_mode(spec, dep) if _model_mixer(spec) is not None else "none"
    aligned = _hybrid_alignment(spec, dep, kv, model_dtype, block, align, mode)
    if aligned is not None:
        block = aligned.block_size
    flight = 1  # SWA_IN_FLIGHT_BATCHES: max_concurrent_batches
    extra = value_at(SWA_IN_FLIGHT_BATCHES, dep.engine_version, engine=dep.engine)
    if isinstance(extra, int):
        flight = 2 if dep.pp == 1 else dep.pp + extra
    if kind.packed_kv_pool:
        # the kind lays out its one packed pool; it sizes its pages from the KV dtype alone
        # (TP, block and model dtype are not read)
        q = _kv_query(1, kv, spec.dtype, kind.default_block_size(arch), 0, False)
        pages = [s for layer in layers for s in kind_of(layer.attention).kv_pages(
            layer.attention, q)]
        group0 = bool(value_at(CONCURRENCY_GROUP0_PAGE, dep.engine_version, False,
                               engine=dep.engine))
        return KVPlan(**kind.packed_pool(pages, kv, dep.engine_version, dep.engine, group0),
                      in_flight_batches=flight)
    specs: list[KVLayerSpec] = []
    n = spec.num_layers
    made: dict[tuple[int, bool], list[KVLayerSpec]] = {}  # one spec per (attention, boundary)
    tq = KV_DTYPES[kv].turboquant
    for layer in layers:
        a = layer.attention
        boundary = tq and (layer.index < TQ_BOUNDARY_LAYERS
                           or layer.index >= n - TQ_BOUNDARY_LAYERS)
        key = (id(a), boundary)
        if key not in made:
            made[key] = kind_of(a).kv_pages(a, _kv_query(dep.attn_tp, kv, model_dtype, block,
                                                         align, boundary))
        specs.extend(made[key])
    if aligned is not None:
        specs = pad_state_pages(specs, aligned)
    if dep.disable_hybrid_kv_cache_manager or (len(made) > 1 and _cached_as_full(specs, dep)):
        specs = unify_hybrid_specs(specs)
    plan = replace(_grouped_plan(specs, block, kv), in_flight_batches=flight,
                   state_pages=_state_pages(spec, dep, arch, mode) if aligned is not None
                   else 1)
    if plan.layout == "uniform":
        tensors = engine_of(dep).pool_tensors(dep, plan.layers)
        if tensors:
            plan = replace(plan, pool_tensors=tensors)
        sized = engine_of(dep).sized_block_bytes(dep, plan.layers)
        if sized and sized != plan.block_bytes:
            plan = replace(plan, sized_block_bytes=sized,
                           formula=f"{plan.formula}; the engine sizes the pool by "
                           f"{sized // block} B/token")
    if plan.layout == "hybrid" and value_at(LAYER_SUM_ADMISSION, dep.engine_version, False,
                                            engine=dep.engine):
        types = Counter((s.kind, s.window) for s in specs)
        page = specs[0].page_bytes
        plan = replace(plan, layer_sum_pages=tuple((c, page) for _k, c in sorted(types.items())))
    return plan


def _mamba_mode(spec: ModelSpec, dep: Deployment) -> str:
    """The ``mamba_cache_mode`` vLLM runs the model in at the deployment's release
    (``memprof.core.hybrid_state.resolve_mamba_cache_mode``; "none" for a model without state
    mixers)."""
    return resolve_mamba_cache_mode(version=dep.engine_version, mixers=_mixer_kinds(spec),
                                    enable_prefix_caching=dep.enable_prefix_caching,
                                    requested=dep.mamba_cache_mode)


def mamba_cache_notes(spec: ModelSpec, dep: Deployment, arch: str) -> tuple[str, ...]:
    """What the estimate took for vLLM's prefix caching of a model with state mixers (the
    mode, where prefix caching was not asked, and the GPU assumption behind a Gated DeltaNet
    checkpoint block); () for any other model or engine."""
    if _model_mixer(spec) is None or not engine_of(dep).models_state_mixers:
        return ()
    mode = _mamba_mode(spec, dep)
    if mode == "none":
        return ()
    pages = _state_pages(spec, dep, arch, mode)
    held = (f"{pages} state pages a request in each state group" if pages
            else "a state page per block of context in each state group")
    how = ("--enable-prefix-caching" if dep.enable_prefix_caching
           else f"prefix caching, on by default for hybrid models in vLLM {dep.engine_version}")
    note = f"{how}: mamba_cache_mode '{mode}', {held}"
    if mode == "align" and "gdn" in _mixer_kinds(spec) and pages == 3 and arch != "sm90":
        note += (" (FlashInfer's Gated DeltaNet prefill and its checkpoint block assumed: "
                 "CUDA runtime 13 or later)")
    return (note + "; --no-enable-prefix-caching for 1",)


@lru_cache(maxsize=64)
def _mixer_kinds(spec: ModelSpec) -> frozenset[str]:
    """The ``StateMixer`` kinds of the model's layers (MLP-only layers left out)."""
    return frozenset(layer.attention.mixer.kind for layer in spec.layers
                     if layer.attention.mixer and layer.attention.mixer.kind != "none")


def _state_pages(spec: ModelSpec, dep: Deployment, arch: str, mode: str) -> int:
    """Pages a request holds in each state group of a model with state mixers, by the mode
    vLLM's prefix caching runs it in (``memprof.core.hybrid_state``'s release table; 0: a page
    per block of context, mode "all")."""
    mixer = _model_mixer(spec)
    assert mixer is not None and mixer.mixer is not None
    return state_pages_per_request(mode, mixer.mixer.kind, dep.engine_version, arch,
                                   mixer.mixer.head_k_dim)


def _mamba_chunk(spec: ModelSpec, dep: Deployment) -> int:
    """The Mamba-2 chunk size a state cached per block aligns the attention block to
    (``ModelConfig.get_mamba_chunk_size``: ``mamba_chunk_size``, else ``chunk_size``, of the
    config); a config without one is refused."""
    for key in ("mamba_chunk_size", "chunk_size"):
        value = spec.raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    asked = ("--mamba-cache-mode all" if dep.mamba_cache_mode == "all" else
             "prefix caching" + (" (on by default for hybrid models at this release)"
                                 if dep.enable_prefix_caching is None else ""))
    raise BadInput(f"{asked}: vLLM {dep.engine_version} caches {spec.name}'s Mamba-2 state per "
                   "block on a block aligned to the Mamba chunk size (mamba_cache_mode 'all'), "
                   "and its config states no mamba_chunk_size or chunk_size (vLLM takes the "
                   "transformers class default, which memprof does not read)",
                   hint="add --no-enable-prefix-caching, or --mamba-cache-mode align "
                   "(vLLM 0.15.0 to 0.31.x)")


def _cached_as_full(specs: list[KVLayerSpec], dep: Deployment) -> bool:
    """Does the release cache this model's windowed layers in full (``SLIDING_CACHED_AS_FULL``,
    ``CHUNKED_LOCAL_CACHED_AS_FULL``)?"""
    kinds = {s.kind for s in specs}
    if "full" not in kinds:
        return False
    return bool(("sliding" in kinds and value_at(SLIDING_CACHED_AS_FULL, dep.engine_version,
                                                  False, engine=dep.engine))
                or ("chunked" in kinds and value_at(CHUNKED_LOCAL_CACHED_AS_FULL,
                                                    dep.engine_version, False,
                                                    engine=dep.engine)))


@lru_cache(maxsize=64)
def _model_mixer(spec: ModelSpec) -> Attention | None:
    """The attention of the model's first layer whose ``StateMixer`` replaces attention (None:
    no such layer)."""
    return next((layer.attention for layer in spec.layers
                 if layer.attention.mixer and layer.attention.mixer.kind != "none"), None)


def _hybrid_alignment(spec: ModelSpec, dep: Deployment, kv: str, model_dtype: str, block: int,
                      align: int, mode: str = "none") -> AlignedPages | None:
    """The attention block size and state page of a model with state mixers (vLLM v0.10.2 /
    v0.11.0 model_executor/models/config.py ``HybridAttentionMambaModelConfig.
    verify_and_update_config``): the attention page of one token (the model's attention kind at
    ``block_size=1``, KV heads per rank, ``--kv-cache-dtype``), the state page of one layer
    (``MambaSpec`` of the mixer's shapes and dtypes), the block raised to the kernel alignment
    (16; 64 for MLA) that makes the attention page hold one state, the state page padded up to
    it; in ``mode`` "all" a multiple of the Mamba-2 chunk size instead (``_mamba_chunk``).
    None for a model without state mixers."""
    mixer = _model_mixer(spec)
    if mixer is None or mixer.mixer is None:
        return None
    a0 = attention_of(mixer)
    kind = kind_of(a0)
    one_token = kind.kv_pages(a0, _kv_query(dep.attn_tp, kv, model_dtype, 1, align, False))
    state = state_bytes(mixer.mixer, dep.attn_tp, kv_dtype_bytes(DEFAULT_KV_DTYPE, model_dtype),
                        dep.engine_version)
    return align_attention_block(
        attn_bytes_per_token=one_token[0].page_bytes, state_bytes=state, block_size=block,
        alignment=MLA_BLOCK_ALIGNMENT if kind.backend_picks_block else ATTENTION_BLOCK_ALIGNMENT,
        chunk=_mamba_chunk(spec, dep) if mode == "all" else 0)


def _grouped_plan(specs: list[KVLayerSpec], block: int, kv: str) -> KVPlan:
    """vLLM ``get_kv_cache_groups`` + ``get_kv_cache_config_from_groups``.

    One type (all full, or all sliding with one window): one group of every layer; pages may
    differ (TurboQuant boundary layers), which vLLM handles as ``UniformTypeKVCacheSpecs`` with
    ``page = Σ layer pages``. Mixed full + sliding with one page size: ``group_size`` = the
    smallest per-type layer count (or the largest if max < 1.5·min), each type split into
    ``cdiv(n, group_size)`` groups, every block id spending ``page × group_size`` bytes.
    """
    types = Counter((s.kind, s.window) for s in specs)
    per_token = sum(s.page_bytes for s in specs if s.kind == "full") // block
    if len(types) == 1:
        (kind, window), = types
        total = sum(s.page_bytes for s in specs)
        return KVPlan(
            layers=tuple(specs), block_size=block, block_bytes=total,
            bytes_per_token=total // block if kind == "full" else 0,
            layout="uniform", kv_dtype=kv,
            group_blocks=((kind, block, window, 1),),
            formula=f"{len(specs)} layers × {total // len(specs) // block} B/token"
            if len({s.page_bytes for s in specs}) == 1
            else f"Σ over {len(specs)} layers of per-layer pages / {block}",
        )
    if len({s.page_bytes for s in specs}) > 1:
        if len({(s.kind, s.window, s.page_bytes) for s in specs}) != len(types):
            # pages that differ within one layer type (TurboQuant's boundary layers)
            raise BadInput("hybrid attention with different page sizes per layer type is not "
                           "modelled yet", hint="use a uniform --kv-cache-dtype")
        specs = unify_page_sizes(specs)
        per_token = sum(s.page_bytes // s.block_size for s in specs if s.kind == "full")
    page = specs[0].page_bytes
    blocks = {(s.kind, s.window): s.block_size for s in specs}
    counts = list(types.values())
    lo, hi = min(counts), max(counts)
    group_size = hi if hi < 1.5 * lo else lo
    groups = tuple((f"{k}{'/' + str(w) if w else ''}", blocks[k, w], w, cdiv(c, group_size))
                   for (k, w), c in sorted(types.items()))
    return KVPlan(
        layers=tuple(specs), block_size=block, block_bytes=page * group_size,
        bytes_per_token=per_token, layout="hybrid", kv_dtype=kv,
        group_blocks=groups,
        formula=f"{len(groups)} KV cache groups × {group_size} layers, page {page} B",
    )


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class KVCapacity:
    """What the KV budget buys on a rank: blocks, bytes, tokens ("GPU KV cache size"), the
    concurrency at ``max_model_len``, and the bytes one such request needs."""

    num_gpu_blocks: int
    kv_cache_bytes: int
    tokens: int  # vLLM "GPU KV cache size: N tokens"
    max_concurrency: float  # "Maximum concurrency for L tokens per request: x"
    blocks_per_request: int
    request_bytes: int  # KV one max_model_len request needs (admission)


def capacity(plan: KVPlan, available_bytes: int, max_model_len: int,
             max_num_batched_tokens: int, hybrid_line_per_group: bool | None = None
             ) -> KVCapacity:
    blocks = max(0, available_bytes // plan.block_bytes) if available_bytes > 0 else 0
    return capacity_from_blocks(plan, blocks, max_model_len, max_num_batched_tokens,
                                hybrid_line_per_group)


@lru_cache(maxsize=64)
def hybrid_token_line_per_group(version: str | None, engine: str = "vllm") -> bool:
    """Does ``version`` print a hybrid pool's "GPU KV cache size" per group
    (``HYBRID_TOKEN_LINE_PER_GROUP``)? Kept by value (every rank estimate asks)."""
    return bool(value_at(HYBRID_TOKEN_LINE_PER_GROUP, version, False, engine))


def capacity_from_blocks(plan: KVPlan, blocks: int, max_model_len: int,
                         max_num_batched_tokens: int,
                         hybrid_line_per_group: bool | None = None) -> KVCapacity:
    """Blocks → tokens, concurrency and admission. ``hybrid_line_per_group``: whether the
    release prints a hybrid or state pool's token line per group
    (``hybrid_token_line_per_group``); None, where no release is named: per group for a pool
    with state groups only (the releases the hybrid-state logs of the tests come from)."""
    per_req, conc_blocks, request_bytes = _request_figures(plan, max_model_len,
                                                           max_num_batched_tokens)
    conc = blocks / conc_blocks if conc_blocks else 0.0
    # a pool with state groups or a hybrid pool: "GPU KV cache size" as 0.9.1–0.20.0 print it
    # (read in v0.10.2, v0.11.0, v0.12.0, v0.14.1 and v0.18.0 v1/core/kv_cache_utils.py
    # _report_kv_cache_config: num_blocks // len(kv_cache_groups) × min block size); from
    # 0.20.1 int(max_concurrency × max_model_len) for state groups too (rows 109/110 of
    # tests/data/published.json, 0.24.0: 569,878 = int(300 / 69 × 131,072); 0.33.0
    # v1/core/kv_cache_utils.py get_kv_cache_capacity)
    state = any(name == "state" for name, _b, _w, _n in plan.group_blocks)
    per_group = (state if hybrid_line_per_group is None
                 else hybrid_line_per_group and (state or plan.layout == "hybrid"))
    tokens = (logged_tokens_per_group(plan, blocks) if per_group
              else int(conc * max_model_len))
    return KVCapacity(
        num_gpu_blocks=blocks, kv_cache_bytes=blocks * plan.block_bytes,
        tokens=tokens, max_concurrency=conc, blocks_per_request=per_req,
        request_bytes=request_bytes,
    )


@lru_cache(maxsize=1024)
def _request_figures(plan: KVPlan, max_model_len: int, max_num_batched_tokens: int
                     ) -> tuple[int, int, int]:
    """(blocks one request takes, the blocks "Maximum concurrency" divides by, the KV bytes of
    one request) of ``plan`` at these lengths, as its methods give them; kept by value (they
    read neither the block count nor the budget: a sweep's points share them)."""
    return (plan.blocks_per_request(max_model_len, max_num_batched_tokens),
            plan.concurrency_blocks(max_model_len, max_num_batched_tokens),
            plan.request_bytes(max_model_len, max_num_batched_tokens))


def max_fitting_model_len(plan: KVPlan, available_bytes: int, max_num_batched_tokens: int,
                          upper: int) -> int:
    """vLLM's "estimated maximum model length": the largest length whose request fits
    (``memprof.core.auto_fit.longest_fitting``, vLLM's binary search)."""
    return longest_fitting(lambda n: plan.request_bytes(n, max_num_batched_tokens),
                           available_bytes, upper)


def kv_tensor_sizes(plan: KVPlan, num_blocks: int) -> list[int]:
    """One ``torch.zeros(size, int8)`` per ``KVCacheTensor`` (``_allocate_kv_cache_tensors``,
    vLLM@52a31cc gpu_model_runner.py):

    - uniform: one tensor per layer cache, ``page_layer × num_blocks``;
    - hybrid: ``group_size`` tensors of ``page × num_blocks`` (group_size = block bytes / page);
    - DeepSeek-V4 packed: one slab of ``block_stride × num_blocks`` (vLLM kv_cache_utils.py
    DeepSeek-V4 packed pool);
    - an engine's own tensors where the plan holds them (``KVPlan.pool_tensors``: SGLang's).
    """
    if num_blocks <= 0:
        return []
    if plan.pool_tensors:
        return [per * num_blocks + extra for per, extra in plan.pool_tensors]
    if plan.layout == "dsv4_packed":
        return [plan.block_bytes * num_blocks]
    if plan.layout == "hybrid":
        page = plan.layers[0].page_bytes
        return [page * num_blocks] * (plan.block_bytes // page)
    return [layer.page_bytes * num_blocks for layer in plan.layers]
