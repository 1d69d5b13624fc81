"""The cards the vLLM 0.28-0.30 logs of tests/data/published.json name that the catalog lacked:
the RTX 4050 Laptop GPU (rows 1711/1712), the RTX 4070 Laptop GPU (row 1736) and the RTX PRO
4000 Blackwell (row 1728). Each total is a print its source quotes (hashcat's CUDA device line,
an Ultralytics start-up line, vLLM's own 'Free memory on device (F/T GiB)'), each SM count the
CUDA cores NVIDIA specifies over 128 FP32 cores per SM, and the names users type and drivers
print resolve."""

from __future__ import annotations

import json

import pytest

from memprof.base.units import GiB
from memprof.core.gpus import find_gpu, gpu_from_total
from memprof.core.models import configs_dir
from tests.test_published_distribution import ROWS as PUBLISHED
from tests.test_published_distribution import row_estimate

CATALOG = {r["name"]: r for r in json.loads(
    (configs_dir() / "gpus.json").read_text(encoding="utf-8"))["gpus"]}

# card -> (torch total in MiB, the print that gives it, nvidia-smi MiB, CUDA cores, architecture)
CARDS = {
    "RTX-4050-Laptop": (5898, "5805/5898 MB, 20MCU", 6141, 2560, "sm89"),
    "RTX-4070-Laptop": (7806, "RTX 4070 Laptop GPU, 7806MiB", 8188, 4608, "sm89"),
    "RTX-PRO-4000": (23992, "(3.25/23.43 GiB) on startup", 24467, 8960, "sm120"),
}

TYPED = {
    "RTX-4050-Laptop": "RTX-4050-Laptop", "RTX 4050 Laptop": "RTX-4050-Laptop",
    "NVIDIA GeForce RTX 4050 Laptop GPU": "RTX-4050-Laptop", "rtx4050laptop": "RTX-4050-Laptop",
    "RTX-4070-Laptop": "RTX-4070-Laptop", "RTX 4070 Laptop": "RTX-4070-Laptop",
    "NVIDIA GeForce RTX 4070 Laptop GPU": "RTX-4070-Laptop",
    "RTX-PRO-4000": "RTX-PRO-4000", "RTX PRO 4000 Blackwell": "RTX-PRO-4000",
    "NVIDIA RTX PRO 4000 Blackwell": "RTX-PRO-4000", "rtx pro 4000": "RTX-PRO-4000",
}


@pytest.mark.parametrize("name", sorted(CARDS))
def test_each_total_is_a_print_its_source_quotes(name: str) -> None:
    mib, printed, smi, _, arch = CARDS[name]
    row, gpu = CATALOG[name], find_gpu(name)
    assert gpu.total_bytes == mib * 2**20 and gpu.arch == arch
    assert printed in row["source"] and mib in row["observed_torch_total_mib"]
    assert row["smi_total_mib"] == smi and f"{smi}" in row["source"].replace(",", "")
    assert gpu.total_bytes < smi << 20  # the driver's reservation: torch sees less than smi
    assert row["exact"] is False


def test_the_pro_4000_total_prints_as_vllm_printed_it() -> None:
    """vLLM prints its total to 0.01 GiB: the row's MiB prints 23.43, and the printed total maps
    back to the card."""
    gpu = find_gpu("RTX PRO 4000 Blackwell")
    assert f"{gpu.total_bytes / GiB:.2f}" == "23.43"
    assert gpu_from_total(23.43 * GiB).name == "RTX-PRO-4000"


@pytest.mark.parametrize("name", sorted(CARDS))
def test_each_sm_count_is_its_cores_over_128(name: str) -> None:
    *_, cores, _ = CARDS[name]
    gpu = find_gpu(name)
    assert cores % 128 == 0 and gpu.sm_count == cores // 128
    assert f"{cores} CUDA cores" in CATALOG[name]["sm_source"]


@pytest.mark.parametrize("name", ["RTX-4050-Laptop", "RTX-4070-Laptop"])
def test_the_laptop_sm_counts_are_their_own_prints(name: str) -> None:
    """hashcat's device line counts the card's multiprocessors ('20MCU', '36MCU')."""
    assert f"'{find_gpu(name).sm_count}MCU'" in CATALOG[name]["sm_source"]


@pytest.mark.parametrize("name", ["RTX-4050-Laptop", "RTX-4070-Laptop"])
def test_geforce_laptops_have_no_peer_access(name: str) -> None:
    gpu = find_gpu(name)
    assert gpu.peer_access is False and not gpu.fully_connected
    assert gpu.interconnect == "PCIe Gen4 x8 (no P2P)"


@pytest.mark.parametrize(("typed", "name"), sorted(TYPED.items()))
def test_the_names_users_type_resolve(typed: str, name: str) -> None:
    assert find_gpu(typed).name == name


def test_older_prints_keep_their_cards() -> None:
    """The new totals sit near older ones (4050 Laptop 5898 / RTX 2060 5918 MiB; 4070 Laptop
    7806 / RTX 4060 8188 MiB; PRO 4000 23992 / RTX 3090 24139 MiB): each card's own print still
    goes to that card."""
    assert gpu_from_total(5918 * 2**20).name == "RTX-2060"
    assert gpu_from_total(5898 * 2**20).name == "RTX-4050-Laptop"
    assert gpu_from_total(8188 * 2**20).name == "RTX-4060"
    assert gpu_from_total(7806 * 2**20).name == "RTX-4070-Laptop"
    assert gpu_from_total(24139 * 2**20).name == "RTX-3090"


@pytest.mark.parametrize("rid", [1711, 1712])
def test_the_4050_laptop_rows_name_the_card(rid: int) -> None:
    """Rows 1711/1712 ran under WSL2, where torch sees the whole 6141 MiB: the log's '(4.95/6.0
    GiB)' is that total, and the row names the card by the log's spelling."""
    row = next(r for r in PUBLISHED if r["id"] == rid)
    assert find_gpu(row["gpu"]).name == "RTX-4050-Laptop"
    assert "(4.95/6.0 GiB)" in row["quote"] and f"{6141 / 1024:.1f}" == "6.0"


def test_the_pro_4000_row_runs_on_the_card() -> None:
    """Row 1728 (Qwen2.5-7B-Instruct-AWQ, vLLM 0.28.0) runs on the catalog card, at its total."""
    row = next(r for r in PUBLISHED if r["id"] == 1728)
    est, _ = row_estimate(row)
    assert est.gpu.name == "RTX-PRO-4000" and est.gpu.arch == "sm120"
    assert est.gpu.total_bytes == 23992 * 2**20 and est.gpu.sm_count == 70
