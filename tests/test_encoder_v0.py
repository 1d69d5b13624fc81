"""vLLM's multimodal profile run before 0.11.0 — V0's (``memprof/core/models/multimodal.py``
``v0_dummy``, ``memprof/core/terms/encoder.py`` ``_v0_encoder_terms``, the dummy sequences'
tokens in ``memprof/core/terms/activation.py``) and V1's at 0.8.4 - 0.9.x (``early_v1_batch``,
``_early_v1_terms``) — against hand calculations from the 0.8.4 wheel: ``worker/model_runner.py``
``_dummy_run``, ``multimodal/profiling.py`` ``get_decoder_dummy_data``, ``models/qwen2_vl.py``
``get_num_frames_with_most_features``, ``models/qwen2_5_vl.py`` (the vision tower's forward,
``_validate_and_reshape_mm_tensor``) and ``v1/worker/gpu_model_runner.py`` ``profile_run``; the
0.8.2 and 0.9.2 wheels for the eras."""

from __future__ import annotations

import json
from typing import Any

from memprof.base.units import fmt_bytes
from memprof.core.models import load_model
from memprof.core.models.multimodal import V0Batch, early_v1_batch, v0_dummy
from tests.cli_helpers import invoke

VL = "qwen2.5-vl-7b-instruct"
H, TEXT_H, TEXT_I, OUT = 1280, 3584, 18944, 3584  # vision / text widths (config.json)
PATCH_VALUES = 3 * 2 * 14 * 14  # in_channels × temporal_patch × patch²
IMAGE_PATCHES = 256 * 256  # the 3584² image of max_pixels 12845056: (3584 / 14)² patches


def _estimate(*argv: str, code: int = 0) -> tuple[dict[str, int], dict[str, str]]:
    got, out, err = invoke(["estimate", "--model", VL, "-f", "json", *argv])
    assert got == code, err  # 1: a predicted OOM
    rank: dict[str, Any] = json.loads(out)["ranks"][0]
    return ({c["name"]: c["bytes"] for c in rank["components"]},
            {c["name"]: c["formula"] for c in rank["components"]})


def _dummy(version: str, max_model_len: int, tokens: int, limit: str | None = None,
           kwargs: str | None = None) -> Any:
    t = load_model(VL).vision
    assert t is not None
    return v0_dummy(t, limit_text=limit, kwargs_text=kwargs, max_model_len=max_model_len,
                    max_num_batched_tokens=tokens, max_num_seqs=256, version=version)


def test_one_overlong_sequence_carries_the_image_and_the_video() -> None:
    # one image and one video by default under V0; the largest image is 16384 tokens, so the
    # video is sized against 8192 − 16384 tokens: one frame (padded to two: 16384 tokens);
    # max_mm_tokens 32768 → min(256, 8192 // 32768) = 0 → one sequence, kept whole from 0.8.3
    d = _dummy("0.8.4+v0", 8192, 8192)
    assert (d.seqs, d.tokens, d.mm_tokens, d.dropped) == (1, 32768, 32768, 0)
    assert d.batches == (V0Batch(modality="image", items=1, patches=IMAGE_PATCHES),
                         V0Batch(modality="video", items=1, patches=IMAGE_PATCHES))
    # before 0.8.3 the overlong sequence is 8192 text tokens without its images and video
    old = _dummy("0.8.2+v0", 8192, 8192)
    assert (old.seqs, old.tokens, old.batches, old.dropped) == (1, 8192, (), 1)
    # V1 runs no V0 dummy
    assert _dummy("0.8.4", 8192, 8192) is None


def test_sequences_share_the_tokens_when_the_items_fit() -> None:
    # max_pixels 1003520: a 980² image, 70² patches, 1225 tokens; no video: max_mm_tokens 1225
    # → min(256, 8192 // 1225) = 6 sequences of 1366, 1366, 1365 × 4 tokens (padded prompts)
    d = _dummy("0.8.4+v0", 8192, 8192, '{"video": 0}', '{"max_pixels": 1003520}')
    assert (d.seqs, d.tokens, d.mm_tokens) == (6, 8192, 1225)
    assert d.batches == (V0Batch(modality="image", items=6, patches=6 * 70 * 70),)
    # with the video: it gets the frames that fit 8192 − 1225 tokens, 10 (5 temporal patches,
    # 6125 tokens), so max_mm_tokens 7350 and one sequence padded to 8192
    both = _dummy("0.8.4+v0", 8192, 8192, None, '{"max_pixels": 1003520}')
    assert (both.seqs, both.tokens, both.mm_tokens) == (1, 8192, 7350)
    assert both.batches[1] == V0Batch(modality="video", items=1, patches=5 * 70 * 70)


def test_row_121_by_hand() -> None:
    """Published row 121's deployment: the text forward of 32768 tokens and 1 sampled row is the
    peak, with both copies of the float32 pixels beside it."""
    # exit code 1: the start-up failure the log shows (KV below one 8192-token request)
    comps, formulas = _estimate("--gpu", "RTX 3090", "--max-model-len", "8192",
                                "--engine-version", "0.8.4+v0", code=1)
    # V0 eager MLP at T = 32768: residual, layer input, hidden, down out [T, H] + gate_up + act
    assert comps["activation peak (profile run)"] == 32768 * (4 * TEXT_H + 3 * TEXT_I) * 2
    assert "T=32768, R=1" in formulas["activation peak (profile run)"]
    pixels = 2 * (2 * IMAGE_PATCHES) * PATCH_VALUES * 4  # two float32 copies, image + video
    assert comps["encoder inputs held (profile run)"] == pixels
    # the video call: its bf16 copy, the text embeddings, the image's outputs, the attention
    # (2·H + 14·H: residual, normed, qkv, q/k/v, the fp32 torch rotary) and 7 rotary tables
    video = (pixels + IMAGE_PATCHES * PATCH_VALUES * 2 + 32768 * TEXT_H * 2
             + IMAGE_PATCHES // 4 * OUT * 2 + IMAGE_PATCHES * 16 * H * 2
             + 7 * IMAGE_PATCHES * 40 * 4)
    text = comps["activation peak (profile run)"]
    assert f"forward {fmt_bytes(video)} " in formulas["vision encoder forward (profile run)"]
    assert video < text + pixels
    assert comps["vision encoder forward (profile run)"] == 0
    assert "encoder cache (profile run)" not in comps
    assert "encoder profile (not modelled at this release)" not in comps


def test_the_encoder_forward_above_the_text_run() -> None:
    # two 16384-token images (no video) in two sequences of 16384 tokens: one tower call on
    # 131072 patches
    comps, _ = _estimate("--gpu", "H100", "--max-model-len", "32768",
                         "--max-num-batched-tokens", "32768", "--limit-mm-per-prompt",
                         '{"video": 0}', "--engine-version", "0.8.4+v0")
    p = 2 * IMAGE_PATCHES
    pixels = 2 * p * PATCH_VALUES * 4
    forward = (pixels + p * PATCH_VALUES * 2 + 32768 * TEXT_H * 2
               + p * (2 * H + 14 * H) * 2 + 7 * p * 40 * 4)
    text = comps["activation peak (profile run)"]
    assert comps["vision encoder forward (profile run)"] == forward - text - pixels > 0


def test_from_0_9_the_pixels_are_in_the_model_dtype_and_the_rotary_a_kernel() -> None:
    comps, _ = _estimate("--gpu", "H100", "--max-model-len", "32768",
                         "--max-num-batched-tokens", "32768", "--limit-mm-per-prompt",
                         '{"video": 0}', "--engine-version", "0.9.2+v0")
    p = 2 * IMAGE_PATCHES
    pixels = 2 * p * PATCH_VALUES * 2  # cast to bf16 on the host (vllm#18756, 0.9.0)
    assert comps["encoder inputs held (profile run)"] == pixels
    forward = pixels + 32768 * TEXT_H * 2 + p * (2 * H + 11 * H) * 2 + 3 * p * 40 * 4
    text = comps["activation peak (profile run)"]
    assert comps["vision encoder forward (profile run)"] == max(0, forward - text - pixels)


def test_where_the_early_profile_is_not_read_the_placeholder_stays() -> None:
    for argv in (("--gpu", "H100", "--engine-version", "0.8.2"),  # V1 0.8.0 - 0.8.3
                 ("--gpu", "H100", "--engine-version", "0.10.1"),  # V1 0.10.x
                 ("--gpu", "MI300X", "--engine-version", "0.8.4+v0"),  # ROCm: SDPA, not read
                 ("--gpu", "MI300X", "--engine-version", "0.8.4")):
        comps, _ = _estimate("--max-model-len", "8192", *argv)
        assert comps["encoder profile (not modelled at this release)"] == 0, argv
        assert "encoder inputs held (profile run)" not in comps, argv


def test_with_tp_the_all_gathered_qkv_can_set_the_attention() -> None:
    # TP 4: the all-gather's moment holds the local qkv (3H/4), the gathered buffer (3H) and its
    # reassembled copy (3H) beside the residual and the normed input: 2H + 3H/4 + 6H = 8.75H,
    # above the rotary's 2H + 14H/4 = 5.5H and the MLP's 5H + 3I/4 (the block's input, the new
    # residual, normed, down out and its all-reduce, gate/up/act)
    comps, formulas = _estimate("--gpu", "H100", "--tp", "4", "--max-model-len", "32768",
                                "--max-num-batched-tokens", "32768", "--limit-mm-per-prompt",
                                '{"video": 0}', "--engine-version", "0.8.4+v0")
    p = 2 * IMAGE_PATCHES
    pixels = 2 * p * PATCH_VALUES * 4
    attention = p * (2 * H + 3 * H // 4 + 6 * H) * 2
    assert attention > p * (5 * H + 3 * 3420 // 4) * 2
    assert attention > p * (2 * H + 3 * H + 6 * H // 4) * 2  # q, k, v made contiguous
    forward = (pixels + p * PATCH_VALUES * 2 + 32768 * TEXT_H * 2 + attention
               + 7 * p * 40 * 4)
    assert f"forward {fmt_bytes(forward)} " in formulas["vision encoder forward (profile run)"]
    text = comps["activation peak (profile run)"]
    assert comps["vision encoder forward (profile run)"] == max(0, forward - text - pixels)


def test_a_later_pipeline_stage_holds_the_model_input_only() -> None:
    # the second stage receives intermediate tensors: no parsed pixels, no tower call
    code, out, err = invoke(["estimate", "--model", VL, "-f", "json", "--gpu", "H100", "-pp", "2",
                             "--max-model-len", "8192", "--engine-version", "0.8.4+v0"])
    assert code == 0, err
    first, later = ({c["name"]: c["bytes"] for c in r["components"]}
                    for r in json.loads(out)["ranks"][:2])
    one = 2 * IMAGE_PATCHES * PATCH_VALUES * 4
    assert first["encoder inputs held (profile run)"] == 2 * one
    assert later["encoder inputs held (profile run)"] == one
    assert "vision encoder forward (profile run)" not in later


def test_max_mm_tokens_sizes_the_items_with_the_limits_until_0_8_4() -> None:
    # two images and a video at max_model_len 65536: 0.8.4 sizes the video against one image
    # (65536 − 16384 → 6 frames, 3 temporal patches, 49152 tokens), so 2 × 16384 + 49152;
    # 0.8.3 against the limit's two (65536 − 32768 → 4 frames, 32768 tokens)
    new = _dummy("0.8.4+v0", 65536, 65536, '{"image": 2}')
    old = _dummy("0.8.3+v0", 65536, 65536, '{"image": 2}')
    assert (new.mm_tokens, old.mm_tokens) == (81920, 65536)
    # either way one sequence, whose own video is sized against its two images: 65536 tokens
    for d in (new, old):
        assert (d.seqs, d.tokens) == (1, 65536)
        assert d.batches == (V0Batch(modality="image", items=2, patches=2 * IMAGE_PATCHES),
                             V0Batch(modality="video", items=1, patches=2 * IMAGE_PATCHES))


# --- vLLM V1's profile run from 0.8.4 to 0.9.x (V1_EARLY_ENCODER_PROFILE) ------------------------


def test_v1_0_8_4_builds_its_dummy_video_at_max_num_batched_tokens() -> None:
    t = load_model(VL).vision
    assert t is not None
    # no image: the budgeted video fits max_model_len 128000 (14 frames, 7 × 16384 tokens); the
    # budget max(8192, 114688) → cdiv(114688, 114688) = 1 item, but the dummy video is built
    # at seq_len = max_num_tokens 8192: one frame, 16384 tokens
    b = early_v1_batch(t, limit_text='{"image": 0}', kwargs_text=None, max_model_len=128000,
                       max_num_batched_tokens=8192, max_num_seqs=256, version="0.8.4")
    assert b is not None
    assert (b.modality, b.per_item, b.budget, b.items, b.item_tokens) == (
        "video", 7 * 16384, 7 * 16384, 1, 16384)
    # an image and a video of 16384 tokens each (32768 − 16384 leaves two frames): the tie goes
    # to the image; 0.8.0 - 0.8.3 (not read) and 0.10.0 on (MultiModalBudget) are not modelled
    b = early_v1_batch(t, limit_text=None, kwargs_text=None, max_model_len=32768,
                       max_num_batched_tokens=8192, max_num_seqs=256, version="0.9.2")
    assert b is not None and (b.modality, b.items, b.item_tokens) == ("image", 1, 16384)
    for version in ("0.8.3", "0.10.1", "0.8.4+v0"):
        assert early_v1_batch(t, limit_text=None, kwargs_text=None, max_model_len=32768,
                              max_num_batched_tokens=8192, max_num_seqs=256,
                              version=version) is None, version


def test_v1_0_8_4_encoder_terms_by_hand() -> None:
    comps, formulas = _estimate("--gpu", "H100", "--max-model-len", "32768",
                                "--max-num-seqs", "1", "--engine-version", "0.8.4")
    # one 16384-token image: its output cached unpadded, its float32 batch kept through the
    # text run; the forward holds the batch, its concatenation and its bf16 copy beside the
    # attention's rotary moment (2H + 14H: the torch rotary before vllm#17726)
    p = IMAGE_PATCHES
    cache = 16384 * OUT * 2
    pixels = p * PATCH_VALUES * 4
    assert comps["encoder cache (profile run)"] == cache
    assert comps["encoder inputs held (profile run)"] == pixels
    forward = 2 * pixels + p * PATCH_VALUES * 2 + p * 16 * H * 2 + 7 * p * 40 * 4
    name = "vision encoder forward (profile run)"
    assert f"forward {fmt_bytes(forward)} " in formulas[name]
    text = comps["activation peak (profile run)"]
    assert comps[name] == forward - text - cache - pixels > 0
    assert "vision encoder forward (not modelled at this release)" not in comps


def test_v1_0_9_0_1_pixels_in_the_model_dtype_on_every_tp_rank() -> None:
    # 0.9.0's as_kwargs casts the batch to bf16 on the host (vllm#18756): no float32 batch, no
    # model-dtype copy; the vllm_flash_attn rotary (2H + 11H at TP 1). At TP 2 every rank runs
    # the whole image through its shard: the all-gather's moment 2H + 3H/2 + 6H = 9.5H
    p = IMAGE_PATCHES
    pixels = p * PATCH_VALUES * 2
    for tp, width in ((1, 2 * H + 11 * H), (2, 2 * H + 3 * H // 2 + 6 * H)):
        comps, formulas = _estimate("--gpu", "L4", "--max-model-len", "2048", "--tp", str(tp),
                                    "--vllm-use-flashinfer-sampler", "1",
                                    "--engine-version", "0.9.0.1")
        assert comps["encoder inputs held (profile run)"] == pixels
        assert comps["encoder cache (profile run)"] == 16384 * OUT * 2
        forward = 2 * pixels + p * width * 2 + 3 * p * 40 * 4
        name = "vision encoder forward (profile run)"
        assert f"forward {fmt_bytes(forward)} " in formulas[name], tp
        # the MLP: the block's input (the tower's loop variable), the new residual, normed,
        # down out (+ its all-reduce at TP 2) beside gate, act and up
        mlp = p * ((4 if tp == 1 else 5) * H + 3 * 3420 // tp) * 2
        assert f"mlp {fmt_bytes(mlp)})" in formulas[name], tp
        text = comps["activation peak (profile run)"]
        assert comps[name] == forward - text - 16384 * OUT * 2 - pixels > 0
