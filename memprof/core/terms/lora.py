"""LoRA: the buffers vLLM allocates for ``--enable-lora`` while it loads the model, so the logged
"Model loading took" holds them beside the weights; and what LoRA adds after the load: the
profile run's wider sampler logits (``lora_logits_widths``, read by the activation term) and the
punica kernels in every captured graph (``lora_graph_nodes``, read by the CUDA-graph term).

vLLM wraps every LoRA-able layer once at load, and each wrapper allocates its stacked adapter
slots for ``max_loras`` adapters of the largest rank (``create_lora_weights``), zero-filled, on
the GPU, in the LoRA dtype ``s_l`` (``--lora-dtype``; auto: the model dtype). Per rank, with
``L = max_loras``, ``r = max_lora_rank``, ``H`` the hidden size, ``t`` the TP size (read in
0.8.2 ``lora/layers.py`` and 0.11.0 / 0.12.0 / 0.33.0 ``lora/layers/``)::

    column-parallel, n slices (qkv_proj: q, k, v; gate_up_proj: gate, up; one slice over the
    whole output where the checkpoint stores them fused: ``LoraSupport.fused_slices``)
        A  n × [L, 1, r', in]            r' = r, or r/t with --fully-sharded-loras
        B  [L, 1, out_i / t, r] per slice (q: heads/t·d; k, v: the rank's KV heads·d)
    bias (--enable-lora-bias, before 0.12.0): [L, 1, out] beside each B, its output width
    row-parallel (o_proj, down_proj)
        A  [L, 1, r, in/t]     B  [L, 1, out', r]   out' = out, or out/t fully sharded
    replicated (a MoE router ``gate`` that is a ReplicatedLinear: ``LoraSupport.router``)
        A  [L, 1, r, H]        B  [L, 1, E, r]
    a MoE layer's shared expert: gate_up_proj and down_proj as above (the routed experts carry
    none before FusedMoEWithLoRA, 0.11.1, which memprof refuses)
    embed_tokens (VocabParallelEmbeddingWithLoRA), where it is a LoRA module
        A  [L, V + x, r]       B  [L, 1, H, r]     embeddings_tensors [L, x, H] (model dtype)
    lm_head (LogitsProcessorWithLoRA)
        A  [L, 1, r, H]        B  [L, 1, ceil((V + x)/256)·256, r]   (0.12.0 on: [L, 1, V, r])
                                                  embeddings_tensors [L, x, H] (model dtype)
    a tied lm_head that is embed_tokens itself (Qwen3 0.16.0 to before 0.28.0), again
        A  [L, V, r]           B  [L, 1, H, r]     (a second VocabParallelEmbeddingWithLoRA)

The embed_tokens and lm_head buffers are whole on every TP rank: A by ``org_vocab_size`` (the
whole vocabulary), B and ``embeddings_tensors`` by the whole hidden size (0.8.5 / 0.11.0 /
0.27.1 ``VocabParallelEmbeddingWithLoRA.create_lora_weights``; its forward looks each token id
up in all of A), and the lm_head's B by the whole ``vocab_size``;
with ``V`` the vocabulary and ``x = lora_extra_vocab_size`` (256; 0 from 0.12.0, which removed
it: ``memprof/core/lora.py`` LORA_EXTRA_VOCAB). Before 0.12.0 some model classes also grow their
own tables (``LoraSupport.extra_vocab`` of the family row): embed_tokens holds ``x·L`` more rows
(``LlamaModel``: ``lora_vocab = lora_extra_vocab_size × max_loras``, padded to 64 apart from the
vocabulary) and lm_head ``x`` more, padded to 256 (``lora_vocab_padding_size``) instead of 64.

The punica wrapper's index tensors (0.8.2 ``lora/punica_wrapper/punica_base.py``
``PunicaWrapperBase.__init__``, ``punica_gpu.py`` ``LoRAKernelMeta.make``): int64
``[T]`` × 4 (token, sampler, padded sampler, long-LoRA indices; the long-LoRA one is gone at
0.10.0) and ``[2, T]`` (embeddings indices) with ``T = max_num_batched_tokens``, int64 ``[B]`` × 3
with ``B = max_num_seqs``, and from 0.8.0 two int32 kernel maps: ``[T]`` × 2 for tokens and, for
prompts, ``[B]`` × 2 (V0 from 0.8.2: ``[T]`` × 2) up to 0.11.0 and ``[T]`` × 2 from 0.12.0 (the
``max_loras + 1`` / ``+ 2`` counters are 512-B blocks).

All of it is allocated inside ``load_model``'s ``DeviceMemoryProfiler`` from 0.8.0 (0.8.2
``v1/worker/gpu_model_runner.py::GPUModelRunner.load_model`` and
``worker/model_runner.py::GPUModelRunnerBase.load_model``: ``load_lora_model`` /
``create_lora_manager`` under ``with DeviceMemoryProfiler() as m``; the same in 0.8.0, 0.11.0 and
0.12.0): category weights, in the budget. Before 0.8.0 V0 builds the manager after that profiler
and its ``memory_profiling`` counts only the weights figure and the profile's peak over a
snapshot taken after the manager, so vLLM budgets the buffers nowhere: memprof puts them outside
the budget (``LORA_BUDGETED``). Each tensor is counted as the caching allocator's
block (512-B granules; a request of 10 MiB or more in 2-MiB steps when that leaves at most
1 MiB: ``memprof/core/terms/load_rounding.py``).

The profile run adds no lasting memory: the dummy LoRAs of ``maybe_dummy_run_with_lora``
(``add_dummy_lora``, rank 8) are built on the CPU (0.8.2 ``lora/models.py`` ``create_dummy_lora``
passes device "cpu" to ``LoRALayerWeights.create_dummy_lora_weights``, pinned; the same in 0.27.1
``lora/model_manager.py``, for Model Runner V2 too: ``v1/worker/lora_model_runner_mixin.py``) and
copied into the slots above, and ``remove_all_adapters`` drops them when the dummy forward ends.
What it adds to the profile run's peak is the sampler warm-up's wider logits
(``lora_logits_widths``): while the release has the extra vocabulary and the family's class grows
its lm_head, the lm_head is
``ParallelLMHead(V + x)`` padded to ``lora_vocab_padding_size`` (0.8.2
``model_executor/models/llama.py`` ``LlamaForCausalLM.__init__``: ``unpadded_vocab_size +=
lora_extra_vocab_size``, ``padding_size = lora_vocab_padding_size``), and where lm_head is a
LoRA module ``LogitsProcessorWithLoRA._get_logits`` (0.8.2 ``lora/layers.py``) writes the
extra-vocab logits into it and returns ``logits[:, :vocab_size]`` with ``vocab_size = V + x``, so
the sampler's fp32 logits and probabilities are ``[R, V + x]`` (Llama 3, V = 128,256, x = 256,
R = 1,024 rows: 2 B + 8 B × 256 × 1,024 = 2.5 MiB more under FlashInfer). The rest, hand-counted
at T = 2,048, R = 1,024, L = 2, r = 16, H = 4,096 (0.8.2 ``lora/punica_wrapper/punica_gpu.py``):
the float32 shrink buffer ``torch.zeros((slices, T, r))`` of ``add_lora_linear`` (384 KiB for
qkv_proj) lives beside the MLP's far larger output, ``add_lora_logits``' ``[R, r]`` float32
(64 KiB) and ``_get_logits``' ``lora_logits`` ``[L + 1, x, R]`` with its reshaped copy (1.5 MiB
each, model dtype) are freed before the sampler's fp32 copy: none of them sets the peak, and
none is charged.
"""

from __future__ import annotations

from memprof.alloc.constants import K_MIN_BLOCK_SIZE, K_MIN_LARGE_ALLOC, K_ROUND_LARGE, K_SMALL_SIZE
from memprof.base.units import fmt_bytes, round_up
from memprof.core.components import Component, TermContext, Where
from memprof.core.deployment import pp_layer_split
from memprof.core.dtypes import dtype_bytes
from memprof.core.engines import engine_of
from memprof.core.lora import LORA_VOCAB_PADDING, LoraSettings, lora_settings
from memprof.core.models import Layer
from memprof.core.models.families.row import LoraSupport
from memprof.core.terms.common import is_first_stage, is_last_stage, max_seqs, profile_tokens
from memprof.core.versions import Rule, value_at
from memprof.core.weights.shard import VOCAB_PADDING

# The punica wrapper's int64 index tensors of [max_num_batched_tokens] (the embeddings
# indices [2, T] counted as two)
PUNICA_TOKEN_INDICES: tuple[Rule, ...] = (
    Rule(name="lora_punica_token_indices", changes="LoRA: punica index tensors", since="0.7.0",
         until="0.10.0", value=6, introduced_by="before 0.7.0",
         removed_by="long-LoRA indices dropped (0.10.0 has none; 0.9.1 and 0.9.2 not read)",
         source="0.7.0 as 0.7.1 (lora/, LoRAConfig, worker/model_runner.py "
         "and the model files compared); "
         "0.8.2 / 0.9.0 lora/punica_wrapper/punica_base.py PunicaWrapperBase.__init__ "
         "(_token_lora_indices, _sampler_indices, _sampler_indices_padded, "
         "_embeddings_indices [2, T], _long_lora_indices)", applies_to="lora"),
    Rule(name="lora_punica_token_indices", changes="LoRA: punica index tensors", since="0.10.0",
         until=None, value=5,
         introduced_by="long-LoRA indices dropped (0.10.0 has none; 0.9.1 and 0.9.2 not read)",
         source="0.10.0 / 0.12.0 / 0.33.0 lora/punica_wrapper/punica_base.py", applies_to="lora"),
)

# The punica wrapper's LoRAKernelMeta pair (tokens, prompts) and the prompts' length: "none"
# (no kernel metadata), "seqs" (max_num_seqs) or "tokens" (max_num_batched_tokens). Rows of one
# engine generation first (``rule_in_force`` takes the first row that holds).
PUNICA_PROMPT_META: tuple[Rule, ...] = (
    Rule(name="lora_punica_prompt_meta", changes="LoRA: punica kernel metadata",
         since="0.7.0", until="0.8.0", value="none", introduced_by="before 0.7.0",
         removed_by="LoRAKernelMeta (first released in 0.8.0)",
         source="0.7.0 as 0.7.1 (lora/, LoRAConfig, worker/model_runner.py "
         "and the model files compared); "
         "0.7.3 lora/punica_wrapper/punica_gpu.py PunicaWrapperGPU.__init__ (base "
         "index tensors only)", applies_to="lora"),
    Rule(name="lora_punica_prompt_meta", changes="LoRA: punica kernel metadata",
         since="0.8.0", until="0.8.2", value="seqs",
         introduced_by="LoRAKernelMeta (first released in 0.8.0)",
         removed_by="V0 sizes the prompts by max_num_batched_tokens (first released in 0.8.2)",
         source="0.8.0 / 0.8.1 lora/punica_wrapper/punica_gpu.py PunicaWrapperGPU.__init__ "
         "(prompt_mapping_meta of max_batches)", applies_to="lora"),
    Rule(name="lora_punica_prompt_meta", changes="LoRA: punica kernel metadata",
         since="0.8.2", until="0.11.0", value="tokens", generation="v0",
         introduced_by="V0 sizes the prompts by max_num_batched_tokens (first released in "
         "0.8.2)", removed_by="V0 removed (0.11.0)",
         source="0.8.2 / 0.9.0 / 0.10.0 lora/punica_wrapper/punica_gpu.py: max_num_prompts = "
         "max_batches if envs.VLLM_USE_V1 else max_num_batched_tokens", applies_to="lora"),
    Rule(name="lora_punica_prompt_meta", changes="LoRA: punica kernel metadata",
         since="0.8.2", until="0.12.0", value="seqs", generation="v1",
         introduced_by="V0 sizes the prompts by max_num_batched_tokens (first released in "
         "0.8.2)", removed_by="sized by max_num_batched_tokens (first released in 0.12.0)",
         source="0.8.2 / 0.9.0 / 0.10.0 / 0.11.0 lora/punica_wrapper/punica_gpu.py "
         "PunicaWrapperGPU.__init__ (V1: max_batches)", applies_to="lora"),
    Rule(name="lora_punica_prompt_meta", changes="LoRA: punica kernel metadata",
         since="0.12.0", until=None, value="tokens",
         introduced_by="sized by max_num_batched_tokens (first released in 0.12.0)",
         source="0.12.0 / 0.33.0 lora/punica_wrapper/punica_gpu.py PunicaWrapperGPU.__init__",
         applies_to="lora"),
)

# Where the buffers land: "load" (inside load_model's DeviceMemoryProfiler: "Model loading took"
# holds them, so the budget does) or "unbudgeted" (V0 before 0.8.0 builds the LoRA manager after
# that profiler, and memory_profiling counts the weights figure plus the profile run's peak over
# a snapshot taken after the manager: vLLM budgets them nowhere)
LORA_BUDGETED: tuple[Rule, ...] = (
    Rule(name="lora_in_model_load", changes="LoRA: in the model load", since="0.7.0",
         until="0.8.0", value="unbudgeted", introduced_by="before 0.7.0",
         removed_by="create_lora_manager inside DeviceMemoryProfiler (first released in 0.8.0)",
         source="0.7.0 as 0.7.1 (lora/, LoRAConfig, worker/model_runner.py "
         "and the model files compared); "
         "0.7.1 / 0.7.3 worker/model_runner.py GPUModelRunnerBase.load_model "
         "(create_lora_manager after 'with DeviceMemoryProfiler() as m'); 0.7.3 utils.py "
         "memory_profiling (non_kv_cache_memory = weights_memory + torch_peak_increase over "
         "before_profile + non_torch_increase)", applies_to="lora"),
    Rule(name="lora_in_model_load", changes="LoRA: in the model load", since="0.8.0",
         until=None, value="load",
         introduced_by="create_lora_manager inside DeviceMemoryProfiler (first released in "
         "0.8.0)",
         source="0.8.0 / 0.8.1 / 0.8.2 worker/model_runner.py and v1/worker/gpu_model_runner.py "
         "load_model; 0.11.0 / 0.12.0 v1/worker/gpu_model_runner.py load_model",
         applies_to="lora"),
)

# Kernel nodes a LoRA linear adds to a captured forward: ``add_lora_linear`` (0.8.2 and 0.11.0
# lora/punica_wrapper/punica_gpu.py) allocates its float32 buffer with ``torch.zeros((slices,
# tokens, r))`` (a fill kernel [approximation: Inductor gives the fill its own kernel, as it
# shares no read with its neighbours]), then ``lora_shrink`` and ``lora_expand`` launch one
# Triton kernel each for all slices (0.8.2 lora/ops/triton_ops/lora_shrink.py /
# lora_expand.py, 0.11.0 lora_shrink_op.py / lora_expand_op.py: one ``_kernel[grid]`` call, the
# slices a grid axis). The LoRA embedding (``VocabParallelEmbeddingWithLoRA.forward``) adds the
# LoRA-A gather (``F.embedding`` of ``x + indices``) and ``add_lora_embedding``'s expand.
# Before LoRAKernelMeta V0's decode path launches one Triton kernel per slice instead (0.7.1 and
# 0.7.3 lora/punica_wrapper/punica_gpu.py: ``add_lora_linear`` fills its float32 buffer with
# ``torch.zeros``, then ``add_shrink`` and ``add_expand`` loop "for slice_idx in
# range(len(lora_a_stacked))" over ``bgmv_shrink`` and ``bgmv_expand_slice``, one
# ``_kernel[grid]`` launch each, lora/ops/triton_ops/bgmv_shrink.py, bgmv_expand_slice.py), so a
# linear of ``n`` slices (qkv_proj 3, gate_up_proj 2, the others 1) is 1 + 2·n nodes; the LoRA
# embedding (lora/layers.py ``VocabParallelEmbeddingWithLoRA.forward``) the added-token mask, the
# index add, the LoRA-A gather, the mask product, the in-place add to the ids and
# ``add_lora_embedding``'s ``bgmv_expand``: six. Its value is (fill, per slice, embedding).
LORA_GRAPH_NODES: tuple[Rule, ...] = (
    Rule(name="lora_graph_nodes", changes="CUDA graphs: LoRA kernel nodes", since="0.7.0",
         until="0.8.0", value=(1, 2, 6), introduced_by="before 0.7.0",
         removed_by="not read at 0.8.0 and 0.8.1 (no nodes charged); LoRAKernelMeta's kernels "
         "read in 0.8.2", source="0.7.0 as 0.7.1 (lora/, LoRAConfig, worker/model_runner.py "
         "and the model files compared); "
         "0.7.1 / 0.7.3 lora/punica_wrapper/punica_gpu.py "
         "add_lora_linear, add_shrink, add_expand (a bgmv kernel per slice in decode); "
         "lora/layers.py VocabParallelEmbeddingWithLoRA.forward", applies_to="lora"),
    Rule(name="lora_graph_nodes", changes="CUDA graphs: LoRA kernel nodes", since="0.8.2",
         until=None, value=(3, 2),
         introduced_by="read first in 0.8.2 (earlier releases not read: no nodes charged)",
         source="0.8.2 / 0.11.0 lora/punica_wrapper/punica_gpu.py add_lora_linear (torch.zeros "
         "buffer, add_shrink, add_expand), lora/ops/triton_ops lora_shrink / lora_expand; "
         "0.11.1 / 0.15.1 / 0.27.1 / 0.33.0 the same three (torch.empty buffer zeroed by "
         "lora_shrink_op.py's output_tensor.zero_()); 0.8.2 lora/layers.py "
         "VocabParallelEmbeddingWithLoRA.forward", applies_to="lora"),
)

# How often vLLM captures each graph under --enable-lora: "once" (every graph runs LoRA's
# kernels); "with-without" (``cudagraph_specialize_lora``, default True, captures every
# descriptor with LoRA active and without, 2 cases); "counts" (one case without LoRA and one
# per captured active-LoRA count: ``max_loras + 1`` alone, or with ``--specialize-active-lora``
# the powers of 2 up to ``max_loras`` and ``max_loras + 1``). A case without LoRA skips the
# LoRA linears' kernels: ``lora_shrink`` returns on ``no_lora_flag_cpu`` before its
# ``output_tensor.zero_()``, ``lora_expand`` likewise, and ``add_lora_linear``'s buffer is
# ``torch.empty`` (0.11.1 to 0.33.0 lora/punica_wrapper/punica_gpu.py,
# lora/ops/triton_ops/lora_shrink_op.py, lora_expand_op.py), so only the LoRA embedding's
# gather stays of the LoRA nodes (``lora_graph_nodes(active=False)``).
LORA_GRAPH_CASES: tuple[Rule, ...] = (
    Rule(name="lora_graph_cases", changes="CUDA graphs: LoRA capture cases", since="0.7.0",
         until="0.11.1", value="once", introduced_by="before 0.7.0",
         removed_by="cudagraph_specialize_lora captures with and without LoRA (first released "
         "in 0.11.1)", source="0.7.0 as 0.7.1 (lora/, LoRAConfig, worker/model_runner.py "
         "and the model files compared); "
         "0.10.2 / 0.11.0 config/compilation.py (no "
         "cudagraph_specialize_lora), v1/cudagraph_dispatcher.py (no LoRA cases)",
         applies_to="lora"),
    Rule(name="lora_graph_cases", changes="CUDA graphs: LoRA capture cases", since="0.11.1",
         until="0.16.0", value="with-without",
         introduced_by="cudagraph_specialize_lora captures with and without LoRA (first "
         "released in 0.11.1)",
         removed_by="cases by active-LoRA count, --specialize-active-lora (first released in "
         "0.16.0)", source="0.11.1 / 0.12.0 / 0.14.0 / 0.15.1 config/compilation.py "
         "(cudagraph_specialize_lora: bool = True), v1/cudagraph_dispatcher.py "
         "(lora_cases = [True, False])", applies_to="lora"),
    Rule(name="lora_graph_cases", changes="CUDA graphs: LoRA capture cases", since="0.16.0",
         until=None, value="counts",
         introduced_by="cases by active-LoRA count, --specialize-active-lora (first released "
         "in 0.16.0)", source="0.16.0 / 0.20.0 / 0.27.1 / 0.33.0 v1/cudagraph_dispatcher.py "
         "_get_lora_cases ([0] + get_captured_lora_counts), lora/utils.py "
         "get_captured_lora_counts, config/lora.py specialize_active_lora; 0.27.1 "
         "v1/worker/gpu/lora_utils.py get_lora_capture_cases (Model Runner V2)",
         applies_to="lora"),
)

RULES = (PUNICA_TOKEN_INDICES, PUNICA_PROMPT_META, LORA_BUDGETED, LORA_GRAPH_NODES,
         LORA_GRAPH_CASES)


def captured_lora_counts(max_loras: int, specialize: bool) -> list[int]:
    """The active-LoRA counts vLLM captures graphs for (0.16.0 on; lora/utils.py
    ``get_captured_lora_counts``): ``max_loras + 1`` alone, or with ``--specialize-active-lora``
    every power of 2 up to ``max_loras + 1`` and ``max_loras + 1`` itself."""
    if not specialize:
        return [max_loras + 1]
    return [n for n in range(1, max_loras + 2) if n & (n - 1) == 0 or n == max_loras + 1]


def lora_capture_cases(ctx: TermContext) -> tuple[int, int]:
    """(cases that run LoRA's kernels, cases without LoRA) each graph descriptor is captured
    for (``LORA_GRAPH_CASES``); (1, 0) without ``--enable-lora``."""
    dep = ctx.dep
    if not dep.enable_lora or not engine_of(dep).flags.get("enable_lora"):
        return 1, 0
    how = value_at(LORA_GRAPH_CASES, dep.engine_version, "once")
    if how == "once":
        return 1, 0
    if how == "with-without":
        return 1, 1
    st = settings_of(ctx)
    return len(captured_lora_counts(st.max_loras, dep.specialize_active_lora)), 1


def lora_slices(layer: Layer, support: LoraSupport) -> list[int]:
    """Output slices of each LoRA-wrapped linear of one decoder layer, in the order
    ``_layer_tensors`` sizes them: qkv_proj 3 (q, k, v), o_proj 1; a gated MLP's gate_up_proj 2,
    down_proj 1 (up_proj 1 ungated); a MoE's router 1 (where it is a LoRA linear:
    ``LoraSupport.router``) and its shared expert's gate_up_proj 2 and down_proj 1. A class whose
    checkpoint fuses qkv_proj and gate_up_proj (``LoraSupport.fused_slices``) wraps each as one
    slice."""
    qkv, gate_up = (1, 1) if support.fused_slices else (3, 2)
    m = layer.mlp
    if m.kind == "moe":
        mlp = [1] if support.router else []
        if m.shared_intermediate_size:
            mlp += [gate_up, 1]
    elif m.kind == "none":
        mlp = []
    else:
        mlp = [gate_up if m.gated else 1, 1]
    return [qkv, 1, *mlp]


def lora_linears(layer: Layer, support: LoraSupport) -> int:
    """LoRA-wrapped linears of one decoder layer (``lora_slices``)."""
    return len(lora_slices(layer, support))


def lora_graph_nodes(ctx: TermContext, layers: int | None = None, *,
                     active: bool = True) -> int:
    """Kernel nodes (not GEMMs) LoRA adds to one capture size's graphs, all pieces together
    (``LORA_GRAPH_NODES``): per LoRA linear of the rank's decoder layers (before 0.8.0 a fill
    and two kernels per slice: ``lora_slices``), and the LoRA embedding's on the stage that
    holds embed_tokens; 0 without ``--enable-lora``. ``active=False``: a graph captured with no
    LoRA active (``LORA_GRAPH_CASES``, 0.11.1 on), where the linears' kernels return early and
    the embedding's LoRA-A gather alone stays."""
    dep, spec = ctx.dep, ctx.spec
    if not dep.enable_lora or not engine_of(dep).flags.get("enable_lora"):
        return 0
    per = value_at(LORA_GRAPH_NODES, dep.engine_version, None)
    if not isinstance(per, tuple):
        return 0
    start, end = pp_layer_split(len(spec.layers), dep.pp, dep.engine_version)[ctx.coord.pp_stage]
    mtp = spec.mtp_layers
    support = settings_of(ctx).support
    if len(per) == 3:  # (fill, per slice, embedding)
        fill, per_slice, embedding = int(per[0]), int(per[1]), int(per[2])
        nodes = sum(fill + per_slice * n for layer in spec.layers[start:end]
                    if layer not in mtp for n in lora_slices(layer, support))
    else:
        linear, embedding = int(per[0]), int(per[1])
        if not active:
            linear, embedding = 0, min(embedding, 1)
        nodes = sum(linear * lora_linears(layer, support) for layer in spec.layers[start:end]
                    if layer not in mtp)
    if is_first_stage(ctx) and support.embeddings:
        nodes += embedding
    return nodes


def lora_logits_widths(ctx: TermContext) -> tuple[int, int]:
    """(lm_head output width, width the sampler sees) in the profile run's sampler warm-up:
    ``(V, V)`` without LoRA; while the release has ``lora_extra_vocab_size`` and the family's
    class grows lm_head by it (``LoraSupport.extra_vocab``), the lm_head's output is ``V + x``
    padded as ``VocabParallelEmbedding`` pads it (the vocabulary to 256, then the added rows to
    256: ``LORA_VOCAB_PADDING``) and, where lm_head is a LoRA module
    (``LogitsProcessorWithLoRA``), the sampler sees ``V + x`` (module docstring; 0.8.2
    ``lora/layers.py`` and ``model_executor/models/llama.py``)."""
    dep, v = ctx.dep, ctx.spec.vocab_size
    if not dep.enable_lora or not engine_of(dep).flags.get("enable_lora"):
        return v, v
    st = settings_of(ctx)
    x = st.extra_vocab
    if not (st.support.extra_vocab and x):
        return v, v
    head = round_up(round_up(v, LORA_VOCAB_PADDING) + x, LORA_VOCAB_PADDING)
    return head, (v + x if st.support.embeddings else v)


def block(n: int) -> int:
    """The caching allocator's block for a fresh request of ``n`` bytes (what
    ``memory_allocated`` adds): 512-B granules; from 10 MiB, the 2-MiB segment when the
    remainder would be 1 MiB or less (no split)."""
    size = round_up(max(n, 1), K_MIN_BLOCK_SIZE)
    if n >= K_MIN_LARGE_ALLOC:
        seg = round_up(n, K_ROUND_LARGE)
        if seg - size <= K_SMALL_SIZE:
            return seg
    return size


def settings_of(ctx: TermContext) -> LoraSettings:
    """The deployment's LoRA settings resolved for its release and model."""
    dep = ctx.dep
    return lora_settings(ctx.spec.family, dep.engine_version, max_loras=dep.max_loras,
                         max_lora_rank=dep.max_lora_rank,
                         lora_extra_vocab_size=dep.lora_extra_vocab_size,
                         lora_dtype=dep.lora_dtype, fully_sharded_loras=dep.fully_sharded_loras,
                         model_dtype=ctx.model_dtype, tp=dep.tp,
                         enable_lora_bias=dep.enable_lora_bias,
                         specialize_active_lora=dep.specialize_active_lora,
                         architecture=ctx.spec.architecture)


def _layer_tensors(layer: Layer, h: int, tp: int, st: LoraSettings) -> list[int]:
    """Elements of each stacked tensor one decoder layer's LoRA wrappers allocate, linear by
    linear as ``lora_slices`` lists them: A and B of every slice."""
    n, r = st.max_loras, st.rank
    ra = r // tp if st.fully_sharded else r  # column-parallel A under --fully-sharded-loras
    rb = h // tp if st.fully_sharded else h  # row-parallel B under --fully-sharded-loras
    a = layer.attention
    out: list[int] = []

    def column(widths: list[int]) -> None:  # A [L, 1, r', H] and B [L, 1, w, r] per slice
        for width in widths:
            out.extend((n * ra * h, n * width * r))

    # qkv_proj: q, k, v slices (MergedQKVParallelLinearWithLoRA), or one over the fused output
    # (QKVParallelLinearWithLoRA)
    kv_local = max(1, a.num_kv_heads // tp)
    qkv = [a.num_heads // tp * a.head_dim, kv_local * a.head_dim, kv_local * a.head_dim]
    column([sum(qkv)] if st.support.fused_slices else qkv)
    # o_proj: RowParallelLinearWithLoRA
    o_in = a.num_heads * a.v_head_dim
    out += [n * r * (o_in // tp), n * rb * r]

    def mlp(inter: int, gated: bool) -> None:  # gate_up_proj (or up_proj), down_proj
        if not gated:
            column([inter // tp])
        else:
            column([2 * inter // tp] if st.support.fused_slices else [inter // tp] * 2)
        out.extend((n * r * (inter // tp), n * rb * r))

    m = layer.mlp
    if m.kind == "moe":
        # the router (ReplicatedLinear gate): ReplicatedLinearWithLoRA; the routed experts carry
        # none (FusedMoE is no LinearBase before FusedMoEWithLoRA); a shared expert is an MLP
        if st.support.router:
            out += [n * r * h, n * m.num_experts * r]
        if m.shared_intermediate_size:
            mlp(m.shared_intermediate_size, True)
    elif m.kind != "none":
        mlp(m.intermediate_size, m.gated)
    if st.bias:  # a bias slot [L, 1, out] beside each B: the B's output width
        out += [e // r for e in out[1::2]]
    return out


def lora_terms(ctx: TermContext) -> list[Component]:
    """The LoRA wrappers' stacked buffers, the extra vocabulary rows and the punica metadata of
    one rank (formulas in the module docstring); nothing without ``--enable-lora``."""
    dep, spec = ctx.dep, ctx.spec
    if not dep.enable_lora or not engine_of(dep).flags.get("enable_lora"):
        return []
    st = settings_of(ctx)
    sl = dtype_bytes(st.dtype)
    sm = dtype_bytes(ctx.model_dtype)
    n, r, x, tp, h = st.max_loras, st.rank, st.extra_vocab, dep.tp, spec.hidden_size
    version = dep.engine_version or ""
    budgeted = value_at(LORA_BUDGETED, version, "load") == "load"
    where: Where = "budget" if budgeted else "runtime"
    out: list[Component] = []
    start, end = pp_layer_split(len(spec.layers), dep.pp, dep.engine_version)[ctx.coord.pp_stage]
    total, count = 0, 0
    by_kind: dict[object, int] = {}
    for layer in spec.layers[start:end]:
        key = (layer.attention, layer.mlp)
        if key not in by_kind:
            by_kind[key] = sum(block(e * sl) for e in _layer_tensors(layer, h, tp, st))
        total += by_kind[key]
        count += 1
    if count:
        out.append(Component(
            name="LoRA stacked A/B buffers", category="weights", where=where,
            profiled=budgeted, bytes=total, count=count,
            formula=f"{count} layers × {fmt_bytes(total // count)} ({n} LoRAs × rank {r} × "
            f"{sl} B: qkv_proj, o_proj, MLP; vLLM {version} lora/layers create_lora_weights)"))
    tied = spec.tie_word_embeddings
    embed_here = is_first_stage(ctx) or (tied and is_last_stage(ctx))
    head_here = is_last_stage(ctx)
    v = spec.vocab_size
    emb = 0
    if st.support.embeddings and embed_here:
        emb += (block((n * (v + x) * r) * sl) + block(n * h * r * sl)
                + (block(n * x * h * sm) if x else 0))
    if st.support.embeddings and head_here:
        head_v = v + (x if st.support.extra_vocab else 0)
        # padded to lora_vocab_padding_size while the release has the extra vocabulary (0.12.0
        # logits_processor.py: B [L, 1, vocab_size, r], unpadded)
        pad = LORA_VOCAB_PADDING if x else 1
        emb += (block(n * r * h * sl) + block(n * round_up(head_v, pad) * r * sl)
                + (block(n * x * h * sm) if x else 0))
        if st.support.tied_head_embedding and tied:
            # the tied lm_head is embed_tokens itself, wrapped again as a
            # VocabParallelEmbeddingWithLoRA (LoraSupport.tied_head_embedding)
            emb += block(n * v * r * sl) + block(n * h * r * sl)
    if emb:
        out.append(Component(
            name="LoRA embed_tokens / lm_head buffers", category="weights", where=where,
            profiled=budgeted, bytes=emb,
            formula=f"A [{n}, vocab {v}+{x}, {r}], B [{n}, 1, {h}, {r}] and lm_head A/B"
            + (f", embeddings_tensors [{n}, {x}, {h}] each" if x else "")))
    if st.support.extra_vocab and x:
        rows = 0
        if embed_here:  # VocabParallelEmbedding: the LoRA rows padded apart from the vocabulary
            with_lora = round_up(round_up(v, VOCAB_PADDING) + x * n, VOCAB_PADDING)
            rows += (with_lora - round_up(v, VOCAB_PADDING)) // tp
        if head_here and not tied:  # ParallelLMHead padded to 256 instead of 64
            with_lora = round_up(round_up(v, LORA_VOCAB_PADDING) + x, LORA_VOCAB_PADDING)
            rows += (with_lora - round_up(v, VOCAB_PADDING)) // tp
        if rows:
            out.append(Component(
                # the model's own tables: built in get_model, inside the load at every release
                name="LoRA extra vocabulary rows", category="weights", bytes=rows * h * sm,
                formula=f"{rows} rows × {h} × {sm} B (embed_tokens + {x}×{n} rows, lm_head "
                f"+ {x} padded to {LORA_VOCAB_PADDING}; /{tp})"))
    t, b = profile_tokens(dep), max_seqs(dep)
    idx = int(value_at(PUNICA_TOKEN_INDICES, version, 5))  # type: ignore[call-overload]
    prompt_meta = value_at(PUNICA_PROMPT_META, version, "tokens")
    # (idx − 2) int64 [T] and the [2, T] embeddings indices; 3 int64 [B]; from 0.8.0 two
    # LoRAKernelMeta (tokens, prompts): int32 [len] × 2, [L+1] × 2, [L+2]
    meta = (idx - 2) * block(8 * t) + block(16 * t) + 3 * block(8 * b)
    kernel = ""
    if prompt_meta != "none":
        prompts = t if prompt_meta == "tokens" else b
        counters = 2 * block(4 * (n + 1)) + block(4 * (n + 2))
        meta += 2 * block(4 * t) + 2 * block(4 * prompts) + 2 * counters
        kernel = f", int32 [{t}] × 2 + [{prompts}] × 2"
    out.append(Component(
        name="LoRA punica metadata", category="weights", where=where, profiled=budgeted,
        bytes=meta,
        formula=f"int64 [{t}] × {idx} + [{b}] × 3{kernel} (punica wrapper)"))
    return out
