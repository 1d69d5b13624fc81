"""SGLang's start-up heuristics per release (``engines/sglang.py`` rows): mem_fraction_static,
the chunked-prefill default and the largest captured CUDA-graph batch, each at a release on
either side of each change, against the formula of that release's ``server_args.py`` written
out by hand here."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang import sglang_defaults
from memprof.core.gpus import GPU, find_gpu
from memprof.core.releases import SGLANG_RELEASES
from memprof.core.version_diff import all_rules
from memprof.core.versions import newest, resolve_version


def _gpu(mib: float, vendor: str = "nvidia") -> GPU:
    return GPU(name=f"test-{mib}", total_bytes=int(mib * MiB), arch="sm90", vendor=vendor)


def _at(version: str, gpu: GPU, **kw: object) -> tuple[int, int, float]:
    return sglang_defaults(gpu, Deployment(engine="sglang", engine_version=version, **kw))


H100 = _gpu(81079.5)
H200 = _gpu(143156)
B200 = _gpu(182000)
A10G = _gpu(22000)
L40S = _gpu(45000)
MI300X = _gpu(196592, vendor="amd")


def test_releases_are_modelled_and_the_newest_by_date_is_the_default() -> None:
    assert SGLANG_RELEASES[0] == "0.4.3"
    assert newest("sglang") == "0.5.23"
    assert resolve_version("0.4.8", "sglang") == "0.4.8"
    with pytest.raises(BadInput):
        resolve_version("0.4.2", "sglang")


@pytest.mark.parametrize(("tp", "mfs"), [(1, 0.88), (2, 0.87), (4, 0.85), (8, 0.81), (16, 0.79)])
def test_043_by_tp(tp: int, mfs: float) -> None:
    # 0.4.3 ServerArgs.__post_init__: the table by tp_size, whatever the GPU
    assert _at("0.4.3", H200, tp=tp)[2] == mfs
    assert _at("0.4.5", H100, tp=tp)[2] == mfs


def test_046_thirteen_gib_above_80_gib() -> None:
    assert _at("0.4.6", H100, tp=8)[2] == 0.81  # 81079.5 <= 81920: the table
    assert _at("0.4.6", H200, tp=8)[2] == pytest.approx((143156 - 13 * 1024) / 143156)


def test_047_large_gpu_rules() -> None:
    # ≤ 80 GiB: the table by tp·pp
    assert _at("0.4.7", H100, tp=4, pp=2)[2] == 0.81
    # > 96 GiB: min(0.88 + 48 GiB·0.12 / total, (total − 18 GiB) / total)
    assert _at("0.4.7", H200)[2] == pytest.approx(
        min(0.88 + 48 * 1024 * 0.12 / 143156, (143156 - 18 * 1024) / 143156))
    # > 180,000 MiB on CUDA: 0.79; on ROCm the 96 GiB rule instead
    assert _at("0.4.7", B200)[2] == 0.79
    assert _at("0.4.7", MI300X)[2] == pytest.approx(
        min(0.88 + 48 * 1024 * 0.12 / 196592, (196592 - 18 * 1024) / 196592))


def test_048_reserve_by_tier() -> None:
    # (9.5 + tp·pp/2) GiB below 90 GiB, (12 + tp·pp/2) below 160, 32 GiB above; round to 3
    assert _at("0.4.8", H100)[2] == round((81079.5 - 10 * 1024) / 81079.5, 3)
    assert _at("0.5.2", H100, tp=8)[2] == round((81079.5 - 13.5 * 1024) / 81079.5, 3)
    assert _at("0.4.9", H200, tp=8)[2] == round((143156 - 16 * 1024) / 143156, 3)
    assert _at("0.4.10", B200)[2] == round((182000 - 32 * 1024) / 182000, 3)
    assert _at("0.4.8", H200, tp=8, dp=8, enable_dp_attention=True)[2] == round(
        (143156 - 20 * 1024) / 143156, 3)


def test_053_and_later_read_chunk_and_graph() -> None:
    # 512 + 1.5·8192 + 1/8·1024 + 2·256 = 13,440 MiB on an H100 at tp 1 (above the 10 GiB floor)
    want = round((81079.5 - (512 + 1.5 * 8192 + 128 + 2 * 256)) / 81079.5, 3)
    for v in ("0.5.3", "0.5.9", "main@d315eb7"):
        assert _at(v, H100) == (8192, 256, want)


@pytest.mark.parametrize(("version", "gpu", "chunk"), [
    ("0.4.3", A10G, 2048), ("0.4.3", L40S, 8192), ("0.4.6", B200, 8192),
    ("0.4.7", B200, 16384), ("0.4.7", L40S, 8192),
    ("0.4.8", L40S, 8192), ("0.4.8", _gpu(30000), 2048), ("0.5.1", B200, 16384),
    ("0.5.3", L40S, 4096), ("main@d315eb7", L40S, 4096),
])
def test_chunked_prefill_default(version: str, gpu: GPU, chunk: int) -> None:
    assert _at(version, gpu)[0] == chunk


@pytest.mark.parametrize(("version", "gpu", "tp", "dp", "bs"), [
    ("0.4.3", A10G, 1, 1, 8), ("0.4.3", A10G, 4, 1, 80), ("0.4.3", H200, 1, 1, 160),
    ("0.4.6", H100, 1, 1, 160), ("0.4.6", H200, 1, 1, 256), ("0.4.6", H200, 1, 2, 160),
    ("0.4.7", H200, 1, 1, 256), ("0.4.7", B200, 1, 1, 512), ("0.4.7", _gpu(95000), 1, 1, 160),
    ("0.4.8", _gpu(95000), 1, 1, 256), ("0.5.2", B200, 8, 1, 512), ("0.5.2", H100, 8, 1, 160),
    ("0.5.3", A10G, 1, 1, 16), ("0.5.4", A10G, 1, 1, 16), ("0.5.5", A10G, 1, 1, 24),
    ("0.5.3", H100, 8, 1, 512), ("main@d315eb7", A10G, 1, 1, 24),
])
def test_graph_max_bs(version: str, gpu: GPU, tp: int, dp: int, bs: int) -> None:
    assert _at(version, gpu, tp=tp, dp=dp)[1] == bs


def test_given_values_win_at_every_release() -> None:
    for v in SGLANG_RELEASES:
        assert _at(v, H100, mem_fraction_static=0.7, chunked_prefill_size=1024,
                   cuda_graph_max_bs=32) == (1024, 32, 0.7)


def test_rules_are_in_the_rulebook_with_sources() -> None:
    names = {"sglang_mem_fraction_static", "sglang_chunked_prefill_size",
             "sglang_cuda_graph_max_bs"}
    rows = [r for r in all_rules() if r.name in names]
    assert {r.name for r in rows} == names
    for r in rows:
        assert r.engine == "sglang" and "sglang 0." in r.source
        for edge in (r.since, r.until):
            assert edge is None or edge in SGLANG_RELEASES


def test_a_vllm_deployment_reads_sglangs_newest_graph_batch() -> None:
    dep = Deployment(engine="vllm", engine_version="0.8.5")
    assert sglang_defaults(find_gpu("H100"), dep)[1] == 256
