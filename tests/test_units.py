import pytest

from memprof.base.errors import BadInput
from memprof.base.units import GiB, KiB, MiB, cdiv, fmt_bytes, parse_size, round_up


@pytest.mark.parametrize(
    ("text", "expected"),
    [("80GiB", 80 * GiB), ("512MiB", 512 * MiB), ("23.58GiB", 25_318_832_209), ("4GB", 4 * 10**9),
     ("1024B", 1024), ("16K", 16 * KiB), ("1_000B", 1000), (" 2 gib ", 2 * GiB),
     ("0.5TiB", 512 * GiB)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "GiB", "12XB", "-3GiB", "0B", "1.2.3G",
                                 "23,58GiB", "1,024MiB",  # decimal comma / separator: a guess
                                 "80", "1024",  # no unit: bytes or GiB?
                                 "80g", "16k",  # vLLM reads 10^9, memprof read 2^30: ambiguous
                                 "1" + "0" * 4000 + "GiB",  # thousands of digits
                                 "2EiB", "2000000TiB"])
def test_parse_size_rejects(bad: str) -> None:
    with pytest.raises(BadInput):
        parse_size(bad)


def test_fmt_bytes() -> None:
    assert fmt_bytes(3 * GiB // 2) == "1.50 GiB"
    assert fmt_bytes(512) == "512 B"
    assert fmt_bytes(-2 * MiB) == "-2.00 MiB"
    assert fmt_bytes(0) == "0 B"


def test_round_helpers() -> None:
    assert cdiv(7, 2) == 4 and cdiv(8, 2) == 4
    assert round_up(2880, 64) == 2880 and round_up(2880, 128) == 2944


def test_parse_size_vllm_rules_where_the_engine_reads_bytes() -> None:
    # vLLM's --kv-cache-memory-bytes (vllm human_readable_int): bare bytes, k decimal, K binary
    assert parse_size("1024", bare_bytes=True) == 1024
    assert parse_size("25.6k", bare_bytes=True, vllm_letters=True) == 25_600
    assert parse_size("16K", bare_bytes=True, vllm_letters=True) == 16 * KiB
    assert parse_size("2g", bare_bytes=True, vllm_letters=True) == 2 * 10**9
    with pytest.raises(BadInput, match="no decimals"):
        parse_size("1.5G", bare_bytes=True, vllm_letters=True)
