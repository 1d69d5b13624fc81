"""SGLang's prefill (piecewise) CUDA-graph reserve in the mem_fraction_static heuristic
(``memprof.core.engines.sglang.SGLANG_PREFILL_GRAPH_RESERVE``), checked against hand counts of
the sglang wheels' formula: 8 MiB per prefill capture size (1.5 GiB with MLA) before the 10 GiB
floor, from 0.5.10, with the off-conditions each release states."""

from __future__ import annotations

from typing import Any

import pytest

from memprof.core.deployment import Deployment
from memprof.core.engines.sglang import (
    ENGINE,
    SGLANG_PREFILL_GRAPH_RESERVE,
    prefill_graph_model,
    prefill_graph_reserve_mib,
    prefill_graph_sizes,
)
from memprof.core.gpus import find_gpu
from memprof.core.models import load_model


def _mfs(model: str, gpu: str, version: str, **kw: Any) -> float:
    dep = Deployment(engine="sglang", engine_version=version, **kw)
    return ENGINE.mem_fraction(dep, find_gpu(gpu), None, spec=load_model(model))


def _reserve(model: str, gpu: str, version: str, chunk: int, **kw: Any) -> float:
    dep = Deployment(engine="sglang", engine_version=version, **kw)
    return prefill_graph_reserve_mib(dep, find_gpu(gpu), chunk,
                                     prefill_graph_model(load_model(model)))


def test_capture_sizes_by_hand() -> None:
    # 4..32 step 4 (8), 48..256 step 16 (14), 288..512 step 32 (8), 576..1024 step 64 (8),
    # 1280..4096 step 256 (12), 4608.. step 512
    assert prefill_graph_sizes(2048) == 8 + 14 + 8 + 8 + 4
    assert prefill_graph_sizes(4096) == 50
    assert prefill_graph_sizes(8192) == 50 + 8
    assert prefill_graph_sizes(16384) == 50 + 24
    assert prefill_graph_sizes(-1) == 0  # chunked prefill off: max tokens -1, no size


def test_h200_tp1_at_0_5_10_by_hand() -> None:
    # H200: nvidia-smi 143,771 MiB, chunk 8192, decode max_bs 256 (tp < 4):
    # 512 + 1.5*8192 + 1/8*1024 + 2*256 = 13,440 MiB; + 58 * 8 = 464 MiB from 0.5.10
    mib = 143771
    assert _mfs("qwen3-8b", "H200", "0.5.9") == round((mib - 13440) / mib, 3) == 0.907
    assert _mfs("qwen3-8b", "H200", "0.5.10") == round((mib - 13904) / mib, 3) == 0.903


def test_b200_tp4_at_0_5_19_by_hand() -> None:
    # B200: 183,359 MiB, chunk 16384, max_bs 512: 512 + 24,576 + 4/8*1024 + 1,024 = 26,624;
    # + 74 * 8 = 592 MiB
    mib = 183359
    assert _mfs("qwen3-32b", "B200", "0.5.19", tp=4) == round((mib - 27216) / mib, 3)
    assert _mfs("qwen3-32b", "B200", "0.5.18", tp=4) == round((mib - 27216) / mib, 3)
    assert _mfs("qwen3-32b", "B200", "0.5.9", tp=4) == round((mib - 26624) / mib, 3)


def test_before_the_floor() -> None:
    # H200 with a chunk of 2048: 512 + 3,072 + 128 + 512 + 42*8 = 4,560 < 10 GiB: the floor
    # holds, the reserve does not move the fraction
    assert (_mfs("qwen3-8b", "H200", "0.5.10", chunked_prefill_size=2048)
            == _mfs("qwen3-8b", "H200", "0.5.9", chunked_prefill_size=2048))


@pytest.mark.parametrize(("version", "kw", "expected"), [
    ("0.5.5", {}, 0.0),  # no term
    ("0.5.9", {}, 0.0),  # opt-in (--enable-piecewise-cuda-graph), off by default
    ("main@d315eb7", {}, 0.0),  # main's source not read for it: not applied
    ("0.5.13", {"enable_dp_attention": True, "tp": 2, "dp": 2}, 0.0),
    ("0.5.16", {"enable_dp_attention": True, "tp": 2, "dp": 2}, 0.0),  # breakable, 0.5.15-16
    ("0.5.17", {"enable_dp_attention": True, "tp": 2, "dp": 2}, 464.0),  # breakable keeps it
    ("0.5.10", {"pp": 2}, 0.0),
    ("0.5.15", {"pp": 2}, 464.0),  # breakable: no PP rule until 0.5.19
    ("0.5.19", {"pp": 2}, 0.0),
    ("0.5.13", {"enforce_eager": True}, 464.0),  # --disable-cuda-graph: decode only
    ("0.5.14", {"enforce_eager": True}, 0.0),  # folds into cuda_graph_config.prefill
    ("0.5.10", {"num_speculative_tokens": 1}, 0.0),
    ("0.5.11", {"num_speculative_tokens": 1}, 464.0),
    ("0.5.10", {"max_total_tokens": 4096}, 400.0),  # 50 sizes up to 4096
])
def test_off_conditions(version: str, kw: dict[str, Any], expected: float) -> None:
    assert _reserve("qwen3-8b", "H200", version, 8192, **kw) == expected


@pytest.mark.parametrize(("model", "version", "expected"), [
    ("deepseek-v3", "0.5.14", 1536.0),  # MLA: 1.5 GiB
    ("deepseek-v3", "0.5.15", 0.0),  # breakable turns MLA off (0.5.15, 0.5.16)
    ("deepseek-v3", "0.5.17", 0.0),  # MLA without the DSA indexer
    ("deepseek-v3.2", "0.5.17", 1536.0),  # DSA MLA keeps it
    ("deepseek-v3.2", "0.5.12", 0.0),  # NSA and DeepseekV32ForCausalLM on the blacklist
    ("deepseek-v3.2", "0.5.13", 1536.0),  # off the blacklist from 0.5.13
    ("deepseek-v3", "0.5.18", 1536.0),
    ("deepseek-v4-flash", "0.5.19", 0.0),  # is_deepseek_v4
    ("deepseek-v4-flash", "0.5.12", 0.0),
    ("qwen3-next-80b-a3b-instruct", "0.5.14", 0.0),
    ("qwen3.5-27b", "0.5.15", 0.0),  # multimodal, no allowlist at 0.5.15
    ("qwen3.5-27b", "0.5.16", 464.0),  # on the breakable allowlist
])
def test_models(model: str, version: str, expected: float) -> None:
    assert _reserve(model, "H200", version, 8192, tp=8) == expected


def test_rocm_and_multimodal_are_off() -> None:
    assert _reserve("qwen3-8b", "MI300X", "0.5.19", 16384) == 0.0
    assert _reserve("qwen3-vl-4b-instruct", "H200", "0.5.14", 8192) == 0.0


def test_each_row_cites_a_wheel() -> None:
    for row in SGLANG_PREFILL_GRAPH_RESERVE:
        assert row.source.startswith("sglang 0.5.")
