"""Qwen2.5-VL and Qwen3-VL (``Qwen2_5_VLForConditionalGeneration``,
``Qwen3VLForConditionalGeneration``, ``Qwen3VLMoeForConditionalGeneration``): a Qwen2 / Qwen3 /
Qwen3-MoE language model with a ViT beside it (``memprof/core/models/multimodal.py``).

Sources (vLLM 0.11.0, read in the wheel):

- ``vllm/model_executor/models/qwen2_5_vl.py``: ``Qwen2_5_VisionTransformer`` — a replicated
  ``Conv3d`` patch embedding without bias; ``depth`` blocks of two RMSNorms,
  ``Qwen2_5_VisionAttention`` (``QKVParallelLinear`` with bias, ``RowParallelLinear`` proj with
  its default bias) and ``Qwen2_5_VisionMLP`` (``MergedColumnParallelLinear`` gate_up +
  ``RowParallelLinear`` down, bias=True); ``Qwen2_5_VisionPatchMerger`` (RMSNorm ``ln_q`` over
  ``hidden_size``, ``ColumnParallelLinear`` ``hidden·merge² → hidden·merge²`` and
  ``RowParallelLinear`` ``→ out_hidden_size``, both biased). The window attention
  (``window_size``, ``fullatt_block_indexes``) changes which patches attend together, not the
  weights. The language model is ``Qwen2ForCausalLM`` from the same flat config.
- ``vllm/model_executor/models/qwen3_vl.py``: ``Qwen3_VisionTransformer`` — ``Conv3d`` patch
  embedding with bias, a learnt ``pos_embed`` (``num_position_embeddings × hidden_size``),
  LayerNorm blocks with a plain fc1/fc2 MLP (``ColumnParallelLinear`` + ``RowParallelLinear``,
  biased), the merger (LayerNorm over ``hidden_size``) and one post-shuffle merger per
  ``deepstack_visual_indexes`` entry (LayerNorm over ``hidden·merge²``); the language model
  ``Qwen3LLMForCausalLM`` (Qwen3 layers) or, for the MoE, Qwen3-MoE layers, from
  ``text_config``. ``Qwen3VLForConditionalGeneration.__init__`` also allocates one
  ``[max_num_batched_tokens, text hidden]`` deepstack buffer per level
  (``memprof/core/terms/encoder.py``).
- Both build the vision tower only when ``--limit-mm-per-prompt`` leaves an image or a video
  (``get_limit_per_prompt("image") or …("video")``), with TP-sharded linears unless
  ``mm_encoder_tp_mode`` is ``data``.
- The processors' limits: ``Qwen/Qwen2.5-VL-7B-Instruct`` ``preprocessor_config.json``
  (``min_pixels`` 3136, ``max_pixels`` 12845056), vLLM ``qwen2_vl.py`` ``_MAX_FRAMES_PER_VIDEO``
  14 (a video resized frame by frame with the image processor); the Qwen3-VL checkpoints'
  ``preprocessor_config.json`` (``size`` 65536 – 16777216 pixels) and
  ``video_preprocessor_config.json`` (``size`` 4096 – 25165824 pixels for the whole clip). How
  vLLM sizes the largest video changed by release: the ``VideoRule`` rows below (Qwen3-VL: up
  to 0.12.0 the most frames that fit, 12.5 placeholder tokens budgeted per video token; 0.13.0
  to 0.14.1 without that scale; from 0.15.0 two frames of the video processor's size).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from memprof.core.models.config import ConfigFields
from memprof.core.models.families import qwen, qwen_moe
from memprof.core.models.families.row import (
    Built,
    EngineTower,
    Family,
    LoraSupport,
    lift_text_config,
    v0_gate_up_rows,
    vision_int,
)
from memprof.core.versions import Rule, around_snapshots

if TYPE_CHECKING:
    from memprof.core.models.multimodal import Processor, VisionTower


@cache
def processors() -> tuple[Processor, Processor]:
    """(Qwen2.5-VL's, Qwen3-VL's) processor limits and video rows, built on first use (the
    multimodal module stays off a text model's import path)."""
    from memprof.core.models.multimodal import Processor, VideoRule

    qwen2_5 = Processor(
        image_min_pixels=3136, image_max_pixels=12845056,
        video=(Rule(name="qwen2_5_vl_video", changes="encoder cache (profile run)", since="0.11.0",
                    until=None, value=VideoRule(rule="frames", start_frames=1, max_frames=14),
                    introduced_by="first seen in 0.11.0 (0.10.2: 16 frames against the images' "
                    "tokens, not modelled)",
                    source="0.11.0 / 0.33.0 models/qwen2_vl.py get_max_video_tokens, "
                    "_get_max_video_frames, _MAX_FRAMES_PER_VIDEO = 14",
                    applies_to="multimodal"),),
        source="Qwen/Qwen2.5-VL-7B-Instruct preprocessor_config.json (min_pixels, max_pixels)")
    qwen3 = Processor(
        image_min_pixels=65536, image_max_pixels=16777216,
        video_min_pixels=4096, video_max_pixels=25165824,
        video=(
            Rule(name="qwen3_vl_video", changes="encoder cache (profile run)", since="0.11.0",
                 until="0.13.0",
                 value=VideoRule(rule="clip", start_frames=2, max_frames=24576, token_scale=12.5),
                 introduced_by="Qwen3-VL support (vLLM 0.11.0)",
                 removed_by="first seen in 0.13.0: no timestamp scale",
                 source="0.11.0 / 0.12.0 models/qwen3_vl.py get_max_video_tokens (× 12.5), "
                 "_MAX_FRAMES_PER_VIDEO = 24576", applies_to="multimodal"),
            Rule(name="qwen3_vl_video", changes="encoder cache (profile run)", since="0.13.0",
                 until="0.15.0", value=VideoRule(rule="clip", start_frames=2, max_frames=24576),
                 introduced_by="first seen in 0.13.0",
                 removed_by="first seen in 0.15.0: two frames of the video processor's size",
                 source="0.13.0 / 0.14.1 models/qwen3_vl.py get_max_video_tokens",
                 applies_to="multimodal"),
            Rule(name="qwen3_vl_video", changes="encoder cache (profile run)", since="0.15.0",
                 until=None, value=VideoRule(rule="two_frames"),
                 introduced_by="first seen in 0.15.0",
                 source="0.15.0 / 0.16.0 / 0.33.0 models/qwen3_vl.py get_max_video_tokens "
                 "(num_frames=2, max_pixels = longest_edge // temporal_patch_size)",
                 applies_to="multimodal"),
        ),
        source="Qwen/Qwen3-VL-*-Instruct preprocessor_config.json / video_preprocessor_config.json "
        "size")
    return qwen2_5, qwen3


@cache
def qwen2_5_vl_early() -> tuple[Rule, ...]:
    """How vLLM before 0.11.0 runs Qwen2.5-VL's tower in its profile run (``EarlyTower``: V0's
    and V1's 0.8.4 - 0.9.x, the same model file), read in the 0.7.3,
    0.8.0, 0.8.3, 0.8.4, 0.9.2 and 0.10.1.1 wheels: ``qwen2_vl.py`` ``_MAX_FRAMES_PER_VIDEO`` =
    16; ``vision.py`` ``get_vit_attn_backend(support_fa=True)`` takes FLASH_ATTN only when the
    separate ``flash-attn`` package is installed (``is_flash_attn_2_available``; vLLM does not
    depend on it), else XFORMERS on CUDA (the "Current `vllm-flash-attn` has a bug inside vision
    module" warning) — memprof assumes it is not installed. ``Qwen2_5_VisionAttention.forward``
    keeps, a patch: the residual and the normed input (replicated, a = 2), qkv (3H/tp, held as
    ``x`` to the end; with TP > 1 all-gathered to 3H by ``split_qkv``, alive until q, k, v are
    made contiguous beside it: 3H + 6H/tp), q, k, v made contiguous (3H/tp), and the rotary
    of q then k on an fp32 copy ``t.float()``: up to 0.8.x without FLASH_ATTN
    ``apply_rotary_emb_torch`` (the copy, ``x·cos``, ``rotate_half`` and ``·sin``
    alive together: 4 fp32 = 8H/tp, b = 14) with the angles, cos, sin and their head_dim
    repeats (7 fp32 [P, head_dim/2] tables); from vllm-project/vllm#17726 (merged 2025-05-06,
    first in 0.9.0, inferred; 0.9.2 / 0.10.1.1 read) vllm_flash_attn's kernel on CUDA (the copy,
    its fp32 output and the cast: 5H/tp, b = 11; 3 tables). The pixels are on the GPU twice
    through the whole forward: the model input's batch (``MultiModalKwargs.batch`` stacks one
    sequence's [P, C] into [1, P, C], ``_try_stack``; ``as_kwargs`` moves it, held by
    ``forward``'s kwargs) and ``_validate_and_reshape_mm_tensor``'s ``torch.concat(list(...))``
    of it (a copy, held by ``forward``'s ``image_input`` / ``video_input``) — 0.7.3, 0.8.0,
    0.8.3, 0.8.4, 0.9.2 and 0.10.1.1 alike; under V1 the copy lives only through
    ``get_multimodal_embeddings`` (``memprof/core/terms/encoder.py``). From 0.11.0 the tower's
    own ``attn_width`` (read at 0.11.0) applies."""
    from memprof.core.models.multimodal import EarlyTower

    return (
        Rule(name="qwen2_5_vl_early_tower", changes="vision encoder forward (profile run)",
             since="0.7.2", until="0.9.0",
             value=EarlyTower(max_frames=16, attn_width=(2, 14), gathered_width=6,
                              rotary_tables=7, pixel_copies=2,
                              backend="XFORMERS (flash-attn not installed)"),
             introduced_by="Qwen2.5-VL support (vLLM PR #12604)",
             removed_by="vllm-project/vllm#17726 (vllm_flash_attn's rotary on CUDA; first "
             "release 0.9.0, inferred from its merge date)",
             source="0.7.3 / 0.8.0 / 0.8.3 / 0.8.4 models/qwen2_5_vl.py "
             "Qwen2_5_VisionAttention.forward, qwen2_vl.py apply_rotary_pos_emb_vision / "
             "apply_rotary_emb_torch, _MAX_FRAMES_PER_VIDEO = 16, "
             "_validate_and_reshape_mm_tensor (torch.concat); models/vision.py "
             "get_vit_attn_backend; multimodal/inputs.py MultiModalKwargs._try_stack",
             applies_to="multimodal"),
        Rule(name="qwen2_5_vl_early_tower", changes="vision encoder forward (profile run)",
             since="0.9.0", until="0.11.0",
             value=EarlyTower(max_frames=16, attn_width=(2, 11), gathered_width=6,
                              rotary_tables=3, pixel_copies=2,
                              backend="XFORMERS (flash-attn not installed)"),
             introduced_by="vllm-project/vllm#17726 (first release 0.9.0, inferred)",
             removed_by="0.11.0: the tower's attn_width, read there, applies",
             source="0.9.2 / 0.10.1.1 models/qwen2_vl.py apply_rotary_pos_emb_vision "
             "(vllm.vllm_flash_attn.layers.rotary.apply_rotary_emb when current_platform.is_cuda"
             "()), _MAX_FRAMES_PER_VIDEO = 16; qwen2_5_vl.py Qwen2_5_VisionAttention.forward, "
             "_validate_and_reshape_mm_tensor (torch.concat)",
             applies_to="multimodal"),
    )


QWEN2_5_VL_RELEASES = (Rule(
    name="qwen2_5_vl_model", changes="the model", since="0.7.2", until=None,
    introduced_by="Qwen2.5-VL support (vLLM PR #12604)",
    source="vLLM 0.7.2 model_executor/models/qwen2_5_vl.py", applies_to="multimodal"),)
QWEN3_VL_RELEASES = (Rule(
    name="qwen3_vl_model", changes="the model", since="0.11.0", until=None,
    introduced_by="Qwen3-VL support (first in 0.11.0; 0.10.2 has no qwen3_vl.py)",
    source="vLLM 0.11.0 model_executor/models/qwen3_vl.py, qwen3_vl_moe.py",
    applies_to="multimodal"),)


# How SGLang builds Qwen2.5-VL's tower (python/sglang/srt/models/qwen2_5_vl.py, read in the
# PyPI wheels): Qwen2_5_VisionTransformer — a Conv3d patch embedding without bias, blocks of
# two RMSNorms, VisionAttention (qkv column-parallel with bias: ColumnParallelLinear up to
# 0.4.9.post5, QKVParallelLinear from 0.4.10; proj RowParallelLinear with bias) and an MLP
# (gate and up ColumnParallelLinear, from 0.5.2 one MergedColumnParallelLinear; down
# RowParallelLinear; biased), the patch merger (RMSNorm ln_q, ColumnParallelLinear and
# RowParallelLinear, biased): the tensors and TP split of vLLM's tower. From 0.5.3 the MLP
# width is ``((intermediate_size + 7) // 8) * 8``. The architecture is in
# sglang/srt/configs/model_config.py multimodal_model_archs and not in mm_disabled_models
# (multimodal by default) at every release read.
QWEN2_5_VL_SGLANG = (
    Rule(name="sglang_vision_tower (qwen2_5_vl)", changes="weights: vision tower",
         since=None, until="0.4.4", value=EngineTower(build="absent"), engine="sglang",
         applies_to="qwen2_5_vl", introduced_by="before 0.4.3 (the oldest release modelled)",
         removed_by="read in the sglang 0.4.4 wheel (first with models/qwen2_5_vl.py)",
         source="sglang 0.4.3 wheel: no models/qwen2_5_vl.py, no Qwen2_5_VL in "
         "sglang/srt/configs/model_config.py"),
    Rule(name="sglang_vision_tower (qwen2_5_vl)", changes="weights: vision tower",
         since="0.4.4", until="0.5.3", value=EngineTower(build="sharded"), engine="sglang",
         applies_to="qwen2_5_vl", introduced_by="read in the sglang 0.4.4 wheel",
         removed_by="read in the sglang 0.5.3 wheel (MLP width rounded up to 8)",
         source="sglang 0.4.4 / 0.4.5 / 0.4.10 / 0.5.2 models/qwen2_5_vl.py "
         "Qwen2_5_VisionTransformer: mlp_hidden_size = vision_config.intermediate_size"),
    *around_snapshots(Rule(
         name="sglang_vision_tower (qwen2_5_vl)", changes="weights: vision tower",
         since="0.5.3", until=None,
         value=EngineTower(build="sharded", mlp_multiple=8), engine="sglang",
         applies_to="qwen2_5_vl", introduced_by="read in the sglang 0.5.3 wheel",
         source="sglang 0.5.3 / 0.5.4 / 0.5.5 / 0.5.9 models/qwen2_5_vl.py "
         "Qwen2_5_VisionTransformer: mlp_hidden_size = ((vision_config.intermediate_size + 7) "
         "// 8) * 8")),
)

# How SGLang builds Qwen3-VL's tower (python/sglang/srt/models/qwen3_vl.py, which
# qwen3_vl_moe.py's wrapper inherits): 0.5.3 Qwen3_VisionTransformer, 0.5.4 - 0.5.6
# Qwen3VLMoeVisionModel — a Conv3d patch embedding with bias, pos_embed an nn.Embedding of
# num_position_embeddings rows (whole), LayerNorm blocks with VisionAttention (qkv
# column-parallel, proj row-parallel, biased) and linear_fc1 / linear_fc2 (column / row,
# biased, intermediate_size wide), the merger (LayerNorm over hidden_size) and one post-shuffle
# merger per deepstack_visual_indexes entry (LayerNorm over hidden·merge²), each
# ColumnParallelLinear + RowParallelLinear: the tensors and TP split of vLLM's tower. No
# deepstack buffer is allocated with the model. Both architectures are in
# multimodal_model_archs and not in mm_disabled_models. 0.5.7 adds a precomputed rotary cache to
# the tower (RotaryPosMixin) and 0.5.8 rebuilds pos_embed: not read, refused.
def _qwen3_vl_sglang(family: str) -> tuple[Rule, ...]:
    """The ``sglang_tower`` rows of ``family`` (Qwen3-VL's or Qwen3-VL-MoE's: one tower)."""
    return (
        Rule(name=f"sglang_vision_tower ({family})", changes="weights: vision tower",
             since=None, until="0.5.3", value=EngineTower(build="absent"), engine="sglang",
             applies_to=family, introduced_by="before 0.4.3 (the oldest release modelled)",
             removed_by="read in the sglang 0.5.3 wheel (first with models/qwen3_vl.py)",
             source="sglang 0.5.2 wheel: no models/qwen3_vl.py"),
        Rule(name=f"sglang_vision_tower ({family})", changes="weights: vision tower",
             since="0.5.3", until="0.5.7", value=EngineTower(build="sharded"), engine="sglang",
             applies_to=family, introduced_by="read in the sglang 0.5.3 wheel",
             removed_by="0.5.7 (RotaryPosMixin) and 0.5.8 (pos_embed) are not read for it",
             source="sglang 0.5.3 / 0.5.4 / 0.5.5 / 0.5.6 models/qwen3_vl.py "
             "Qwen3_VisionTransformer / Qwen3VLMoeVisionModel, Qwen3VLForConditionalGeneration; "
             "qwen3_vl_moe.py Qwen3VLMoeForConditionalGeneration(Qwen3VLForConditionalGeneration)"),
    )


def _qwen2_5_vl_tower(cfg: dict[str, Any], text_hidden: int) -> VisionTower:
    from memprof.core.models.multimodal import VisionTower, merger_parts, vision_fields

    vc = vision_fields(cfg)
    h, merge = vision_int(vc, "hidden_size"), vision_int(vc, "spatial_merge_size")
    return VisionTower(
        depth=vision_int(vc, "depth"), hidden=h,
        intermediate=vision_int(vc, "intermediate_size"), heads=vision_int(vc, "num_heads"),
        in_channels=vision_int(vc, "in_channels", "in_chans"),
        patch=vision_int(vc, "patch_size"), temporal_patch=vision_int(vc, "temporal_patch_size"),
        merge=merge, out_hidden=vision_int(vc, "out_hidden_size"),
        gated=True, norm_bias=False, patch_bias=False, text_hidden=text_hidden,
        head=merger_parts("visual.", h, merge, vision_int(vc, "out_hidden_size"), 0),
        processor=processors()[0], releases=QWEN2_5_VL_RELEASES, early_profile=qwen2_5_vl_early(),
        source="vLLM 0.11.0 qwen2_5_vl.py")


def _qwen3_vl_tower(cfg: dict[str, Any], text_hidden: int) -> VisionTower:
    return deepstack_tower(cfg, text_hidden, QWEN3_VL_RELEASES, "vLLM 0.11.0 qwen3_vl.py")


def deepstack_tower(cfg: dict[str, Any], text_hidden: int, releases: tuple[Rule, ...],
                    source: str) -> VisionTower:
    """``Qwen3_VisionTransformer`` (deepstack merger levels) from ``vision_config``, with the
    releases and source of the family that builds it (Qwen3-VL here; Qwen3.5 builds the same
    tower)."""
    from memprof.core.models.multimodal import VisionTower, merger_parts, vision_fields

    vc = vision_fields(cfg)
    h, merge = vision_int(vc, "hidden_size"), vision_int(vc, "spatial_merge_size")
    levels = len(vc.get("deepstack_visual_indexes") or [])
    return VisionTower(
        depth=vision_int(vc, "depth"), hidden=h,
        intermediate=vision_int(vc, "intermediate_size"), heads=vision_int(vc, "num_heads"),
        in_channels=vision_int(vc, "in_channels", "in_chans"),
        patch=vision_int(vc, "patch_size"), temporal_patch=vision_int(vc, "temporal_patch_size"),
        merge=merge, out_hidden=vision_int(vc, "out_hidden_size"),
        gated=False, norm_bias=True, patch_bias=True,
        position_embeddings=vision_int(vc, "num_position_embeddings"),
        # Qwen3_VisionTransformer.forward keeps the interpolated pos_embeds [P, H] referenced
        # through the blocks (0.11.0 qwen3_vl.py: the local pos_embeds; 0.19.0 / 0.33.0:
        # encoder_metadata["pos_embeds"])
        kept_pos_embeds=True,
        deepstack_levels=levels, text_hidden=text_hidden,
        head=merger_parts("visual.", h, merge, vision_int(vc, "out_hidden_size"), levels),
        processor=processors()[1], releases=releases, source=source)


def _qwen2_5_vl_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    """The language model: Qwen2 layers (q/k/v biases) from the flat config."""
    return qwen.QWEN2.build(c, hidden, n_layers)


def _qwen3_vl_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    """The language model: Qwen3 layers (q/k norms) from ``text_config``."""
    return qwen.QWEN3.build(c, hidden, n_layers)


def _qwen3_vl_moe_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    """The language model: Qwen3-MoE layers from ``text_config``."""
    return qwen_moe.QWEN3_MOE.build(c, hidden, n_layers)


# vLLM's LoRA support of Qwen2_5_VLForConditionalGeneration (SupportsLoRA in every release read):
# LoRA on its language model, Qwen2ForCausalLM, alone: q/k/v and gate/up packed, no embedding
# modules (0.7.3 ``embedding_modules = {}``, then the SupportsLoRA default; Qwen2ForCausalLM names
# none either), no extra vocabulary; the vision tower and merger are filtered out (0.7.3 / 0.8.5
# lora/models.py ``_filter_unsupported_mm_module``: get_mm_mapping's connector "visual."; 0.33.0
# lora/model_manager.py: tower LoRA only under ``enable_tower_connector_lora``, default False)
QWEN2_5_VL_LORA: tuple[Rule, ...] = (
    Rule(name="qwen2_5_vl_lora", changes="LoRA: modules", since="0.7.3", until=None,
         value=LoraSupport(extra_vocab=False, embeddings=False),
         introduced_by="read first in 0.7.3 (0.7.2 not read)",
         source="0.7.3 / 0.8.5 / 0.10.2 / 0.11.0 / 0.14.1 / 0.20.0 / 0.28.0 / 0.33.0 "
         "model_executor/models/qwen2_5_vl.py (SupportsLoRA, packed_modules_mapping, "
         "get_mm_mapping: tower 'visual.', the module's own name, language model "
         "Qwen2ForCausalLM); 0.7.3 - 0.12.0 lora/models.py _filter_unsupported_mm_module, "
         "0.14.1 - 0.33.0 lora/model_manager.py _get_punica_wrapper", applies_to="qwen2_5_vl"),
)

# vLLM's LoRA support of Qwen3VLForConditionalGeneration (SupportsLoRA from its first release,
# 0.11.0) and its MoE subclass. 0.11.0's get_mm_mapping names the tower "model.visual." and the
# connector "model.visual.merger", which no module name starts with (the tower is
# ``self.visual``), so lora/models.py ``_filter_unsupported_mm_module`` keeps the tower's linears
# and vLLM wraps them: refused. From 0.11.1 the mapping says "visual." and LoRA sits on the
# language model alone, Qwen3LLMForCausalLM (a Qwen3ForCausalLM): as the qwen3 rows, no embedding
# modules before 0.16.0; then embed_tokens / lm_head, with a tied lm_head that is embed_tokens
# itself wrapped again up to 0.27.1 (``self.lm_head = self.model.embed_tokens``; 0.28.0
# ``tie_weights``). The MoE's experts carry LoRA from 0.11.1 (FusedMoEWithLoRA): refused.
_QWEN3_VL_TOWER = ("vision tower linears (get_mm_mapping's 'model.visual.' misses the module "
                   "names 'visual.', so the LoRA manager keeps them)")
_QWEN3_VL_READ = ("0.11.0 / 0.11.1 / 0.12.0 / 0.14.1 / 0.15.0 / 0.16.0 / 0.20.0 / 0.25.0 / "
                  "0.27.1 / 0.28.0 / 0.33.0 model_executor/models/qwen3_vl.py "
                  "(get_mm_mapping, Qwen3LLMForCausalLM), qwen3.py (embedding_modules); "
                  "0.11.0 lora/models.py _filter_unsupported_mm_module")
_QWEN3_VL_FIRST = "Qwen3-VL support with SupportsLoRA (first released in 0.11.0)"
_TOWER_FIXED = "get_mm_mapping names the tower 'visual.' (first released in 0.11.1)"
QWEN3_VL_LORA: tuple[Rule, ...] = (
    Rule(name="qwen3_vl_lora", changes="LoRA: modules", since="0.11.0", until="0.11.1",
         value=LoraSupport(extra_vocab=False, embeddings=False, unmodelled=_QWEN3_VL_TOWER),
         introduced_by=_QWEN3_VL_FIRST, removed_by=_TOWER_FIXED, source=_QWEN3_VL_READ,
         applies_to="qwen3_vl"),
    Rule(name="qwen3_vl_lora", changes="LoRA: modules", since="0.11.1", until="0.16.0",
         value=LoraSupport(extra_vocab=False, embeddings=False), introduced_by=_TOWER_FIXED,
         removed_by="embedding_modules embed_tokens / lm_head (first released in 0.16.0)",
         source=_QWEN3_VL_READ, applies_to="qwen3_vl"),
    Rule(name="qwen3_vl_lora", changes="LoRA: modules", since="0.16.0", until="0.28.0",
         value=LoraSupport(extra_vocab=False, embeddings=True, tied_head_embedding=True),
         introduced_by="embedding_modules embed_tokens / lm_head (first released in 0.16.0)",
         removed_by="tied lm_head a ParallelLMHead via tie_weights (first released in 0.28.0)",
         source=_QWEN3_VL_READ, applies_to="qwen3_vl"),
    Rule(name="qwen3_vl_lora", changes="LoRA: modules", since="0.28.0", until=None,
         value=LoraSupport(extra_vocab=False, embeddings=True),
         introduced_by="tied lm_head a ParallelLMHead via tie_weights (first released in "
         "0.28.0)", source=_QWEN3_VL_READ, applies_to="qwen3_vl"),
)
QWEN3_VL_MOE_LORA: tuple[Rule, ...] = (
    Rule(name="qwen3_vl_moe_lora", changes="LoRA: modules", since="0.11.0", until="0.11.1",
         value=LoraSupport(extra_vocab=False, embeddings=False, unmodelled=_QWEN3_VL_TOWER),
         introduced_by=_QWEN3_VL_FIRST, removed_by="FusedMoEWithLoRA (first released in 0.11.1)",
         source=_QWEN3_VL_READ + "; qwen3_vl_moe.py", applies_to="qwen3_vl_moe"),
    Rule(name="qwen3_vl_moe_lora", changes="LoRA: modules", since="0.11.1", until=None,
         value=LoraSupport(extra_vocab=False, embeddings=False, experts=True),
         introduced_by="FusedMoEWithLoRA (first released in 0.11.1)",
         source=_QWEN3_VL_READ + "; qwen3_vl_moe.py; 0.11.1 lora/layers/fused_moe.py",
         applies_to="qwen3_vl_moe"),
)

QWEN2_5_VL = Family(
    name="qwen2_5_vl", model_types=("qwen2_5_vl",),
    architectures=("Qwen2_5_VLForConditionalGeneration",), build=_qwen2_5_vl_layers,
    attention="gqa", vision=_qwen2_5_vl_tower, config_view=lift_text_config,
    release_rules=lambda: multimodal_rules(), sglang_tower=QWEN2_5_VL_SGLANG,
    lora=QWEN2_5_VL_LORA,
    # its language model is Qwen2ForCausalLM (0.7.3 qwen2_5_vl.py init_vllm_registered_model)
    v0_mlp_gate_up=v0_gate_up_rows("qwen2_5_vl", "qwen2.py", "Qwen2MLP",
                                   (("0.7.3", None, "kept", "0.7.3"),)),
    source="vLLM model_executor/models/qwen2_5_vl.py (0.11.0)")
QWEN3_VL = Family(
    name="qwen3_vl", model_types=("qwen3_vl",),
    architectures=("Qwen3VLForConditionalGeneration",), build=_qwen3_vl_layers,
    attention="gqa", vision=_qwen3_vl_tower, config_view=lift_text_config,
    sglang_tower=_qwen3_vl_sglang("qwen3_vl"),
    lora=QWEN3_VL_LORA,
    source="vLLM model_executor/models/qwen3_vl.py (0.11.0)")
QWEN3_VL_MOE = Family(
    name="qwen3_vl_moe", model_types=("qwen3_vl_moe",),
    architectures=("Qwen3VLMoeForConditionalGeneration",), build=_qwen3_vl_moe_layers,
    attention="gqa", moe=True, vision=_qwen3_vl_tower, config_view=lift_text_config,
    sglang_tower=_qwen3_vl_sglang("qwen3_vl_moe"),
    lora=QWEN3_VL_MOE_LORA,
    source="vLLM model_executor/models/qwen3_vl_moe.py (0.11.0)")

def multimodal_rules() -> tuple[tuple[Rule, ...], ...]:
    """This module's release rows (``memprof versions`` lists them:
    memprof/core/version_diff.py)."""
    qwen2_5, qwen3 = processors()
    return QWEN2_5_VL_RELEASES, QWEN3_VL_RELEASES, qwen2_5.video, qwen3.video, qwen2_5_vl_early()
