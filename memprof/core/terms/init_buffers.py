"""Init buffers: the buffers a model class registers at construction, which count in "model
loading took" (category weights), where the engine's model classes register them
(``Engine.registers_model_init_buffers``: vLLM's).

The lightning indexer's buffers, wherever the config has ``index_topk`` (vLLM keys them on that
field: ``is_v32 = hasattr(config, "index_topk")``):

- ``topk_indices_buffer``: ``[max_num_batched_tokens, index_topk]`` int32, one on every rank,
  made by the model before its layers and shared by them (``TOPK_INDICES_BUFFER``). The MTP
  drafter makes its own where speculative decoding drafts with the checkpoint's MTP layer, on
  the last stage: one per MTP layer where the drafter makes it in each predictor layer
  (``model_executor/models/deepseek_mtp.py`` ``DeepSeekMultiTokenPredictorLayer``, 0.11.0 –
  0.33.0), one per drafter where its kind says so (``AttentionKind.drafter_topk_per_layer``
  False: DeepSeek-V4's ``nvidia/mtp.py`` predictor, 0.33.0). The drafter's is its own: the
  proposer points the drafter at the target's only where the target model keeps the buffer as
  an attribute (0.20.0 – 0.33.0 v1/spec_decode/llm_base_proposer.py ``load_model``: ``if
  hasattr(target_language_model.model, "topk_indices_buffer")``; Model Runner V2's
  spec_decode/eagle/utils.py the same), which ``DeepseekV2Model`` does not (a local of its
  ``__init__``, read in every release from 0.11.0 to 0.33.0), and where it does (DeepSeek-V4)
  the drafter's was made before the load's peak, which the figure reports;
- sparse MLA's index groups, vLLM 0.30.0 on (``SPARSE_MLA_INDEX_GROUPS``): each layer the sparse
  MLA implementation runs (``kv_dtypes.attention_kind`` ``sparse_mla``) with an indexer of its
  own opens a group (v1/attention/backends/mla/index_group.py
  ``SparseMLAIndexGroupBuilder.register_layer``, called by
  model_executor/layers/attention/sparse_mla_attention.py ``SparseMLACommonImpl.__init__``),
  which keeps ``physical_topk_indices`` [rows + 1, index_topk] int32 and ``valid_topk_counts``
  [rows + 1] int32 (0.30.0 also ``request_ids`` [rows] int32). The target's groups share the
  model's builder, rows = ``get_sparse_mla_index_group_max_rows`` = min(max_num_batched_tokens,
  max_num_seqs × (1 + k)) with k the draft tokens (0.31.0 on ``max_decode_query_len``; 0.30.0
  the same sum: memprof runs no parallel drafting, which adds k more); the MTP layer gets none
  from its predictor, so its implementation makes its own builder over its own buffer, rows =
  the buffer's max_num_batched_tokens.

DeepSeek-V4's kind adds ``_mtp_hidden_buffer``: ``[max_num_batched_tokens, hc_mult × hidden]``
in the model dtype (``AttentionKind.model_init_buffers``) — which ranks hold it, and whether it
needs speculative decoding, changed by release (``MTP_HIDDEN_BUFFER`` rows below).
"""

from __future__ import annotations

from memprof.base.units import fmt_bytes
from memprof.core.attention import kind_of
from memprof.core.components import Component, TermContext
from memprof.core.dtypes import dtype_bytes
from memprof.core.engines import engine_of
from memprof.core.kv_dtypes import SPARSE_MLA, attention_kind
from memprof.core.kvcache import rank_layers
from memprof.core.models import Attention
from memprof.core.terms.common import is_last_stage, max_seqs, profile_tokens
from memprof.core.versions import Rule, rule_in_force, value_at

TOPK = "indexer topk_indices_buffer"
GROUPS = "sparse MLA index groups"
DRAFT_GROUPS = "MTP drafter index group"

# Where the indexer's topk_indices_buffer is made, read in every vLLM wheel from 0.11.0 to
# 0.33.0 (model_executor/models/deepseek_v2.py, deepseek_mtp.py): the same shape, dtype and
# place in each; absent from 0.10.2, which has no index_topk.
TOPK_INDICES_BUFFER: tuple[Rule, ...] = (
    Rule(name="indexer_topk_indices_buffer", changes="model load: the lightning indexer's "
         "topk_indices_buffer", since="0.11.0", until=None, applies_to="indexer",
         introduced_by="DeepSeek-V3.2 support (first released in 0.11.0; 0.10.2's "
         "deepseek_v2.py has no index_topk)",
         source="0.11.0 - 0.33.0 model_executor/models/deepseek_v2.py DeepseekV2Model.__init__ "
         "(hasattr(config, 'index_topk'): torch.empty(max_num_batched_tokens, index_topk, "
         "int32) before make_layers, every PP rank), deepseek_mtp.py "
         "DeepSeekMultiTokenPredictorLayer.__init__ (one per MTP layer); DeepSeek-V4: 0.20.0 "
         "model_executor/models/deepseek_v4.py, 0.33.0 models/deepseek_v4/nvidia/model.py "
         "DeepseekV4Model.__init__, nvidia/mtp.py (one per predictor)"),
)

# Sparse MLA's index groups per release, as (request_ids kept, ROCm's implementation opens
# them too): read in the 0.30.0, 0.31.0, 0.32.0 and 0.33.0 wheels (v1/attention/backends/mla/
# index_group.py absent from 0.29.0). ROCm's ROCMAiterMLASparseImpl subclasses
# SparseMLACommonImpl from 0.32.0 (0.30.0 / 0.31.0 rocm_aiter_mla_sparse.py: not a subclass).
SPARSE_MLA_INDEX_GROUPS: tuple[Rule, ...] = (
    Rule(name="sparse_mla_index_groups", changes="model load: sparse MLA's index groups",
         since="0.30.0", until="0.31.0", value=(True, False), applies_to="sparse_mla",
         introduced_by="0.30.0: v1/attention/backends/mla/index_group.py (absent in 0.29.0)",
         source="0.30.0 index_group.py SparseMLAIndexGroupBuilder.register_layer "
         "(physical_topk_indices, valid_topk_counts, request_ids), "
         "get_sparse_mla_index_group_max_rows; model_executor/models/deepseek_v2.py "
         "DeepseekV2Model.__init__; layers/attention/sparse_mla_attention.py "
         "SparseMLACommonImpl.__init__"),
    Rule(name="sparse_mla_index_groups", changes="model load: sparse MLA's index groups",
         since="0.31.0", until="0.32.0", value=(False, False), applies_to="sparse_mla",
         introduced_by="0.31.0: request_ids dropped; max_decode_query_len",
         source="0.31.0 index_group.py, v1/attention/backend.py max_decode_query_len"),
    Rule(name="sparse_mla_index_groups", changes="model load: sparse MLA's index groups",
         since="0.32.0", until=None, value=(False, True), applies_to="sparse_mla",
         introduced_by="0.32.0: ROCMAiterMLASparseImpl subclasses SparseMLACommonImpl",
         source="0.32.0 / 0.33.0 index_group.py, v1/attention/backends/mla/"
         "rocm_aiter_mla_sparse.py"),
)

# Who allocates ``_mtp_hidden_buffer``: "every rank", "last stage" (PP), or "last stage with
# speculative decoding".
MTP_HIDDEN_BUFFER: tuple[Rule, ...] = (
    Rule(name="dsv4_mtp_hidden_buffer", changes="DeepSeek-V4 _mtp_hidden_buffer",
         since="0.20.0", until="0.21.0", value="every rank",
         introduced_by="DeepSeek-V4 support (first released in 0.20.0)",
         source="0.20.0 model_executor/models/deepseek_v4.py DeepseekV4Model.__init__ "
         "(unconditional, every rank)", applies_to="dsv4"),
    Rule(name="dsv4_mtp_hidden_buffer", changes="DeepSeek-V4 _mtp_hidden_buffer",
         since="0.21.0", until="0.27.0", value="last stage",
         introduced_by="'Only allocated on the last PP rank' (read in 0.21.0; PR not "
         "identified)",
         source="0.21.0 model_executor/models/deepseek_v4.py, 0.26.0 "
         "models/deepseek_v4/nvidia/model.py DeepseekV4Model.__init__", applies_to="dsv4"),
    Rule(name="dsv4_mtp_hidden_buffer", changes="DeepSeek-V4 _mtp_hidden_buffer",
         since="0.27.0", until=None, value="last stage with speculative decoding",
         introduced_by="vLLM PR #50312 (needs_mtp_hidden_states)",
         source="0.27.0 / 0.33.0 models/deepseek_v4/nvidia/model.py DeepseekV4Model.__init__",
         applies_to="dsv4"),
)


def _index_topk(ctx: TermContext) -> int:
    """The config's ``index_topk`` (0: none)."""
    return next((x.attention.index_topk for x in ctx.spec.layers if x.attention.index_topk), 0)


def _drafter_buffers(ctx: TermContext) -> int:
    """The topk_indices_buffers the MTP drafter makes on this rank (the module docstring)."""
    spec = ctx.spec
    if not (ctx.dep.speculative_mtp and spec.mtp_layers and is_last_stage(ctx)):
        return 0
    return len(spec.mtp_layers) if kind_of(spec.layers[0].attention).drafter_topk_per_layer else 1


def _own_group(a: Attention) -> bool:
    """Does a layer of attention ``a`` open an index group: the sparse MLA implementation runs
    it, with an indexer of its own?"""
    return a.has_indexer and attention_kind(a.kind, a.has_indexer) == SPARSE_MLA


def index_group_parts(ctx: TermContext) -> list[tuple[str, int, int, str]]:
    """Sparse MLA's index groups on this rank at the release (``SPARSE_MLA_INDEX_GROUPS``), as
    (name, bytes of one, count, rows formula); empty where none holds."""
    dep = ctx.dep
    rule = rule_in_force(SPARSE_MLA_INDEX_GROUPS, dep.engine_version, dep.engine)
    topk = _index_topk(ctx)
    if rule is None or not topk:
        return []
    value = rule.value
    assert isinstance(value, tuple)
    request_ids, rocm = bool(value[0]), bool(value[1])
    if ctx.gpu.is_rocm and not rocm:
        return []
    target = sum(1 for x in rank_layers(ctx.spec, dep, ctx.coord)
                 if not x.is_mtp and _own_group(x.attention))
    drafter = (sum(1 for x in ctx.spec.mtp_layers if _own_group(x.attention))
               if _drafter_buffers(ctx) else 0)
    n, r, k = profile_tokens(dep), max_seqs(dep), dep.num_speculative_tokens
    out: list[tuple[str, int, int, str]] = []
    for label, groups, rows, why in (
            (GROUPS, target, min(n, r * (1 + k)),
             f"min({n} tokens, {r} seqs × (1 + {k}))"),
            (DRAFT_GROUPS, drafter, n, f"its own builder: {n} tokens")):
        if not groups:
            continue
        out.append((f"{label} (physical top-k)", (rows + 1) * topk * 4, groups,
                    f"physical_topk_indices [{rows} + 1, {topk}] int32, rows {why}"))
        out.append((f"{label} (valid counts)", (rows + 1) * 4, groups,
                    f"valid_topk_counts [{rows} + 1] int32"))
        if request_ids:
            out.append((f"{label} (request ids)", rows * 4, groups,
                        f"request_ids [{rows}] int32"))
    return out


def init_buffer_terms(ctx: TermContext) -> list[Component]:
    """``topk_indices_buffer = mnbt × index_topk × 4 B`` (+ the MTP drafter's), sparse MLA's
    index groups where the release opens them, and ``_mtp_hidden_buffer = mnbt × hc_mult·H × s``
    where the release's row says it is allocated (the module docstring)."""
    spec, dep = ctx.spec, ctx.dep
    if not engine_of(dep).registers_model_init_buffers or not spec.layers:
        return []
    mnbt = profile_tokens(dep)
    version = dep.engine_version or ""
    out: list[Component] = []
    topk = _index_topk(ctx)
    if topk and rule_in_force(TOPK_INDICES_BUFFER, dep.engine_version, dep.engine):
        n_topk = 1 + _drafter_buffers(ctx)
        out.append(Component(name=TOPK, category="weights", bytes=n_topk * mnbt * topk * 4,
                             count=n_topk,
                             formula=f"{mnbt} tokens × {topk} top-k × 4 B int32"
                             + (f" (target + MTP drafter's {n_topk - 1})" if n_topk > 1
                                else "")))
        for name, each, count, formula in index_group_parts(ctx):
            out.append(Component(name=name, category="weights", bytes=count * each,
                                 count=count, formula=f"{formula} per group, {count} group"
                                 f"{'s' if count != 1 else ''} (vLLM {version})"))
    if not kind_of(spec.layers[0].attention).model_init_buffers:
        return out
    spec_on = dep.speculative_mtp
    who = value_at(MTP_HIDDEN_BUFFER, version, "last stage with speculative decoding")
    held = (who == "every rank" or (who == "last stage" and is_last_stage(ctx))
            or (who == "last stage with speculative decoding" and is_last_stage(ctx)
                and spec_on))
    if held:
        width = spec.hc_mult * spec.hidden_size
        s = dtype_bytes(ctx.model_dtype)
        n = mnbt * width * s
        out.append(Component(name="DeepSeek-V4 _mtp_hidden_buffer", category="weights",
                             bytes=n, formula=f"{mnbt} tokens × {spec.hc_mult}×"
                             f"{spec.hidden_size} × {s} B ({fmt_bytes(n)}; {who}, "
                             f"vLLM {version})"))
    return out
