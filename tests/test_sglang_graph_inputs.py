"""SGLang's decode ``CudaGraphRunner`` allocates its input buffers inside the window it logs as
"Capture cuda graph end. … mem usage" (memprof/core/engines/sglang_graph_inputs.py, read in the
sglang 0.4.3 - 0.5.19 wheels), and on a pipeline stage before the last each graph keeps its
``PPProxyTensors`` output, not logits (``sglang_graphs.stage_outputs_kept``)."""

from __future__ import annotations

from memprof.alloc.constants import K_SMALL_SIZE
from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang_attention import reserved_on_streams
from memprof.core.engines.sglang_graph_inputs import graph_input_buffers, large_input_bytes
from memprof.core.engines.sglang_graphs import stage_outputs_kept
from memprof.core.estimate import estimate


def _by_name(version: str, max_bs: int = 256, hidden: int = 4096, dtype: str = "bfloat16",
             pp: int = 1) -> dict[str, tuple[tuple[int, ...], str, int]]:
    return {b.name: (b.shape, b.dtype, b.nbytes)
            for b in graph_input_buffers(version, max_bs, hidden, dtype, pp)}


def test_043_makes_the_six_index_buffers_and_no_mask() -> None:
    # sglang 0.4.3 cuda_graph_runner.py: input_ids, req_pool_indices, seq_lens, out_cache_loc,
    # positions, mrope_positions; no custom_mask, no PP buffers
    got = _by_name("0.4.3", pp=2)
    assert list(got) == ["input_ids", "req_pool_indices", "seq_lens", "out_cache_loc",
                         "positions", "mrope_positions"]
    assert sum(b for *_, b in got.values()) == 256 * (8 + 4 + 4 + 8 + 8 + 3 * 8)


def test_0410_to_053_add_the_mask_and_bf16_pp_buffers() -> None:
    for version in ("0.4.10", "0.5.1", "0.5.3"):
        got = _by_name(version, dtype="float16", pp=2)
        assert got["custom_mask"] == ((512,), "bool", 512), version  # max_bs × 1 + max_bs
        assert got["num_token_non_padded"] == ((1,), "int32", 4), version
        # torch.zeros((max_bs, hidden_size), dtype=torch.bfloat16) whatever the model dtype
        assert got["pp_proxy hidden_states"] == ((256, 4096), "bfloat16", 2 * MiB), version
        assert "input_embeds" not in got, version
    assert "pp_proxy residual" not in _by_name("0.4.10", pp=1)


def test_055_pp_buffers_in_the_model_dtype_and_056_adds_input_embeds() -> None:
    assert _by_name("0.5.5", dtype="float16", pp=2)["pp_proxy residual"][1] == "float16"
    assert "input_embeds" not in _by_name("0.5.5")
    for version in ("0.5.6", "0.5.9", "0.5.19"):
        # GraphInputBuffers.create: torch.zeros((max_num_token, hidden_size), dtype=dtype)
        assert _by_name(version)["input_embeds"] == ((256, 4096), "bfloat16", 2 * MiB), version
    assert _by_name("0.5.9")["seq_lens"][1] == "int32"
    assert _by_name("0.5.19")["seq_lens"][1] == _by_name("0.5.19")["req_pool_indices"][1] \
        == "int64"


def test_only_buffers_above_the_small_block_limit_take_segments() -> None:
    # an 8B model's [256, 4,096] bf16 input_embeds (2 MiB) is a large-pool block; a 0.6B
    # model's [256, 1,024] (512 KiB) and every index buffer are small-pool blocks
    big = graph_input_buffers("0.5.9", 256, 4096, "bfloat16", 1)
    small = graph_input_buffers("0.5.9", 256, 1024, "bfloat16", 1)
    assert large_input_bytes(big) == (2 * MiB,)
    assert large_input_bytes(small) == ()
    assert all(b.nbytes <= K_SMALL_SIZE for b in small)


def test_input_embeds_takes_a_large_segment_where_no_free_tail_holds_it() -> None:
    # on the runner's stream after a 20 MiB page table (one 20 MiB segment, no free tail) the
    # 2 MiB input_embeds needs a segment of its own (kLargeBuffer, 20 MiB); after an 8 MiB page
    # table its 12 MiB tail holds it
    full, part = 20 * MiB, 8 * MiB
    assert reserved_on_streams((full, 2 * MiB), (), 1) - reserved_on_streams((full,), (), 1) \
        == 20 * MiB
    assert reserved_on_streams((part, 2 * MiB), (), 1) == reserved_on_streams((part,), (), 1)


def test_the_estimate_names_the_large_input_buffers() -> None:
    e = estimate("llama-3.1-8b", Deployment(engine="sglang", engine_version="0.5.9"),
                 gpu_name="H200")
    graph = next(c for c in e.ranks[0].components if c.name == "CUDA-graph estimate")
    assert "input_embeds [256, 4096] bfloat16" in graph.formula
    e = estimate("llama-3.1-8b", Deployment(engine="sglang", engine_version="0.5.5"),
                 gpu_name="H200")
    graph = next(c for c in e.ranks[0].components if c.name == "CUDA-graph estimate")
    assert "input_embeds" not in graph.formula and "(large: none" in graph.formula


def test_stages_before_the_last_keep_hidden_states_and_residual_not_logits() -> None:
    # 0.4.10 keeps each graph's fp32 logits on the last stage only; the first stage of two keeps
    # its PPProxyTensors (hidden_states, residual [bs, hidden]) per graph
    dep = Deployment(engine="sglang", engine_version="0.4.10", pp=2)
    e = estimate("qwen3-8b", dep, gpu_name="H200")
    by_stage = {r.coord.pp_stage: next(c for c in r.components if c.name == "CUDA-graph estimate")
                for r in e.ranks}
    assert "fp32 logits" not in by_stage[0].formula
    assert "hidden_states and residual" in by_stage[0].formula
    assert "fp32 logits [bs, 151,936] kept" in by_stage[1].formula
    # 35 graphs of [bs, 4,096] × 2 bf16 against 35 of fp32 [bs, 151,936]: the first stage's
    # pool is far below the last's
    assert by_stage[0].bytes < by_stage[1].bytes / 4
    kept, _ = stage_outputs_kept([256, 8], 4096, 2)
    assert kept == ((2 * MiB, 2 * MiB), (65_536, 65_536))
