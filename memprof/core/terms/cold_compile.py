"""What a cold ``torch.compile`` allocates inside vLLM's profile window: the example arguments of
Inductor's compile-time autotuning (vLLM 0.20.0 on).

vLLM compiles each graph piece through ``torch._inductor.standalone_compile``
(compilation/compiler_interface.py ``InductorStandaloneAdaptor``, chosen by
compilation/backends.py ``make_compiler`` when ``VLLM_USE_STANDALONE_COMPILE`` is on, its default
from 0.9.2 but in 0.11.0, and torch is 2.8 or newer, the pin from 0.10.2), and
``standalone_compile`` turns Inductor's ``triton.autotune_at_compile_time`` on around every
compile (torch/_inductor/standalone_compile.py: ``config.patch(
"triton.autotune_at_compile_time", True)``). With it the wrapper autotunes each Triton kernel
while the graph compiles, on example arguments it generates for every argument of the kernel
(torch/_inductor/codegen/wrapper.py ``generate_example_arg_value``: ``generate_example_value(
size, stride, device, dtype, offset, allocation_size)``, a fresh tensor of the argument's full
size at the size hints), graph inputs included, and frees each once the last kernel that reads
it has run (``get_autotune_deletion_call``). The weights are graph inputs of vLLM's compiled
pieces; the one a Triton kernel reads whole is the token embedding (the gather that starts the
first piece: ``VocabParallelEmbedding``), so a cold compile allocates, on the first PP stage, a
copy of this rank's embedding table beside the gather's [T, H] output, and frees them before
the profiling forward. vLLM's budget line charges the window's torch peak (``memory_profiling``:
``torch_peak_increase`` to 0.26.x, ``transient_peak_headroom`` from 0.27.0), so the copy is
charged as peak activation where it exceeds the forward's own peak (vLLM issue 54122, PRs 54209
and 54479: "temporary GPU allocations from cold torch.compile / Triton compilation and
autotuning are charged as peak model activation memory"). A warm start loads the compiled
artifact and autotunes nothing (``--compile-cache warm``); ``--enforce-eager`` compiles nothing.

The published cold starts this sizes (docs/model-runner-v2.md, "Every published cold / warm
pair"): vLLM 0.27.1 on an RTX 4090 logs a peak activation of 1.18 GiB for Qwen3-8B (table 1.16
GiB + [2048, 4096] bf16 0.02) and 0.59 GiB for Qwen3-1.7B (0.58 + 0.01), against 0.19 GiB on
the warm restarts; the compiled Model Runner V2 logs of 0.24.0 / 0.26.0 keep 0.82-0.88 GiB
beyond V2's own terms for Llama-3-8B (table 0.98 GiB + 0.02, less the forward's 0.21). Held
from 0.20.0, the first release that pins torch 2.11, the torch of the earliest log that shows it
(0.24.0) and of the measurement (reports/gpu/cold-compile-window/ "Set d": one H200, the largest
allocation of every cold compile a copy of the rank's table from ``generate_example_value``, none
warm; Qwen3-8B's 36 pieces peak at 1,220 MiB against this stage's 1,203). vLLM 0.10.2-0.19.x
(torch 2.8-2.10) compile through the same path under the same ``config.patch``, but neither a
cold / warm pair of theirs nor their torch is measured, so it is not charged there
[approximation].

With ``--enable-lora`` where embed_tokens is a LoRA module (``VocabParallelEmbeddingWithLoRA``,
lora/layers/vocal_parallel_embedding.py 0.27.1: ``F.embedding(x + indices_1,
self.lora_a_stacked_2d)`` beside the base layer's gather of the same ids), the LoRA-A stack
[max_loras · (V + extra), r] is a kernel argument too, and both copies are live at once: the
two independent gathers of the ids are one combo kernel (vLLM turns Inductor's
``combo_kernels`` on, config/compilation.py), and the published cold LoRA starts of 0.27.1 keep
0.03 / 0.07 / 0.29 GiB more peak at 8 / 16 / 64 adapters than at one (rows 1649, 1646, 1647
against 1607), the stack's growth (4.6 MiB an adapter for Qwen3-4B at rank 16). Not read: a
quantised (GGUF) table, and the benchmarker's L2-sized flush buffer (measured with torch 2.11:
reports/gpu/compile-peak/).

A multimodal model's compiled graph holds no gather: where the runner supports multimodal inputs
(a vision tower with a modality limit above 0: multimodal/registry.py
``supports_multimodal_inputs``), the profile run passes the model ``inputs_embeds`` and
``input_ids=None`` (V1: v1/worker/gpu_model_runner.py ``_dummy_run`` -> ``_prepare_mm_inputs``,
read in the 0.20.0, 0.28.0, 0.30.0 and 0.33.0 wheels; Model Runner V2: v1/worker/gpu/
model_runner.py ``dummy_inputs_embeds``, then ``input_ids = None``, read in 0.25.0, 0.28.0,
0.30.0 and 0.33.0; both unless the model ``requires_raw_input_tokens``, which no family memprof
bundles declares), so Dynamo traces the forward's ``inputs_embeds`` branch and the table is no
kernel's argument: no copy (``feeds_inputs_embeds``).

Freed, the copy can still be in the budget a second time: its segment, kept past
``memory_profiling``'s closing ``empty_cache()`` by a live block a later allocation of the window
carved out of it, counts in 0.27.0-0.30.x's ``total_consumed`` (``COLD_COPY_PINNABLE``). The
published cold starts of those releases keep about one table more in their consumed memory
where it happens (rows 901, 907, 1601, 1604, 1605, 1701, 1707, 1728: every single-GPU start on
an sm120 card) and not in others (902 at TP2, 908 and 909, the GPTQ and FP8 servers of 907's
session, 1603, 1736, the LoRA rows; docs/model-runner-v2.md, "The rows side by side"); the
allocation is not read, so it is not charged, and the estimate says so (``pinned_copy_note``).
From 0.31.0 the profile run's ``max_split_size_mb:20`` rules it out, and the same deployment's
cold start keeps one table less there (rows 1702 / 1703: docs/model-runner-v2.md, "The cold
start's second table").
"""

from __future__ import annotations

from memprof.base.units import fmt_bytes
from memprof.core.components import TermContext
from memprof.core.dtypes import dtype_bytes
from memprof.core.engines.vllm_compile import COLD_COMPILE_EXAMPLE_ARGS, COLD_COPY_PINNABLE
from memprof.core.terms.common import Stage, is_first_stage, model_bytes
from memprof.core.terms.lora import settings_of
from memprof.core.versions import rule_in_force, value_at
from memprof.core.weights.shard import VOCAB_PADDING

WARM = "warm"

def compiles_cold(ctx: TermContext) -> bool:
    """Does this vLLM deployment compile its model cold inside the profile window at a release
    where the compile's example arguments are charged (``COLD_COMPILE_EXAMPLE_ARGS``)?"""
    dep = ctx.dep
    if dep.enforce_eager or dep.compile_cache == WARM:
        return False  # the rule is vLLM's (Rule.engine): SGLang's deployments never hold it
    return rule_in_force(COLD_COMPILE_EXAMPLE_ARGS, dep.engine_version, dep.engine) is not None


def feeds_inputs_embeds(ctx: TermContext) -> bool:
    """Does vLLM's profile run pass the model ``inputs_embeds`` rather than ``input_ids`` (the
    module docstring's last part): a model whose vision tower takes inputs, some modality's
    limit above 0?"""
    tower = ctx.spec.vision
    if tower is None:
        return False
    # imported here: a text model's estimate never loads the multimodal modules
    from memprof.core.models.multimodal import DEFAULT_LIMIT, mm_limits

    limits = mm_limits(ctx.dep.limit_mm_per_prompt, tower.modalities)
    return any(limits.get(m, DEFAULT_LIMIT) > 0 for m in tower.modalities)


def cold_compile_stage(ctx: TermContext, tokens: int) -> Stage | None:
    """The live set of the compile-time autotuning of the embedding's gather on a cold compile:
    a copy of this rank's table [V/tp, H] and the gather's output [T, H], in the model dtype,
    and with LoRA on embed_tokens a copy of its LoRA-A stack; None where nothing is compiled
    cold, off the first PP stage, for a GGUF table, or where the profile run feeds
    ``inputs_embeds`` (a multimodal model: no gather in the graph)."""
    if not (compiles_cold(ctx) and is_first_stage(ctx)) or feeds_inputs_embeds(ctx):
        return None
    if ctx.quant is not None and ctx.quant.method == "gguf":
        return None
    spec, dep = ctx.spec, ctx.dep
    s, h = model_bytes(ctx), spec.hidden_size
    per_rank = -(-spec.vocab_size // VOCAB_PADDING) * VOCAB_PADDING // max(dep.tp, 1)
    parts = [(f"embedding table copy [{per_rank},{h}]", per_rank * h * s),
             ("gather output [T,H]", tokens * h * s)]
    if dep.enable_lora:
        st = settings_of(ctx)
        if st.support.embeddings:  # the LoRA-A stack of embed_tokens, gathered beside it
            rows = st.max_loras * (spec.vocab_size + st.extra_vocab)
            parts.append((f"LoRA embedding A stack copy [{rows},{st.rank}]",
                          rows * st.rank * dtype_bytes(st.dtype)))
    return Stage("cold compile (autotuning example arguments)", tuple(parts))


def pinned_copy_note(ctx: TermContext) -> str:
    """What the estimate leaves out of a cold compile at a release whose budget line can keep the
    freed table copy pinned (``COLD_COPY_PINNABLE``: 0.27.0-0.30.x), or "" where it cannot or
    nothing is copied (``cold_compile_stage``)."""
    if not value_at(COLD_COPY_PINNABLE, ctx.dep.engine_version, False, ctx.dep.engine):
        return ""
    stage = cold_compile_stage(ctx, 0)  # the copy's size does not depend on the tokens
    if stage is None:
        return ""
    table = stage.parts[0][1]
    return (f"; not charged: the freed table copy ({fmt_bytes(table)}) may stay in the "
            "consumed memory as well, its segment pinned by a later allocation of the window "
            "(published cold starts of 0.27.1-0.30.0 keep about one table more; the allocation "
            "is not read; none from 0.31.0, whose profile run limits splitting)")
