"""SGLang from 0.5.14 captures its decode graphs after the prefill CUDA graphs, into the same
global graph pool (memprof/core/engines/sglang_graphs.py ``SGLANG_DECODE_AFTER_PREFILL``): the
decode figure ("Capture target decode CUDA graph end … mem usage") from 0.5.16 holds not the
shared logits buffer, and from 0.5.19, where both capture on one stream, no live set of its own
and not the capture stream's cuBLAS workspace either (row 1452: 0.13 GB logged; the live set
through 0.5.18: tests/test_sglang_decode_graph_stream.py)."""

from __future__ import annotations

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang_graphs import after_prefill
from memprof.core.estimate import estimate


@pytest.mark.parametrize(("version", "want"), [
    ("0.5.13", (False, False, False)),  # init_device_graphs before init_piecewise_cuda_graphs
    ("0.5.14", (True, False, False)),   # "prefill before decode"
    ("0.5.16", (True, True, False)),    # GraphSharedOutput
    ("0.5.19", (True, True, True)),     # get_or_create_global_graph_capture_stream
])
def test_capture_order_per_release(version: str, want: tuple[bool, bool, bool]) -> None:
    assert after_prefill(version) == want


def _graphs(version: str, **kw: object) -> tuple[int, str]:
    dep = Deployment(engine="sglang", engine_version=version, max_model_len=8192,
                     mem_fraction_static=0.9, **kw)  # type: ignore[arg-type]
    e = estimate("qwen3-32b", dep, gpu_name="H100")
    comp = next(c for c in e.ranks[0].components if c.name == "CUDA-graph estimate")
    return comp.bytes, comp.formula


def test_decode_after_prefill_holds_no_live_set_logits_or_workspace() -> None:
    first, formula_first = _graphs("0.5.13")
    after, formula_after = _graphs("0.5.19")
    assert "the largest size's decode live set" in formula_first
    assert "captured after the prefill CUDA graphs" in formula_after
    assert "shared fp32 logits buffer allocated by the prefill runner" in formula_after
    # at least the [256, 151,936] fp32 logits buffer (148.4 MiB) less than before
    assert first - after >= 256 * 151936 * 4


def test_0516_keeps_its_own_capture_stream_workspace() -> None:
    b0516, f0516 = _graphs("0.5.16")
    b0519, _ = _graphs("0.5.19")
    assert "cuBLAS workspace" in f0516
    assert b0516 - b0519 >= 4 * MiB  # the capture stream's cuBLAS workspace


def test_without_prefill_graphs_the_decode_capture_is_first() -> None:
    # SGLang turns the prefill graphs off under pipeline parallelism (the release's row of
    # configs/sglang_prefill_graph_off_archs.json): the decode graphs pay their own live set
    _, formula = _graphs("0.5.19", pp=2)
    assert "captured after" not in formula and "decode live set" in formula
