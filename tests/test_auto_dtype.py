"""vLLM's ``--dtype auto`` per release and card (memprof/core/auto_dtype.py): before 0.9.1 the
checkpoint's dtype (float32 -> float16, Gemma 2 bfloat16), refused by the worker where that is
bfloat16 below compute capability 8.0; from 0.9.1 the first dtype the platform supports for the
model type, keeping a supported checkpoint dtype."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.auto_dtype import AUTO_DTYPE, check_served_dtype, served_dtype
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.models import ModelSpec, load_model
from memprof.core.version_diff import all_rules


def _spec(name: str, dtype: str) -> ModelSpec:
    return replace(load_model(name), dtype=dtype)


Q, G2, G3, G3T = "qwen3-0.6b", "gemma-2-9b-it", "gemma-3-27b-it", "gemma-3-1b-it"


@pytest.mark.parametrize(("version", "arch", "ckpt", "model", "served"), [
    ("0.7.3", "sm90", "bfloat16", Q, "bfloat16"),
    ("0.7.3", "sm75", "float16", Q, "float16"),
    ("0.7.3", "sm90", "float32", Q, "float16"),      # "common practice": float16
    ("0.7.3", "sm90", "float32", G2, "bfloat16"),    # Gemma 2's exception
    ("0.9.0", "sm75", "bfloat16", Q, "bfloat16"),    # then refused by the worker
    ("0.9.1", "sm75", "bfloat16", Q, "float16"),     # _resolve_auto_dtype
    ("0.9.1", "sm90", "float32", Q, "bfloat16"),
    ("0.11.0", "sm70", "float32", Q, "float16"),
    ("0.33.0", "sm80", "bfloat16", Q, "bfloat16"),
    ("0.33.0", "sm75", "bfloat16", G3, "float32"),   # model type gemma3: no float16, no bf16
    ("0.33.0", "sm75", "bfloat16", G2, "float32"),
    ("0.33.0", "sm75", "bfloat16", G3T, "float16"),  # gemma3_text is not on vLLM's list
    ("0.33.0", "sm90", "float16", G3, "bfloat16"),
    ("0.33.0", "gfx942", "bfloat16", Q, "bfloat16"),  # ROCm: no CUDA capability gate
])
def test_served_dtype(version: str, arch: str, ckpt: str, model: str, served: str) -> None:
    spec = _spec(model, ckpt)
    assert served_dtype(spec, Deployment(engine_version=version), arch) == served


def test_an_explicit_dtype_and_sglang() -> None:
    spec = _spec("qwen3-0.6b", "float32")
    assert served_dtype(spec, Deployment(dtype="half"), "sm75") == "float16"
    # SGLang's own reading (tests/test_sglang_dtype.py): float16 for a float32 checkpoint
    assert served_dtype(spec, Deployment(engine="sglang"), "sm90") == "float16"


def test_before_0_9_1_a_bfloat16_checkpoint_on_a_t4_is_refused() -> None:
    spec = load_model("qwen3-0.6b")
    assert spec.dtype == "bfloat16"
    with pytest.raises(BadInput, match="refuses bfloat16 on T4"):
        check_served_dtype(spec, Deployment(engine_version="0.8.5"), "sm75", "T4")
    for ok in (Deployment(engine_version="0.9.1"), Deployment(engine_version="0.8.5",
                                                              dtype="float16")):
        check_served_dtype(spec, ok, "sm75", "T4")
    check_served_dtype(spec, Deployment(engine_version="0.8.5"), "sm80", "A100-80GB")


def test_the_estimate_serves_float16_on_a_t4_and_says_so() -> None:
    e = estimate("qwen3-0.6b", Deployment(engine_version="0.11.0"), gpu_name="T4")
    assert e.model_dtype == "float16"
    assert any("in float16" in n and "auto_dtype" in n for n in e.notes)
    assert estimate("qwen3-0.6b", Deployment(engine_version="0.11.0"),
                    gpu_name="H100").model_dtype == "bfloat16"


def test_the_cli_refusal_has_the_way_out(capsys: pytest.CaptureFixture[str]) -> None:
    # (Qwen2.5, a bfloat16 checkpoint 0.7.3's model registry lists; it has no Qwen3ForCausalLM)
    assert run(["estimate", "-m", "qwen2.5-0.5b", "--gpu", "T4", "--engine-version", "0.7.3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("error: ") and "--dtype float16" in err[1]


def test_listed_with_its_sources() -> None:
    listed = all_rules()
    assert all(any(r is x for x in listed) for r in AUTO_DTYPE)
    assert all(r.source for r in AUTO_DTYPE)
