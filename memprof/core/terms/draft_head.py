"""An EAGLE / EAGLE-3 draft head's memory beside the target's: its weights (counted in vLLM's
model load) and the proposer's persistent buffers (the runner's constructor: in the budget where
``runner_buffers.RUNNER_BUFFERS_CHARGED`` charges the runner's own). The same proposer drafts
MTP (``--speculative-method mtp``: V1 ``EagleProposer``, Model Runner V2 ``MTPSpeculator``), so
its buffers are charged for the checkpoint's MTP layer too (``proposer_kind``; the MTP layer's
profile-run forward is memprof.core.terms.mtp_drafter). Its decoder layers' KV is the
KV cache's (``memprof.core.kvcache.draft_kv_layers``). The head is ``ModelSpec.draft_head``
(``memprof.core.models.draft_head``), sized in the model dtype (the draft's ``ModelConfig``
takes the target's ``dtype``: config/speculative.py ``SpeculativeConfig.__post_init__``).

Weights, with H the head's hidden size, t the TP size, s the dtype's bytes (read in the 0.30.0
wheel, model_executor/models/llama_eagle3.py, qwen3_eagle3.py and llama_eagle.py; the same
classes in 0.31.0 and 0.33.0):

- each decoder layer: ``qkv_proj`` (QKVParallelLinear: heads / t and max(1, KV heads / t) of
  head_dim) over an input of 2H on EAGLE-3's first layer (the embedding and the hidden state
  concatenated: ``qkv_input_size = 2 * self.hidden_size if layer_idx == 0``), H otherwise;
  ``o_proj``; ``gate_up_proj`` / ``down_proj`` of intermediate / t; ``input_layernorm`` (not on
  EAGLE's first layer, an ``nn.Identity``), ``post_attention_layernorm`` and EAGLE-3's
  ``hidden_norm``; Qwen3 heads ``q_norm`` / ``k_norm`` of head_dim; biases with
  ``attention_bias`` (Llama: qkv and o_proj);
- EAGLE-3: ``fc`` (ReplicatedLinear, whole on every rank) from the target hidden states it
  concatenates (``num_aux_hidden_states`` × ``target_hidden_size``) to H, ``input_norm`` over that
  input with ``norm_before_fc``, one norm per target state with ``fc_norm``, the final ``norm``
  (H); ``lm_head`` (ParallelLMHead over ``draft_vocab_size``, padded to 64, split t ways) and
  ``draft_id_to_target_id`` (``d2t``, int64 [draft vocab]) where the draft vocabulary is not
  the target's (``t2d`` is skipped at load);
- EAGLE (``EagleLlamaForCausalLM``): ``fc`` [H, 2H], no final norm, no lm_head (the target's);
- the embedding: built and then replaced by the target's (v1/worker/gpu/spec_decode/eagle/
  utils.py ``maybe_share_target_embed`` / ``_should_share``; v1/spec_decode/llm_base_proposer.py
  ``_maybe_share_embeddings``, which shares only when the widths match) where the head's width
  is the target's: memprof takes it as shared [assumption: a head that ships an embedding
  differing from the target's keeps it]; the replaced table is freed, and the profile window's
  ``empty_cache`` returns its segment (reserved_charge.py), so only the load's transient holds it
  (not modelled). A head of another width keeps its own [vocab, H] table. EAGLE-3's lm_head over
  a draft vocabulary of the target's size is taken as shared [assumption: ``_should_share``
  compares the tensors, which a config does not give].

The proposer's buffers, N = ``max_num_batched_tokens``, R = ``max_num_seqs``, k draft tokens
(``PROPOSER_BUFFERS``; H the head's, for MTP the target's: ``proposer_hidden``):

- Model Runner V2 (v1/worker/gpu/spec_decode/speculator.py ``DraftModelSpeculator.__init__`` and
  autoregressive/speculator.py, from 0.32.0 target_dependent_ar/speculator.py):
  ``InputBuffers`` (input_ids int32 [N], positions int64 [N], is_padding bool [N],
  query_start_loc int32 [R+1], seq_lens and dcp_local_seq_lens int32 [R]), ``idx_mapping`` [R]
  (int32 to 0.31.0, int64 from 0.32.0), ``temperature`` fp32 [R], ``seeds`` int64 [R],
  ``draft_tokens`` int64 [R, k], ``draft_token_confidence_probs`` fp32 [R, k] (from 0.30.0),
  ``hidden_states`` [N, H] in the model dtype, ``current_draft_step`` int64,
  ``last_token_indices`` int64 [R] and ``sample_src_positions`` int64 [R] (from 0.29.0)
  (``draft_logits`` only with ``draft_sample_method`` probabilistic, not the default greedy;
  ``inputs_embeds`` only for a multimodal target);
- the V1 runner (v1/spec_decode/llm_base_proposer.py ``SpecDecodeBaseProposer.__init__``, the
  same in 0.27.0 – 0.33.0): input_ids int32 [N], positions int64 [N], hidden_states [N, H],
  arange int32 [max(R+1, N)], inputs_embeds [N, H], backup_next_token_ids int32 [R] (the GPU
  half of its ``CpuGpuBuffer``), ``_slot_mapping_buffer`` int64 [N].

Both are made in the runner's constructor (Model Runner V2: ``init_speculator`` in
``GPUModelRunner.__init__``; V1: ``EagleProposer`` there), after the worker's init snapshot.

The profile run drafts once over its T tokens (``drafter_profile_stages``): the V1 runner's
``_dummy_run`` calls ``EagleProposer.dummy_run(T)`` after the target's forward, the head over its
persistent buffers; Model Runner V2's ``_dummy_run`` calls the speculator's ``propose`` (eager:
``need_eager=is_profile``), which first folds EAGLE-3's aux hidden states through ``fc``
(``torch.cat(aux_hidden_states, dim=-1)`` then ``combine_hidden_states``) while ``_dummy_run``
still holds them and the target's output. In the head's layer (llama_eagle3.py
``LlamaDecoderLayer.forward``) the model's ``input_embeds``, the normed embedding, the residual
(the hidden state's norm with ``norm_before_residual``; otherwise the input buffer) and the
[T, 2H] concatenation are live through the attention; the MLP runs beside the first three and
the attention's output. EAGLE's layer (llama_eagle.py) takes ``fc`` of the [T, 2H]
concatenation instead.

The target's forward keeps EAGLE-3's aux hidden states (three [T, H] made at layers 2, N/2 and
N-3) through its last layers (``target_aux_parts``, held beside every target layer's stage).

Not modelled: the allocator's rounding of the head's tensors in the load's replay
(``load_rounding`` replays the target's) [approximation]; and, said so in the component, the
drafter's logits over the sampled rows and its later draft steps (R rows each, below the
T-token prefill), Model Runner V2's speculator graphs (draft prefill and decode graphs; the V1
runner's PIECEWISE drafter graphs are memprof/core/terms/drafter_graphs.py's) and the
proposer's buffers at 0.8.5 – 0.9.0.x, whose budget charges torch's absolute peak
(``RUNNER_BUFFERS_CHARGED``; 0.9.1 – 0.26.x charge no constructor buffer).
"""

from __future__ import annotations

from memprof.base.errors import BadInput, LayoutError
from memprof.base.units import cdiv, fmt_bytes, round_up
from memprof.core.attention.base import rope_scaling
from memprof.core.components import Component, TermContext
from memprof.core.dtypes import dtype_bytes
from memprof.core.models.spec import DraftHead
from memprof.core.terms.common import Stage, is_last_stage, max_seqs, profile_tokens
from memprof.core.terms.runner_buffers import ALLOC_ROUND, charged_from_init_snapshot
from memprof.core.terms.runner_v2_profile import runs_v2
from memprof.core.versions import Rule, rule_in_force
from memprof.core.weights.shard import VOCAB_PADDING

WEIGHTS = "draft head weights"
BUFFERS = "draft proposer buffers"

# The proposer's persistent buffers per release, as (sample_src_positions, the confidence
# probabilities, idx_mapping's bytes) beside the list every release has (read in the 0.27.0,
# 0.28.0, 0.29.0, 0.30.0, 0.31.0, 0.32.0 and 0.33.0 wheels, v1/worker/gpu/spec_decode/
# speculator.py and autoregressive/ or target_dependent_ar/speculator.py; InputBuffers read in
# 0.27.0 and 0.30.0 - 0.33.0). The V1 proposer's list is the same in each of them. One table
# for the two methods whose drafter is this proposer (``applies_to``): an EAGLE head and an MTP
# layer (V1: ``SpeculativeConfig.use_eagle()`` is true for "eagle", "eagle3" and "mtp", and
# v1/worker/gpu_model_runner.py builds ``EagleProposer`` for it; Model Runner V2:
# v1/worker/gpu/spec_decode/__init__.py ``init_speculator`` builds ``EagleSpeculator`` for an
# EAGLE method and ``MTPSpeculator`` for "mtp", the same ``AutoRegressiveSpeculator`` (from
# 0.32.0 ``TargetDependentARSpeculator``) with no buffer of its own).
_SPANS = (("0.27.0", "0.29.0", (False, False, 4),
           "the first release read (0.27.0), the first whose budget charges the runner's "
           "constructor buffers again",
           "0.27.0 / 0.28.0 v1/worker/gpu/spec_decode/speculator.py DraftModelSpeculator."
           "__init__, autoregressive/speculator.py; v1/spec_decode/llm_base_proposer.py "
           "SpecDecodeBaseProposer.__init__"),
          ("0.29.0", "0.30.0", (True, False, 4),
           "0.29.0: AutoRegressiveSpeculator.sample_src_positions int64 [R]",
           "0.29.0 v1/worker/gpu/spec_decode/autoregressive/speculator.py"),
          ("0.30.0", "0.32.0", (True, True, 4),
           "0.30.0: DraftModelSpeculator.draft_token_confidence_probs fp32 [R, k]",
           "0.30.0 / 0.31.0 v1/worker/gpu/spec_decode/speculator.py"),
          ("0.32.0", None, (True, True, 8),
           "0.32.0: idx_mapping int64; target_dependent_ar/speculator.py",
           "0.32.0 / 0.33.0 v1/worker/gpu/spec_decode/speculator.py, "
           "target_dependent_ar/speculator.py"))
_DRAFTER_CLASS = {
    "eagle": "EagleSpeculator (V2), EagleProposer (V1)",
    "mtp": "mtp/speculator.py MTPSpeculator (V2), EagleProposer (V1: use_eagle() lists 'mtp')",
}
PROPOSER_BUFFERS: dict[str, tuple[Rule, ...]] = {
    kind: tuple(Rule(name=f"{kind}_proposer_buffers", changes=f"the {kind.upper()} proposer's "
                     "persistent buffers", since=since, until=until, value=value,
                     applies_to=kind, introduced_by=why, source=f"{src}; {_DRAFTER_CLASS[kind]}")
                for since, until, value, why, src in _SPANS)
    for kind in ("eagle", "mtp")}

# Model Runner V2 drafts with ``MultiModuleMTPSpeculator`` instead of ``MTPSpeculator`` where
# the checkpoint has more than one MTP layer and more than one draft token is asked
# (``SpeculativeConfig.use_multi_module_mtp``: min(num_nextn_predict_layers, k) > 1): its own
# cached inputs and hidden states, not read for their sizes, so memprof refuses that span.
MULTI_MODULE_MTP: tuple[Rule, ...] = (
    Rule(name="multi_module_mtp_speculator", changes="MTP with several MTP layers: its "
         "speculator", since="0.28.0", until=None, applies_to="mtp", generation="v1",
         introduced_by="0.28.0: init_speculator's use_multi_module_mtp() branch (absent in "
         "0.27.0)",
         source="0.28.0 - 0.33.0 v1/worker/gpu/spec_decode/__init__.py init_speculator, "
         "multi_module_mtp/speculator.py MultiModuleMTPSpeculator; config/speculative.py "
         "use_multi_module_mtp"),
)

NOT_MODELLED = ("[not modelled: the drafter's logits and later draft steps in the profile run; "
                "its CUDA graphs: the CUDA-graph estimate's formula says what is sized]")


def _vocab_parallel(vocab: int, hidden: int, tp: int, s: int) -> int:
    padded = round_up(vocab, VOCAB_PADDING)
    if padded % tp:
        raise LayoutError(f"the draft head's padded vocabulary ({padded}) is not divisible by "
                          f"tensor parallel size {tp}", hint="vLLM asserts it; use a TP size "
                          "that divides it")
    return padded // tp * hidden * s


def _shard(total: int, tp: int, what: str) -> int:
    if total % tp:
        raise LayoutError(f"tensor parallel size {tp} does not divide the draft head's {what} "
                          f"({total})", hint="use a TP size that divides it")
    return total // tp


def head_weight_parts(head: DraftHead, *, tp: int, dtype: str, target_hidden: int,
                      target_vocab: int) -> list[tuple[str, int]]:
    """One rank's tensors of the head, as (name, bytes) (the module docstring)."""
    s = dtype_bytes(dtype)
    h, hd = head.hidden_size, head.head_dim
    q = _shard(head.num_heads, tp, "attention heads") * hd
    kv = max(1, head.num_kv_heads // tp) * hd
    inter = _shard(head.intermediate_size, tp, "intermediate size")
    eagle3 = head.method == "eagle3"
    parts: list[tuple[str, int]] = []
    for i in range(head.num_layers):
        width = 2 * h if eagle3 and i == 0 else h
        at = f"layers.{i}."
        parts.append((f"{at}qkv_proj [{q + 2 * kv}, {width}]", (q + 2 * kv) * width * s))
        parts.append((f"{at}o_proj [{h}, {q}]", h * q * s))
        if head.attention_bias:
            parts.append((f"{at}qkv/o biases", (q + 2 * kv) * s
                          + (h * s if head.architecture != "Eagle3Qwen3ForCausalLM" else 0)))
        if head.qk_norm:
            parts.append((f"{at}q_norm/k_norm", 2 * hd * s))
        parts.append((f"{at}gate_up_proj [{2 * inter}, {h}]", 2 * inter * h * s))
        parts.append((f"{at}down_proj [{h}, {inter}]", h * inter * s))
        norms = 1 + (0 if not eagle3 and i == 0 else 1) + (1 if eagle3 else 0)
        parts.append((f"{at}norms ({norms}×{h})", norms * h * s))
    if eagle3:
        parts.append((f"norm [{h}]", h * s))
        if head.fc_inputs:
            fc_in = head.fc_inputs * head.target_hidden_size
            parts.append((f"fc [{h}, {fc_in}]", h * fc_in * s))
            norms = int(head.norm_before_fc) + int(head.fc_norm)
            if norms:
                parts.append((f"fc input norms ({norms}×{fc_in})", norms * fc_in * s))
        if head.draft_vocab_size != target_vocab:
            parts.append((f"lm_head [{head.draft_vocab_size}, {h}] (draft vocabulary)",
                          _vocab_parallel(head.draft_vocab_size, h, tp, s)))
            parts.append((f"d2t int64 [{head.draft_vocab_size}]", head.draft_vocab_size * 8))
    else:
        parts.append((f"fc [{h}, {2 * h}]", h * 2 * h * s))
    if h != target_hidden:
        parts.append((f"embed_tokens [{head.vocab_size}, {h}] (its own: the target's is "
                      f"{target_hidden} wide)", _vocab_parallel(head.vocab_size, h, tp, s)))
    return parts


def _shared(head: DraftHead, target_hidden: int, target_vocab: int) -> str:
    shared = []
    if head.hidden_size == target_hidden:
        shared.append("embedding")
    if head.method == "eagle" or head.draft_vocab_size == target_vocab:
        shared.append("lm_head")
    return (" and ".join(shared) + " shared with the target"
            + (" [assumption: the head ships none, or one equal to the target's]"
               if shared else "")) if shared else "no table shared with the target"


def draft_head_weight_terms(ctx: TermContext) -> list[Component]:
    """The head's weights on the last stage, one component (category weights: the drafter
    loads inside the runner's ``load_model`` and its "Model loading took" window, V1
    gpu_model_runner.py ``self.drafter.load_model``, V2 model_runner.py
    ``self.speculator.load_model``)."""
    head = ctx.spec.draft_head
    if head is None or not is_last_stage(ctx):
        return []
    parts = head_weight_parts(head, tp=ctx.dep.tp, dtype=ctx.model_dtype,
                              target_hidden=ctx.spec.hidden_size,
                              target_vocab=ctx.spec.vocab_size)
    total = sum(b for _n, b in parts)
    return [Component(
        name=WEIGHTS, category="weights", bytes=total,
        formula=f"{head.architecture} {head.name} ({head.num_layers} layer"
        f"{'s' if head.num_layers != 1 else ''}, /{ctx.dep.tp}): "
        + " + ".join(f"{n} {fmt_bytes(b)}" for n, b in parts)
        + f"; {_shared(head, ctx.spec.hidden_size, ctx.spec.vocab_size)} {NOT_MODELLED}")]


def proposer_kind(ctx: TermContext) -> str | None:
    """The drafter vLLM runs with the EAGLE proposer on this rank (``PROPOSER_BUFFERS``'
    ``applies_to``): "eagle" for a draft head, "mtp" for the checkpoint's MTP layer, ``None``
    for neither or off the last stage (the drafter is built there only)."""
    if not is_last_stage(ctx):
        return None
    if ctx.spec.draft_head is not None:
        return "eagle"
    if ctx.dep.speculative_mtp and ctx.spec.mtp_layers:
        return "mtp"
    return None


def proposer_hidden(ctx: TermContext) -> int:
    """H of the proposer's hidden-state buffers: the head's hidden size, or for MTP the
    draft config's, which is the target's. A hyper-connection target (DeepSeek-V4,
    ``ModelSpec.hc_mult``) widens it to hc_mult × H: V1 where the draft config has
    ``compress_ratios`` and ``hc_mult`` (llm_base_proposer.py, 0.27.0 - 0.33.0), Model Runner
    V2 by ``hc_mult`` at 0.27.0 / 0.28.0 and from 0.29.0 where the target class has
    ``get_mtp_target_hidden_states`` (speculator.py ``_target_feeds_hc_residual``), which
    DeepSeek-V4's has (models/deepseek_v4/nvidia/model.py, read in 0.29.0 - 0.33.0)."""
    head = ctx.spec.draft_head
    if head is not None:
        return head.hidden_size
    return ctx.spec.hidden_size * (ctx.spec.hc_mult or 1)


def _mrope_dims(ctx: TermContext) -> int:
    """The M-RoPE position channels of an MTP drafter (its config is the target's), 0 without
    M-RoPE: max(3, len(mrope_section)) (0.30.0 transformers_utils/config.py
    ``mrope_num_dims``). An EAGLE head's own config has none [assumption: the heads memprof
    reads are Llama / Qwen3 layers]."""
    if ctx.spec.draft_head is not None:
        return 0
    section = rope_scaling(ctx.spec).get("mrope_section")
    return max(3, len(section)) if isinstance(section, list) else 0


def _v2_mm_embeds(ctx: TermContext) -> bool:
    """Does Model Runner V2's speculator make ``inputs_embeds`` [N, H]? In ``load_model``
    (autoregressive/speculator.py, 0.27.0 - 0.31.0; target_dependent_ar/ from 0.32.0) where
    the target takes multimodal inputs (a vision tower and a modality not limited to 0) and the
    drafter model embeds them (speculator.py ``supports_mm_inputs``): an MTP drafter of a
    multimodal target, Qwen3.5 / 3.6's ``Qwen3_5MTP`` (``SupportsMultiModal``,
    qwen3_5_mtp.py). An EAGLE head's class is not multimodal [assumption: the Llama / Qwen3
    heads memprof reads]."""
    vision = ctx.spec.vision
    if proposer_kind(ctx) != "mtp" or vision is None:
        return False
    from memprof.core.models.multimodal import mm_limits  # kept off the cold start (6 ms)

    return any(mm_limits(ctx.dep.limit_mm_per_prompt, vision.modalities).values())


def check_mtp_speculator(ctx: TermContext) -> None:
    """Refuse Model Runner V2's ``MultiModuleMTPSpeculator`` (``MULTI_MODULE_MTP``), whose
    buffers memprof does not size."""
    dep = ctx.dep
    if (proposer_kind(ctx) == "mtp" and runs_v2(ctx) and len(ctx.spec.mtp_layers) > 1
            and dep.num_speculative_tokens > 1
            and rule_in_force(MULTI_MODULE_MTP, dep.engine_version, dep.engine) is not None):
        raise BadInput(f"{ctx.spec.name} has {len(ctx.spec.mtp_layers)} MTP layers: with "
                       f"{dep.num_speculative_tokens} draft tokens Model Runner V2 drafts with "
                       "MultiModuleMTPSpeculator, whose buffers memprof does not size",
                       hint="--num-speculative-tokens 1 (MTPSpeculator drafts it), or an "
                       f"--engine-version before {MULTI_MODULE_MTP[0].since}")


def proposer_buffer_parts(ctx: TermContext) -> list[tuple[str, int]]:
    """The proposer's persistent buffers at the release (``PROPOSER_BUFFERS``, the row of the
    drafter's kind), each rounded to the allocator's 512 B; empty without a drafter that uses
    it or at a release not read."""
    dep, kind = ctx.dep, proposer_kind(ctx)
    if kind is None:
        return []
    rule = rule_in_force(PROPOSER_BUFFERS[kind], dep.engine_version, dep.engine)
    if rule is None:
        return []
    check_mtp_speculator(ctx)
    n, r, k = profile_tokens(dep), max_seqs(dep), dep.num_speculative_tokens
    s = dtype_bytes(ctx.model_dtype)
    row = proposer_hidden(ctx) * s
    if runs_v2(ctx):
        value = rule.value
        assert isinstance(value, tuple)
        sample_src, confidence, idx = (bool(value[0]), bool(value[1]), int(value[2]))
        parts = [("input_ids int32 [N]", n * 4), ("positions int64 [N]", n * 8),
                 ("is_padding bool [N]", n), ("query_start_loc int32 [R+1]", (r + 1) * 4),
                 ("seq_lens int32 [R]", r * 4), ("dcp_local_seq_lens int32 [R]", r * 4),
                 (f"idx_mapping int{idx * 8} [R]", r * idx), ("temperature fp32 [R]", r * 4),
                 ("seeds int64 [R]", r * 8), ("draft_tokens int64 [R,k]", r * k * 8)]
        if confidence:
            parts.append(("draft_token_confidence_probs fp32 [R,k]", r * k * 4))
        parts += [("hidden_states [N,H]", n * row), ("current_draft_step int64", 8),
                  ("last_token_indices int64 [R]", r * 8)]
        if sample_src:
            parts.append(("sample_src_positions int64 [R]", r * 8))
        if _v2_mm_embeds(ctx):
            parts.append(("inputs_embeds [N,H] (load_model)", n * ctx.spec.hidden_size * s))
    else:
        dims = _mrope_dims(ctx)
        positions = ((f"mrope_positions int64 [{dims},N+1]", dims * (n + 1) * 8) if dims
                     else ("positions int64 [N]", n * 8))
        # inputs_embeds is the draft config's inputs_embeds_size: H, never hc-widened
        embeds = (ctx.spec.draft_head.hidden_size if ctx.spec.draft_head is not None
                  else ctx.spec.hidden_size) * s
        parts = [("input_ids int32 [N]", n * 4), positions,
                 ("hidden_states [N,H]", n * row),
                 ("arange int32 [max(R+1,N)]", max(r + 1, n) * 4),
                 ("inputs_embeds [N,H]", n * embeds), ("backup_next_token_ids int32 [R]", r * 4),
                 ("slot_mapping int64 [N]", n * 8)]
    return [(name, cdiv(b, ALLOC_ROUND) * ALLOC_ROUND) for name, b in parts]


def proposer_buffer_terms(ctx: TermContext) -> list[Component]:
    """The proposer's buffers in the budget where the release charges the runner's
    constructor buffers (``RUNNER_BUFFERS_CHARGED``'s 0.27.0-on rows: ``total_consumed`` from
    the worker's init snapshot); nothing elsewhere (0.9.1 – 0.26.x charge none of them)."""
    dep = ctx.dep
    if not charged_from_init_snapshot(dep):
        return []
    parts = proposer_buffer_parts(ctx)
    if not parts:
        return []
    v2 = runs_v2(ctx)
    if proposer_kind(ctx) == "mtp":
        runner = ("Model Runner V2's MTPSpeculator" if v2
                  else "the V1 runner's EagleProposer, which drafts MTP")
    else:
        runner = "Model Runner V2's EagleSpeculator" if v2 else "the V1 runner's EagleProposer"
    return [Component(
        name=BUFFERS, category="activation", bytes=sum(b for _n, b in parts),
        formula=f"N={profile_tokens(dep)}, R={max_seqs(dep)}, k={dep.num_speculative_tokens}, "
        f"H={proposer_hidden(ctx)}: "
        + " + ".join(f"{name} {fmt_bytes(b)}" for name, b in parts)
        + f" ({runner}, made in the runner's constructor after the worker's init snapshot)")]


def drafter_profile_stages(ctx: TermContext, t: int) -> list[Stage]:
    """The head's forward over the profile run's ``t`` tokens, as live sets beside what the
    runner still holds (the module docstring); empty without a head or off the last stage.
    Read in the 0.30.0 wheel (v1/worker/gpu_model_runner.py ``_dummy_run``, v1/worker/gpu/
    model_runner.py ``_dummy_run`` and autoregressive/speculator.py ``propose``) and taken for
    every release that drafts with a head [approximation: the other releases' runners not
    read for it]."""
    head = ctx.spec.draft_head
    if head is None or not is_last_stage(ctx):
        return []
    s, h, tp = dtype_bytes(ctx.model_dtype), head.hidden_size, ctx.dep.tp
    row = t * h * s
    held = [("target hidden_states [T,H]", t * ctx.spec.hidden_size * s)]
    stages = []
    if head.fc_inputs and runs_v2(ctx):  # V2's propose combines the aux states itself
        aux = head.fc_inputs * head.target_hidden_size * t * s
        held.append((f"aux hidden states {head.fc_inputs}×[T,H]", aux))
        fold = [("aux concatenated [T,kH]", aux)]
        if head.norm_before_fc:
            fold.append(("input_norm out [T,kH]", aux))
        stages.append(Stage("EAGLE-3 fc (profile run)", tuple(held + fold
                                                              + [("fc out [T,H]", row)])))
        held.append(("combined hidden [T,H]", row))
    q = head.num_heads // tp * head.head_dim
    kv = max(1, head.num_kv_heads // tp) * head.head_dim
    inter = head.intermediate_size // tp
    reduced = [("all-reduce out [T,H]", row)] if tp > 1 else []
    if head.method == "eagle3":
        live = [("input_embeds [T,H]", row), ("normed embeds [T,H]", row)]
        if head.norm_before_residual:
            live.append(("residual (normed hidden) [T,H]", row))
        attn_in = [("embeds ‖ hidden [T,2H]", 2 * row)]
    else:  # EagleLlamaForCausalLM: fc(cat(embeds, hidden)) feeds the layer
        live = [("input_embeds [T,H]", row)]
        stages.append(Stage("EAGLE fc (profile run)", tuple(
            held + live + [("embeds ‖ hidden [T,2H]", 2 * row), ("fc out [T,H]", row)])))
        live.append(("fc out = residual [T,H]", row))
        attn_in = []
    stages.append(Stage("draft attention (profile run)", tuple(
        held + live + attn_in + [("qkv [T,(q+2kv)]", t * (q + 2 * kv) * s),
                                 ("attention out [T,q]", t * q * s), ("o_proj out [T,H]", row)]
        + reduced)))
    stages.append(Stage("draft MLP (profile run)", tuple(
        held + live + [("attention out [T,H]", row), ("gate_up [T,2I]", 2 * t * inter * s),
                       ("act [T,I]", t * inter * s), ("down_proj out [T,H]", row)] + reduced)))
    return stages


def target_aux_parts(ctx: TermContext, t: int) -> list[tuple[str, int]]:
    """EAGLE-3's aux hidden states the target's forward keeps for the head, live through its
    last layers: one [T, H] (``hidden_states + residual``, a new tensor) at each layer of
    ``eagle_aux_hidden_state_layer_ids`` (default 2, N/2, N-3), as many as the head's fc
    reads (0.30.0 model_executor/models/llama.py ``LlamaModel.forward`` returns
    ``hidden_states, aux_hidden_states``; v1/worker/gpu/spec_decode/eagle/eagle3_utils.py
    ``set_eagle3_aux_hidden_state_layers``). Empty without an EAGLE-3 head. [approximation:
    held beside every layer kind's stage; a kind found only before the aux layers (a model's
    first dense layers) holds fewer]"""
    head = ctx.spec.draft_head
    if head is None or not head.fc_inputs or not is_last_stage(ctx):
        return []
    n = head.fc_inputs * t * ctx.spec.hidden_size * dtype_bytes(ctx.model_dtype)
    return [(f"EAGLE-3 aux hidden states {head.fc_inputs}×[T,H]", n)]


def head_note(target_hidden: int, target_vocab: int, head: DraftHead) -> str:
    """The estimate's note on an EAGLE head: what it took from the target (an assumption where
    a config cannot tell) and what it leaves out."""
    return (f"--speculative-model {head.name}: {head.architecture}, {head.num_layers} layer"
            f"{'s' if head.num_layers != 1 else ''} (its weights, its KV in the pool, the "
            f"proposer's buffers and its profile-run forward are sized); "
            f"{_shared(head, target_hidden, target_vocab)}; " + NOT_MODELLED)
