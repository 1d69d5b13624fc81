"""The GeForce cards issue 24's newest logs and log hunt met (RTX 5060 Ti, 5060, 5070, 5070 Ti,
the 4070 family, 3080, 3080 Ti, the 6 GB RTX 3050 Laptop GPU): each row's total is a
torch print its source quotes, its SM count the CUDA cores NVIDIA specifies over 128 FP32 cores
per SM (or the card's own print), it resolves by the names users type and drivers print, and the
two calibration rows run on an RTX 5060 Ti (tests/data/published.json 1601/1602) take the card's
architecture and SMs."""

from __future__ import annotations

import json
import re

import pytest

from memprof.base.units import GiB
from memprof.core.gpus import find_gpu, gpu_from_total
from memprof.core.models import configs_dir
from tests.test_published_distribution import ROWS as PUBLISHED
from tests.test_published_distribution import row_estimate

CATALOG = {r["name"]: r for r in json.loads(
    (configs_dir() / "gpus.json").read_text(encoding="utf-8"))["gpus"]}

# card -> (torch total in MiB, CUDA cores, architecture, PCIe lanes)
CARDS = {
    "RTX-5060-Ti": (15848, 4608, "sm120", 8),
    "RTX-5060": (8151, 3840, "sm120", 8),
    "RTX-5070": (12227, 6144, "sm120", 16),
    "RTX-5070-Ti": (16303, 8960, "sm120", 16),
    "RTX-4070": (12002, 5888, "sm89", 16),
    "RTX-4070-SUPER": (12282, 7168, "sm89", 16),
    "RTX-4070-Ti": (12007, 7680, "sm89", 16),
    "RTX-4070-Ti-SUPER": (16069, 8448, "sm89", 16),
    "RTX-3080": (10002, 8704, "sm86", 16),
    "RTX-3080-Ti": (11910.625, 10240, "sm86", 16),
    "RTX-3050-6GB-Laptop": (5804, 2048, "sm86", 8),
}

TYPED = {
    "RTX 5060 Ti": "RTX-5060-Ti", "rtx5060ti": "RTX-5060-Ti", "5060 Ti": "RTX-5060-Ti",
    "RTX 5060 Ti 16GB": "RTX-5060-Ti", "NVIDIA GeForce RTX 5060 Ti": "RTX-5060-Ti",
    "RTX 5060": "RTX-5060", "NVIDIA GeForce RTX 5060": "RTX-5060",
    "RTX-5070": "RTX-5070", "5070 Ti": "RTX-5070-Ti", "NVIDIA GeForce RTX 5070 Ti": "RTX-5070-Ti",
    "RTX 4070": "RTX-4070", "RTX 4070 Super": "RTX-4070-SUPER",
    "NVIDIA GeForce RTX 4070 SUPER": "RTX-4070-SUPER", "4070 Ti": "RTX-4070-Ti",
    "RTX 4070 Ti SUPER": "RTX-4070-Ti-SUPER", "4070 Ti Super": "RTX-4070-Ti-SUPER",
    "RTX 3080": "RTX-3080", "3080 Ti": "RTX-3080-Ti", "NVIDIA GeForce RTX 3080 Ti": "RTX-3080-Ti",
    "NVIDIA GeForce RTX 3050 6GB Laptop GPU": "RTX-3050-6GB-Laptop",
    "RTX 3050 6GB Laptop": "RTX-3050-6GB-Laptop",
}


@pytest.mark.parametrize("name", sorted(CARDS))
def test_each_total_is_a_print_its_source_quotes(name: str) -> None:
    mib, _, arch, _ = CARDS[name]
    row, gpu = CATALOG[name], find_gpu(name)
    assert gpu.total_bytes == round(mib * 2**20) and gpu.arch == arch
    printed = f"{mib}MiB" if mib != int(mib) else f"{int(mib)}MiB"
    assert (printed in row["source"] or printed.replace("MiB", "MB") in row["source"]), name
    assert mib in row["observed_torch_total_mib"]
    assert row["exact"] is False and len(row["notes"]) > 40
    assert gpu.total_bytes <= row["smi_total_mib"] << 20  # torch never sees more than smi


@pytest.mark.parametrize("name", sorted(CARDS))
def test_each_sm_count_is_its_cores_over_128(name: str) -> None:
    _, cores, _, lanes = CARDS[name]
    gpu = find_gpu(name)
    assert gpu.sm_count == cores // 128 and cores % 128 == 0
    assert f"{cores} CUDA cores" in CATALOG[name]["sm_source"]
    # GeForce: no peer access, PCIe with the card's lanes (NCCL's channel search reads them)
    assert gpu.peer_access is False and not gpu.fully_connected
    assert gpu.interconnect.startswith("PCIe Gen")
    assert (f" x{lanes} " in gpu.interconnect) == (lanes != 16)


def test_the_5060_ti_sm_count_is_its_own_print() -> None:
    src = CATALOG["RTX-5060-Ti"]["sm_source"]
    assert "props.multi_processor_count=36" in src and "cc=(12, 0)" in src


@pytest.mark.parametrize(("typed", "name"), sorted(TYPED.items()))
def test_the_names_users_type_resolve(typed: str, name: str) -> None:
    assert find_gpu(typed).name == name


def test_a_5080_print_stays_a_5080_and_a_4060_print_a_4060() -> None:
    """The new rows sit near older ones (5060 Ti 15848 / 5080 15840 MiB; 5060 8151 / 4060 8188
    MiB): a log's printed total still goes to the nearest card's total. vLLM's 'total_gpu_memory
    (8.00GiB)' stays the RTX 4060 (tests/data/published.json row 122): no RTX 3060 Ti row, whose
    only torch prints (8192 MiB, Windows/WSL2) would take that total."""
    assert gpu_from_total(15840 * 2**20).name == "RTX-5080"
    assert gpu_from_total(15848 * 2**20).name == "RTX-5060-Ti"
    assert gpu_from_total(8188 * 2**20).name == "RTX-4060"
    assert gpu_from_total(8.00 * 2**30).name == "RTX-4060"
    assert gpu_from_total(8151 * 2**20).name == "RTX-5060"


@pytest.mark.parametrize("rid", [1601, 1602])
def test_the_5060_ti_rows_run_on_the_card_at_their_wsl_total(rid: int) -> None:
    row = next(r for r in PUBLISHED if r["id"] == rid)
    est, _ = row_estimate(row)
    assert est.gpu.name == "RTX-5060-Ti" and est.gpu.arch == "sm120"
    assert est.gpu.sm_count == 36
    assert est.gpu.total_bytes == 16311 * 2**20
    # the log prints the total to 0.1 GiB: 15.9
    assert re.search(r"/15\.9 GiB\)", row["quote"]) and f"{est.gpu.total_bytes / GiB:.1f}" == "15.9"
