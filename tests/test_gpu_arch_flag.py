"""``memprof estimate --gpu-memory SIZE --gpu-arch ARCH``: a card the catalog lacks takes the
named architecture's rules, and every wrong combination is one ``error:`` + ``hint:``, exit 2."""

from __future__ import annotations

import json

import pytest

from tests.test_did_you_mean import call, error_and_hint


def _gpu(*argv: str) -> dict[str, object]:
    code, out, err = call("estimate", "-m", "qwen3-0.6b", "--format", "json", *argv)
    assert code == 0, err
    gpu: dict[str, object] = json.loads(out)["gpu"]
    return gpu


def test_the_architecture_given_replaces_unknown() -> None:
    got = _gpu("--gpu-memory", "15GiB", "--gpu-arch", "7.5")
    assert (got["arch"], got["total_bytes"], got["name"]) == ("sm75", 15 << 30, "custom sm75")
    assert _gpu("--gpu-memory", "40GiB", "--gpu-arch", "gfx942")["arch"] == "gfx942"
    assert _gpu("--gpu", "L40S", "--gpu-arch", "sm89")["name"] == "L40S"


def test_the_unknown_architecture_note_names_the_way_out() -> None:
    from memprof.core.deployment import Deployment
    from memprof.core.estimate import estimate
    from memprof.core.gpus import UNKNOWN_ARCH_RULES, unlisted_gpu

    # only a caller with a bare size (a log, the Python API) gets an unknown architecture, and
    # its estimate says which rules it applied
    e = estimate("qwen3-0.6b", Deployment(), gpu=unlisted_gpu(15 << 30))
    assert UNKNOWN_ARCH_RULES in e.notes and "add --gpu-arch" in UNKNOWN_ARCH_RULES
    code, out, _ = call("estimate", "-m", "qwen3-0.6b", "--gpu-memory", "15GiB", "--gpu-arch",
                        "sm86")
    assert code == 0 and "GPU architecture not given" not in out


@pytest.mark.parametrize(("argv", "error", "hint"), [
    (["--gpu-memory", "15GiB", "--gpu-arch", "sm99"], "unknown GPU architecture 'sm99'",
     "sm75"),
    (["--gpu", "L40S", "--gpu-arch", "sm90"], "--gpu L40S is sm89, but --gpu-arch says sm90",
     "leave out --gpu-arch"),
    (["--gpu-arch", "sm90"], "--gpu-arch without --gpu-memory sizes no GPU", "--gpu-memory"),
    (["--gpu-memory", "15GiB"], "--gpu-memory without --gpu-arch: the card's architecture "
     "decides its kernels, attention backends and platform figures", "add --gpu-arch ARCH"),
])
def test_wrong_combinations_are_bad_input(argv: list[str], error: str, hint: str) -> None:
    got_error, got_hint = error_and_hint(["estimate", "-m", "qwen3-0.6b", *argv])
    assert got_error == f"error: {error}"
    assert got_hint.startswith("hint: ") and hint in got_hint
