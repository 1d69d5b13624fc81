"""SGLang with a vision-language model (``memprof/core/engines/sglang_vlm.py``, the families'
``sglang_tower`` rows): the tower's weights per rank against a hand count from the bundled
config (Qwen2.5-VL, Qwen3-VL, Gemma 3, Llama 4), the mem_fraction_static reduction at each
release span (and against the fraction the SGLang log of calibration row 1401 prints), chunked
prefill turned off where a release does, no encoder term, and the refusals of what is not
read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang import ENGINE, sglang_defaults
from memprof.core.engines.sglang_vlm import SGLANG_VLM_FRACTION, vit_fraction
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu
from memprof.core.models import load_model
from memprof.core.versions import value_at

ROOT = Path(__file__).resolve().parents[1]
QWEN = "qwen2.5-vl-7b-instruct"
SCOUT = "llama-4-scout-17b-16e-instruct"
BF16 = 2


def _vision(name: str) -> dict[str, int]:
    cfg = json.loads((ROOT / "configs" / "models" / f"{name}.json").read_text())
    return dict(cfg["vision_config"])


def _tower_bytes(model: str, version: str, tp: int = 1) -> int:
    dep = Deployment(engine="sglang", engine_version=version, tp=tp, max_model_len=8192)
    est = estimate(model, dep, gpu_name="H200")
    return sum(c.bytes for c in est.ranks[0].components if c.name in ("vision tower",
                                                                      "mm projector"))


def qwen_tower_by_hand(tp: int, mlp_multiple: int) -> int:
    """Qwen2.5-VL's tower on one of ``tp`` ranks, from its vision_config: per block two RMSNorms,
    qkv (column: weight and bias split), proj (row: weight split, bias whole), gate+up
    (column), down (row); the Conv3d patch embedding without bias, the merger's RMSNorm, fc1
    (column) and fc2 (row), all bf16."""
    v = _vision(QWEN)
    h, depth, merge, out = v["hidden_size"], v["depth"], v["spatial_merge_size"], \
        v["out_hidden_size"]
    inter = -(-v["intermediate_size"] // mlp_multiple) * mlp_multiple
    patch_in = v["in_chans"] * v["temporal_patch_size"] * v["patch_size"] ** 2
    block = (2 * h + (3 * h * h + 3 * h) // tp + (h * h) // tp + h
             + (2 * inter * h + 2 * inter) // tp + (h * inter) // tp + h)
    wide = h * merge * merge
    merger = h + (wide * wide + wide) // tp + (out * wide) // tp + out
    return BF16 * (depth * block + h * patch_in + merger)


@pytest.mark.parametrize(("version", "tp", "multiple"), [
    ("0.4.5", 1, 1), ("0.5.2", 2, 1),  # mlp_hidden_size = intermediate_size (3420)
    ("0.5.5", 1, 8), ("0.5.5", 2, 8), ("0.5.9", 4, 8),  # rounded up to 8 (3424) from 0.5.3
])
def test_qwen2_5_vl_tower_per_rank_by_hand(version: str, tp: int, multiple: int) -> None:
    assert _tower_bytes(QWEN, version, tp) == qwen_tower_by_hand(tp, multiple)


def qwen3_tower_by_hand(model: str, tp: int) -> int:
    """Qwen3-VL's tower on one of ``tp`` ranks, from its vision_config: per block two
    LayerNorms (weight and bias), qkv (column), proj (row), fc1 (column) and fc2 (row), all
    biased; the Conv3d patch embedding with bias and the whole pos_embed table; the merger
    (LayerNorm over hidden) and one post-shuffle merger per deepstack index (LayerNorm over
    hidden·merge²), each fc1 (column) and fc2 (row) with biases."""
    v = _vision(model)
    h, inter, depth, merge, out = (v["hidden_size"], v["intermediate_size"], v["depth"],
                                   v["spatial_merge_size"], v["out_hidden_size"])
    patch_in = v["in_channels"] * v["temporal_patch_size"] * v["patch_size"] ** 2
    block = (4 * h + (3 * h * h + 3 * h) // tp + (h * h) // tp + h
             + (inter * h + inter) // tp + (h * inter) // tp + h)
    wide = h * merge * merge
    fcs = (wide * wide + wide) // tp + (out * wide) // tp + out
    mergers = 2 * h + fcs + len(v["deepstack_visual_indexes"]) * (2 * wide + fcs)
    return BF16 * (depth * block + h * patch_in + h + v["num_position_embeddings"] * h
                   + mergers)


@pytest.mark.parametrize(("model", "version", "tp"), [
    ("qwen3-vl-4b-instruct", "0.5.3", 1), ("qwen3-vl-4b-instruct", "0.5.5", 2),
    ("qwen3-vl-30b-a3b-instruct", "0.5.6", 4),
])
def test_qwen3_vl_tower_per_rank_by_hand(model: str, version: str, tp: int) -> None:
    assert _tower_bytes(model, version, tp) == qwen3_tower_by_hand(model, tp)

def siglip_tower_by_hand(model: str, tp: int, whole: bool) -> int:
    """Gemma 3's SigLIP tower and projector on one of ``tp`` ranks, from its vision_config: per
    layer two LayerNorms, qkv (column), out_proj (row), fc1 (column), fc2 (row), all biased; the
    Conv2d patch embedding with bias, the (image/patch)² position table (SGLang's
    VocabParallelEmbedding: padded to 64 rows and split over TP; transformers' nn.Embedding
    whole), post_layernorm; the projector's weight (vision hidden → text hidden) and RMSNorm.
    ``whole``: transformers' modules, nothing split."""
    cfg = json.loads((ROOT / "configs" / "models" / f"{model}.json").read_text())
    v = cfg["vision_config"]
    text_hidden = cfg["text_config"]["hidden_size"]
    t = 1 if whole else tp
    h, inter, n = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    layer = (4 * h + (3 * h * h + 3 * h) // t + (h * h) // t + h
             + (inter * h + inter) // t + (h * inter) // t + h)
    positions = (v["image_size"] // v["patch_size"]) ** 2
    rows = positions if whole else -(-positions // 64) * 64 // tp
    patch = h * 3 * v["patch_size"] ** 2 + h
    return BF16 * (n * layer + patch + rows * h + 2 * h + text_hidden * h + h)


@pytest.mark.parametrize(("version", "tp", "whole"), [
    ("0.4.5", 2, True), ("0.4.6", 1, True),  # transformers' SiglipVisionModel
    ("0.4.7", 2, False), ("0.5.5", 4, False), ("0.5.9", 1, False),  # SGLang's siglip.py
])
def test_gemma3_siglip_per_rank_by_hand(version: str, tp: int, whole: bool) -> None:
    got = _tower_bytes("gemma-3-4b-it", version, tp)
    assert got == siglip_tower_by_hand("gemma-3-4b-it", tp, whole)


@pytest.mark.parametrize(("version", "factor"), [("0.4.5", 0.90), ("0.4.6", 1.0),
                                                 ("0.5.5", 1.0)])
def test_gemma3_is_multimodal_at_0_4_5_only(version: str, factor: float) -> None:
    """mm_disabled_models holds Gemma 3 from 0.4.6: no reduction; the tower is built anyway."""
    got, base = _mfs("gemma-3-4b-it", version)
    assert got == pytest.approx(base * factor)

def scout_tower_by_hand() -> int:
    """transformers' Llama4VisionModel and Llama4MultiModalProjector, whole (plain nn.Linear):
    the unfold-convolution linear (no bias), the class embedding, the positional table of
    (image/patch)² + 1 rows, LayerNorms pre and post, per layer q/k/v/o with biases, two
    LayerNorms and fc1/fc2 with biases; the pixel-shuffle MLP's fc1 (intermediate → projector
    input) and fc2 (→ projector output) without bias; the projector's linear_1 (vision output →
    text hidden) without bias."""
    v = _vision(SCOUT)
    h, inter, n = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    patch_in = v["num_channels"] * v["patch_size"] ** 2
    positions = (v["image_size"] // v["patch_size"]) ** 2 + 1
    layer = 4 * (h * h + h) + 2 * 2 * h + (inter * h + inter) + (h * inter + h)
    adapter = inter * v["projector_input_dim"] + v["projector_input_dim"] * \
        v["projector_output_dim"]
    text_hidden = 5120  # text_config.hidden_size
    projector = v["vision_output_dim"] * text_hidden
    return BF16 * (h * patch_in + h + positions * h + 2 * 2 * h + n * layer + adapter + projector)


@pytest.mark.parametrize(("version", "built"), [
    ("0.4.5", False),  # the wrapper builds the language model only
    ("0.4.6", True), ("0.4.9", True),  # transformers' modules, whole on every rank
    ("0.4.9.post5", False), ("0.5.5", False),  # only with --enable-multimodal
])
def test_llama4_tower_by_release(version: str, built: bool) -> None:
    got = _tower_bytes(SCOUT, version, tp=8)
    assert got == (scout_tower_by_hand() if built else 0)


def _mfs(model: str, version: str, gpu: str = "H100", **kw: object) -> tuple[float, float]:
    """(mem_fraction_static the budget reads, the heuristic's or the given one)."""
    dep = Deployment(engine="sglang", engine_version=version, **kw)  # type: ignore[arg-type]
    g = find_gpu(gpu)
    return ENGINE.mem_fraction(dep, g, None, spec=load_model(model)), sglang_defaults(g, dep)[2]


def test_vit_factor_by_hand() -> None:
    """adjust_mem_fraction_for_vlm: Qwen2.5-VL's config names its depth ``depth``, so the
    getattr default 24 layers is read, with its hidden 1280: 0.95·(1 − 0.1·(1280²/1024² − 1))."""
    assert vit_fraction(_vision(QWEN)) == pytest.approx(0.95 * (1 - 0.1 * (1.5625 - 1)))
    assert vit_fraction({}) == pytest.approx(0.95)  # the ViT-L/14 baseline
    # Qwen3-VL-30B-A3B: depth 27 under another name as well, hidden 1152
    assert vit_fraction(_vision("qwen3-vl-30b-a3b-instruct")) == pytest.approx(
        0.95 * (1 - 0.1 * (1152 ** 2 / 1024 ** 2 - 1)))
    assert vit_fraction({"num_hidden_layers": 96, "hidden_size": 4096}) == pytest.approx(0.95 * 0.8)


def test_vit_factor_reproduces_row_1401() -> None:
    """Row 1401's log prints mem_fraction_static=0.7629746875 on a B200: SGLang's heuristic
    0.851 (0.5.6's reserve with the piecewise-graph term: (183359 − 27264) / 183359 MiB) times
    the ViT factor, exactly."""
    assert 0.851 * vit_fraction(_vision(QWEN)) == pytest.approx(0.7629746875, abs=1e-12)


@pytest.mark.parametrize(("version", "given", "factor"), [
    ("0.4.3", None, 0.95), ("0.4.3", 0.8, 0.95),  # model_runner: any mem_fraction_static
    ("0.4.5", None, 0.90), ("0.4.8.post1", 0.8, 0.90),
    ("0.4.9", None, 0.90), ("0.4.9", 0.8, 1.0),  # server_args: the heuristic's only
    ("0.5.5", None, 0.8965625), ("0.5.5", 0.8, 1.0),
])
def test_qwen_fraction_at_each_release(version: str, given: float | None, factor: float) -> None:
    if version == "0.4.3":  # no Qwen2.5-VL at 0.4.3: the rule alone
        assert value_at(SGLANG_VLM_FRACTION, version, None, engine="sglang") == ("runner", 0.95)
        return
    got, base = _mfs(QWEN, version, mem_fraction_static=given)
    assert got == pytest.approx(base * factor)


@pytest.mark.parametrize("version", ["0.4.6", "0.4.9", "0.5.5"])
def test_llama4_fraction_is_not_reduced(version: str) -> None:
    """Llama 4 is in mm_disabled_models from 0.4.6 (and a TODO at 0.4.5): not multimodal."""
    got, base = _mfs(SCOUT, version, tp=8)
    assert got == base


def test_no_encoder_term_and_row_1401_kv() -> None:
    """SGLang profiles no encoder; row 1401's B200 run at its logged fraction: 2,243,474 tokens
    logged, memprof within 0.5%."""
    dep = Deployment(engine="sglang", engine_version="0.5.5", mem_fraction_static=0.7629746875)
    est = estimate(QWEN, dep, gpu_name="B200")
    names = {c.name for c in est.ranks[0].components}
    assert not any("encoder" in n for n in names)
    assert "vision tower" in names
    assert abs(est.kv_cache_tokens / 2_243_474 - 1) < 0.005


def invoke(argv: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, err.getvalue()


@pytest.mark.parametrize(("argv", "text"), [
    (["--model", QWEN, "--engine-version", "0.4.3"], "SGLang 0.4.3 has no "
     "Qwen2_5_VLForConditionalGeneration model"),
    (["--model", SCOUT, "--engine-version", "0.4.4", "--tp", "8"], "SGLang 0.4.4 has no"),
    (["--model", QWEN, "--engine-version", "main@d315eb7"],
     "has not read SGLang main@d315eb7's vision path"),
    (["--model", "qwen3-vl-4b-instruct", "--engine-version", "0.5.2"], "SGLang 0.5.2 has no"),
    (["--model", "qwen3-vl-4b-instruct", "--engine-version", "0.5.7"],
     "has not read SGLang 0.5.7's vision path"),
    (["--model", QWEN, "--engine-version", "0.5.5", "--tp", "2", "--pp-size", "2"],
     "with --pp-size 2"),
    (["--model", QWEN, "--engine-version", "0.5.5", "--tp", "2", "--dp", "2",
      "--enable-dp-attention"], "with --enable-dp-attention"),
    (["--model", QWEN, "--engine-version", "0.5.5", "--quantization", "fp8"],
     "with a quantised checkpoint"),
])
def test_what_is_not_read_is_refused(argv: list[str], text: str) -> None:
    code, err = invoke(["estimate", "--engine", "sglang", "--gpu", "H200", *argv])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 2, err
    assert lines[0].startswith("error: ") and text in lines[0]
    assert lines[1].startswith("hint: ")


def test_skipped_tower_is_not_refused_under_pp() -> None:
    """Llama 4 at 0.4.5 builds no tower: a PP layout is the text model's to check."""
    code, err = invoke(["estimate", "--engine", "sglang", "--engine-version", "0.4.5", "--gpu",
                        "H200", "--model", SCOUT, "--tp", "4", "--pp-size", "2",
                        "--context-length", "8192"])
    assert code in (0, 1), err



@pytest.mark.parametrize(("model", "version", "given", "chunk", "tokens"), [
    (QWEN, "0.4.4", None, 8192, 8192),  # only Mllama and Qwen2-VL up to 0.4.4
    # 0.4.5 - 0.4.6: model_runner turns it off for every multimodal model, given or not
    (QWEN, "0.4.5", None, -1, 16384), (QWEN, "0.4.6", 4096, -1, 16384),
    (QWEN, "0.4.7", None, 8192, 8192),  # from 0.4.7 only for unsupported architectures
    (QWEN, "0.4.9", 4096, 4096, 4096),
    (SCOUT, "0.4.5", None, 8192, 8192),  # Llama 4 is not multimodal there
])
def test_chunked_prefill_off_for_a_multimodal_model(model: str, version: str, given: int | None,
                                                    chunk: int, tokens: int) -> None:
    dep = Deployment(engine="sglang", engine_version=version, tp=8 if model == SCOUT else 1,
                     max_model_len=8192, chunked_prefill_size=given)
    got = estimate(model, dep, gpu_name="H100").deployment
    assert (got.chunked_prefill_size, got.max_num_batched_tokens) == (chunk, tokens)
