"""The GPU catalog holds the GPUs people rent, each total with its source."""

from __future__ import annotations

import pytest

from memprof.core.gpus import catalog, find_gpu

RENTED = ["L4", "L40S", "A10G", "H100 PCIe", "H100 NVL", "H100", "H800", "H20", "GH200",
          "H200", "B200", "B300", "GB200", "MI300X", "MI325X", "MI355X"]


@pytest.mark.parametrize("name", RENTED)
def test_rented_gpus_are_in_the_catalog(name: str) -> None:
    g = find_gpu(name)
    assert g.total_bytes > 16 << 30 and g.source and g.arch != "unknown"


def test_every_entry_cites_its_total_and_names_are_unique() -> None:
    names = [g.name for g in catalog()]
    assert len(names) == len(set(names))
    assert all(len(g.source) > 40 for g in catalog())
    assert find_gpu("NVIDIA H100 PCIe").name == "H100-PCIe"
    assert find_gpu("NVIDIA H100 80GB HBM3").name == "H100-80GB"
    assert find_gpu("NVIDIA B300 SXM6 AC").arch == "sm103"
