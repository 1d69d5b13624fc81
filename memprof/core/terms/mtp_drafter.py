"""The profile run's forward of the checkpoint's MTP layer (``--speculative-method mtp``).

vLLM drafts MTP with the EAGLE proposer (memprof/core/terms/draft_head.py ``PROPOSER_BUFFERS``:
its persistent buffers), and its profile run drafts over the same T tokens as the target
(``max_num_batched_tokens``): the V1 runner's ``_dummy_run`` calls ``self.drafter.dummy_run(T)``
after the target's forward (v1/worker/gpu_model_runner.py, read in 0.27.0, 0.30.0 and 0.33.0;
``EagleProposer.dummy_run`` runs the drafter model k times over T tokens, each the same size),
Model Runner V2's ``_dummy_run`` calls ``MTPSpeculator.propose`` (v1/worker/gpu/model_runner.py,
the same releases), whose first step is over the T tokens too. Both still hold the target's
output hidden states [T, H] (``target hidden``) while the drafter runs.

The drafter model's forward (read in the 0.27.0, 0.30.0 and 0.33.0 wheels), as live sets:

- ``eh_proj`` (model_executor/models/deepseek_mtp.py, DeepSeek-V3 / R1 / V3.2; glm4_moe_mtp.py,
  GLM-4.5 / 4.6): the predictor's ``forward`` embeds the input ids ([T, H], held by the caller
  through the layer), ``DeepSeekMultiTokenPredictorLayer.forward`` masks them
  (``torch.where``), ``enorm`` / ``hnorm`` them and the target's hidden states, and projects
  their concatenation [T, 2H] through ``eh_proj`` (nn.Linear, whole on every rank) to the block's
  input; the normed embeddings and hidden states stay bound to its locals through
  ``mtp_block``;
- ``fc`` (qwen3_5_mtp.py, Qwen3.5 / 3.6; qwen3_next_mtp.py, Qwen3-Next): the embedding rebound
  to ``pre_fc_norm_embedding``'s output (held through the layer), ``pre_fc_norm_hidden``'s output
  and their concatenation [T, 2H] into ``fc``, a ``ColumnParallelLinear`` with
  ``gather_output``: with TP > 1 its [T, H/t] shard, the all-gather's buffer and the gathered
  [T, H] (parallel_state.py ``all_gather``: ``movedim`` then ``reshape``, a copy).

Then the MTP layer itself, a decoder layer of the target's kinds: its stages are the target
layer's (memprof/core/terms/activation.py, the MTP layers are in the last stage's layers), with
what the drafter holds beside it (``mtp_layer_held``).

[approximation: the drafter runs under ``torch.compile`` (``@support_torch_compile``), whose
graph may free a local before the Python code would; the sets above are the eager code's, as
the target's layers are; and the releases before 0.27.0 are taken as the ones read, as the
EAGLE head's profile stages are (draft_head.py ``drafter_profile_stages``).] Not read:
DeepSeek-V4's MTP forward (hyper-connections): no stage beyond its layer's own.
"""

from __future__ import annotations

from memprof.core.components import TermContext
from memprof.core.dtypes import dtype_bytes
from memprof.core.models.families import family_row
from memprof.core.models.spec import ModelSpec
from memprof.core.terms.common import Stage
from memprof.core.terms.draft_head import proposer_kind


def _form(ctx: TermContext) -> str | None:
    """The MTP drafter's input projection ("eh_proj" / "fc"), ``None`` where memprof has not
    read it or the rank does not draft with an MTP layer."""
    if proposer_kind(ctx) != "mtp":
        return None
    entry = family_row(ctx.spec.family).mtp_predictor_input
    return entry[0] if entry else None


def mtp_layer_held(ctx: TermContext, t: int) -> list[tuple[str, int]]:
    """What the profile run holds beside the MTP layer's own live set over ``t`` tokens: the
    target's output hidden states and the predictor's bound inputs (the module docstring);
    empty where the rank drafts no MTP layer or its forward is not read."""
    form = _form(ctx)
    if form is None:
        return []
    row = t * ctx.spec.hidden_size * dtype_bytes(ctx.model_dtype)
    if form == "eh_proj":
        return [("target hidden [T,H]", row), ("MTP embeds [T,H]", row),
                ("enorm out [T,H]", row), ("hnorm out [T,H]", row)]
    return [("target hidden [T,H]", row), ("MTP normed embeds [T,H]", row)]


def mtp_profile_stages(ctx: TermContext, t: int) -> list[Stage]:
    """The MTP drafter's input projection over the profile run's ``t`` tokens, as one live set
    (the module docstring); empty where the rank drafts no MTP layer or its forward is not
    read."""
    form = _form(ctx)
    if form is None:
        return []
    tp = ctx.dep.tp
    row = t * ctx.spec.hidden_size * dtype_bytes(ctx.model_dtype)
    target = ("target hidden [T,H]", row)
    if form == "eh_proj":
        return [Stage("MTP eh_proj (profile run)", (
            target, ("MTP embeds [T,H]", row), ("enorm out [T,H]", row), ("hnorm out [T,H]", row),
            ("embeds ‖ hidden [T,2H]", 2 * row), ("eh_proj out [T,H]", row)))]
    out = [("fc out [T,H]", row)]
    if tp > 1:  # gather_output: the shard, the all-gather's buffer, the reshaped copy
        out = [("fc shard [T,H/t]", row // tp), ("all-gather buffer [T,H]", row),
               ("fc out (gathered) [T,H]", row)]
    return [Stage("MTP fc (profile run)", (
        target, ("MTP normed embeds [T,H]", row), ("embeds ‖ hidden [T,2H]", 2 * row), *out))]


def mtp_note(spec: ModelSpec) -> str:
    """The estimate's note on an MTP drafter: what is sized, and what is not."""
    n = len(spec.mtp_layers)
    sized = ("its weights, its KV in the pool, the proposer's buffers from vLLM 0.27.0 and its "
             "input projection's forward in the profile run are sized"
             if family_row(spec.family).mtp_predictor_input else
             "its weights, its KV in the pool and the proposer's buffers from vLLM 0.27.0 are "
             f"sized; its input projection's forward is not read for {spec.family}")
    return (f"--speculative-method mtp: the checkpoint's {n} MTP layer{'s' if n != 1 else ''} "
            f"drafts with vLLM's EAGLE proposer: {sized} [not modelled: its later draft "
            "steps; its CUDA graphs: the CUDA-graph estimate's formula says what is sized]")
