"""Release names users type as ``--engine-version`` and logs print: vLLM 0.7.0 modelled as a
release, and SGLang's post, development, candidate and local builds placed among its numbered
releases by the one mapping ``explain`` uses too (``memprof/core/release_names.py``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.engines.vllm import V0_CHUNKED_PREFILL_OFF
from memprof.core.lora import LORA_RANKS
from memprof.core.release_names import map_build, map_release
from memprof.core.releases import PUBLISHED, SGLANG_POST_BUILT, SGLANG_SNAPSHOTS
from memprof.core.versions import resolve_version, value_at, version_key
from memprof.probes.sglang_log import modelled_release

SGL = ["estimate", "-m", "qwen3-0.6b", "--gpu", "H100", "--engine", "sglang", "-f", "json"]
SGL_QWEN25 = ["estimate", "-m", "qwen2.5-0.5b", "--gpu", "H100", "--engine", "sglang", "-f",
              "json"]
_DATES = dict(PUBLISHED["sglang"])


def _estimate(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str, str]:
    code = run(args)
    out, err = capsys.readouterr()
    return code, out, err


# --- vLLM 0.7.0 ---------------------------------------------------------------------------------

def test_vllm_070_is_a_release_and_its_builds_map_to_it() -> None:
    assert resolve_version("0.7.0") == "0.7.0" and resolve_version("v0.7.0") == "0.7.0"
    assert map_release("0.7.0") is not None and map_release("0.7.0").note is None  # type: ignore
    built = map_build("0.7.0+cu124")
    assert built is not None and built.release == "0.7.0"
    assert built.note is not None and "(+cu124)" in built.note


def test_vllm_07x_keeps_the_rocm_check_and_ranks_to_256() -> None:
    """0.7.0 – 0.7.3 engine/arg_utils.py: 'and not current_platform.is_rocm()' in the
    long-context default; config.py LoRAConfig: ranks 8 – 256 until 0.8.0."""
    for v in ("0.7.0", "0.7.1", "0.7.3"):
        assert "rocm" in value_at(V0_CHUNKED_PREFILL_OFF, v, ())  # type: ignore[operator]
        assert 320 not in value_at(LORA_RANKS, v, ())  # type: ignore[operator]
    assert 512 in value_at(LORA_RANKS, "0.8.0", ())  # type: ignore[operator]


def test_vllm_070_refuses_mla_as_before_0_7_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _estimate(capsys, ["estimate", "-m", "deepseek-v3", "--gpu", "H200", "--tp",
                                      "8", "--engine-version", "0.7.0"])
    assert code == 2 and "MLA" in err and "hint:" in err


# --- SGLang post releases -----------------------------------------------------------------------

@pytest.mark.parametrize("post", sorted(SGLANG_POST_BUILT, key=version_key))
def test_a_dated_post_release_is_modelled_at_the_newest_release_built_before_it(
        post: str) -> None:
    m = map_release(post, "sglang")
    assert m is not None and m.note is not None
    built = SGLANG_POST_BUILT[post]
    assert _DATES[m.release] <= built
    later = [r for r, when in PUBLISHED["sglang"] if _DATES[m.release] < when <= built]
    assert later == []  # nothing published between it and the build
    base = post.split(".post")[0]
    assert f"SGLang {post}: a post release of {base}, not modelled: modelled at {m.release}" \
        in m.note and built[:10] in m.note


@pytest.mark.parametrize(("post", "release"), [
    ("0.4.3.post4", "0.4.3"), ("0.5.13.post1", "0.5.13"), ("0.4.6.post5", "0.4.6"),
    ("0.5.1.post3", "0.5.1"), ("0.4.9.post6", "0.4.9.post5")])
def test_engine_version_takes_a_post_release(capsys: pytest.CaptureFixture[str], post: str,
                                             release: str) -> None:
    # Qwen2.5: SGLang 0.4.3's registry has no Qwen3ForCausalLM (first in 0.4.5.post2's wheel)
    code, out, err = _estimate(capsys, [*SGL_QWEN25, "--engine-version", post])
    assert code in (0, 1), err
    assert json.loads(out)["deployment"]["engine_version"] == release
    assert err.startswith(f"note: SGLang {post}: a post release of") \
        and f"modelled at {release}" in err


def test_an_undated_post_release_is_placed_by_its_number_and_says_so() -> None:
    assert "0.4.9.post3" not in SGLANG_POST_BUILT
    m = map_release("0.4.9.post3", "sglang")
    assert m is not None and m.release == "0.4.9" and m.note is not None
    assert "by number" in m.note and "no build date" in m.note
    m = map_release("0.4.9.post7", "sglang")  # after the listed 0.4.9.post5
    assert m is not None and m.release == "0.4.9.post5"


def test_the_build_date_places_a_post_release_not_its_number(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A post release built after the next release was published is a main build after it."""
    monkeypatch.setitem(SGLANG_POST_BUILT, "0.4.9.post9", "2025-08-01T00:00:00Z")
    m = map_release("0.4.9.post9", "sglang")
    assert m is not None and m.release == "0.4.10"


@pytest.mark.parametrize(("given", "release", "says"), [
    ("0.5.14.dev3", "0.5.13", "a development build on the way to 0.5.14"),
    ("0.5.14rc1", "0.5.14", "a release candidate of 0.5.14"),
    ("0.5.14+rocm630", "0.5.14", "a local or vendor build (+rocm630)"),
    ("v0.5.3rc0", "0.5.3", "a release candidate of 0.5.3"),
])
def test_dev_rc_and_local_builds(given: str, release: str, says: str) -> None:
    m = map_build(given, "sglang")
    assert m is not None and m.release == release and m.note is not None and says in m.note


def test_explain_and_engine_version_agree() -> None:
    for name in [*SGLANG_POST_BUILT, "0.4.9.post3", "0.5.14.dev3", "0.5.14rc1", "0.5.2+cu128"]:
        built = map_build(name, "sglang")
        assert built is not None
        assert modelled_release(name) == (built.release, built.note)


@pytest.mark.parametrize(("given", "says"), [
    ("0.5.24", "newer than the SGLang releases memprof models"),
    ("0.5.24.post1", "newer than the SGLang releases memprof models"),
    ("0.6.0rc0", "newer than the SGLang releases memprof models"),
    ("0.4.2", "older than the SGLang releases memprof models"),
    ("0.4.2.post1", "older than the SGLang releases memprof models"),
    ("0.5.0", "is not a release among the SGLang releases memprof models"),
    ("0.4.3.dev1", "older than the SGLang releases memprof models"),
    ("0.4.3-cu124", "is not a release among the SGLang releases memprof models"),
    ("nightly", "is not a release number or a source snapshot memprof models"),
])
def test_what_maps_to_no_modelled_release_is_refused(capsys: pytest.CaptureFixture[str],
                                                     given: str, says: str) -> None:
    code, _, err = _estimate(capsys, [*SGL, "--engine-version", given])
    assert code == 2 and err.startswith("error:") and says in err and "\nhint: " in err
    assert "source snapshots" not in err and "Traceback" not in err


@pytest.mark.parametrize("name", [*SGLANG_SNAPSHOTS, "0.4.8.post1", "0.5.23"])
def test_listed_names_are_taken_as_they_are(name: str) -> None:
    assert resolve_version(name, "sglang") == name
    assert map_build(name, "sglang") is None and map_release(name, "sglang").note is None  # type: ignore[union-attr]


_VERSIONISH = st.from_regex(
    r"\A[vV]?[0-9]{1,3}(\.[0-9]{1,3}){0,3}((rc|a|b|\.post|\.dev|post)[0-9]{0,3})?"
    r"(\+[a-z0-9.]{0,8})?\Z")


@settings(max_examples=300, deadline=None)
@given(st.one_of(_VERSIONISH, st.text(max_size=30)), st.sampled_from(["sglang", "vllm"]))
def test_fuzzed_versions_never_crash(text: str, engine: str) -> None:
    mapped = map_release(text, engine)
    built = map_build(text, engine)
    if built is not None:
        assert mapped is not None and built.release == mapped.release
    try:
        resolve_version(built.release if built else text, engine)
    except BadInput as exc:
        assert exc.hint
