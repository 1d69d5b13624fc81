"""The GPU catalog rows (``configs/gpus.json``): every row carries the fields the estimator and
the reader need, cites a public source, and resolves by the names users type and tools print."""

from __future__ import annotations

import json
import re

import pytest

from memprof.base.errors import BadInput
from memprof.core.gpus import catalog, find_gpu, suggest_gpus
from memprof.core.models import configs_dir

ROWS = json.loads((configs_dir() / "gpus.json").read_text(encoding="utf-8"))["gpus"]
REQUIRED = ("name", "aliases", "vendor", "total_bytes", "arch", "compute_capability", "hbm",
            "interconnect", "exact", "smi_total_mib", "driver_reserved_mib",
            "observed_torch_total_mib", "source", "notes")
NVIDIA_ARCH_CC = {"sm70": "7.0", "sm75": "7.5", "sm80": "8.0", "sm86": "8.6", "sm89": "8.9",
                  "sm90": "9.0", "sm100": "10.0", "sm103": "10.3", "sm120": "12.0",
                  "sm121": "12.1"}
AMD_ARCHS = {"gfx90a", "gfx942", "gfx950", "gfx1100"}


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_every_row_has_the_required_fields(row: dict[str, object]) -> None:
    missing = [k for k in REQUIRED if k not in row]
    assert not missing, f"{row['name']}: missing {missing}"
    assert isinstance(row["total_bytes"], int) and 2 << 30 < row["total_bytes"] < 400 << 30
    assert isinstance(row["exact"], bool)
    assert row["interconnect"] and row["hbm"]
    if row["vendor"] == "nvidia":
        assert NVIDIA_ARCH_CC[str(row["arch"])] == row["compute_capability"]
    else:
        assert row["vendor"] == "amd" and row["arch"] in AMD_ARCHS


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_every_row_cites_a_public_source_and_states_its_assumptions(row: dict[str, object]) -> None:
    source = str(row["source"])
    assert len(source) > 40
    text = json.dumps(row)
    assert "/work/" not in text and "farm-" not in text and "/tmp/" not in text
    assert not re.search(r"nvidia-h[12]00(-x\d)? device", text)  # no lent-machine names
    if not row["exact"]:
        assert len(str(row["notes"])) > 20, "an inexact total must say what was assumed"
    if row.get("peer_access") is False:
        assert "peer_access_source" in row


def test_the_torch_total_is_below_the_smi_total_where_both_are_read() -> None:
    for row in ROWS:
        smi, reserved = row["smi_total_mib"], row["driver_reserved_mib"]
        if smi and reserved is not None:
            assert row["total_bytes"] == (smi - reserved) << 20 or row["vendor"] == "nvidia"
        if smi and row["vendor"] == "nvidia" and row["name"] != "A40":  # A40: ECC-off print
            assert row["total_bytes"] <= smi << 20, row["name"]


# the GPUs issue 24 lists, as users type them
ISSUE_NAMES = {
    "T4": "T4", "V100-16GB": "V100-16GB", "V100 32GB": "V100-32GB", "A10": "A10", "A10G": "A10G",
    "A30": "A30", "A40": "A40", "A100-40GB": "A100-40GB", "A100 80GB": "A100-80GB",
    "A100-PCIE-40GB": "A100-PCIe-40GB", "A100 80GB PCIe": "A100-PCIe-80GB",
    "A100-SXM4-80GB": "A100-80GB", "L4": "L4", "L20": "L20", "L40": "L40", "L40S": "L40S",
    "RTX A4000": "RTX-A4000", "RTX A5000": "RTX-A5000", "RTX A6000": "RTX-A6000",
    "RTX 6000 Ada": "RTX-6000-Ada", "RTX 2060": "RTX-2060", "2080 Ti": "RTX-2080-Ti",
    "RTX 3060": "RTX-3060", "3090": "RTX-3090", "RTX 4060 Ti": "RTX-4060-Ti", "4080": "RTX-4080",
    "4090": "RTX-4090", "RTX-5080": "RTX-5080", "RTX 5080": "RTX-5080", "5080": "RTX-5080",
    "5090": "RTX-5090", "RTX PRO 6000 Blackwell": "RTX-PRO-6000", "H20": "H20", "H800": "H800",
    "H100 PCIe": "H100-PCIe", "H100 SXM": "H100-80GB", "H100 NVL": "H100-NVL", "GH200": "GH200",
    "H200 SXM": "H200", "H200 NVL": "H200-NVL", "B200": "B200", "B300": "B300",
    "GB200": "GB200", "GB10": "GB10", "MI210": "MI210", "MI250X": "MI250X", "MI300X": "MI300X",
    "MI300A": "MI300A", "MI308X": "MI308X", "MI325X": "MI325X", "MI355X": "MI355X",
    "RX 7900 XTX": "RX-7900-XTX",
}
# what `nvidia-smi --query-gpu=name`, torch.cuda.get_device_name and rocm-smi print
PRINTED_NAMES = {
    "Tesla T4": "T4", "Tesla V100-SXM2-32GB": "V100-32GB", "Tesla V100-SXM2-16GB": "V100-16GB",
    "NVIDIA A10": "A10", "NVIDIA A10G": "A10G", "NVIDIA A100-SXM4-40GB": "A100-40GB",
    "NVIDIA A100-PCIE-40GB": "A100-PCIe-40GB", "NVIDIA L40": "L40", "NVIDIA L20": "L20",
    "NVIDIA RTX A6000": "RTX-A6000", "NVIDIA RTX 6000 Ada Generation": "RTX-6000-Ada",
    "NVIDIA GeForce RTX 2080 Ti": "RTX-2080-Ti", "NVIDIA GeForce RTX 5090": "RTX-5090",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "RTX-PRO-6000",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "RTX-PRO-6000",
    "NVIDIA H200 NVL": "H200-NVL", "NVIDIA GB10": "GB10", "AMD Instinct MI308X": "MI308X",
    "AMD Instinct MI210": "MI210", "AMD Radeon RX 7900 XTX": "RX-7900-XTX",
}


@pytest.mark.parametrize(("typed", "row"), sorted({**ISSUE_NAMES, **PRINTED_NAMES}.items()))
def test_the_names_users_type_and_tools_print_resolve(typed: str, row: str) -> None:
    assert find_gpu(typed).name == row


def test_every_name_resolves_to_one_row_only() -> None:
    seen: dict[str, str] = {}
    for row in ROWS:
        for alias in [row["name"], *row["aliases"]]:
            key = "".join(ch for ch in alias.lower() if ch.isalnum())
            assert seen.setdefault(key, row["name"]) == row["name"], alias


@pytest.mark.parametrize(("typed", "offered"), [
    ("V100", ["V100-16GB", "V100-32GB"]), ("A100", ["A100-80GB", "A100-40GB"]),
    ("RTX 5090 48GB", ["RTX-5090"]), ("MI250", ["MI250X"]), ("MI308", ["MI308X"]),
])
def test_ambiguous_or_misspelt_names_are_refused_with_the_rows_offered(
        typed: str, offered: list[str]) -> None:
    if typed == "MI250":  # an alias: the MI250 is the same die and memory as the MI250X
        assert find_gpu(typed).name == "MI250X"
        return
    with pytest.raises(BadInput) as info:
        find_gpu(typed)
    assert "did you mean" in (info.value.hint or "")
    assert suggest_gpus(typed)[:len(offered)] == offered


def test_consumer_geforce_cards_have_no_peer_access_but_data_center_cards_do() -> None:
    by = {g.name: g for g in catalog()}
    for name in ("RTX-2060", "RTX-2080-Ti", "RTX-3060", "RTX-3090", "RTX-4060-Ti", "RTX-4080",
                 "RTX-4090", "RTX-5080", "RTX-5090"):
        assert by[name].peer_access is False, name
    # every GeForce row: the stock driver gives none (the RTX 3090: NVIDIA/nccl#1127)
    assert not [g.name for g in catalog() if g.name.startswith("RTX-")
                and not g.name.startswith(("RTX-A", "RTX-PRO", "RTX-6000")) and g.peer_access]
    for name in ("T4", "A10", "L40", "A100-PCIe-80GB", "RTX-PRO-6000", "MI300X", "V100-32GB"):
        assert by[name].peer_access is True, name


def test_rocm_rows_are_rocm_and_a_mi250x_is_one_die() -> None:
    by = {g.name: g for g in catalog()}
    for name in ("MI210", "MI250X", "MI300A", "MI308X", "RX-7900-XTX"):
        assert by[name].is_rocm
    assert by["MI250X"].total_bytes == 64 * 2**30 - 16 * 2**20  # 68702699520 B per GCD


@pytest.mark.parametrize(("typed", "arch"), [
    ("sm89", "sm89"), ("SM_120", "sm120"), ("8.9", "sm89"), ("10.0", "sm100"), ("12.1", "sm121"),
    ("7.5", "sm75"), ("gfx1100", "gfx1100"), ("gfx90a", "gfx90a")])
def test_a_gpu_memory_only_card_takes_the_architecture_given(typed: str, arch: str) -> None:
    from memprof.core.gpus import resolve_gpu

    g = resolve_gpu(None, 20 << 30, typed)
    assert (g.arch, g.total_bytes, g.exact) == (arch, 20 << 30, True)
    assert g.is_rocm == arch.startswith("gfx")
    assert g.compute_capability == (None if g.is_rocm else NVIDIA_ARCH_CC[arch])


def test_an_unknown_or_contradicting_architecture_is_bad_input() -> None:
    from memprof.core.gpus import known_archs, resolve_gpu

    with pytest.raises(BadInput) as info:
        resolve_gpu(None, 20 << 30, "sm99")
    assert all(a in (info.value.hint or "") for a in known_archs())
    with pytest.raises(BadInput):
        resolve_gpu("L40S", None, "sm90")  # an L40S is sm89
    with pytest.raises(BadInput):
        resolve_gpu(None, None, "sm90")  # an architecture alone sizes nothing
    assert resolve_gpu("L40S", None, "8.9").name == "L40S"
    with pytest.raises(BadInput) as info:  # a size alone picks no rules behind the user's back
        resolve_gpu(None, 20 << 30)
    assert "--gpu-arch" in (info.value.hint or "")


def test_rows_expose_compute_capability_and_interconnect() -> None:
    by = {g.name: g for g in catalog()}
    assert by["T4"].compute_capability == "7.5" and by["GB10"].compute_capability == "12.1"
    assert by["MI308X"].compute_capability is None
    assert "NVLink" in by["H100-80GB"].interconnect and "xGMI" in by["MI300X"].interconnect
    assert "no P2P" in by["RTX-5090"].interconnect
