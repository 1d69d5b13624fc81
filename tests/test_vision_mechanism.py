"""One multimodal mechanism for every vision-language family (``memprof/core/models/multimodal.py``,
``memprof/core/weights/vision.py``, ``memprof/core/terms/encoder.py``): Gemma 3's SigLIP tower and
Llama 4's vision tower go through the same row field (``Family.vision``), the same encoder
budget and the same profile-run term as Qwen-VL, each against a hand count from vLLM's source:

- Gemma 3 (vLLM 0.11.0 ``gemma3_mm.py``): ``get_num_image_tokens`` = ``(num_crops + 1) ×
  image_seq_length`` with ``num_crops`` 0 (pan-and-scan off): 256 tokens, from ``64 × 64`` SigLIP
  patches (896 / 14) average-pooled 4 × 4, projected to the text hidden size (5376); the
  placeholder ``\\n\\n<boi>`` + 256 + ``<eoi>\\n\\n`` is 260 tokens.
- Llama 4 (``mllama4.py``): ``get_image_size_with_most_features`` is 16 tiles high, so
  ``patches_per_image`` = 1 + 16 = 17 tiles of ``(336 / 14)² // 4`` = 144 tokens (2448), a class
  token a tile in the encoder (577 patches); the placeholder adds ``<|image_start|>``, 16
  ``<|tile_y_separator|>``, ``<|image|>`` and ``<|image_end|>``: 2467 tokens.
- The budget (``compute_mm_encoder_budget``, ``get_max_items``): items = budget // tokens per
  item; 0.11.0 - 0.12.0 count the whole placeholder (``get_mm_max_contiguous_tokens``) and pad
  each cached output to the budget, 0.13.0+ count embeddings and cache them unpadded.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from memprof.core.deployment import Deployment, ranks
from memprof.core.models import load_model
from memprof.core.models.families import ROWS
from memprof.core.models.multimodal import encoder_budget, largest_item
from memprof.core.weights import rank_weights
from memprof.core.weights.vision import tower_params
from tests.cli_helpers import invoke, one_error

GEMMA, LLAMA4 = "gemma-3-27b-it", "llama-4-scout-17b-16e"
S = 2  # bf16


def _components(*argv: str) -> dict[str, int]:
    code, out, err = invoke(["estimate", "--gpu", "H200", "-f", "json", *argv])
    assert code == 0, err
    rank: dict[str, Any] = json.loads(out)["ranks"][0]
    return {c["name"]: c["bytes"] for c in rank["components"]}


def test_every_vision_language_row_uses_the_one_field() -> None:
    """Gemma 3, Gemma 4, Llama 4 and the Qwen-VL rows read their tower through ``vision``; no row
    keeps a second mechanism (the removed ``towers`` field, a 'not modelled' note)."""
    names = {r.name for r in ROWS if r.vision is not None}
    assert names == {"gemma3_mm", "gemma4", "llama4", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe",
                     "qwen3_5", "qwen3_5_moe"}
    assert not any(hasattr(r, "towers") for r in ROWS)
    assert all("not modelled" not in r.note for r in ROWS if r.vision is not None)


def test_gemma3_tokens_per_image() -> None:
    t = load_model(GEMMA).vision
    assert t is not None
    assert (t.tiles, t.tile_tokens, t.merge, t.out_hidden) == (1, 256, 4, 5376)
    assert t.tile_tokens * t.merge ** 2 == (896 // 14) ** 2  # the pool covers the patches
    new = largest_item(t, t.processor, "image", 131072, "0.13.0")
    old = largest_item(t, t.processor, "image", 131072, "0.11.0")
    assert (new.encoder_tokens, new.budget_tokens) == (256, 256)
    assert (old.encoder_tokens, old.budget_tokens) == (256, 260)


def test_llama4_tokens_per_image() -> None:
    t = load_model(LLAMA4).vision
    assert t is not None
    assert (t.tiles, t.tile_tokens, t.merge, t.out_hidden) == (17, 144, 2, 5120)
    new = largest_item(t, t.processor, "image", 262144, "0.33.0")
    old = largest_item(t, t.processor, "image", 262144, "0.12.0")
    assert (new.encoder_tokens, new.budget_tokens) == (17 * 144, 17 * 144)
    assert old.budget_tokens == 1 + 16 * (144 + 1) + 1 + 144 + 1 == 2467


@pytest.mark.parametrize(("model", "version", "items", "rows"), [
    # 0.13.0+: 8192 // 256 = 32 images, 256 rows each
    (GEMMA, "0.13.0", 32, 32 * 256),
    # 0.12.0: 8192 // 260 = 31 images, each padded to the 8192-token budget
    (GEMMA, "0.12.0", 31, 31 * 8192),
    (LLAMA4, "0.33.0", 8192 // 2448, 3 * 2448),
    (LLAMA4, "0.11.0", 8192 // 2467, 3 * 8192),
])
def test_encoder_budget_and_cache_rows(model: str, version: str, items: int, rows: int) -> None:
    t = load_model(model).vision
    assert t is not None
    eb = encoder_budget(t, limits={}, max_model_len=32768, max_num_batched_tokens=8192,
                        max_num_seqs=256, version=version)
    assert eb is not None
    assert (eb.items, eb.cached_rows) == (items, rows)


def test_gemma3_profile_term_by_hand() -> None:
    """32768 batched tokens: 128 images of 4096 patches through SigLIP (H 1152, I 4304) on one
    rank; the cache holds 128 × 256 rows of the 5376-wide projector output."""
    comps = _components("--model", GEMMA, "--max-num-batched-tokens", "32768",
                        "--max-model-len", "32768", "--engine-version", "0.13.0")
    h, i = 1152, 4304
    p = 128 * 4096
    cache = 128 * 256 * 5376 * S
    assert comps["encoder cache (profile run)"] == cache
    pixels = p * 3 * 14 * 14 * S  # in the model dtype (the processor casts them)
    # the V1 runner's profile_run keeps the dummy batch's pixels through the text run
    assert comps["encoder inputs held (profile run)"] == pixels
    attn = p * (2 * h + 4 * h) * S  # residual, normed input, qkv, attention output
    mlp = p * (2 * h + 2 * i) * S  # residual, normed input, fc1 and its activation
    forward = pixels + max(attn, mlp)
    assert comps["vision encoder forward (profile run)"] == max(
        0, forward - comps["activation peak (profile run)"] - cache - pixels)
    assert comps["vision encoder forward (profile run)"] > 0  # the encoder run sets the peak


def test_llama4_profile_term_by_hand_at_tp4() -> None:
    """TP4, 16384 batched tokens: 6 images of 17 tiles, 577 patches a tile (a class token), the
    attention and MLP widths split over the 4 ranks, no all-gather of qkv."""
    comps = _components("--model", LLAMA4, "-tp", "4", "--max-num-batched-tokens", "16384",
                        "--max-model-len", "32768", "--engine-version", "0.13.0")
    h, i, tp = 1408, 5632, 4
    items = 16384 // 2448
    p = items * 17 * 577
    cache = items * 2448 * 5120 * S
    assert comps["encoder cache (profile run)"] == cache
    pixels = items * 17 * 576 * 3 * 14 * 14 * S
    assert comps["encoder inputs held (profile run)"] == pixels
    attn = p * (2 * h + 11 * h // tp) * S
    mlp = p * (2 * h + 2 * i // tp) * S
    forward = pixels + max(attn, mlp)
    assert comps["vision encoder forward (profile run)"] == max(
        0, forward - comps["activation peak (profile run)"] - cache - pixels)


def test_tower_params_match_the_hand_counts() -> None:
    """The generic writer's total equals the families' hand counts of the tower and projector
    (tests/test_family_gemma.py, tests/test_family_llama4.py)."""
    g = load_model(GEMMA).vision
    assert g is not None
    h, inter, layers, text_h = 1152, 4304, 27, 5376
    per_layer = 4 * (h * h + h) + (h * inter + inter) + (inter * h + h) + 4 * h
    siglip = (layers * per_layer + h * 3 * 14 * 14 + h + 4096 * h + 2 * h + h * text_h + h)
    assert tower_params(g) == siglip
    v = load_model(LLAMA4).vision
    assert v is not None
    h, inter = 1408, 5632
    per_layer = 4 * (h * h + h) + (h * inter + inter) + (inter * h + h) + 4 * h
    embeddings = 3 * 14 * 14 * h + h + ((336 // 14) ** 2 + 1) * h + 4 * h
    assert tower_params(v) == 34 * per_layer + embeddings + inter * 4096 + 4096 * 4096 + 4096 * 5120


@pytest.mark.parametrize(("model", "version", "built"), [
    (LLAMA4, "0.10.0", True),  # mllama4.py builds the tower whatever the limits
    (LLAMA4, "0.10.1", False),  # self.vision_model = None unless the image limit
    (GEMMA, "0.14.1", True),  # gemma3_mm.py builds SigLIP whatever the limits
    (GEMMA, "0.15.1", False),  # _mark_tower_model
])
def test_image_limit_zero_drops_the_tower(model: str, version: str, built: bool) -> None:
    spec = load_model(model)
    dep = Deployment(engine_version=version, limit_mm_per_prompt='{"image": 0}')
    tower = sum(t.bytes for t in rank_weights(spec, dep, None, ranks(dep)[0], "sm90")
                if t.group in ("vision tower", "mm projector"))
    assert (tower > 0) is built


@pytest.mark.parametrize(("argv", "text"), [
    (["--model", GEMMA, "--mm-processor-kwargs", '{"max_pixels": 1003520}'],
     "--mm-processor-kwargs is not modelled"),
    (["--model", GEMMA, "--mm-encoder-tp-mode", "data"], "not modelled for"),
    (["--model", LLAMA4, "--limit-mm-per-prompt", '{"video": 1}'], "'video', a modality"),
    # SGLang's vision path is modelled for the families with sglang_tower rows, at the releases
    # read (memprof/core/engines/sglang_vlm.py): not at a source snapshot
    (["--model", GEMMA, "--engine", "sglang", "--engine-version", "main@d315eb7"],
     "has not read SGLang main@d315eb7's vision path"),
    (["--model", LLAMA4, "--engine", "sglang", "--engine-version", "main@d315eb7"],
     "has not read SGLang main@d315eb7's vision path"),
])
def test_tiled_towers_refuse_what_they_do_not_take(argv: list[str], text: str) -> None:
    code, out, err = invoke(["estimate", "--gpu", "H200", *argv])
    assert (code, out) == (2, "")
    one_error(err, text)


def test_llama4_data_mode_replicates_the_tower_not_the_projector() -> None:
    """``--mm-encoder-tp-mode data``: ``Llama4VisionModel(use_data_parallel=True)`` whole on
    every rank; ``Llama4MultiModalProjector`` stays a column-parallel linear."""
    spec = load_model(LLAMA4)
    dep = Deployment(tp=4, mm_encoder_tp_mode="data")
    got: dict[str, int] = {}
    for t in rank_weights(spec, dep, None, ranks(dep)[0], "sm90"):
        if t.group in ("vision tower", "mm projector"):
            got[t.group] = got.get(t.group, 0) + t.bytes
    v = spec.vision
    assert v is not None
    assert got["mm projector"] == 5120 * 4096 // 4 * S
    assert got["vision tower"] == (tower_params(v) - 5120 * 4096) * S
