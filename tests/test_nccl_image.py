"""NCCL's device code in a first communicator's init (memprof/core/terms/nccl_image.py) against
its goldens (reports/gpu/nccl-image/) and on the cards and releases it moves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.gpus import find_gpu
from memprof.core.terms import non_torch
from memprof.core.terms.nccl import NCCL_ROWS
from memprof.core.terms.nccl_channels import PER_CHANNEL
from memprof.core.terms.nccl_image import (
    GOLDEN,
    IMAGE_BYTES,
    IMAGES_GOLDEN,
    LOAD_BEYOND_IMAGE_BYTES,
    MEASURED_LOAD_BYTES,
    PAGE_BYTES,
    image_delta,
    image_load,
    on_image,
)
from memprof.core.terms.nccl_stack import MEASURED_GROWTH_BYTES
from memprof.core.terms.non_torch import nccl_comm

ROOT = Path(__file__).resolve().parents[1]


def _golden(path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / path).read_text())
    return data


def test_init_less_nccls_logged_allocations_is_one_figure() -> None:
    cases = _golden(GOLDEN)["cases"]
    assert set(cases) == {"shm-c2", "shm-def", "shm-c2-noras", "p2p-c4"}
    for case in cases.values():
        r0, r1 = case["rank0"], case["rank1"]
        assert r0 == r1  # both ranks alike
        assert r0["nccl_version_code"] == 22809
        logged = sum(case["nccl_logged_device_allocations"].values())
        assert r0["init_bytes"] - logged == case["init_less_logged_bytes"] == MEASURED_LOAD_BYTES
        # the first all_reduce is the stack reservation alone (memprof.core.terms.nccl_stack)
        assert r0["first_all_reduce_bytes"] == MEASURED_GROWTH_BYTES


def test_the_logged_buffers_are_the_per_channel_bytes_memprof_moves_by() -> None:
    cases = _golden(GOLDEN)["cases"]
    # SHM: 2 MiB a channel (the proxy's shared p2p buffer), the slope PER_CHANNEL takes
    shm2, shm4 = cases["shm-c2"]["rank0"]["init_bytes"], cases["shm-def"]["rank0"]["init_bytes"]
    assert (shm4 - shm2) // 2 == PER_CHANNEL[(False, False, 2)].init_coll == 2 * MiB
    # P2P at 4 channels: 10 + 2 MiB a collective channel, 8 MiB a p2p channel
    p2p = cases["p2p-c4"]["nccl_logged_device_allocations"]
    per = PER_CHANNEL[(True, False, 2)]
    assert sum(v for k, v in p2p.items() if "receive" in k or "send" in k) == 4 * per.init_coll
    assert sum(v for k, v in p2p.items() if "shared" in k) == 4 * per.init_p2p


def test_captured_all_reduces_cost_the_same_at_every_channel_count() -> None:
    cases = _golden(GOLDEN)["cases"]
    assert len({c["rank0"]["graphs50_8_all_reduces_driver_bytes"] for c in cases.values()}) == 1


def test_image_table_is_the_wheels() -> None:
    wheels = _golden(IMAGES_GOLDEN)["wheels"]
    by_release: dict[str, dict[int, int]] = {}
    for name, w in wheels.items():
        release = name.split("-")[1]
        by_release[release] = {int(k.split("_sm")[1]): v["bytes"]
                               for k, v in w["images"].items() if k.startswith("elf_")}
    for release in ("2.20.5", "2.21.5", "2.26.2", "2.28.9", "2.29.7", "2.30.7"):
        assert IMAGE_BYTES[release] == by_release[release]
    assert IMAGE_BYTES["2.27.3"] == by_release["2.27.3"]
    assert IMAGE_BYTES["2.27.5"] == by_release["2.27.5"]
    # 2.27.3 and 2.27.5 differ only in sm_120, by less than a page
    diff = {a for a in by_release["2.27.3"] if by_release["2.27.3"][a] != by_release["2.27.5"][a]}
    assert diff == {120}
    pages = {-(-by_release[r][120] // PAGE_BYTES) for r in ("2.27.3", "2.27.5")}
    assert len(pages) == 1


def test_the_measured_load_is_its_image_and_two_pages() -> None:
    # 2.28.9's own sm_90 image (the measured NCCL's wheel, nvidia-nccl-cu13): 51 pages, and the
    # golden's load 53
    assert -(-IMAGE_BYTES["2.28.9"][90] // PAGE_BYTES) == 51
    assert MEASURED_LOAD_BYTES == 53 * PAGE_BYTES == 51 * PAGE_BYTES + LOAD_BEYOND_IMAGE_BYTES
    load = image_load("2.28.9", find_gpu("H100"))
    assert load is not None and load[0] == MEASURED_LOAD_BYTES


def test_cards_and_releases() -> None:
    a40, h100 = find_gpu("A40"), find_gpu("H100")
    # sm86 runs the sm_80 image: 2.21.5's 50,031,552 B in 24 pages, and the 2 beyond it
    load = image_load("2.21.5", a40)
    assert load is not None and load[0] == 24 * PAGE_BYTES + LOAD_BEYOND_IMAGE_BYTES
    # a first communicator moves by the two images' pages: 24 against 2.28.9's sm_90 51
    assert image_delta(a40, "2.21.5")[0] == (24 - 51) * PAGE_BYTES
    # H100 at 2.21.5: 88,514,016 B in 43 pages
    assert image_delta(h100, "2.21.5")[0] == (43 - 51) * PAGE_BYTES
    # the measured NCCL on another card: 2.28.9's sm_80 image, 50,658,184 B in 25 pages
    assert image_delta(a40, "2.28.9")[0] == (25 - 51) * PAGE_BYTES
    # not derived: the engine's NCCL not mapped, a release not read; the measured card itself
    assert image_delta(a40, None) == (0, "")
    assert image_delta(a40, "2.31.2") == (0, "")
    assert image_delta(h100, "2.28.9") == (0, "")


def test_a_first_communicator_moves_and_a_second_does_not(monkeypatch: Any) -> None:
    a40 = find_gpu("A40")
    dep = Deployment(engine_version="0.7.1", tp=2)
    row = nccl_comm(dep, a40, "TP", 2)
    assert "NCCL's device code" in row.basis and "sm_80 image" in row.basis
    init, _first, _src = NCCL_ROWS[(True, False, 2)]
    assert on_image(row, a40, None) == row
    assert row.init < init
    # the same row with the measured image left in: 2.21.5's sm_80 image (24 pages) against
    # 2.28.9's sm_90 one (51), its init 54 MiB above and nothing else moved
    monkeypatch.setattr(non_torch, "on_image", lambda r, _gpu, _nccl: r)
    measured = nccl_comm(dep, a40, "TP", 2)
    assert measured.init - row.init == (51 - 24) * PAGE_BYTES
    assert (measured.first_all_reduce, measured.first_p2p) == (row.first_all_reduce, row.first_p2p)
    sglang = Deployment(engine="sglang", engine_version="0.4.3", tp=4)
    world = nccl_comm(sglang, find_gpu("L4"), "world", 4)
    assert "device code" not in world.basis


def test_sglang_releases_load_their_torchs_nccl_image() -> None:
    # SGLang's wheels pin torch (2.7.1 from 0.4.7, 2.8.0 from 0.5.1, 2.9.1 from 0.5.6, 2.11.0
    # from 0.5.11, 2.13.0 from 0.5.18) and torch pins NCCL (2.26.2, 2.27.3, 2.27.5, 2.28.9,
    # 2.29.7): memprof/core/terms/nccl.py
    a100, h100 = find_gpu("A100-80GB"), find_gpu("H100")
    versions = ("0.4.8", "0.5.4", "0.5.11", "0.5.19")
    rows = {v: nccl_comm(Deployment(engine="sglang", engine_version=v, tp=2), a100, "TP", 2)
            for v in versions}
    nccl = {"0.4.8": "2.26.2", "0.5.4": "2.27.3", "0.5.11": "2.28.9", "0.5.19": "2.29.7"}
    # on the measured card, 0.5.11 runs the measured image: its row is the measured one
    at_h100 = nccl_comm(Deployment(engine="sglang", engine_version="0.5.11", tp=2), h100, "TP", 2)
    assert "device code" not in at_h100.basis
    base = rows["0.5.11"].init - (25 - 51) * PAGE_BYTES  # its sm_80 image: 25 pages
    for v in versions:
        assert f"{nccl[v]}'s sm_80 image" in rows[v].basis, v
        load = image_load(nccl[v], a100)
        assert load is not None
        assert rows[v].init == base + load[0] - MEASURED_LOAD_BYTES, v
