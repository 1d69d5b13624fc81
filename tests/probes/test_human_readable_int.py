"""vLLM's ``human_readable_int`` as memprof reads a pasted command's --max-model-len and
--max-num-batched-tokens (vLLM 0.8.4+ engine/arg_utils.py; serve_command.HUMAN_READABLE_SINCE)."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.base.units import human_readable_int
from memprof.probes.serve_command import HUMAN_READABLE_SINCE, parse_tokens


@pytest.mark.parametrize(("text", "value"), [
    ("10k", 10_000), ("25.6k", 25_600), ("1m", 1_000_000), ("2g", 2_000_000_000),
    ("32K", 32_768), ("1M", 1_048_576), ("1G", 1 << 30), ("131072", 131_072), (" 4096 ", 4096),
    ("1_000", 1000),  # int() reads the underscore, so vLLM does too
])
def test_values_as_vllm_reads_them(text: str, value: int) -> None:
    assert human_readable_int(text) == value


@pytest.mark.parametrize("text", ["1.5K", "1t", "1T", "10KiB", "32kb", "k", "1e4", "ten"])
def test_values_vllm_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        human_readable_int(text)


def test_pasted_command_reads_them_and_refuses_what_vllm_refuses() -> None:
    c = parse_tokens(["vllm", "serve", "m", "--max-model-len", "10k",
                      "--max-num-batched-tokens", "8K"])
    assert c.settings == {"max_model_len": 10_000, "max_num_batched_tokens": 8192}
    with pytest.raises(BadInput, match="bad value '1T' for --max-model-len"):
        parse_tokens(["vllm", "serve", "m", "--max-model-len", "1T"])
    with pytest.raises(BadInput, match="not a positive"):
        parse_tokens(["vllm", "serve", "m", "--max-model-len", "0"])


def test_the_release_each_flag_arrived_in_is_named() -> None:
    assert HUMAN_READABLE_SINCE == {"max_model_len": "0.8.4", "max_num_batched_tokens": "0.9.2"}
