"""The CLI's coercion of option values (``memprof.commands.options.PARSERS``): a plain decimal
is read as the number it writes, anything else is one ``error:`` line naming the flag and the
value (exit 2), never a traceback; values are never guessed (no ``1e3`` for an int, no nan)."""

from __future__ import annotations

import argparse

import pytest

from memprof.commands.options import parse_float, parse_int
from tests.cli_helpers import invoke, one_error

INTS = [("8", 8), ("0", 0), ("007", 7), ("-1", -1), ("+3", 3), (" 5", 5),
        ("9999999999999999999", 9999999999999999999), ("9" * 400, int("9" * 400))]
BAD_INTS = ["1_000", "1e3", "0.9", "abc", "H200", "", "nan", "9" * 4001, "0x10",
            "٣", "None"]
FLOATS = [("0.9", 0.9), ("0.90", 0.9), (".5", 0.5), ("1.", 1.0), ("1", 1.0), ("-1", -1.0),
          ("1e-3", 0.001), (" 0.5 ", 0.5)]
BAD_FLOATS = ["nan", "inf", "-inf", "1e400", "abc", "", "0,9", "None", "1_0"]


@pytest.mark.parametrize(("text", "value"), INTS)
def test_ints_read_as_written(text: str, value: int) -> None:
    assert parse_int(text) == value and type(parse_int(text)) is int


@pytest.mark.parametrize("text", BAD_INTS)
def test_not_an_int_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_int(text)


@pytest.mark.parametrize(("text", "value"), FLOATS)
def test_floats_read_as_written(text: str, value: float) -> None:
    assert parse_float(text) == pytest.approx(value) and type(parse_float(text)) is float


@pytest.mark.parametrize("text", BAD_FLOATS)
def test_not_a_number_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_float(text)


@pytest.mark.parametrize(("argv", "flag", "value"), [
    (["estimate", "-tp", "two"], "--tensor-parallel-size", "two"),
    (["estimate", "--tp-size", "1e3"], "--tensor-parallel-size", "1e3"),
    (["estimate", "--gpu-memory-utilization", "nan"], "--gpu-memory-utilization", "nan"),
    (["plan", "-m", "qwen3-32b", "--context", "8k", "--requests", "x"], "--requests", "x"),
    (["gate", "--tolerance", "lots"], "--tolerance", "lots"),
    (["validate", "--layers", "4.5"], "--layers", "4.5"),
])
def test_a_bad_value_names_the_flag_and_the_value(argv: list[str], flag: str, value: str
                                                  ) -> None:
    code, out, err = invoke(argv)
    assert code == 2 and out == ""
    one_error(err, flag)
    assert repr(value) in err.splitlines()[0]


def test_values_reach_the_deployment_as_numbers() -> None:
    import json

    code, out, err = invoke(["estimate", "-m", "qwen3-0.6b", "--gpu", "H100", "-tp", " 1",
                             "--gpu-memory-utilization", ".85", "--max-num-seqs", "+64",
                             "-f", "json"])
    assert code == 0, err
    dep = json.loads(out)["deployment"]
    assert dep["tensor_parallel_size"] == 1 and dep["gpu_memory_utilization"] == 0.85
    assert dep["max_num_seqs"] == 64


def test_a_flag_takes_the_next_word_as_its_value() -> None:
    """As click did: ``--kv-cache-memory -1GiB`` is a size the reader refuses, not a flag."""
    code, _, err = invoke(["estimate", "-m", "llama-3.1-8b", "--kv-cache-memory", "-1GiB"])
    assert code == 2
    one_error(err, "cannot read the size '-1GiB'")
