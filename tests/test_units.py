import pytest

from memprof.base.errors import BadInput
from memprof.base.units import GiB, KiB, MiB, cdiv, fmt_bytes, parse_size, round_up


@pytest.mark.parametrize(
    ("text", "expected"),
    [("80GiB", 80 * GiB), ("512MiB", 512 * MiB), ("23.58GiB", int(23.58 * GiB)), ("4GB", 4 * 10**9),
     ("1024", 1024), ("16k", 16 * KiB), ("1_000", 1000), (" 2 gib ", 2 * GiB)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "GiB", "12XB", "-3GiB", "0", "1.2.3G"])
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
