"""``--engine-version`` names a development, pre-release or vendor build the way a start-up log
does (``memprof/core/release_names.py`` ``map_build``): modelled at the release it maps to,
with a note on stderr; a plain release memprof does not model, or a build with no modelled
release to map to, stays an ``error:``."""

from __future__ import annotations

import json

import pytest

from memprof.cli import run

BASE = ["estimate", "-m", "llama-3.1-8b", "--gpu", "H100", "-f", "json"]


@pytest.mark.parametrize(("given", "modelled"), [("0.7.4.dev12", "0.7.3"),
                                                 ("0.11.2rc1+rhai0", "0.11.2"),
                                                 ("0.8.5.post1+cu124", "0.8.5.post1"),
                                                 ("0.34.0.dev3", "0.33.0")])
def test_a_build_is_modelled_at_its_release(capsys: pytest.CaptureFixture[str], given: str,
                                           modelled: str) -> None:
    code = run([*BASE, "--engine-version", given])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert json.loads(out)["deployment"]["engine_version"] == modelled
    assert err.startswith(f"note: vLLM {given}") and f"modelled at {modelled}" in err


def test_the_same_figures_as_the_release(capsys: pytest.CaptureFixture[str]) -> None:
    run([*BASE, "--engine-version", "0.7.4.dev12"])
    dev = json.loads(capsys.readouterr()[0])
    run([*BASE, "--engine-version", "0.7.3"])
    rel = json.loads(capsys.readouterr()[0])
    assert dev["summary"] == rel["summary"] and dev["ranks"] == rel["ranks"]


@pytest.mark.parametrize("given", ["0.5.4", "0.6.0.dev3", "0.99.0rc1", "0.40.0"])
def test_what_maps_to_no_modelled_release_is_refused(capsys: pytest.CaptureFixture[str],
                                                     given: str) -> None:
    code = run([*BASE, "--engine-version", given])
    err = capsys.readouterr()[1]
    assert code == 2 and err.startswith("error:") and "hint:" in err


PLAN = ["plan", "-m", "qwen2.5-0.5b", "--gpu", "H100", "--requests", "8", "--context", "4096",
        "-f", "json"]


def test_plan_models_a_build_at_its_release(capsys: pytest.CaptureFixture[str]) -> None:
    """``memprof plan --engine-version`` takes a build as ``estimate`` does: the same layouts as
    the release it maps to, and the note on stderr."""
    assert run([*PLAN, "--engine-version", "0.7.4.dev12"]) == 0
    dev, err = capsys.readouterr()
    assert run([*PLAN, "--engine-version", "0.7.3"]) == 0
    rel = capsys.readouterr()[0]
    assert dev == rel
    assert err.startswith("note: vLLM 0.7.4.dev12") and "modelled at 0.7.3" in err
    assert run([*PLAN, "--engine-version", "0.6.0.dev3"]) == 2
    assert capsys.readouterr()[1].startswith("error:")
