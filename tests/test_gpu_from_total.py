"""``memprof.core.gpus.gpu_from_total``: the card a printed total stands for, the one rule
``memprof explain`` and the calibration test both take a log's card by."""

from __future__ import annotations

from memprof.core.gpus import GPU_MATCH, PRINTED_ROUNDING, catalog, find_gpu, gpu_from_total


def test_a_total_that_prints_as_a_cards_is_that_card_at_its_exact_total() -> None:
    h100 = find_gpu("H100-80GB")
    got = gpu_from_total(h100.total_bytes + PRINTED_ROUNDING // 2)
    assert got == h100


def test_a_total_within_the_match_is_that_card_at_the_printed_total() -> None:
    a100 = find_gpu("A100-PCIe-40GB")
    printed = 39.38 * (1 << 30)  # row 508's "total_gpu_memory (39.38GiB)"
    assert PRINTED_ROUNDING < abs(a100.total_bytes - printed) <= GPU_MATCH * printed
    got = gpu_from_total(printed)
    assert got.arch == a100.arch
    assert got.total_bytes == int(printed)
    assert not got.exact


def test_a_total_far_from_every_card_has_no_architecture() -> None:
    total = 33.3 * (1 << 30)
    assert all(abs(g.total_bytes - total) > GPU_MATCH * total for g in catalog())
    got = gpu_from_total(total)
    assert got.arch == "unknown"
    assert got.name == "from log"
