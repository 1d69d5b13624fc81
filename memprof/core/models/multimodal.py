"""The multimodal mechanism, one for every vision-language family: a model's vision tower (what
vLLM builds beside the language model), the tokens an image (or a video) becomes, and the encoder
budget vLLM V1 profiles with.

A family opts in through its row's ``vision`` reader (``families/row.py``): the reader turns the
config's ``vision_config`` into a ``VisionTower`` — its blocks, embeddings and head (merger,
adapter, projector), how many patches one output token pools (``merge``), the tiles of a fixed-
tile tower (Gemma 3's SigLIP, Llama 4) or the processor limits of a dynamic-resolution one
(Qwen2.5-VL, Qwen3-VL, kept on the family's row with their source), and the encoder forward's
live widths — and its ``config_view`` reads the language model from ``text_config``;
``load.py`` keeps the tower on ``ModelSpec.vision``. Everything else is generic and reads the
tower:

- the tower's weights per rank: ``memprof/core/weights/vision.py``;
- the profile run's encoder terms (encoder cache, encoder forward, deepstack buffers):
  ``memprof/core/terms/encoder.py``;
- the ``--limit-mm-per-prompt`` / ``--mm-processor-kwargs`` settings: ``mm_limits`` and
  ``processor_limits`` here, checked by ``check_multimodal`` before any work is done.

The token arithmetic follows vLLM (read in the 0.11.0 wheel, and where it changed in the 0.11.1,
0.12.0, 0.13.0, 0.14.0, 0.14.1, 0.15.0, 0.16.0 and 0.33.0 wheels: ``ENCODER_PROFILE``, the
families' ``VideoRule`` rows):
``vllm/model_executor/models/qwen2_vl.py`` ``Qwen2VLProcessingInfo._get_vision_info`` /
``get_max_image_tokens`` / ``get_max_video_tokens`` (and the ``Qwen3VLProcessingInfo`` overrides),
``gemma3_mm.py`` ``Gemma3ProcessingInfo.get_num_image_tokens``, ``mllama4.py``
``Mllama4ProcessingInfo.get_patch_per_chunk`` / ``get_max_num_tiles``,
``vllm/multimodal/registry.py`` ``get_max_tokens_per_item_by_nonzero_modality`` (one item of each
modality whose limit is above 0, ``seq_len = max_model_len``; the whole placeholder up to 0.12.0,
its embeddings from 0.13.0), ``vllm/v1/core/encoder_cache_manager.py``
``compute_mm_encoder_budget`` and ``vllm/v1/worker/utils.py`` ``MultiModalBudget.get_max_items``;
``vllm/config/multimodal.py`` ``get_limit_per_prompt`` (999 items per modality by default under
V1).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from memprof.base.errors import BadInput, ConfigError
from memprof.core.versions import Rule, value_at

ENCODER_TP_MODES = ("weights", "data")  # vllm/config/multimodal.py MMEncoderTPMode (0.10.2+)
ENCODER_TP_MODE_SINCE = "0.10.2"  # first release with --mm-encoder-tp-mode (0.10.1 has none)
# first release with --language-model-only (0.16.0 engine/arg_utils.py has none)
LANGUAGE_MODEL_ONLY_SINCE = "0.17.0"
DEFAULT_LIMIT = 999  # vllm/config/multimodal.py get_limit_per_prompt under V1 (v0.11.0)
# under V0: one item of each modality (0.7.3 multimodal/registry.py init_mm_limits_per_prompt
# config_limits_per_plugin.get(key, 1); 0.8.4 / 0.9.2 config.py, 0.10.1.1 config/__init__.py
# get_limit_per_prompt: 999 if envs.VLLM_USE_V1 else 1)
V0_DEFAULT_LIMIT = 1
MAX_LIMIT = 1 << 20  # items per prompt: far above any real limit, bounds the arithmetic


@dataclass(frozen=True, slots=True, kw_only=True)
class VideoRule:
    """How vLLM sizes a model's largest video at a release (its processing info's
    ``get_max_video_tokens``): ``rule`` ``"frames"`` resizes every frame as an image and counts
    the most frames whose tokens fit ``max_model_len`` (from ``start_frames``, at most
    ``max_frames``); ``"clip"`` does the same with the video processor bounding the whole clip's
    pixels; ``"two_frames"`` takes two frames of the largest image within the video processor's
    ``longest_edge // temporal_patch``. ``token_scale``: placeholder tokens budgeted per video
    token."""

    rule: str
    start_frames: int = 1
    max_frames: int = 1
    token_scale: float = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Processor:
    """The checkpoint processor's limits that set the largest image and video (vLLM asks the HF
    processor; memprof keeps its defaults on the family row, with the file they come from).

    ``image_min_pixels`` / ``image_max_pixels``: the image processor's ``min_pixels`` /
    ``max_pixels`` (``size["shortest_edge"]`` / ``size["longest_edge"]``);
    ``video_min_pixels`` / ``video_max_pixels``: the video processor's (0: it resizes frames
    as images); ``video``: ``VideoRule`` rows by vLLM release (a release with no row: its
    video sizing is not modelled)."""

    image_min_pixels: int
    image_max_pixels: int
    video_min_pixels: int = 0
    video_max_pixels: int = 0
    video: tuple[Rule, ...] = ()
    source: str = ""


# When vLLM leaves the tower out (the default of ``VisionTower.skipped``: the wrappers that test
# the limits in their own ``__init__``; memprof/core/weights/vision.py reads it). ``value``:
# "no modality" (every modality limited to 0), "later stages" (PP stages after the first, Model
# Runner V2: ``_mark_tower_model``).
TOWER_SKIPPED: tuple[Rule, ...] = (
    Rule(name="mm_tower_skipped", changes="weights: vision tower", since="0.10.1", until="0.33.0",
         value=("no modality",),
         introduced_by="first seen in 0.10.1 (0.9.2 / 0.10.0 build the tower whatever the "
         "limits)", removed_by="0.33.0 adds the PP case",
         source="0.10.1 / 0.10.2 / 0.11.0 models/qwen2_5_vl.py, 0.11.0 qwen3_vl.py __init__: "
         "self.visual = None unless get_limit_per_prompt('image') or ('video'); 0.10.1 / "
         "0.11.0 / 0.13.0 mllama4.py __init__: self.vision_model = None unless "
         "get_limit_per_prompt('image') (0.10.0 builds it always)",
         applies_to="multimodal"),
    Rule(name="mm_tower_skipped", changes="weights: vision tower", since="0.33.0", until=None,
         value=("no modality", "later stages"),
         introduced_by="first seen in 0.33.0 (0.29.0 - 0.32.0 build it on every PP stage)",
         source="0.33.0 models/interfaces.py SupportsMultiModal._mark_tower_model "
         "(StageMissingLayer when every limit is 0, or under Model Runner V2 — the default "
         "(memprof/core/kvcache.py SWA_IN_FLIGHT_BATCHES) — on a stage after the first)",
         applies_to="multimodal"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HeadPart:
    """One tensor after the encoder blocks (a patch merger, a pixel-shuffle adapter, a
    projector): a linear ``out × inn`` sharded ``shard`` (``data_shard`` under
    ``--mm-encoder-tp-mode data``), or, with ``inn`` 0, a norm of ``out`` (the tower's norm kind
    with ``norm_bias``, else one vector)."""

    module: str
    out: int
    inn: int = 0
    shard: str = "rep"
    data_shard: str = "rep"
    bias: bool = False
    norm: bool = False
    group: str = "vision tower"


@dataclass(frozen=True, slots=True, kw_only=True)
class TowerNames:
    """Module names of the tower's tensors as vLLM names them (prefix, a block's prefix with
    ``{i}`` for its index, and the block's tensors)."""

    prefix: str = "visual."
    patch: str = "patch_embed.proj"
    position: str = "pos_embed"
    block: str = "blocks.{i}."
    norm1: str = "norm1"
    norm2: str = "norm2"
    qkv: str = "attn.qkv"
    proj: str = "attn.proj"
    up: str = ""  # "": mlp.gate_up_proj when gated, else mlp.linear_fc1
    down: str = ""  # "": mlp.down_proj when gated, else mlp.linear_fc2


@dataclass(frozen=True, slots=True, kw_only=True)
class VisionTower:
    """A ViT as vLLM builds it beside the language model, from ``vision_config``: what every
    vision-language family's row reader (``Family.vision``) returns, and all that the generic
    modules read (weights: ``memprof/core/weights/vision.py``; the profile run's encoder cache
    and forward: ``memprof/core/terms/encoder.py``).

    Weights. Every block: two norms (``norm_bias``: LayerNorm with a bias, else RMSNorm), a fused
    qkv linear (column-parallel, biased as ``qkv_bias``) and an output projection (row-parallel,
    ``proj_bias``), and an MLP: ``gated`` (gate_up column-parallel + down row-parallel) or not
    (fc1 + fc2), biased as ``mlp_bias``; the linears unquantised unless ``quantised`` (the
    checkpoint's quantisation, the MLP's only when both its sizes are multiples of
    ``mlp_quant_multiple``). Around the blocks: the patch embedding (``in_channels·temporal_patch
    ·patch²`` inputs per output, ``patch_bias``, sharded ``patch_shard``), a learnt position
    table of ``position_embeddings`` rows (padded to ``position_pad``, sharded
    ``position_shard``), a class embedding, ``outer_norms``; after them ``head``: the merger /
    adapter / projector tensors (``HeadPart``).

    Tokens. One encoder output token is ``merge × merge`` patches (a patch merger, a pixel
    shuffle or an average pool) of width ``out_hidden`` (with each deepstack level's
    concatenated: ``embed_width``). A tiled tower (``tiles`` > 0) cuts the largest image into
    ``tiles`` fixed tiles of ``tile_tokens`` output tokens (plus a class token a tile when
    ``class_embedding``) and its placeholder holds ``placeholder_extra`` tokens more than its
    embeddings; otherwise the tokens follow the image size the ``processor`` allows (dynamic
    resolution).

    Forward (the profile run's encoder pass, per patch, TP-local widths): attention keeps
    ``attn_width[0]·H + attn_width[1]·H/tp`` values live, plus the all-gathered qkv (``3H``)
    with TP > 1 when ``gather_qkv``; the MLP ``2H + g·I/tp`` (g = 3 gated, 2 plain); with
    ``kept_pos_embeds`` the interpolated position embeddings (``H``) stay live through every
    block. Before 0.11.0 the family's ``early_profile`` rows (``EarlyTower``) give the release's
    widths instead."""

    depth: int
    hidden: int
    intermediate: int
    heads: int
    in_channels: int
    patch: int
    temporal_patch: int = 1
    merge: int
    out_hidden: int
    gated: bool
    norm_bias: bool
    proj_bias: bool = True
    mlp_bias: bool = True
    qkv_bias: bool = True
    patch_bias: bool = False
    patch_shard: str = "rep"
    quantised: bool = False
    mlp_quant_multiple: int = 0
    position_embeddings: int = 0
    position_pad: int = 1
    position_shard: str = "rep"
    class_embedding: bool = False
    outer_norms: tuple[str, ...] = ()
    head: tuple[HeadPart, ...] = ()
    names: TowerNames = TowerNames()
    deepstack_levels: int = 0  # extra post-shuffle mergers; their outputs ride with the main one
    text_hidden: int = 0  # the language model's hidden size (deepstack buffers)
    tiles: int = 0
    tile_tokens: int = 0
    placeholder_extra: int = 0
    attn_width: tuple[int, int] = (1, 10)
    gather_qkv: bool = True
    kept_pos_embeds: bool = False  # [P, H] position embeddings referenced through the blocks
    data_mode: bool = True  # the family honours --mm-encoder-tp-mode data
    # the tower is transformers' own model (plain nn.Linear): whole on every rank, as in data mode
    whole: bool = False
    processor: Processor | None = None
    modalities: tuple[str, ...] = ("image", "video")
    releases: tuple[Rule, ...] = ()  # the vLLM releases with the architecture (value True)
    skipped: tuple[Rule, ...] = TOWER_SKIPPED  # when vLLM leaves it out (weights/vision.py)
    # how vLLM before 0.11.0 (V0, V1 0.8.4 - 0.9.x) sizes and runs the tower in its profile run,
    # by release (``EarlyTower`` values; no row: not modelled for the family there)
    early_profile: tuple[Rule, ...] = ()
    source: str = ""

    @property
    def patch_inputs(self) -> int:
        """Values of one flattened patch (``in_channels·temporal_patch·patch²``)."""
        return self.in_channels * self.temporal_patch * self.patch * self.patch

    @property
    def embed_width(self) -> int:
        """Width of one encoder output token: ``out_hidden``, with each deepstack level's
        output concatenated (vLLM qwen3_vl.py ``_process_image_input``: ``torch.cat`` of the main
        and deepstack embeddings; ``visual_dim + multiscale_dim``)."""
        return self.out_hidden * (1 + self.deepstack_levels)


def merger_parts(prefix: str, hidden: int, merge: int, out_hidden: int,
                 levels: int) -> tuple[HeadPart, ...]:
    """The Qwen-VL patch merger and ``levels`` deepstack mergers: a norm over ``hidden``
    (``hidden·merge²`` for a post-shuffle deepstack merger), a column-parallel
    ``hidden·merge² → hidden·merge²`` and a row-parallel ``→ out_hidden`` linear, both biased
    (vLLM 0.11.0 qwen2_5_vl.py ``Qwen2_5_VisionPatchMerger``, qwen3_vl.py
    ``Qwen3_VisionPatchMerger``)."""
    m2 = merge * merge
    out: list[HeadPart] = []
    for k in range(1 + levels):
        mp = prefix + ("merger." if k == 0 else f"deepstack_merger_list.{k - 1}.")
        out += [HeadPart(module=mp + "norm", out=hidden if k == 0 else hidden * m2, norm=True),
                HeadPart(module=mp + "linear_fc1", out=hidden * m2, inn=hidden * m2,
                         shard="col", bias=True),
                HeadPart(module=mp + "linear_fc2", out=out_hidden, inn=hidden * m2,
                         shard="row", bias=True)]
    return tuple(out)


# --- reading vision_config ---------------------------------------------------------------------

_VISION_INT_FIELDS = ("depth", "hidden_size", "intermediate_size", "num_heads", "patch_size",
                      "temporal_patch_size", "spatial_merge_size", "out_hidden_size",
                      "in_channels", "in_chans", "num_position_embeddings", "window_size")


def vision_fields(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The config's ``vision_config`` with every integer field memprof reads checked (a missing
    ``vision_config`` or a wrong type is a ``ConfigError`` naming the field)."""
    vc = cfg.get("vision_config")
    if not isinstance(vc, dict):
        raise ConfigError("config.json of this multimodal model has no 'vision_config' object",
                          hint="pass the checkpoint's own config.json (it describes the vision "
                          "tower under 'vision_config')")
    for key in _VISION_INT_FIELDS:
        v = vc.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= 1 << 24:
            raise ConfigError(f"config.json field 'vision_config.{key}' must be a positive "
                              f"integer, got {str(v)[:40]!r}",
                              hint=f"fix 'vision_config.{key}' in the config.json")
    for key in ("fullatt_block_indexes", "deepstack_visual_indexes"):
        v = vc.get(key)
        if v is not None and (not isinstance(v, list) or not all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v)):
            raise ConfigError(f"config.json field 'vision_config.{key}' must be a list of "
                              "layer indices", hint=f"fix 'vision_config.{key}' in the config.json")
    return vc


# --- the largest image and video (the processing info of vLLM's Qwen2-VL family) ------------------


def smart_resize(height: int, width: int, factor: int, min_pixels: int,
                 max_pixels: int) -> tuple[int, int]:
    """transformers ``qwen2_vl/image_processing_qwen2_vl.py`` ``smart_resize``: both sides
    rounded to ``factor``, then scaled to keep the area within [min_pixels, max_pixels]."""
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def clip_resize(frames: int, height: int, width: int, factor: int, temporal: int,
                min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """transformers ``qwen3_vl/video_processing_qwen3_vl.py`` ``smart_resize``: the clip's
    pixels (frames rounded up to ``temporal``) kept within [min_pixels, max_pixels]."""
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    t_bar = math.ceil(frames / temporal) * temporal
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt(frames * height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


@dataclass(frozen=True, slots=True)
class ProfileEra:
    """What vLLM V1's encoder profile does at a release: whether ``profile_run`` pads each
    item's output to the encoder budget before caching it, and whether
    ``get_image_size_with_most_features`` factorises ``max_pixels // (patch·merge)²`` merged
    patches (else it resizes a 9999999² image, a square), and whether the budget counts an
    item's whole placeholder (``contiguous``: its embeddings and the text tokens between them,
    ``get_mm_max_contiguous_tokens``) or its embeddings only (``get_num_embeds``)."""

    pad_to_budget: bool
    factorized_image: bool
    contiguous: bool = False


ENCODER_PROFILE: tuple[Rule, ...] = (
    Rule(name="mm_encoder_profile", changes="encoder cache (profile run)", since="0.11.0",
         until="0.13.0",
         value=ProfileEra(pad_to_budget=True, factorized_image=False, contiguous=True),
         introduced_by="first seen in 0.11.0 (0.10.2 caches the outputs unpadded; the releases "
         "before 0.11.0 are not modelled)",
         removed_by="first seen in 0.13.0: outputs cached unpadded, the largest image by "
         "factorising max_pixels, the budget counting an item's embeddings only",
         source="0.11.0 / 0.11.1 / 0.12.0 wheels: v1/worker/gpu_model_runner.py profile_run "
         "(output.new_zeros((encoder_budget, …))), models/qwen2_vl.py "
         "get_image_size_with_most_features (_get_vision_info of a 9999999² image), "
         "multimodal/registry.py get_max_tokens_per_item_by_modality "
         "(profiler.get_mm_max_contiguous_tokens: the whole placeholder)",
         applies_to="multimodal"),
    Rule(name="mm_encoder_profile", changes="encoder cache (profile run)", since="0.13.0",
         until=None, value=ProfileEra(pad_to_budget=False, factorized_image=True),
         introduced_by="first seen in 0.13.0",
         source="0.13.0 / 0.15.0 / 0.33.0 wheels: profile_run (encoder_cache[f'tmp_{i}'] = "
         "output), qwen2_vl.py get_image_size_with_most_features (closest_factor_pair, aspect "
         "≤ 200), 0.13.0 multimodal/registry.py profiler.get_mm_max_tokens / 0.33.0 "
         "multimodal/encoder_budget.py get_mm_max_toks_per_item (get_num_embeds: embeddings "
         "only)", applies_to="multimodal"),
)
"""vLLM V1's encoder profile by release; before 0.11.0 no row: the encoder term says that
release's encoder profile is not modelled (0.8.0 - 0.10.2 size the largest video against the
images' tokens and 16 frames; 0.8.4 - 0.9.x are ``V1_EARLY_ENCODER_PROFILE`` below). V0
profiles inside its dummy sequences: ``V0_MM_DUMMY`` and ``v0_dummy`` below, with the family's
``early_profile`` rows."""

_HUGE = 9_999_999  # vLLM asks for the size of a 9999999 × 9999999 image (get_image_size_…)
MAX_ASPECT = 200  # the processors refuse a longer side over 200 × the shorter


def _closest_factor_pair(n: int) -> tuple[int, int]:
    for d in range(math.isqrt(n), 0, -1):
        if n % d == 0:
            return d, n // d
    return 1, n


def _image_size(t: VisionTower, max_pixels: int, min_pixels: int,
                factorized: bool) -> tuple[int, int]:
    """``get_image_size_with_most_features``: (height, width) of the largest image within
    ``max_pixels`` — the most merged patches ``max_pixels // unit²`` split into the closest
    factor pair of aspect at most 200 (``factorized``), else a 9999999² image resized."""
    unit = t.patch * t.merge
    if not factorized:
        return smart_resize(_HUGE, _HUGE, unit, min_pixels, max_pixels)
    hf, wf = 1, max(1, max_pixels // (unit * unit))
    for n in range(wf, 0, -1):
        hf, wf = _closest_factor_pair(n)
        if wf / hf <= MAX_ASPECT:
            break
    return unit * hf, unit * wf


def _vision_tokens(t: VisionTower, frames: int, h: int, w: int) -> int:
    """``_get_vision_info``: frames padded to ``temporal_patch``, patches merged ``merge²``."""
    padded = frames + frames % t.temporal_patch
    grid_t = max(padded // t.temporal_patch, 1)
    return grid_t * (h // t.patch) * (w // t.patch) // (t.merge * t.merge)


def _video_tokens(t: VisionTower, p: Processor, rule: VideoRule, frames: int,
                  size: tuple[int, int]) -> int:
    h, w = size
    if rule.rule in ("clip", "two_frames"):  # the video processor resizes the clip
        h, w = clip_resize(frames, h, w, t.patch * t.merge, t.temporal_patch,
                           p.video_min_pixels, p.video_max_pixels)
    return _vision_tokens(t, frames, h, w)


@dataclass(frozen=True, slots=True, kw_only=True)
class Item:
    """The largest item of one modality: the encoder's input tokens (after the merger) and the
    placeholder tokens vLLM budgets for it."""

    modality: str
    encoder_tokens: int  # tokens the vision tower outputs for the item (patches / merge²)
    budget_tokens: int  # what the encoder budget counts for it
    frames: int = 1


def video_rule(p: Processor, version: str | None) -> VideoRule | None:
    """The processor's video rule at ``version`` (None: the release lacks the model)."""
    found = value_at(p.video, version, None)
    return found if isinstance(found, VideoRule) else None


@lru_cache(maxsize=64)
def largest_item(t: VisionTower, p: Processor | None, modality: str, seq_len: int,
                 version: str | None = None) -> Item:
    """The largest item of ``modality`` at ``version`` (``get_mm_max_tokens_per_item``, one
    item of each modality): a tiled tower's image of ``tiles`` tiles (its placeholder's other
    tokens counted where the release's budget counts them); else an image of the most features
    within the processor's limits, a video by its ``VideoRule``."""
    era = value_at(ENCODER_PROFILE, version, ENCODER_PROFILE[-1].value)
    assert isinstance(era, ProfileEra)
    if t.tiles:
        n = t.tiles * t.tile_tokens
        return Item(modality="image", encoder_tokens=n,
                    budget_tokens=n + (t.placeholder_extra if era.contiguous else 0))
    if p is None:
        raise ConfigError("a vision tower without tiles needs its processor's limits",
                          hint="set VisionTower.processor in the family's vision reader")
    image = _image_size(t, p.image_max_pixels, p.image_min_pixels, era.factorized_image)
    if modality == "image":
        n = _vision_tokens(t, 1, *image)
        return Item(modality="image", encoder_tokens=n, budget_tokens=n)
    rule = video_rule(p, version)
    if rule is None:
        return Item(modality="video", encoder_tokens=0, budget_tokens=0, frames=0)
    if rule.rule == "two_frames":
        size = _image_size(t, p.video_max_pixels // t.temporal_patch, p.image_min_pixels,
                           era.factorized_image)
        n = _video_tokens(t, p, rule, 2, size)
        return Item(modality="video", encoder_tokens=n, budget_tokens=n, frames=2)
    frames = rule.start_frames
    while frames < rule.max_frames and _video_tokens(t, p, rule, frames + 1, image) <= seq_len:
        frames += 1
    frames = max(1, min(frames, rule.max_frames))
    n = _video_tokens(t, p, rule, frames, image)
    return Item(modality="video", encoder_tokens=n, budget_tokens=int(n * rule.token_scale),
                frames=frames)


# --- --limit-mm-per-prompt and --mm-processor-kwargs -------------------------------------------

LIMIT_HINT = """e.g. --limit-mm-per-prompt '{"image": 2, "video": 0}' (JSON, as vLLM reads it)"""


def mm_limits(text: str | None, modalities: tuple[str, ...],
              default: int = DEFAULT_LIMIT) -> dict[str, int]:
    """``--limit-mm-per-prompt`` read as vLLM reads it: a JSON object of modality → items per
    prompt (an item count, or an object with a ``count``; newer releases' ``width`` / ``height`` /
    ``num_frames`` there are refused, not modelled), or the older ``image=2,video=0``
    form; a modality left out keeps vLLM's default (``default``: 999 under V1,
    ``V0_DEFAULT_LIMIT`` under V0). A modality the model lacks, a negative or non-integer count
    is a ``BadInput``."""
    out = dict.fromkeys(modalities, default)
    if text is None:
        return out
    raw: object
    pairs: dict[str, int] = {}
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        try:
            raw = json.loads(stripped)
        except (ValueError, RecursionError):
            raise BadInput(f"--limit-mm-per-prompt is not JSON ({text[:40]!r})",
                           hint=LIMIT_HINT) from None
    else:
        raw = pairs
        for part in filter(None, (s.strip() for s in stripped.split(","))):
            key, eq, value = part.partition("=")
            if not eq:
                raise BadInput(f"--limit-mm-per-prompt {text[:40]!r} is neither JSON nor "
                               "MODALITY=COUNT pairs", hint=LIMIT_HINT)
            try:
                pairs[key.strip()] = int(value)
            except ValueError:
                raise BadInput(f"--limit-mm-per-prompt {key.strip()[:20]}={value[:20]!r} is not "
                               "an item count", hint=LIMIT_HINT) from None
    if not isinstance(raw, dict):
        raise BadInput("--limit-mm-per-prompt must be a JSON object of modality → count",
                       hint=LIMIT_HINT)
    for key, value in raw.items():
        if key not in modalities:
            raise BadInput(f"--limit-mm-per-prompt names {str(key)[:20]!r}, a modality this "
                           f"model does not take", hint="its modalities: " + ", ".join(modalities))
        if isinstance(value, dict) and set(value) - {"count"}:
            extra = sorted(set(value) - {"count"})[0]
            raise BadInput(f"--limit-mm-per-prompt {key}: {extra!r} (the dummy item's size) is "
                           "not modelled by memprof", hint=f'give the count only, e.g. {{"{key}": '
                           f'{{"count": {value.get("count", 1)}}}}}')
        count = value.get("count") if isinstance(value, dict) else value
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_LIMIT:
            raise BadInput(f"--limit-mm-per-prompt {key}: {str(value)[:30]} is not an item count "
                           f"in [0, {MAX_LIMIT:,}]", hint=LIMIT_HINT)
        out[key] = count
    return out


KWARGS_HINT = """e.g. --mm-processor-kwargs '{"max_pixels": 1003520}'"""
MODELLED_KWARGS = ("max_pixels", "min_pixels", "size")


def processor_limits(p: Processor, text: str | None) -> Processor:
    """``p`` with ``--mm-processor-kwargs`` applied (vLLM passes them to the HF processor, whose
    image processor then resizes within them): ``max_pixels`` / ``min_pixels``, or ``size`` with
    ``longest_edge`` / ``shortest_edge``. Other keys are refused (memprof does not model them)."""
    if text is None:
        return p
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        raise BadInput(f"--mm-processor-kwargs is not JSON ({text[:40]!r})",
                       hint=KWARGS_HINT) from None
    if not isinstance(raw, dict):
        raise BadInput("--mm-processor-kwargs must be a JSON object", hint=KWARGS_HINT)
    unknown = [k for k in raw if k not in MODELLED_KWARGS]
    if unknown:
        raise BadInput(f"--mm-processor-kwargs {str(unknown[0])[:30]!r} is not modelled by memprof",
                       hint="memprof reads " + ", ".join(MODELLED_KWARGS) + " (the image "
                       "size limits); drop the others for the estimate")
    size = raw.get("size")
    if size is not None and not isinstance(size, dict):
        raise BadInput("--mm-processor-kwargs size must be an object",
                       hint="""e.g. {"size": {"longest_edge": 1003520}}""")
    got: dict[str, int] = {}
    for name, edge, default in (("min_pixels", "shortest_edge", p.image_min_pixels),
                                ("max_pixels", "longest_edge", p.image_max_pixels)):
        v = raw.get(name, (size or {}).get(edge, default))
        if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= 1 << 40:
            raise BadInput(f"--mm-processor-kwargs {name} must be a positive pixel count, got "
                           f"{str(v)[:30]}", hint=KWARGS_HINT)
        got[name] = v
    low, high = got["min_pixels"], got["max_pixels"]
    if low > high:
        raise BadInput(f"--mm-processor-kwargs min_pixels {low:,} is above max_pixels {high:,}",
                       hint=KWARGS_HINT)
    from dataclasses import replace

    return replace(p, image_min_pixels=low, image_max_pixels=high)


# --- the encoder budget (vLLM V1 profile run) -------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class EncoderBudget:
    """What vLLM V1's profile run feeds the vision tower: ``items`` dummy items of ``item`` (the
    modality with the most tokens), and the encoder cache it fills (``cached_rows``: the
    outputs, each padded to the budget when shorter where the release does)."""

    item: Item
    items: int
    compute_budget: int
    cache_size: int
    pad_to_budget: bool = False  # the release pads each output to the budget (ProfileEra)

    @property
    def budget(self) -> int:
        """``MultiModalBudget.get_encoder_budget``: min(compute budget, cache size)."""
        return min(self.compute_budget, self.cache_size)

    @property
    def encoder_tokens(self) -> int:
        """Tokens the tower outputs in the profile run (all items)."""
        return self.items * self.item.encoder_tokens

    @property
    def cached_rows(self) -> int:
        """Rows of the encoder cache during the text dummy run: each item's output, padded to
        the budget when shorter where the release does (``profile_run``:
        ``output.new_zeros((encoder_budget, …))``, ``ENCODER_PROFILE``)."""
        per = max(self.item.encoder_tokens, self.budget) if self.pad_to_budget else (
            self.item.encoder_tokens)
        return self.items * per


def encoder_budget(t: VisionTower, *, limits: Mapping[str, int], max_model_len: int,
                   max_num_batched_tokens: int, max_num_seqs: int,
                   chunked_prefill: bool = True, version: str | None = None
                   ) -> EncoderBudget | None:
    """``compute_mm_encoder_budget`` and ``MultiModalBudget.get_max_items`` (the same from 0.11.0
    to 0.33.0 with the budget flags left at their defaults); None when every modality is
    limited to 0 (no encoder cache, no encoder profile)."""
    era = value_at(ENCODER_PROFILE, version, ENCODER_PROFILE[-1].value)
    assert isinstance(era, ProfileEra)
    items = [largest_item(t, t.processor, m, max_model_len, version) for m in t.modalities
             if limits.get(m, DEFAULT_LIMIT) > 0]
    items = [i for i in items if i.budget_tokens > 0]
    if not items:
        return None
    top = max(items, key=lambda i: i.budget_tokens)
    per_item = top.budget_tokens
    compute = max(max_num_batched_tokens, per_item)
    cache = max(max_num_batched_tokens, per_item)
    budget = min(compute, cache)
    per_prompt = max(1, min(limits.get(top.modality, DEFAULT_LIMIT), max_model_len // per_item))
    reqs = max_num_seqs if chunked_prefill else min(max_num_seqs,
                                                    max_num_batched_tokens // per_item)
    batch = max(1, min(budget // per_item, reqs * per_prompt))
    return EncoderBudget(item=top, items=batch, compute_budget=compute, cache_size=cache,
                         pad_to_budget=era.pad_to_budget)


# --- vLLM V0's profile run: the dummy sequences carry the images and videos --------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class EarlyTower:
    """How a family's tower runs in vLLM's profile run before 0.11.0 (its ``early_profile`` rows):
    ``max_frames``: the processing info's ``_MAX_FRAMES_PER_VIDEO``; ``attn_width`` (a, b): the
    attention's live ``a·H + b·H/tp`` values a patch at its peak (the rotary); with TP > 1 the
    all-gathered qkv (``3H``) is alive beside ``a·H + gathered_width·H/tp``;
    ``rotary_tables``: the vision rotary's fp32 [P, head_dim/2] tables live beside it (the
    angles, cos and sin, and where the torch path repeats them to head_dim, the repeats);
    ``pixel_copies``: the copies of the dummy pixels the model's forward holds through the text
    run; ``backend``: the vision attention backend the widths were read for."""

    max_frames: int
    attn_width: tuple[int, int]
    gathered_width: int
    rotary_tables: int
    pixel_copies: int
    backend: str


# What V0's dummy sequence does when its prompt (the placeholders of one item of each modality,
# ``get_mm_limits``) is longer than the sequence's share of max_num_batched_tokens: before
# 0.8.3 the sequence is seq_len text tokens and no multimodal data ("drop": the encoder does not
# run); from 0.8.3 the whole prompt is kept with its images and videos ("overlong": the text
# forward runs on more tokens than max_num_batched_tokens).
V0_MM_DUMMY: tuple[Rule, ...] = (
    Rule(name="v0_mm_dummy_sequence", changes="activation: V0 multimodal dummy sequences",
         since=None, until="0.8.3", value="drop", generation="v0",
         introduced_by="before 0.7.3 (the oldest release read)",
         removed_by="first seen in 0.8.3 (0.8.0, 0.8.1 and 0.8.2 drop the data)",
         source="0.7.3 multimodal/profiling.py MultiModalProfiler.get_dummy_data, 0.8.0 / 0.8.1 "
         "/ 0.8.2 get_decoder_dummy_data (total_len > seq_len and not VLLM_USE_V1: "
         "SequenceData.from_prompt_token_counts((0, seq_len)), multi_modal_data=None)",
         applies_to="multimodal"),
    Rule(name="v0_mm_dummy_sequence", changes="activation: V0 multimodal dummy sequences",
         since="0.8.3", until=None, value="overlong", generation="v0",
         introduced_by="first seen in 0.8.3",
         source="0.8.3 / 0.8.4 / 0.9.2 / 0.10.1.1 multimodal/profiling.py get_decoder_dummy_data "
         "(a warning when total_len > seq_len, the prompt kept whole with mm_kwargs; padded with "
         "0s to seq_len when shorter); worker/model_runner.py _dummy_run (max_num_seqs = "
         "min(max_num_seqs, max_num_batched_tokens // max_mm_tokens), at least 1; seq_len = "
         "max_num_batched_tokens // max_num_seqs (+1 for the first remainder))",
         applies_to="multimodal"),
)

# The pixels reach the GPU as the HF processor makes them (float32) until vLLM casts every
# floating tensor of the batched multimodal inputs to the model dtype on the host, in the same
# step as the transfer to the GPU (MultiModalKwargs.as_kwargs(dtype=...), 0.9.0; from 0.9.1 the
# processor's outputs are cast too, vllm-project/vllm#18862).
PIXELS_FP32: tuple[Rule, ...] = (
    Rule(name="mm_pixels_fp32", changes="encoder inputs held (profile run)", since=None,
         until="0.9.0", value=True,
         introduced_by="before 0.7.3 (the oldest release read)",
         removed_by="vllm-project/vllm#18756 ([Core] Automatically cast multi-modal input "
         "dtype, opened 2025-05-27), first released in 0.9.0 (read in the 0.9.0 and 0.9.0.1 "
         "wheels)",
         source="0.8.4 multimodal/inputs.py MultiModalKwargs.as_kwargs (x.to(device) only) and "
         "inputs/registry.py InputProcessingContext.call_hf_processor (the BatchFeature "
         "returned as is: float32 pixel values; the model casts on the GPU, qwen2_5_vl.py "
         "_process_image_input: pixel_values.type(self.visual.dtype)); 0.9.0 / 0.9.0.1 "
         "multimodal/inputs.py as_kwargs (maybe_cast_dtype(x).to(device): floating tensors "
         "cast to dtype on the host before the transfer), called with dtype="
         "self.model_config.dtype by v1/worker/gpu_model_runner.py profile_run / "
         "_execute_mm_encoder and worker/model_runner.py (V0); 0.9.2 / 0.10.1.1 (the "
         "processor's output cast as well)",
         applies_to="multimodal"),
)


# How ``get_max_tokens_per_item_by_modality`` sizes an item of each modality for
# ``max_mm_tokens``: from 0.8.4 with one item of each enabled modality; before, with the
# configured limits (the video's frames against the limit's images, shared by the limit's videos).
MAX_TOKENS_ONE_EACH: tuple[Rule, ...] = (
    Rule(name="mm_max_tokens_one_each", changes="activation: V0 multimodal dummy sequences",
         since="0.8.4", until=None, value=True,
         introduced_by="first seen in 0.8.4 (0.8.3 passes the limits)",
         source="0.8.4 multimodal/registry.py get_max_tokens_per_item_by_modality "
         "(profiler.get_mm_max_tokens(seq_len, {modality: 1 ...})); 0.7.3 / 0.8.0 / 0.8.3 "
         "processor.info.get_mm_max_tokens_per_item(seq_len, mm_limits)",
         applies_to="multimodal"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class V0Batch:
    """What one call of the tower encodes in V0's profile run: ``patches`` of one modality's
    items over every dummy sequence (``items`` of them), merged into ``patches // merge²``
    output tokens."""

    modality: str
    items: int
    patches: int


@dataclass(frozen=True, slots=True, kw_only=True)
class V0Dummy:
    """vLLM V0's profile batch for a multimodal model: ``seqs`` dummy sequences of ``tokens``
    text tokens in all (the sampler's rows are the sequences), the tower's ``batches`` (image
    first, then video: ``get_input_embeddings_v0``), ``mm_tokens`` (``max_mm_tokens``) and
    ``dropped`` (sequences whose multimodal data the release leaves out)."""

    seqs: int
    tokens: int
    batches: tuple[V0Batch, ...]
    mm_tokens: int
    dropped: int = 0


def _early_item_tokens(t: VisionTower, p: Processor, reading: EarlyTower, seq_len: int,
                    counts: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """(tokens, frames) of one item of each modality of ``counts`` in V0's dummy data: the
    image of the most features (a 9999999² image resized), the video of as many frames of that
    size as fit ``seq_len`` less the images' tokens, per video, at most ``max_frames`` and at
    least one (0.8.4 qwen2_vl.py ``get_num_frames_with_most_features`` /
    ``_get_max_video_frames``; 0.7.3 / 0.8.0 the same with the limits read from the config)."""
    h, w = _image_size(t, p.image_max_pixels, p.image_min_pixels, factorized=False)
    image = _vision_tokens(t, 1, h, w)
    out: dict[str, tuple[int, int]] = {}
    if "image" in counts:
        out["image"] = (image, 1)
    if "video" in counts:
        room = seq_len - image * counts.get("image", 0)
        frames = 0
        while _vision_tokens(t, frames + 1, h, w) <= room:
            frames += 1
        frames = max(min(frames // max(counts["video"], 1), reading.max_frames), 1)
        out["video"] = (_vision_tokens(t, frames, h, w), frames)
    return out


@lru_cache(maxsize=64)
def v0_dummy(t: VisionTower, *, limit_text: str | None, kwargs_text: str | None,
             max_model_len: int, max_num_batched_tokens: int, max_num_seqs: int,
             version: str | None) -> V0Dummy | None:
    """V0's ``ModelRunner._dummy_run`` for a multimodal model (``V0_MM_DUMMY``): ``max_mm_tokens``
    is the sum over modalities of the limit × one item's tokens sized at ``max_model_len``
    (``get_max_multimodal_tokens``; the item sized with one of each modality or with the limits:
    ``MAX_TOKENS_ONE_EACH``); ``n = max(1, min(max_num_seqs, T // max_mm_tokens))``
    sequences share T = max_num_batched_tokens; each carries the limit of items of every
    modality (``get_mm_limits``, one each by default: ``V0_DEFAULT_LIMIT``), its prompt their
    placeholder tokens (the Qwen-VL dummy text is the placeholders alone), run whole when longer
    than its share ("overlong") or replaced by its share of text tokens ("drop"). None where
    the family's ``early_profile`` has no row at ``version`` or no modality is left."""
    era = value_at(V0_MM_DUMMY, version, None)
    reading = value_at(t.early_profile, version, None)
    if era is None or not isinstance(reading, EarlyTower) or t.processor is None:
        return None
    p = processor_limits(t.processor, kwargs_text)
    limits = mm_limits(limit_text, t.modalities, V0_DEFAULT_LIMIT)
    counts = {m: limits[m] for m in t.modalities if limits[m] > 0}
    if not counts:
        return None
    one_each = bool(value_at(MAX_TOKENS_ONE_EACH, version, False))
    one = _early_item_tokens(t, p, reading, max_model_len,
                          dict.fromkeys(counts, 1) if one_each else counts)
    mm_tokens = sum(counts[m] * one[m][0] for m in counts)
    big = max_num_batched_tokens
    n = max(1, min(max_num_seqs, big // mm_tokens)) if mm_tokens else max_num_seqs
    tokens = dropped = 0
    patches: dict[str, tuple[int, int]] = {}  # modality -> (items, patches)
    m2 = t.merge * t.merge
    for seq_len, many in ((big // n + 1, big % n), (big // n, n - big % n)):
        if many == 0:
            continue
        items = _early_item_tokens(t, p, reading, seq_len, counts)
        prompt = sum(counts[m] * items[m][0] for m in counts)
        if prompt > seq_len and era == "drop":
            tokens += many * seq_len
            dropped += many
            continue
        tokens += many * max(seq_len, prompt)
        for m in counts:
            k, q = patches.get(m, (0, 0))
            patches[m] = (k + many * counts[m], q + many * counts[m] * items[m][0] * m2)
    batches = tuple(V0Batch(modality=m, items=patches[m][0], patches=patches[m][1])
                    for m in ("image", "video") if m in patches)
    return V0Dummy(seqs=n, tokens=tokens, batches=batches, mm_tokens=mm_tokens, dropped=dropped)


# --- vLLM V1's profile run from 0.8.4 to 0.9.x (before MultiModalBudget) -----------------------

# ``profile_run`` takes the modality with the most tokens per item (sized at max_model_len with
# one item of each enabled modality), a budget ``max(max_num_batched_tokens, tokens per item)``
# (compute and cache alike: SchedulerConfig sets both to max_num_batched_tokens), and
# ``min(cdiv(budget, tokens per item), max_num_seqs × limit)`` copies of one dummy item that it
# builds at ``seq_len = max_num_tokens`` (so a video of the frames that fit max_num_batched_tokens,
# which may be smaller than the budgeted one); the outputs are cached unpadded.
V1_EARLY_ENCODER_PROFILE: tuple[Rule, ...] = (
    Rule(name="v1_early_encoder_profile", changes="encoder cache (profile run)", since="0.8.4",
         until="0.10.0", value=True, generation="v1",
         introduced_by="first seen in 0.8.4 (0.8.0 builds the dummy item from "
         "dummy_data_for_profiling with the limits; 0.8.1 - 0.8.3 not read)",
         removed_by="0.10.1.1 read with MultiModalBudget and _get_mm_dummy_batch (0.10.0 not "
         "read)",
         source="0.8.4 / 0.9.2 v1/worker/gpu_model_runner.py profile_run "
         "(max_num_mm_items = min(cdiv(encoder_budget, max_tokens_per_mm_item), max_num_reqs × "
         "max_mm_items_per_req); get_decoder_dummy_data(seq_len=self.max_num_tokens, "
         "mm_counts={modality: 1}); encoder_cache['tmp'] = dict(enumerate(outputs))), "
         "v1/core/encoder_cache_manager.py _compute_encoder_budget_multimodal, config.py "
         "SchedulerConfig (max_num_encoder_input_tokens = encoder_cache_size = "
         "max_num_batched_tokens)", applies_to="multimodal"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class EarlyV1Batch:
    """What V1's 0.8.4 - 0.9.x ``profile_run`` encodes: ``items`` copies of one dummy
    ``modality`` item of ``item_tokens`` output tokens, for a budget of ``budget`` tokens and
    ``per_item`` tokens budgeted per item."""

    modality: str
    items: int
    item_tokens: int
    budget: int
    per_item: int


@lru_cache(maxsize=64)
def early_v1_batch(t: VisionTower, *, limit_text: str | None, kwargs_text: str | None,
                   max_model_len: int, max_num_batched_tokens: int, max_num_seqs: int,
                   version: str | None) -> EarlyV1Batch | None:
    """``V1_EARLY_ENCODER_PROFILE``'s batch (None at another release, for a family without
    ``early_profile`` rows, or with every modality limited to 0). Ties between modalities go to
    the first (image), as Python's ``max`` over vLLM's dict does."""
    reading = value_at(t.early_profile, version, None)
    if (value_at(V1_EARLY_ENCODER_PROFILE, version, None) is None
            or not isinstance(reading, EarlyTower) or t.processor is None):
        return None
    p = processor_limits(t.processor, kwargs_text)
    limits = mm_limits(limit_text, t.modalities)
    enabled = [m for m in t.modalities if limits[m] > 0]
    if not enabled:
        return None
    per = _early_item_tokens(t, p, reading, max_model_len, dict.fromkeys(enabled, 1))
    modality = max(enabled, key=lambda m: per[m][0])
    tokens = per[modality][0]
    budget = max(max_num_batched_tokens, tokens)
    items = min(-(-budget // tokens), max_num_seqs * limits[modality])
    item = _early_item_tokens(t, p, reading, max_num_batched_tokens, {modality: 1})[modality][0]
    return EarlyV1Batch(modality=modality, items=items, item_tokens=item, budget=budget,
                        per_item=tokens)


_TP_MODE_ROWS = (Rule(
    name="mm_encoder_tp_mode", changes="the --mm-encoder-tp-mode flag",
    since=ENCODER_TP_MODE_SINCE, until=None,
    introduced_by="first seen in 0.10.2 (use_data_parallel in qwen2_5_vl.py)",
    source="0.10.2 / 0.11.0 config/multimodal.py mm_encoder_tp_mode", applies_to="multimodal"),)


_LANGUAGE_MODEL_ONLY_ROWS = (Rule(
    name="vllm_language_model_only", changes="the --language-model-only flag",
    since=LANGUAGE_MODEL_ONLY_SINCE, until=None,
    introduced_by="first released in 0.17.0 (0.15.0, 0.15.1 and 0.16.0 have no such flag)",
    source="0.17.0 / 0.20.0 / 0.27.1 engine/arg_utils.py ('--language-model-only'), "
    "config/multimodal.py MultiModalConfig.language_model_only; 0.16.0 engine/arg_utils.py "
    "has none", applies_to="multimodal"),)


def check_language_model_only(version: str | None) -> None:
    """vLLM's ``--language-model-only`` where the release has it (:class:`BadInput` before
    0.17.0, whose argparse refuses the unknown flag); None is the newest release."""
    if version is not None and not value_at(_LANGUAGE_MODEL_ONLY_ROWS, version, False):
        raise BadInput(f"--language-model-only is not in vLLM {version}, whose argparse "
                       f"refuses it (it came in {LANGUAGE_MODEL_ONLY_SINCE})",
                       hint="drop it and give --limit-mm-per-prompt with each modality at 0, "
                       f"or use --engine-version {LANGUAGE_MODEL_ONLY_SINCE} or later")


def check_multimodal(vision: VisionTower | None, *, model: str, engine_models_it: bool,
                     engine: str, limit_text: str | None, kwargs_text: str | None,
                     version: str | None = None, tp_mode: str = "weights") -> None:
    """Before any work: the engine must model the vision tower, the release must have the
    model (its processor's ``video`` rows), and the multimodal settings must parse
    (``BadInput`` with a hint otherwise). A text-only model taking them is refused."""
    if tp_mode not in ENCODER_TP_MODES:
        raise BadInput(f"unknown --mm-encoder-tp-mode {tp_mode[:40]!r}",
                       hint="weights (the default: the tower split over TP) or data")
    if tp_mode != "weights" and version is not None and not value_at(_TP_MODE_ROWS, version,
                                                                      False):
        raise BadInput(f"--mm-encoder-tp-mode is not in vLLM {version} (it came in "
                       f"{ENCODER_TP_MODE_SINCE})",
                       hint=f"drop it, or use --engine-version {ENCODER_TP_MODE_SINCE} or later")
    if vision is None:
        if tp_mode != "weights":
            raise BadInput(f"--mm-encoder-tp-mode given, but {model} has no vision tower "
                           "(text-only)", hint="drop --mm-encoder-tp-mode")
        if limit_text is not None or kwargs_text is not None:
            flag = "--limit-mm-per-prompt" if limit_text is not None else "--mm-processor-kwargs"
            raise BadInput(f"{flag} given, but {model} has no vision tower (text-only)",
                           hint=f"drop {flag}")
        return
    if not engine_models_it:
        raise BadInput(f"memprof does not model {engine}'s vision encoder of {model} (its "
                       "weights, encoder cache and encoder profile)",
                       hint="estimate it with --engine vllm, or pass the language model's own "
                       "config.json for a text-only estimate")
    if vision.releases and not value_at(vision.releases, version, False):
        first = vision.releases[0].since
        raise BadInput(f"{engine} {version} has no {model} architecture (vLLM added it in "
                       f"{first}, {vision.releases[0].introduced_by})",
                       hint=f"use --engine-version {first} or later")
    if tp_mode != "weights" and not vision.data_mode:
        raise BadInput(f"--mm-encoder-tp-mode {tp_mode} is not modelled for {model}: its vLLM "
                       "model does not shard the tower by data", hint="drop --mm-encoder-tp-mode")
    mm_limits(limit_text, vision.modalities)
    if vision.processor is None:
        if kwargs_text is not None:
            raise BadInput(f"--mm-processor-kwargs is not modelled for {model} (its images are "
                           "fixed tiles, not sized by max_pixels)",
                           hint="drop --mm-processor-kwargs for the estimate")
        return
    processor_limits(vision.processor, kwargs_text)
