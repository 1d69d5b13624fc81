"""``memprof estimate --compare``: a change that moves no component's bytes is an answer (not an
internal error); an empty change, None for a field with no engine default, or a key given twice
is refused (exit 2, one ``error:`` and one ``hint:`` line) before any work."""

import json

import pytest

from memprof.cli import run

BASE = ("estimate", "--model", "qwen3-32b", "--gpu", "H200")


def call(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("change", ["max_model_len=32768", "max_num_seqs=1024",
                                    "max_num_seqs=None"])
@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_a_change_no_component_feels_is_said(capsys: pytest.CaptureFixture[str], change: str,
                                             fmt: str) -> None:
    code, out, err = call(capsys, *BASE, "--compare", change, "-f", fmt)
    assert code == 0, err
    assert "internal error" not in err
    assert f"compare with {change}" in out
    assert "no component's bytes change" in out


def test_no_change_json_has_empty_component_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = call(capsys, *BASE, "--compare", "max_num_seqs=1024", "-f", "json")
    assert code == 0
    d = json.loads(out)["compare"]
    assert d["changes"] == "max_num_seqs=1024" and d["components"] == []


def test_a_change_that_moves_bytes_still_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    # a smaller budget shrinks the KV cache's bytes (an fp8 KV cache need not: the pool fills
    # the same budget with twice the tokens, and from vLLM 0.29.0 Model Runner V2 measures the
    # graphs it captures, so nothing else need move either)
    code, out, _ = call(capsys, *BASE, "--compare", "gpu_memory_utilization=0.8")
    assert code == 0
    assert "no component's bytes change" not in out
    assert "kv_cache" in out.split("compare with gpu_memory_utilization=0.8")[1]


@pytest.mark.parametrize(("change", "message"), [
    ("", "--compare is empty"),
    (" , ", "--compare is empty"),
    ("None", "cannot read the change 'None'"),
    ("tp=None", "tp has no engine default"),
    ("kv_cache_dtype=none", "kv_cache_dtype has no engine default"),
    ("tp=2,tensor_parallel_size=4", "--compare sets tp twice"),
])
def test_bad_compare_is_refused_before_work(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch, change: str,
                                            message: str) -> None:
    import memprof.core.estimate as core

    def no_work(*a: object, **k: object) -> None:
        raise AssertionError("estimated before the bad --compare was refused")

    monkeypatch.setattr(core, "estimate", no_work)
    code, out, err = call(capsys, *BASE, "--compare", change)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert message in lines[0]
