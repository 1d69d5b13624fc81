"""memprof's own ``--max-model-len`` and ``--max-num-batched-tokens`` read a token count as vLLM's
``human_readable_int`` reads them (``memprof.base.units``): 32k = 32,000, 32K = 32,768, 1.5k =
1,500; a decimal with a binary letter, a T, or a word is an ``error:`` with exit 2 — on the
command line, in a sweep's ``--set`` and in a gate scenario's TOML alike."""

from __future__ import annotations

import json

import pytest

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.flags import coerce

QWEN = ["estimate", "--model", "qwen3-32b", "--gpu", "H200", "-f", "json"]


@pytest.mark.parametrize(("text", "tokens"), [("10k", 10_000), ("32K", 32_768), ("1.5k", 1_500),
                                              ("40960", 40_960), ("1m", 1_000_000)])
def test_max_model_len_reads_vllms_forms(capsys: pytest.CaptureFixture[str], text: str,
                                         tokens: int) -> None:
    code = run([*QWEN, "--max-model-len", text])
    out, err = capsys.readouterr()
    if tokens > 40_960:  # beyond Qwen3-32B's max_position_embeddings: vLLM refuses it
        assert code == 2 and "error:" in err
        return
    assert code in (0, 1), err
    assert json.loads(out)["deployment"]["max_model_len"] == tokens


@pytest.mark.parametrize("text", ["1.5K", "1T", "abc", "32 k", "9" * 50])
def test_bad_token_counts_are_refused_before_any_work(capsys: pytest.CaptureFixture[str],
                                                      text: str) -> None:
    code = run([*QWEN, "--max-num-batched-tokens", text])
    _, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and lines[0].startswith("error:") and lines[-1].startswith("hint:")
    assert "Traceback" not in err


def test_batched_tokens_in_binary_letters(capsys: pytest.CaptureFixture[str]) -> None:
    assert run([*QWEN, "--max-num-batched-tokens", "8K"]) in (0, 1)
    assert json.loads(capsys.readouterr()[0])["deployment"]["max_num_batched_tokens"] == 8192


def test_the_core_coerces_text_and_refuses_other_types() -> None:
    assert coerce("max_model_len", "32k", where="x") == 32_000
    assert coerce("max_model_len", 4096, where="x") == 4096
    with pytest.raises(BadInput, match="max_model_len"):
        coerce("max_model_len", "1.5K", where="x")
    with pytest.raises(BadInput, match="max_model_len"):
        coerce("max_model_len", 1.5, where="x")


def test_sweep_set_reads_them(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["sweep", "--model", "qwen3-32b", "--gpu", "H200", "--set",
                "max_model_len=8k,32K", "-f", "csv"])
    out = capsys.readouterr()[0].splitlines()
    assert code in (0, 1)
    assert [line.split(",")[0] for line in out[1:]] == ["8000", "32768"]
