"""Engine versions: parsing ``--engine-version``, the rule rows' ranges, the CLI's refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.versions import VLLM_RELEASES, Rule, resolve_version, value_at, version_key


def test_default_is_the_newest_release() -> None:
    assert resolve_version(None) == VLLM_RELEASES[-1] == "0.33.0"
    assert resolve_version("v0.7.1") == "0.7.1"
    assert resolve_version("0.8") == "0.8.0"
    assert resolve_version("0.8.5.post1") == "0.8.5.post1"


def test_releases_are_in_order() -> None:
    keys = [version_key(v) for v in VLLM_RELEASES]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


@pytest.mark.parametrize("text", ["0.6.6", "0.7.0", "0.34.0", "0.8.7", "banana", "1", "",
                                  "0.7.1rc1", "0" * 60])
def test_unknown_or_malformed_versions_are_refused(text: str) -> None:
    with pytest.raises(BadInput) as exc:
        resolve_version(text)
    assert "0.7.1" in exc.value.hint and "0.33.0" in exc.value.hint


def test_rule_ranges_are_half_open() -> None:
    rows = (Rule(name="x", changes="t", since=None, until="0.7.3", introduced_by="a",
                 source="s", value=1),
            Rule(name="x", changes="t", since="0.7.3", until="0.8.0", introduced_by="b",
                 source="s", value=2))
    assert [value_at(rows, v, 0) for v in ("0.7.1", "0.7.2", "0.7.3", "0.8.0")] == [1, 1, 2, 0]


def test_cli_unknown_version_exits_2_naming_the_versions(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    assert run(["estimate", "-m", "qwen3-32b", "--engine-version", "0.6.0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "hint: memprof models vLLM 0.7.1 to 0.33.0" in err


@given(st.text(max_size=30))
def test_fuzz_engine_version_never_crashes(text: str) -> None:
    try:
        got = resolve_version(text)
    except BadInput as exc:
        assert exc.exit_code == 2
    else:
        assert got in VLLM_RELEASES


def test_versions_lists_releases_and_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["versions"]) == 0
    out = capsys.readouterr().out
    for name in ("pp_split_remainder", "deepseek_lm_head_every_pp_stage",
                 "mla_matrix_absorption", "dsv4_mtp_hidden_buffer", "0.7.1", "0.33.0"):
        assert name in out


def test_versions_diff_names_the_rules_for_the_deployment(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    assert run(["versions", "-m", "deepseek-r1", "--gpu", "H200", "-tp", "8", "--from", "0.7.3",
                "--to", "0.8.0"]) == 0
    out = capsys.readouterr().out
    assert "mla_matrix_absorption" in out.split("but not for this deployment")[0]
    assert "attention (MLA)" in out
    assert run(["versions", "-m", "qwen3-32b", "--from", "0.26.0", "--to", "0.27.0"]) == 0
    out = capsys.readouterr().out
    assert "no rule that differs applies" in out and "no component differs" in out
    assert run(["versions", "--from", "0.6.0"]) == 2
