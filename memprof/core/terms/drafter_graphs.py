"""The speculative drafter's CUDA graphs (an MTP layer or an EAGLE head, drafted by vLLM's EAGLE
proposer): which runner captures them, at which sizes, into which pool.

The V1 runner (``DRAFTER_GRAPHS_V1``), read in the 0.11.0, 0.11.1, 0.19.0 and 0.33.0 wheels:

- 0.11.0: none. v1/spec_decode/eagle.py ``EagleProposer.dummy_run`` and ``propose`` enter
  ``set_forward_context`` without a ``cudagraph_runtime_mode``, whose default is NONE
  (forward_context.py), and compilation/cuda_graph.py ``CUDAGraphWrapper.__call__`` runs the
  piece eagerly under NONE; DeepSeek's MTP class is not even compiled there
  (``Family.mtp_compiled``);
- 0.11.1 on: v1/worker/gpu_model_runner.py ``_dummy_run``, called by ``capture_model`` for each
  capture descriptor, calls ``self.drafter.dummy_run(num_tokens, use_cudagraphs=...)`` with
  ``use_cudagraphs`` true only for a PIECEWISE descriptor (0.11.1 l. 3866; 0.33.0 l. 5812:
  ``is_graph_capturing and cudagraph_runtime_mode == PIECEWISE``), and ``dummy_run`` runs the
  drafter model once under ``CUDAGraphMode.PIECEWISE`` at that size (0.11.1 eagle.py
  ``dummy_run``; from 0.15.0 the proposer's own ``CudagraphDispatcher``, whose keys
  ``initialize_cudagraph_keys`` sets PIECEWISE where the mode's mixed mode is PIECEWISE or
  FULL, 0.33.0 spec_decode/llm_base_proposer.py; ``only_one_forward_pass`` under capture). So
  each PIECEWISE capture size captures the drafter's compiled pieces too, one graph per piece
  (its attention layers + 1, as the target's: ``cudagraph.graph_pieces``), in the same global
  graph pool (``CUDAGraphWrapper``'s ``graph_pool``: ``get_global_graph_pool()``); a FULL
  descriptor runs it eagerly, outside the FULL graph. From 0.18.0
  ``profile_cudagraph_memory`` samples the PIECEWISE descriptors through the same
  ``_warmup_and_capture`` → ``_dummy_run(is_graph_capturing=True)``, so vLLM's estimate holds
  the drafter's graphs in its PIECEWISE samples (0.33.0 l. 6330-6358), and
  ``clear_all_graphs`` destroys them with the target's.

A piece's output is a weak reference (as the target's), and the drafter's live set at a size
is one decoder layer's, below the target's at the same size, whose blocks the shared pool
already holds: memprof charges the drafter's graphs their driver memory only
(``cudagraph.drafter_graph_nodes``) [approximation].

Model Runner V2 (``v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py``
``TargetDependentARSpeculator.capture``, 0.33.0; called from ``model_runner.py``
``capture_model``, so inside V2's profiling capture too) captures the draft prefill at the
target's modes (its FULL graphs hold the drafter's forward, ``compute_logits`` and the sampler)
and, with more than one draft token, FULL draft-decode graphs: not modelled, said in the
drafter's note.
"""

from __future__ import annotations

from memprof.core.components import TermContext
from memprof.core.models.families import family_row
from memprof.core.terms.draft_head import proposer_kind
from memprof.core.terms.runner_v2_profile import runs_v2
from memprof.core.versions import Rule, rule_in_force

DRAFTER_GRAPHS_V1: tuple[Rule, ...] = (
    Rule(name="drafter_graphs_v1", changes="CUDA graphs: the EAGLE / MTP drafter's",
         since="0.11.0", until="0.11.1", value=None, applies_to="speculative",
         generation="v1", introduced_by="read in the 0.11.0 wheel",
         removed_by="0.11.1: EagleProposer.dummy_run under CUDAGraphMode.PIECEWISE",
         source="0.11.0 v1/spec_decode/eagle.py EagleProposer.dummy_run / propose "
         "(set_forward_context without cudagraph_runtime_mode: NONE), forward_context.py, "
         "compilation/cuda_graph.py CUDAGraphWrapper.__call__ (NONE: eager)"),
    Rule(name="drafter_graphs_v1", changes="CUDA graphs: the EAGLE / MTP drafter's",
         since="0.11.1", until=None, value="PIECEWISE", applies_to="speculative",
         generation="v1", introduced_by="0.11.1: EagleProposer.dummy_run(use_cudagraphs) "
         "under CUDAGraphMode.PIECEWISE at each PIECEWISE capture descriptor",
         source="0.11.1 / 0.33.0 v1/worker/gpu_model_runner.py _dummy_run "
         "(drafter.dummy_run, use_cudagraphs for PIECEWISE), v1/spec_decode/eagle.py (0.33.0 "
         "llm_base_proposer.py) dummy_run, initialize_cudagraph_keys; profile_cudagraph_memory "
         "(0.18.0 on) samples them"),
)


def drafter_captures(ctx: TermContext) -> str | None:
    """The drafter whose PIECEWISE graphs the V1 runner captures on this rank at each
    PIECEWISE size: "mtp", "eagle" or ``None`` (none: no drafter, Model Runner V2, a release
    without the row, or an MTP class not compiled or not read: ``drafter_graph_note``)."""
    kind = proposer_kind(ctx)
    if kind is None or runs_v2(ctx) or ctx.dep.enforce_eager:
        return None
    rule = rule_in_force(DRAFTER_GRAPHS_V1, ctx.dep.engine_version, ctx.dep.engine)
    if rule is None or rule.value != "PIECEWISE":
        return None
    if kind == "mtp":
        compiled = rule_in_force(family_row(ctx.spec.family).mtp_compiled,
                                 ctx.dep.engine_version, ctx.dep.engine)
        return "mtp" if compiled is not None and compiled.value else None
    return kind


def drafter_graph_note(ctx: TermContext) -> str:
    """What the estimate says of the drafter's CUDA graphs on this rank ("" without a
    drafter)."""
    kind = proposer_kind(ctx)
    # the rows are one engine's (vLLM's EAGLE proposer); another engine's drafter is not theirs
    if kind is None or all(r.engine != ctx.dep.engine for r in DRAFTER_GRAPHS_V1):
        return ""
    if ctx.dep.enforce_eager:
        return "none (enforce_eager)"
    if runs_v2(ctx):
        return ("Model Runner V2's speculator graphs (draft prefill, and draft decode with more "
                "than one draft token) not modelled")
    rule = rule_in_force(DRAFTER_GRAPHS_V1, ctx.dep.engine_version, ctx.dep.engine)
    if rule is None:
        return f"its CUDA graphs not read at vLLM {ctx.dep.engine_version}"
    if rule.value is None:
        return f"none captured at vLLM {ctx.dep.engine_version} (it runs eagerly)"
    if kind == "mtp":
        compiled = rule_in_force(family_row(ctx.spec.family).mtp_compiled,
                                 ctx.dep.engine_version, ctx.dep.engine)
        if compiled is None:
            return (f"its CUDA graphs not modelled: whether vLLM compiles {ctx.spec.family}'s "
                    "MTP class is not read")
        if not compiled.value:
            return "none captured (its MTP class is not compiled: it runs eagerly)"
    return ("its PIECEWISE graphs at each PIECEWISE capture size, in the target's pool, are "
            "sized by their driver memory (memprof/core/terms/drafter_graphs.py)")
