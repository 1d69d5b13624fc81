"""SGLang 0.5.14 - 0.5.18 capture the decode graphs after the prefill CUDA graphs into the same
graph pool but on a capture stream of their own (``GroupCoordinator.graph_capture`` makes one per
runner), and torch's caching allocator reuses a free block only on the stream it was made on
(c10/cuda/CUDACachingAllocator.cpp ``get_free_block``): the decode live set takes segments of its
own there (memprof/core/terms/cudagraph.py ``_engine_graph_model``); from 0.5.19 one capture
stream serves both and the prefill's freed blocks hold it (row 1455: 0.34 GB logged at 0.5.18).
The attention backend's capture state is on two streams too: ``init_cuda_graph_state``'s buffers
on the runner's stream, FlashInfer's per-size decode wrappers on the capture stream, with that
stream's cuBLAS workspace (memprof/core/engines/sglang_attention.py ``reserved_on_streams``)."""

from __future__ import annotations

import json
from pathlib import Path

from memprof.alloc.allocator import CachingAllocator
from memprof.base.units import GiB, MiB
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang_attention import reserved_on_streams
from memprof.core.estimate import estimate


def test_a_freed_pool_block_is_not_reused_on_another_stream() -> None:
    # the allocator replica the decode term uses: one private pool, a block freed on stream 1
    # is reused on stream 1 and not on stream 2
    same = CachingAllocator()
    same.begin_capture(1, stream=1)
    same.free(same.malloc(64 * MiB, stream=1))
    same.malloc(64 * MiB, stream=1)
    same.end_capture()
    other = CachingAllocator()
    other.begin_capture(1, stream=1)
    other.free(other.malloc(64 * MiB, stream=1))
    other.malloc(64 * MiB, stream=2)
    other.end_capture()
    assert same.total_allocated_memory == 64 * MiB
    assert other.total_allocated_memory == 128 * MiB


def _decode(version: str) -> tuple[int, str]:
    dep = Deployment(engine="sglang", engine_version=version, mem_fraction_static=0.83,
                     attention_backend="triton")
    e = estimate("qwen3-30b-a3b-fp8", dep, gpu_name="H100")
    comp = next(c for c in e.ranks[0].components if c.name == "CUDA-graph estimate")
    return comp.bytes, comp.formula


def test_own_stream_releases_pay_the_decode_live_set() -> None:
    for version in ("0.5.14", "0.5.16", "0.5.18"):
        _, formula = _decode(version)
        assert "on a capture stream of its own" in formula, version
        assert "the largest size's decode live set" in formula, version
    _, f0519 = _decode("0.5.19")
    assert "on the capture stream the prefill runner used" in f0519
    assert "the largest size's decode live set" not in f0519


def test_0518_pool_holds_state_workspace_and_a_live_set() -> None:
    # 0.5.18's triton attention state (attn logits [256, 32, 8, 128] fp32 and lse in 34 MiB of
    # segments, kv_indices [256 x 40,960] int64 in 80 MiB; no custom mask from 0.5.17) and the
    # capture stream's 32 MiB cuBLAS workspace are 146 MiB of the pool; the bs-256 decode live
    # set adds at least one segment, and for this MoE (hidden 2,048) less than two of 20 MiB,
    # beside the lm_head output [256, 151,936] bf16 in a 76 MiB segment of its own
    # (reports/gpu/sglang-capture-window)
    _, f0518 = _decode("0.5.18")
    pool = float(f0518.split("pool tensors ")[1].split(" MiB")[0])
    assert 146 + 76 < pool <= 146 + 76 + 40
    assert "no custom mask" in f0518
    _, f0516 = _decode("0.5.16")
    assert "custom mask uint8" in f0516


def test_row_1455_decode_figure_within_25_percent() -> None:
    rows = json.loads((Path(__file__).parent / "data" / "published.json").read_text())["rows"]
    row = next(r for r in rows if r["id"] == 1455)
    got, _ = _decode(row["memprof_engine_version"])
    logged = row["observed"]["graph_mem_usage_gb"]
    assert row["memprof_engine_version"] == "0.5.18"
    assert abs(got / GiB - logged) / logged <= 0.25


def test_runner_and_capture_streams_share_no_segment() -> None:
    # FlashInfer's per-size decode wrappers (8 MiB int workspace each) are made inside
    # graph_capture(), on the capture stream, as is the first warm-up's cuBLAS workspace
    # (8 MiB + 128 KiB before sm90): two workspaces a 20 MiB segment, the cuBLAS one in the
    # first size's spare 12 MiB; the runner's own buffers take segments of their own
    ws, cublas = 8 * MiB, 8 * MiB + 128 * 1024
    assert reserved_on_streams((), (ws,), 4, (cublas,)) == 60 * MiB
    # a 1.25 MiB kv_indices and a 4.6 MiB logits buffer share one 20 MiB segment of the
    # runner's stream, none of the capture stream's
    assert reserved_on_streams((1310720, 4862000), (ws,), 4, (cublas,)) == 80 * MiB


def test_row_1501_flashinfer_state_by_stream() -> None:
    # Qwen3-1.7B at SGLang 0.5.10 on an RTX 4060 Ti, context 1,024: decode sizes 8, 4, 2, 1;
    # the runner's stream holds kv_indices and mask in one 2 MiB small segment and the
    # [8, 151,936] fp32 logits buffer in a 20 MiB one, the capture stream 60 MiB (above), the
    # pool the bs-8 live set's 2 MiB and the lm_head output [8, 151,936] bf16 (2.4 MB, above the
    # 1 MiB small-block limit) in a 20 MiB segment (reports/gpu/sglang-capture-window), and the
    # capture stream's 2 MiB small segment of torch's generator graph state (GENERATOR_GRAPH_STATE)
    dep = Deployment(engine="sglang", engine_version="0.5.10", mem_fraction_static=0.75,
                     max_model_len=1024)
    e = estimate("qwen3-1.7b", dep, gpu_name="RTX-4060-Ti")
    comp = next(c for c in e.ranks[0].components if c.name == "CUDA-graph estimate")
    assert "pool tensors 106.00 MiB" in comp.formula
    assert "(on the capture stream)" in comp.formula
