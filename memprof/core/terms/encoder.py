"""A multimodal model's encoder in vLLM V1's profile run, and the buffers its wrapper allocates.

vLLM ``vllm/v1/worker/gpu_model_runner.py`` ``profile_run`` (read in the 0.11.0, 0.13.0 and
0.33.0 wheels): unless ``skip_mm_profiling``, when the encoder budget is above 0 it builds
``max_items_per_batch`` dummy items of the modality with the most tokens
(``_get_mm_dummy_batch``), runs the vision tower on them (``get_multimodal_embeddings`` /
``embed_multimodal``) and keeps the outputs in ``encoder_cache`` while the text ``_dummy_run``
and the sampler run — 0.11.0 to 0.12.0 pad each output to ``encoder_budget`` rows first
(``ENCODER_PROFILE``); the cache is cleared after. Before 0.11.0, where the family's
``early_profile`` rows were read: vLLM V0's profile run, which has no encoder cache and runs the
tower inside its dummy sequences, is ``_v0_encoder_terms``, and V1's at 0.8.4 - 0.9.x
``_early_v1_terms`` (below); other V1 releases before 0.11.0 are not modelled (a labelled
placeholder says so). The budget and the items: ``memprof/core/models/multimodal.py``
(``encoder_budget``). The profile's torch peak is therefore the larger of

    the encoder forward:  pixels + the tower's live activations (one block at a time)
    the text dummy run:   encoder cache + the encoder inputs still held + the text peak
                          (``memprof/core/terms/activation.py``)

so this term adds, beside the text peak: the encoder cache (profiled), the inputs held through
the text run (profiled), and what the encoder forward needs above the text peak, the cache and
the held inputs (profiled, 0 when the text run is larger).

The encoder forward on P = items × tokens × merge² patches (plus a class token a tile for a
tower that has one), one rank (TP-local widths), the same for every family with the tower's
``attn_width`` (a, b) and ``gather_qkv`` read from its vLLM file: ``qwen2_5_vl.py`` /
``qwen3_vl.py`` (a, b) = (1, 10), and at 0.11.0 ``split_qkv`` all-gathering qkv when TP > 1
(``all_gather_interleave``; removed by vllm-project/vllm#28271, first released in 0.11.1: the
0.11.1, 0.12.0, 0.19.0 and 0.33.0 wheels' ``Qwen2_5_VisionAttention.forward`` keeps its own
heads, ``QWEN_VL_QKV_GATHER``); ``siglip.py`` (Gemma 3) (2, 4); ``mllama4.py`` (Llama 4)
(2, 11) — the family modules give the reading (flash-attention varlen: no P² scores). With
``--mm-encoder-tp-mode data`` the tower is whole on each rank (tp = 1 below) and each rank
encodes a share of the items (``vision.py`` ``run_dp_sharded_mrope_vision_model``): the busiest
rank's ceil(items / TP) is charged:

    pixels     P' · patch_inputs · s        the dummy items' pixel values, in the model dtype
                                            (P': the patches that carry pixels, no class token)
    attention  P · (a·H + b·H/tp) · s       residual, normed input, qkv, q/k copies and rotation
               + P · 3H · s with TP > 1     the all-gathered qkv (gather_qkv, until 0.11.1)
    mlp        P · (2H + g·I/tp) · s        residual and normed input, gate_up (g = 3: gate_up +
                                            its activation) or fc1 (g = 2: fc1 + activation)
    deepstack  levels · P/merge² · out · s  the deepstack mergers' outputs kept to the end
    position   P · H · s                    Qwen3-VL's interpolated position embeddings, kept
                                            through the blocks (kept_pos_embeds)

The pixels are in the model dtype on the GPU: vLLM's processor casts every floating output of
the HF processor to ``model_config.dtype`` on the host ("This mimics the behavior of
transformers.BatchFeature": 0.11.0 / 0.11.1 / 0.12.0 ``multimodal/processing.py``
``InputProcessingContext._postprocess_output``, 0.19.0 / 0.33.0
``multimodal/processing/context.py``), and the tower's ``x.to(device, dtype)`` is then no copy.

What the V1 runner holds through the text dummy run beside the cache (``ENCODER_INPUTS_HELD``):
``profile_run`` keeps ``batched_dummy_mm_inputs`` — every item's pixels, on the GPU
(``_get_mm_dummy_batch`` batches them with ``device=self.device``) — as a local until it returns,
and in the padding era (0.11.0 - 0.12.0) its loop variable ``output`` still references the last
unpadded encoder output, a ``split`` view of the tower's whole output (``qwen3_vl.py``
``_process_video_input``: ``video_embeds.split(sizes)``), while ``_dummy_run`` and the sampler
run. Model Runner V2 (``v1/worker/gpu/mm/encoder_runner.py`` ``profile_encoder_cache``, 0.33.0)
batches the items inside ``execute_mm_encoder`` and keeps only the outputs: nothing held.
The text side of the peak is therefore text peak + cache + held.

``Qwen3VLForConditionalGeneration.__init__`` also allocates one ``[max_num_batched_tokens, text
hidden]`` buffer per deepstack level (``deepstack_input_embeds``, model dtype) while the model is
built: counted in the weights ("Model loading took").

The encoder forward is a reading of the code, not a measurement (no GPU run of a vision tower
has been recorded yet); the cache and the buffers are exact sizes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from memprof.base.units import fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.engines import engine_of
from memprof.core.terms.activation import activation_terms
from memprof.core.terms.common import max_seqs, model_bytes, profile_tokens
from memprof.core.terms.runner_v2_profile import runs_v2
from memprof.core.versions import Rule, value_at

if TYPE_CHECKING:
    from memprof.core.models.multimodal import EarlyTower, EncoderBudget, VisionTower

# Model Runner V2 (vLLM's default from 0.29.0: memprof/core/kvcache.py SWA_IN_FLIGHT_BATCHES)
# profiles the encoder on the first PP stage only; the V1 runner on every stage.
ENCODER_FIRST_STAGE: tuple[Rule, ...] = (
    Rule(name="mm_encoder_profile_first_stage", changes="encoder cache (profile run)",
         since="0.29.0", until=None, value=True,
         introduced_by="Model Runner V2 by default (0.29.0)",
         source="0.29.0 / 0.33.0 v1/worker/gpu/model_runner.py profile_run (if "
         "self.supports_mm_inputs and self.is_first_pp_rank); v1/worker/gpu_model_runner.py "
         "(the V1 runner) profiles on every rank", applies_to="multimodal"),
)


# Qwen2.5-VL's vision attention (Qwen3-VL's and Qwen3.5's too) all-gathers qkv over the TP ranks
# and re-splits it (split_qkv) until vllm-project/vllm#28271 (merged 2025-11-07) keeps each rank's
# own heads.
QWEN_VL_QKV_GATHER: tuple[Rule, ...] = (
    Rule(name="mm_vision_qkv_all_gather", changes="vision encoder forward (profile run)",
         since="0.11.0", until="0.11.1", value=True,
         introduced_by="not identified (in 0.11.0, the first release whose encoder profile "
         "memprof models)",
         removed_by="vllm-project/vllm#28271 ([Refactor] Remove redundant TP gather/split in "
         "split_qkv in QwenVL), first released in 0.11.1",
         source="0.11.0 model_executor/models/qwen2_5_vl.py Qwen2_5_VisionAttention.split_qkv "
         "(all_gather_interleave when tp_size > 1); 0.11.1 / 0.12.0 / 0.19.0 / 0.33.0 "
         "qwen2_5_vl.py (no all_gather_interleave)", applies_to="multimodal"),
)

# What the V1 runner's profile_run still references while the text dummy run and the sampler run:
# the dummy batch's GPU pixels (a local until it returns) and, while it pads the outputs, the
# last unpadded output (the loop variable ``output``).
ENCODER_INPUTS_HELD: tuple[Rule, ...] = (
    Rule(name="mm_encoder_inputs_held", changes="encoder inputs held (profile run)",
         since="0.11.0", until=None, value=True,
         introduced_by="not identified (in 0.11.0, the first release whose encoder profile "
         "memprof models)",
         source="0.11.0 / 0.11.1 / 0.12.0 / 0.19.0 / 0.33.0 v1/worker/gpu_model_runner.py "
         "profile_run (batched_dummy_mm_inputs = self._get_mm_dummy_batch(...), no del before "
         "self._dummy_run; 0.11.0 - 0.12.0 'for output in dummy_encoder_outputs' before it); "
         "Model Runner V2 (0.33.0 v1/worker/gpu/mm/encoder_runner.py profile_encoder_cache) "
         "batches the items inside execute_mm_encoder: nothing held", applies_to="multimodal"),
)


def encoder_terms(ctx: TermContext) -> list[Component]:
    """The deepstack buffers, the profile run's encoder cache and the encoder forward above the
    text peak, for a model with a vision tower (``[]`` otherwise)."""
    tower = ctx.spec.vision
    if tower is None or not engine_of(ctx.dep).profiles_encoder:  # (SGLang profiles none)
        return []
    # imported here: a text model's estimate never loads the multimodal modules
    from memprof.core.models.multimodal import (
        ENCODER_PROFILE,
        encoder_budget,
        mm_limits,
        processor_limits,
    )
    from memprof.core.weights.vision import tower_built

    dep = ctx.dep
    if not tower_built(tower, dep.limit_mm_per_prompt, dep.engine_version):
        return []
    s = model_bytes(ctx)
    t = profile_tokens(dep)
    out: list[Component] = []
    if tower.deepstack_levels:
        each = t * tower.text_hidden * s
        out.append(Component(
            name="deepstack buffers", category="weights", bytes=tower.deepstack_levels * each,
            count=tower.deepstack_levels, where="budget", profiled=True,
            formula=f"{tower.deepstack_levels} levels × [{t}, {tower.text_hidden}] × {s} B "
            "(qwen3_vl.py deepstack_input_embeds, allocated with the model)"))
    early = _v0_encoder_terms(ctx, tower)
    if early is None:
        early = _early_v1_terms(ctx, tower)
    if early is not None:
        return out + early
    if value_at(ENCODER_PROFILE, dep.engine_version, None) is None:
        out.append(Component(
            name="encoder profile (not modelled at this release)", category="activation",
            bytes=0, where="budget", profiled=True, placeholder=True,
            formula="vLLM V1 before 0.11.0 sizes the largest video against the images' tokens "
            "(0.8.0-0.10.2), and V0 profiles inside its dummy sequences (modelled where read: "
            "Qwen2.5-VL on CUDA under V0 and V1 0.8.4-0.9.x, its early_profile rows): left out, "
            "not guessed (ENCODER_PROFILE, memprof/core/models/multimodal.py)"))
        return out
    if ctx.coord.pp_stage > 0 and value_at(ENCODER_FIRST_STAGE, dep.engine_version, False):
        return out
    if tower.processor is not None:
        tower = replace(tower, processor=processor_limits(tower.processor,
                                                          dep.mm_processor_kwargs))
    limits = mm_limits(dep.limit_mm_per_prompt, tower.modalities)
    max_len = dep.max_model_len or ctx.spec.max_position_embeddings or t
    eb = encoder_budget(tower, limits=limits, max_model_len=max_len,
                        max_num_batched_tokens=t, max_num_seqs=max_seqs(dep),
                        version=dep.engine_version)
    if eb is None:
        return out
    data = dep.mm_encoder_tp_mode == "data" and tower.data_mode
    tp = 1 if data or tower.whole else dep.tp  # a whole tower: every rank runs all of it
    h, i, m2 = tower.hidden, tower.intermediate, tower.merge * tower.merge
    # data mode: the items are spread over the TP ranks (run_dp_sharded_mrope_vision_model),
    # whole ones; the busiest rank's share is taken, ceil(items / tp) [an upper bound]
    local_items = -(-eb.items // dep.tp) if data else eb.items
    image_patches = local_items * eb.item.encoder_tokens * m2  # those that carry pixels
    # a tiled tower adds a class token to each tile
    cls = local_items * tower.tiles if tower.class_embedding else 0
    patches = image_patches + cls
    # the processor's pixels, cast to the model dtype on the host (the module docstring)
    pixels = image_patches * tower.patch_inputs * s
    gather = tower.gather_qkv and value_at(QWEN_VL_QKV_GATHER, dep.engine_version, False)
    a, b = tower.attn_width
    attn = (patches * (a * h + b * h // tp) * s
            + (patches * 3 * h * s if tp > 1 and gather else 0))
    mlp = patches * (2 * h + (3 if tower.gated else 2) * i // tp) * s
    deep = tower.deepstack_levels * local_items * eb.item.encoder_tokens * tower.out_hidden * s
    pos = patches * h * s if tower.kept_pos_embeds else 0
    forward = pixels + pos + max(attn, mlp) + deep
    cache = eb.cached_rows * tower.embed_width * s
    text_peak = activation_terms(ctx)[0].bytes
    item = eb.item
    what = (f"{eb.items} × {item.modality} of {item.encoder_tokens} tokens"
            + (f" ({item.frames} frames)" if item.modality == "video" else "")
            + f", budget {eb.budget} tokens")
    out.append(Component(
        name="encoder cache (profile run)", category="activation", bytes=cache,
        where="budget", profiled=True,
        formula=f"{eb.cached_rows} rows × {tower.embed_width} × {s} B; {what} "
        f"({'padded to the budget, ' if eb.pad_to_budget else ''}profile_run; "
        "compute_mm_encoder_budget)"))
    held = _held_through_text_run(ctx, eb, tower, s)
    if held is not None:
        out.append(held)
    kept = held.bytes if held is not None else 0
    above = max(0, forward - text_peak - cache - kept)
    out.append(Component(
        name="vision encoder forward (profile run)", category="activation", bytes=above,
        where="budget", profiled=True,
        formula=f"max(0, forward {fmt_bytes(forward)} − text peak {fmt_bytes(text_peak)} − "
        f"cache {fmt_bytes(cache)} − held {fmt_bytes(kept)}); forward on {patches} patches = "
        "pixels "
        f"{fmt_bytes(pixels)} + "
        + (f"position embeddings {fmt_bytes(pos)} + " if pos else "")
        + f"max(attention {fmt_bytes(attn)}, mlp {fmt_bytes(mlp)}) + deepstack {fmt_bytes(deep)}"))
    return out


def _held_through_text_run(ctx: TermContext, eb: EncoderBudget, tower: VisionTower,
                           s: int) -> Component | None:
    """What the V1 runner's ``profile_run`` still references during the text dummy run
    (``ENCODER_INPUTS_HELD``): every dummy item's pixels in the model dtype, and in the padding
    era the tower's whole unpadded output (the last item's output is a view of it); ``None``
    under Model Runner V2 or at a release without the rule."""
    dep = ctx.dep
    if not value_at(ENCODER_INPUTS_HELD, dep.engine_version, False) or runs_v2(ctx):
        return None
    # data mode: each rank's batch still holds every item; the outputs are gathered on every rank
    pixels = eb.items * eb.item.encoder_tokens * tower.merge * tower.merge * tower.patch_inputs * s
    padded = eb.pad_to_budget and eb.item.encoder_tokens < eb.budget
    outputs = eb.encoder_tokens * tower.embed_width * s if padded else 0
    return Component(
        name="encoder inputs held (profile run)", category="activation", bytes=pixels + outputs,
        where="budget", profiled=True,
        formula=f"pixels {eb.items} × {eb.item.encoder_tokens * tower.merge ** 2} patches × "
        f"{tower.patch_inputs} × {s} B ({fmt_bytes(pixels)}: batched_dummy_mm_inputs, a local of "
        "profile_run through _dummy_run)"
        + (f" + the unpadded outputs {eb.encoder_tokens} × {tower.embed_width} × {s} B "
           f"({fmt_bytes(outputs)}: the loop variable 'output', a view of them)"
           if padded else ""))


def _v0_encoder_terms(ctx: TermContext, tower: VisionTower) -> list[Component] | None:
    """vLLM V0's profile run for a family with ``early_profile`` rows (``v0_dummy``): no encoder
    cache; the dummy sequences' pixels stay on the GPU, in float32 until 0.9.0
    (``PIXELS_FP32``), through the text forward (the model input's ``multi_modal_kwargs``), so
    they are charged beside the text peak (which ``activation_terms`` takes at the dummy
    sequences' tokens and rows); the tower runs once on all images, then once on all videos
    (``get_input_embeddings_v0``, first PP stage), with the text embeddings [T', H], the
    earlier modality's outputs and, for float32 pixels, the batch's model-dtype copy alive
    beside its live set (``EarlyTower``: the attention's ``a·H + b·H/tp`` a patch, or with TP > 1
    the all-gather's moment, the rotary tables; the MLP ``4H + 3I/tp``: the block's input, the
    new residual, the normed input, gate and up (or gate_up) and act kept through down_proj and
    its output: ``_tower_live``). None where V0's encoder profile is not modelled (another
    family, ROCm, V1)."""
    from memprof.core.models.multimodal import PIXELS_FP32, EarlyTower, v0_dummy

    dep = ctx.dep
    reading = value_at(tower.early_profile, dep.engine_version, None)
    # --mm-encoder-tp-mode data (0.10.2+) under V0 is not read: the placeholder stays
    if not isinstance(reading, EarlyTower) or ctx.gpu.is_rocm or dep.mm_encoder_tp_mode == "data":
        return None
    d = v0_dummy(tower, limit_text=dep.limit_mm_per_prompt, kwargs_text=dep.mm_processor_kwargs,
                 max_model_len=dep.max_model_len or ctx.spec.max_position_embeddings or
                 profile_tokens(dep), max_num_batched_tokens=profile_tokens(dep),
                 max_num_seqs=max_seqs(dep), version=dep.engine_version)
    if d is None:
        return None
    s = model_bytes(ctx)
    fp32 = bool(value_at(PIXELS_FP32, dep.engine_version, False))
    ps = 4 if fp32 else s
    # a later PP stage gets intermediate tensors and parses no pixels: only the model input's
    inputs = tower.patch_inputs
    copies = reading.pixel_copies if ctx.coord.pp_stage == 0 else 1
    patches = sum(b.patches for b in d.batches)
    pixels = copies * patches * inputs * ps
    what = " + ".join(f"{b.items} {b.modality}{'s' if b.items > 1 else ''} of "
                      f"{b.patches // max(b.items, 1)} patches" for b in d.batches)
    out = [Component(
        name="encoder inputs held (profile run)", category="activation", bytes=pixels,
        where="budget", profiled=True,
        formula=(f"{copies} cop{'ies' if copies > 1 else 'y'} × ({what or 'no item'}) × "
                 f"{inputs} × {ps} B "
                 f"({'float32: cast in the model, PIXELS_FP32' if fp32 else 'model dtype'}; "
                 + ("the model input's batch and the forward's concatenation, EarlyTower); "
                    if copies > 1 else "the model input's batch; a later PP stage); ")
                 + f"V0 dummy: {d.seqs} sequence{'s' if d.seqs > 1 else ''} of {d.tokens} tokens "
                 f"in all (max_mm_tokens {d.mm_tokens}"
                 + (f"; {d.dropped} without their multimodal data" if d.dropped else "")
                 + "; V0_MM_DUMMY, multimodal.py v0_dummy), alive through the text "
                 "forward"))]
    if not d.batches or ctx.coord.pp_stage > 0:
        return out
    a, b = reading.attn_width
    embeds = d.tokens * ctx.spec.hidden_size * s
    text_peak = activation_terms(ctx)[0].bytes
    best, label, earlier = 0, "", 0
    for batch in d.batches:
        n = batch.patches
        attn, mlp, rotary = _tower_live(tower, reading, n, dep.tp, s)
        cast = n * inputs * s if fp32 else 0
        live = pixels + cast + embeds + earlier + max(attn, mlp) + rotary
        if live > best:
            best = live
            label = (f"{batch.modality} call on {n} patches: pixels {fmt_bytes(pixels)}"
                     + (f" + their {tower.patch_inputs}-wide model-dtype copy {fmt_bytes(cast)}"
                        if cast else "")
                     + f" + text embeddings [{d.tokens}, {ctx.spec.hidden_size}] "
                     f"{fmt_bytes(embeds)} + earlier outputs {fmt_bytes(earlier)} + "
                     f"max(attention ({a}·H + {b}·H/tp, or with TP > 1 the all-gather's "
                     f"{a}·H + 3H/tp + 2·3H) "
                     f"{fmt_bytes(attn)}, mlp {fmt_bytes(mlp)}) + rotary tables "
                     f"{fmt_bytes(rotary)}")
        earlier += n // (tower.merge * tower.merge) * tower.out_hidden * s
    out.append(Component(
        name="vision encoder forward (profile run)", category="activation",
        bytes=max(0, best - text_peak - pixels), where="budget", profiled=True,
        formula=f"max(0, forward {fmt_bytes(best)} − text peak {fmt_bytes(text_peak)} − pixels "
        f"held {fmt_bytes(pixels)}); forward = {label}; {reading.backend} [assumed]"))
    return out


def _tower_live(tower: VisionTower, reading: EarlyTower, patches: int, tp: int,
                s: int) -> tuple[int, int, int]:
    """(attention, mlp, rotary tables) bytes of one tower call on ``patches`` before 0.11.0
    (``EarlyTower``). The block's input stays referenced by the tower's loop variable
    (``hidden_states = blk(hidden_states, ...)``) through the whole block, so the attention
    holds it and the normed input (``a·H``) and the MLP holds it beside the new residual.
    Attention: at the rotary, ``a·H + b·H/tp``; with TP > 1 also the all-gather's moment, the
    local qkv (held as ``x``) beside the gathered buffer and its reassembled copy (``a·H + 3H/tp
    + 2·3H``: 0.8.4 ``tensor_model_parallel_all_gather``'s ``[tp, ...]`` output and its reshape,
    0.9.0.1 ``all_gather_interleave``'s ``zeros_like`` list and its ``torch.cat``), and the
    moment q, k and v are made contiguous beside the gathered qkv (``a·H + 3H +
    gathered_width·H/tp``). MLP: the block's input, the new residual, the normed input, gate
    and up (or gate_up) and act kept through down_proj, its output (+ the all-reduce's with
    TP > 1). The rotary's fp32 [P, head_dim/2] tables."""
    h, i = tower.hidden, tower.intermediate
    a, b = reading.attn_width
    gathered = max(a * h + 3 * h // tp + 2 * 3 * h,
                   a * h + 3 * h + reading.gathered_width * h // tp) if tp > 1 else 0
    attn = patches * max(a * h + b * h // tp, gathered) * s
    mlp = patches * ((4 if tp == 1 else 5) * h + 3 * i // tp) * s
    rotary = reading.rotary_tables * patches * (tower.hidden // tower.heads // 2) * 4
    return attn, mlp, rotary


def _early_v1_terms(ctx: TermContext, tower: VisionTower) -> list[Component] | None:
    """vLLM V1's ``profile_run`` from 0.8.4 to 0.9.x (``early_v1_batch``): the encoder cache
    (the items' outputs, unpadded), the dummy batch's pixels kept through the text run (float32
    until 0.9.0, ``PIXELS_FP32``) and the encoder forward above the text peak, the cache and
    those pixels: the batch (``profile_run``'s ``batched_dummy_mm_inputs``, held by
    ``get_multimodal_embeddings``'s kwargs), ``_validate_and_reshape_mm_tensor``'s
    concatenation of it and, for float32 pixels, its model-dtype copy beside the tower's live
    set (``_tower_live``); every TP rank runs the whole batch through its shard of the tower.
    None elsewhere (another release or family, ROCm)."""
    from memprof.core.models.multimodal import PIXELS_FP32, EarlyTower, early_v1_batch

    dep = ctx.dep
    if ctx.gpu.is_rocm:
        return None
    t = profile_tokens(dep)
    b = early_v1_batch(tower, limit_text=dep.limit_mm_per_prompt,
                       kwargs_text=dep.mm_processor_kwargs,
                       max_model_len=dep.max_model_len or ctx.spec.max_position_embeddings or t,
                       max_num_batched_tokens=t, max_num_seqs=max_seqs(dep),
                       version=dep.engine_version)
    reading = value_at(tower.early_profile, dep.engine_version, None)
    if b is None or not isinstance(reading, EarlyTower):
        return None
    s = model_bytes(ctx)
    fp32 = bool(value_at(PIXELS_FP32, dep.engine_version, False))
    ps = 4 if fp32 else s
    m2 = tower.merge * tower.merge
    patches = b.items * b.item_tokens * m2
    pixels = patches * tower.patch_inputs * ps
    cache = b.items * b.item_tokens * tower.embed_width * s
    attn, mlp, rotary = _tower_live(tower, reading, patches, dep.tp, s)
    cast = patches * tower.patch_inputs * s if fp32 else 0
    forward = 2 * pixels + cast + max(attn, mlp) + rotary
    text_peak = activation_terms(ctx)[0].bytes
    what = (f"{b.items} × {b.modality} of {b.item_tokens} tokens (built at seq_len "
            f"{t}; {b.per_item} budgeted per item, budget {b.budget})")
    return [
        Component(name="encoder cache (profile run)", category="activation", bytes=cache,
                  where="budget", profiled=True,
                  formula=f"{b.items * b.item_tokens} rows × {tower.embed_width} × {s} B; {what} "
                  "(V1_EARLY_ENCODER_PROFILE: unpadded)"),
        Component(name="encoder inputs held (profile run)", category="activation",
                  bytes=pixels, where="budget", profiled=True,
                  formula=f"pixels {patches} patches × {tower.patch_inputs} × {ps} B "
                  f"({'float32, PIXELS_FP32' if fp32 else 'model dtype'}; "
                  "batched_dummy_mm_inputs, a local of profile_run through _dummy_run)"),
        Component(name="vision encoder forward (profile run)", category="activation",
                  bytes=max(0, forward - text_peak - cache - pixels), where="budget",
                  profiled=True,
                  formula=f"max(0, forward {fmt_bytes(forward)} − text peak "
                  f"{fmt_bytes(text_peak)} − cache {fmt_bytes(cache)} − held "
                  f"{fmt_bytes(pixels)}); forward on {patches} patches = pixels and their "
                  f"concatenation 2 × {fmt_bytes(pixels)}"
                  + (f" + their model-dtype copy {fmt_bytes(cast)}" if cast else "")
                  + f" + max(attention {fmt_bytes(attn)}, mlp {fmt_bytes(mlp)}) + rotary "
                  f"tables {fmt_bytes(rotary)}; {reading.backend} [assumed]"),
    ]
