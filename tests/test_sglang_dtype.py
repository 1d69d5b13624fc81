"""SGLang's model dtype per release and card (memprof/core/engines/sglang_dtype.py): ``auto`` the
checkpoint's dtype, a float32 one in float16 (Gemma in bfloat16: model type gemma2 through 0.4.4,
any gemma* from 0.4.5); then float16 below compute capability 8.0 whatever --dtype, and no start
below 7.5 (sglang 0.4.3 – 0.5.23 ModelRunner.load_model)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.auto_dtype import check_served_dtype, served_dtype
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang_dtype import SGLANG_AUTO_DTYPE, SGLANG_LEGACY_GPU
from memprof.core.estimate import estimate
from memprof.core.models import ModelSpec, load_model
from memprof.core.version_diff import all_rules

Q, G2, G3T, G3 = "qwen3-0.6b", "gemma-2-9b-it", "gemma-3-1b-it", "gemma-3-27b-it"


def _spec(name: str, dtype: str) -> ModelSpec:
    return replace(load_model(name), dtype=dtype)


def _sglang(version: str, dtype: str = "auto") -> Deployment:
    return Deployment(engine="sglang", engine_version=version, dtype=dtype)


@pytest.mark.parametrize(("version", "arch", "ckpt", "model", "asked", "served"), [
    ("0.5.23", "sm90", "bfloat16", Q, "auto", "bfloat16"),
    ("0.5.23", "sm90", "float16", Q, "auto", "float16"),
    ("0.5.23", "sm90", "float32", Q, "auto", "float16"),     # "the common practice"
    ("0.4.3", "sm90", "float32", G2, "auto", "bfloat16"),    # model_type == "gemma2"
    ("0.4.4", "sm90", "float32", G3T, "auto", "float16"),    # gemma3_text: not gemma2 yet
    ("0.4.5", "sm90", "float32", G3T, "auto", "bfloat16"),   # startswith("gemma")
    ("0.5.23", "sm90", "float32", G3, "auto", "bfloat16"),
    ("0.5.23", "sm90", "bfloat16", Q, "float32", "float32"),  # explicit: as given
    ("0.5.23", "sm86", "bfloat16", Q, "auto", "bfloat16"),
    ("0.4.3", "sm75", "bfloat16", Q, "auto", "float16"),     # load_model: below sm80
    ("0.5.23", "sm75", "bfloat16", Q, "bf16", "float16"),    # an explicit bf16 too
    ("0.5.23", "sm75", "bfloat16", Q, "float32", "float16"),
    ("0.5.23", "sm75", "float32", G2, "auto", "float16"),
    ("0.5.23", "sm75", "bfloat16", G3, "auto", "float16"),   # vLLM 0.33.0 serves float32 here
    ("0.5.23", "gfx942", "bfloat16", Q, "auto", "bfloat16"),  # ROCm: no fallback
    ("0.5.23", "gfx942", "bfloat16", Q, "float32", "float32"),
])
def test_served_dtype(version: str, arch: str, ckpt: str, model: str, asked: str,
                      served: str) -> None:
    assert served_dtype(_spec(model, ckpt), _sglang(version, asked), arch) == served


def test_vllm_reads_its_own_rows_for_the_same_card() -> None:
    spec = _spec(G3, "bfloat16")
    assert served_dtype(spec, Deployment(engine_version="0.33.0"), "sm75") == "float32"
    assert served_dtype(spec, _sglang("0.5.23"), "sm75") == "float16"


# Qwen3-0.6B by hand: 28 layers x (q 1024x2048 + k, v 1024x1024 + o 2048x1024 + MLP 3 x 1024x3072
# + q/k norms 2 x 128 + 2 x 1024 norms) + embed 151,936 x 1024 (tied) + final norm 1024
QWEN3_06B_PARAMS = 28 * (2 * 1024 * 2048 + 2 * 1024 * 1024 + 3 * 1024 * 3072 + 256 + 2048) \
    + 151936 * 1024 + 1024


@pytest.mark.parametrize(("gpu", "asked", "dtype", "itemsize"), [
    ("T4", "auto", "float16", 2),          # the bfloat16 checkpoint at float16
    ("T4", "float32", "float16", 2),       # an explicit float32 too: half the bytes
    ("RTX-2080-Ti", "bfloat16", "float16", 2),
    ("H100", "auto", "bfloat16", 2),
    ("H100", "float32", "float32", 4),
])
def test_the_weights_are_sized_at_the_dtype_served(gpu: str, asked: str, dtype: str,
                                                   itemsize: int) -> None:
    assert QWEN3_06B_PARAMS == 596_049_920
    e = estimate(Q, _sglang("0.5.23", asked), gpu_name=gpu)
    assert e.model_dtype == dtype
    assert sum(t.bytes for t in e.ranks[0].tensors) == QWEN3_06B_PARAMS * itemsize


def test_below_8_0_the_note_says_float16_and_why() -> None:
    e = estimate(Q, _sglang("0.4.6"), gpu_name="T4")
    assert any(n.startswith("capability 7.5 < 8.0: SGLang serves the model in float16, not "
                            "bfloat16") for n in e.notes)
    assert not any("vLLM serves" in n for n in e.notes)
    half = estimate(Q, _sglang("0.4.6", "float16"), gpu_name="T4")
    assert not any(n.startswith("capability 7.5") for n in half.notes)  # nothing changed
    assert half.kv_cache_tokens == e.kv_cache_tokens


@pytest.mark.parametrize("version", ["0.4.3", "0.5.9", "0.5.23"])
def test_a_v100_is_refused_whatever_the_dtype(version: str) -> None:
    spec = load_model(Q)
    for asked in ("auto", "float16"):
        with pytest.raises(BadInput, match="sm75 and above"):
            check_served_dtype(spec, _sglang(version, asked), "sm70", "V100-32GB")
    check_served_dtype(spec, _sglang(version), "sm75", "T4")
    check_served_dtype(spec, _sglang(version), "gfx942", "MI300X")


def test_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "-m", Q, "--engine", "sglang", "--engine-version", "0.5.9"]
    assert run([*argv, "--gpu", "V100-16GB", "--dtype", "float16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("error: SGLang 0.5.9 does not start on V100")
    assert err[1].startswith("hint: no --dtype avoids it")
    # an explicit bfloat16 on a T4: vLLM refuses it, SGLang serves float16
    assert run([*argv, "--gpu", "T4", "--dtype", "bfloat16"]) == 0
    assert run(["estimate", "-m", Q, "--gpu", "T4", "--dtype", "bfloat16"]) == 2


def test_listed_with_their_sources() -> None:
    listed = all_rules()
    for r in (*SGLANG_AUTO_DTYPE, *SGLANG_LEGACY_GPU):
        assert any(r is x for x in listed) and r.source and r.engine == "sglang"
