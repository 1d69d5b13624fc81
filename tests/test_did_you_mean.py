"""An unknown --gpu or --model names the close catalog / bundled entries, or, when nothing is
close, says so and gives the way out (``--gpu-memory``, ``memprof gpus``, ``memprof models``)."""

from __future__ import annotations

import contextlib
import io

import pytest

from memprof.cli import run
from memprof.core.gpus import catalog, find_gpu, suggest_gpus
from memprof.core.models.load import suggest_models


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(list(argv))
    return code, out.getvalue(), err.getvalue()


def error_and_hint(argv: list[str]) -> tuple[str, str]:
    code, out, err = call(*argv)
    lines = err.strip().splitlines()
    assert code == 2 and out == "", err
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    return lines[0], lines[1]


@pytest.mark.parametrize(("typed", "expected"), [
    ("A100", ["A100-80GB", "A100-40GB"]),
    ("a100-80", ["A100-80GB"]),
    ("RTX 4090 24GB", ["RTX-4090"]),
    ("h200-144gb", ["H200"]),
    ("H100-94GB", ["H100-80GB"]),
    ("mi300", ["MI300X"]),
    ("b200x", ["B200"]),
    ("L40S-96GB", ["L40S"]),
    ("V100", ["V100-16GB", "V100-32GB"]),
])
def test_close_gpus_are_suggested(typed: str, expected: list[str]) -> None:
    error, hint = error_and_hint(["estimate", "-m", "qwen3-0.6b", "--gpu", typed])
    assert error == f"error: unknown GPU {typed!r}"
    assert hint.startswith("hint: did you mean ")
    close = suggest_gpus(typed)
    assert close[:len(expected)] == expected
    for name in expected:
        assert name in hint
    assert "--gpu-memory" in hint and "memprof gpus" in hint


@pytest.mark.parametrize("typed", ["P100", "K80", "TPU-v5e", "GTX 1080"])
def test_gpus_not_in_the_catalog_say_so_and_how_to_proceed(typed: str) -> None:
    assert suggest_gpus(typed) == []
    error, hint = error_and_hint(["estimate", "-m", "qwen3-0.6b", "--gpu", typed])
    assert error == f"error: unknown GPU {typed!r}: it is not in memprof's GPU catalog"
    assert "--gpu-memory SIZE --gpu-arch ARCH" in hint and "leave out --gpu" in hint
    assert "memprof gpus" in hint
    # and the way out works: the same GPU described by its memory
    code, _, err = call("estimate", "-m", "qwen3-0.6b", "--gpu-memory", "14.58GiB", "--gpu-arch",
                        "sm75")
    assert code == 0, err


@pytest.mark.parametrize("typed", ["h100", "H100-80G", "rtx4090", "H100 80GB HBM3", "h-2-0-0"])
def test_spellings_of_catalog_names_resolve(typed: str) -> None:
    assert find_gpu(typed).name in {g.name for g in catalog()}


def test_every_catalog_name_resolves_and_suggests_itself() -> None:
    for g in catalog():
        assert find_gpu(g.name.lower()) == g
        assert g.name in suggest_gpus(g.name + "-999GB")  # a memory size it does not have


def test_a_huge_gpu_name_is_cut_in_the_message() -> None:
    error, _ = error_and_hint(["estimate", "-m", "qwen3-0.6b", "--gpu", "H" * 10_000])
    assert len(error) < 200


@pytest.mark.parametrize(("typed", "first"), [
    ("qwen3_32b", "qwen3-32b"), ("Qwen3 32B", "qwen3-32b"), ("qwen3-72b", "qwen3-32b"),
    ("gptoss-120b", "gpt-oss-120b"), ("deepseek-r2", "deepseek-r1"), ("kimi", "kimi-k2"),
    ("llama-9", "llama-3.1-8b"),
])
def test_close_models_are_suggested(typed: str, first: str) -> None:
    error, hint = error_and_hint(["estimate", "--gpu", "H100", "-m", typed])
    assert error == f"error: unknown model {typed!r}"
    assert first in suggest_models(typed)
    assert hint.startswith("hint: did you mean ") and first in hint


@pytest.mark.parametrize(("typed", "first"), [
    ("Qwen/Qwen3-32B-Instruct", "Qwen/Qwen3-32B"),
    ("meta-llama/Llama-3.2-8B-Instruct", "meta-llama/Llama-3.1-8B"),
    ("someorg/gpt-oss-120", "openai/gpt-oss-120b"),
])
def test_close_hf_ids_are_suggested(typed: str, first: str) -> None:
    error, hint = error_and_hint(["estimate", "--gpu", "H100", "-m", typed])
    assert "is not a bundled model" in error and "downloads nothing" in error
    assert hint.startswith("hint: did you mean ") and first in hint


def test_nothing_close_gives_the_way_out() -> None:
    assert suggest_models("zzzz") == []
    error, hint = error_and_hint(["estimate", "--gpu", "H100", "-m", "zzzz"])
    assert error == "error: unknown model 'zzzz'"
    assert "did you mean" not in hint and "memprof models" in hint


def test_a_logs_model_that_is_not_bundled_names_the_close_one() -> None:
    from memprof.base.errors import BadInput
    from memprof.probes.log_deployment import resolve_model

    with pytest.raises(BadInput, match="is not a bundled model") as info:
        resolve_model("/models/Qwen3-32B-AWQ")
    assert info.value.hint.startswith("if it is Qwen/Qwen3-32B, pass --model Qwen/Qwen3-32B")
    with pytest.raises(BadInput) as info:
        resolve_model("foo/bar")
    assert info.value.hint.startswith("pass --model (memprof models")
