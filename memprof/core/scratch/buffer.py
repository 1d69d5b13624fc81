"""The vocabulary of the scratch catalog: a buffer (``ScratchBuffer``), its parts (``Part``), the
rank dimensions its shapes are a function of (``Dims``), and their names.

The catalog (``CATALOG``) has one ``ScratchBuffer`` per (buffer, variant). ``policy`` says which
``--scratch`` policy the variant belongs to: ``"per-layer"`` (the PR that allocated one copy per
layer, or per layer per step) or ``"shared"`` (one copy for all layers: a module-level buffer,
vLLM's ``WorkspaceManager``, or a per-call allocation that the caching allocator reuses);
``"both"`` marks workspaces every deployment of the backend has whatever the policy.

Lifetimes:

- ``per_layer_registered``: ``register_buffer`` at model construction, so it is counted in "model
  load" (vLLM's ``weights_memory``): inside the budget, seen by the profiler;
- ``per_layer_lazy``: one per layer, allocated lazily at the first decode: after the KV cache is
  sized, invisible to the profiler;
- ``per_step``: fresh on every call;
- ``shared_workspace``: one buffer for all layers (a ``WorkspaceManager`` slot or a module-level
  tensor).

``where`` of a component follows from ``profiled``: ``"budget"`` when the engine's start-up sees
the buffer before it sizes the KV cache (model construction, or the profile run), ``"runtime"``
when it first appears afterwards. Buffers sized by the KV pool (``needs_kv_blocks``) are always
runtime terms: ``scratch_runtime_terms`` reads ``ctx.num_gpu_blocks``, which the estimate sets only
after sizing the KV cache; ``scratch_budget_terms`` never does.

``WorkspaceManager`` (vLLM@52a31cc ``vllm/v1/worker/workspace.py``): every ``get_simultaneous``
call rounds each sub-buffer up to 256 B and asks for their sum; the manager keeps *one* buffer
per micro-batch that only grows, so all of its callers together cost the largest single call, not
the sum. The terms below therefore report each workspace caller as the growth it adds above the
callers already counted (budget callers first, then runtime callers, largest last).

"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from memprof.core.components import TermContext, Where
from memprof.core.deployment import Deployment
from memprof.core.dtypes import dtype_bytes as element_bytes
from memprof.core.dtypes import short_name
from memprof.core.engine_defaults import model_facts
from memprof.core.engines import engine_of
from memprof.core.engines.sglang import DP_ATTENTION_SCRATCH, sglang_defaults
from memprof.core.kv_dtypes import kv_dtype
from memprof.core.models import Layer, ModelSpec

# --- names ---------------------------------------------------------------------------------------

LIFETIMES = ("per_layer_registered", "per_layer_lazy", "per_step", "shared_workspace")
POLICIES = ("per-layer", "shared")

# Catalog keys that are not attention backends.
SGLANG_DP_ATTENTION = DP_ATTENTION_SCRATCH  # SGLang --enable-dp-attention gathered buffer

# --- constants (each with its source) -------------------------------------------------------------

# WorkspaceManager.get_simultaneous: round_up(bytes_i, 256) (vLLM@52a31cc
# vllm/v1/worker/workspace.py WorkspaceManager)
WORKSPACE_ALIGN = 256
# AITER DSv4 SWA scope attends to the 128-token window (vLLM #40892 AiterSparseScratch
# (ROCm/vllm#902))
AITER_SWA_TOPK = 128


# --- the dimensions a buffer's shape is a function of ---------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Dims:
    """The sizes of one rank that scratch shapes depend on."""

    local_heads: int  # query heads on this rank: num_heads / TP
    local_kv_heads: int  # KV heads on this rank: max(1, num_kv_heads / TP)
    head_dim: int
    kv_lora_rank: int  # MLA latent rank (0 elsewhere)
    hidden: int
    decode_seqs: int  # max_num_seqs: at most one decode request per sequence slot
    decode_tokens: int  # decode query rows: seqs × (1 + speculative tokens), ≤ batched tokens
    max_num_batched_tokens: int
    max_model_len: int
    block_size: int  # KV block (tokens) of this rank's plan
    num_gpu_blocks: int  # 0 until the KV cache is sized
    model_bytes: int  # bytes of the model (= query) dtype
    model_dtype: str  # its short name: bf16 / fp16 / fp32
    kv_quantized: bool  # --kv-cache-dtype fp8*
    window: int  # sliding window (DeepSeek-V4: 128)
    index_topk: int  # DeepSeek sparse indexer top-k
    dp: int
    graph_max_bs: int  # SGLang --cuda-graph-max-bs (or its default)
    tokens_per_bs: int  # SGLang decode tokens per request in a graph: 1 + speculative tokens


def dims(ctx: TermContext) -> Dims:
    """The dimensions of ``ctx``'s rank; unresolved deployment defaults follow ``resolve``."""
    spec, dep = ctx.spec, ctx.dep
    a = spec.layers[0].attention
    mnbt_default, seqs_default = engine_of(dep).batch_defaults(
        ctx.gpu, dep.engine_version, dep.entrypoint,
        dep.max_model_len or spec.max_position_embeddings or 0,
        given=(dep.max_num_batched_tokens, dep.max_num_seqs), model_facts=model_facts(spec))
    seqs = dep.max_num_seqs or seqs_default
    mnbt = dep.max_num_batched_tokens or mnbt_default
    per_req = 1 + dep.num_speculative_tokens
    return Dims(
        local_heads=max(1, a.num_heads // dep.tp),
        local_kv_heads=max(1, a.num_kv_heads // dep.tp),
        head_dim=a.head_dim,
        kv_lora_rank=a.kv_lora_rank,
        hidden=spec.hidden_size,
        decode_seqs=min(seqs, mnbt),
        decode_tokens=min(seqs * per_req, mnbt),
        max_num_batched_tokens=mnbt,
        max_model_len=dep.max_model_len or spec.max_position_embeddings or 1,
        block_size=ctx.plan.block_size,
        num_gpu_blocks=ctx.num_gpu_blocks,
        model_bytes=element_bytes(ctx.model_dtype),
        model_dtype=short_name(ctx.model_dtype),
        kv_quantized=kv_dtype(dep.kv_cache_dtype).quantized_fp8,
        window=a.sliding_window or AITER_SWA_TOPK,
        index_topk=a.index_topk,
        dp=dep.dp,
        graph_max_bs=dep.cuda_graph_max_bs or sglang_defaults(ctx.gpu, dep)[1],
        tokens_per_bs=per_req,
    )


def dtype_bytes(dtype: str, d: Dims) -> int:
    """Bytes of one element. ``model`` / ``query``: the model dtype; ``mla_out``: bf16 when the
    KV cache is quantised, else the query dtype (``CutlassMLAImpl`` / ``FlashInferMLAImpl``,
    vLLM #37442)."""
    if dtype in ("model", "query"):
        return d.model_bytes
    if dtype == "mla_out":
        return 2 if d.kv_quantized else d.model_bytes
    return element_bytes(dtype)


def dtype_name(dtype: str, d: Dims) -> str:
    """The element type a catalog dtype resolves to on this rank (for formulas)."""
    if dtype in ("model", "query"):
        return d.model_dtype
    if dtype == "mla_out":
        return "bf16" if d.kv_quantized else d.model_dtype
    return dtype


# --- the catalog ---------------------------------------------------------------------------------

Shape = tuple[int, ...]
ShapeFn = Callable[[Dims, str], Shape | None]  # (dims, layer kind) -> shape, None = absent
AppliesFn = Callable[[ModelSpec, Deployment, Layer], str | None]  # layer -> kind, None = no


@dataclass(frozen=True, slots=True, kw_only=True)
class Part:
    """One tensor of a buffer set (the sub-buffers one call needs at the same time)."""

    label: str
    shape: ShapeFn
    dtype: str  # a dtype of memprof.core.dtypes, or "model" / "query" / "mla_out"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScratchBuffer:
    """One variant of one scratch buffer (set) of one backend."""

    key: str  # identity shared by the per-layer and shared variants of the same buffer
    backend: str  # attention backend, SGLANG_DP_ATTENTION or an attention kind's scratch_key
    name: str
    label: str  # how the variant shows in a component name: "per layer", "shared", ...
    policy: str  # "per-layer" | "shared" | "both"
    lifetime: str  # one of LIFETIMES
    per_layer: bool  # does every layer (that has it) hold its own copy?
    parts: tuple[Part, ...]
    applies: AppliesFn
    profiled: bool  # seen by the engine before it sizes the KV cache
    source: str  # PR / file it comes from
    workspace_manager: bool = False  # a vLLM WorkspaceManager caller (256-B aligned, max-shared)
    needs_kv_blocks: bool = False  # sized by the KV pool: a runtime term only
    # when a lazily allocated buffer first appears: at the first decode, or at the first
    # continuation prefill (a prefill over an already cached prefix)
    first_use: Literal["decode", "prefill"] = "decode"

    @property
    def where(self) -> Where:
        return "budget" if self.profiled else "runtime"




def any_layer(spec: ModelSpec, dep: Deployment, layer: Layer) -> str | None:
    """Every layer holds (or calls) the buffer."""
    del spec, dep, layer
    return ""
