"""CUDA-graph capture sizes and modes per vLLM release and engine generation
(``memprof.core.terms.cudagraph`` CAPTURE_SIZES, GRAPH_MODES) and the fused-MoE chunk per release
(``memprof.core.terms.activation`` FUSED_MOE_CHUNK), each against the list the release's
``_set_cudagraph_sizes`` builds, written out here by hand."""

from __future__ import annotations

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms.activation import fused_moe_chunk
from memprof.core.terms.cudagraph import capture_sizes, graph_modes


def _dep(version: str, seqs: int = 256, mnbt: int = 8192, spec: int = 0) -> Deployment:
    return Deployment(engine_version=version, max_num_seqs=seqs, max_num_batched_tokens=mnbt,
                      max_model_len=8192, num_speculative_tokens=spec)


def test_0_8_captures_its_full_list_whatever_max_num_seqs() -> None:
    full = [1, 2, 4, *range(8, 513, 8)]
    assert capture_sizes(_dep("0.8.5", seqs=16)) == full and len(full) == 67
    assert capture_sizes(_dep("0.9.2", seqs=256)) == full
    # ... but only sizes <= max_num_batched_tokens
    assert capture_sizes(_dep("0.8.5", seqs=16, mnbt=100))[-1] == 96
    assert graph_modes(_dep("0.8.5")) == {"PIECEWISE": full}


def test_0_10_caps_at_twice_max_num_seqs_in_steps_of_8() -> None:
    assert capture_sizes(_dep("0.10.1", seqs=16)) == [1, 2, 4, 8, 16, 24, 32]
    assert capture_sizes(_dep("0.11.0", seqs=256))[-3:] == [496, 504, 512]
    assert set(graph_modes(_dep("0.11.0"))) == {"PIECEWISE", "FULL"}
    assert set(graph_modes(_dep("0.10.2"))) == {"PIECEWISE"}


def test_0_11_1_steps_16_from_256_and_0_13_counts_speculative_tokens() -> None:
    sizes = capture_sizes(_dep("0.11.1", seqs=256))
    assert sizes[:3] == [1, 2, 4] and 248 in sizes and 264 not in sizes and 272 in sizes
    assert len(sizes) == 3 + 31 + 17
    # 64 sequences with 1 MTP token: 0.12.0 caps at 128, 0.13.0 at 64·2·2 = 256
    assert capture_sizes(_dep("0.12.0", seqs=64, spec=1))[-1] == 128
    assert capture_sizes(_dep("0.13.0", seqs=64, spec=1))[-1] == 256


def test_v0_captures_one_full_graph_per_size_up_to_max_num_seqs() -> None:
    assert capture_sizes(_dep("0.7.3", seqs=100)) == [1, 2, 4, *range(8, 105, 8)]
    assert capture_sizes(_dep("0.8.5+v0", seqs=256)) == [1, 2, 4, *range(8, 257, 8)]
    assert graph_modes(_dep("0.8.5+v0", seqs=20)) == {"FULL": [1, 2, 4, 8, 16, 24]}


def test_fused_moe_chunk_by_release() -> None:
    assert [fused_moe_chunk(v) for v in ("0.7.3", "0.8.5", "0.11.1", "0.12.0", "0.17.1",
                                         "0.18.0", None)] == [
        32768, 32768, 32768, 16384, 16384, None, None]  # not chunked from 0.18.0 (PR #34086)


def test_the_0_8_chunk_moves_a_large_batch_moe_profile_run() -> None:
    """Mixtral-8x7B with 32768 batched tokens: the 0.11.1 fused-MoE caches hold twice the
    rows of 0.12.0's, the rest of the activation peak alike. Both releases allocate them per
    call (memprof/core/terms/moe_caches.py), in the MoE stage, which is the peak here:
    cache13 [M·k·max(2I, H)] + cache2 [M·k, I], bf16, k = 2, I = 14336, H = 4096."""
    def act(version: str) -> int:
        e = estimate("mixtral-8x7b", Deployment(engine_version=version, max_model_len=32768,
                                                 max_num_batched_tokens=32768), gpu_name="H100")
        return sum(c.bytes for c in e.ranks[0].components if c.category == "activation")
    old, new = act("0.11.1"), act("0.12.0")
    assert old - new == (32768 - 16384) * 2 * (2 * 14336 + 14336) * 2


def test_gpt_oss_config_raises_the_largest_capture_size_whatever_max_num_seqs() -> None:
    """GptOssForCausalLMConfig.verify_and_update_config (model_executor/models/config.py):
    0.10.1-0.10.2 give [1, 2, 4] + range(8, 256, 8) + range(256, 1025, 16), 0.11.0 the same to
    992, 0.11.1 on max_cudagraph_capture_size 1024; each cut at max_num_batched_tokens. Other
    architectures keep the release's default."""
    gpt = "GptOssForCausalLM"
    to_1024 = [1, 2, 4, *range(8, 256, 8), *range(256, 1025, 16)]
    assert len(to_1024) == 83
    assert capture_sizes(_dep("0.10.1", seqs=256), gpt) == to_1024
    assert capture_sizes(_dep("0.10.2", seqs=256, mnbt=2048), gpt) == to_1024
    assert capture_sizes(_dep("0.11.0", seqs=256), gpt) == to_1024[:81]
    assert capture_sizes(_dep("0.11.0", seqs=256), gpt)[-1] == 992
    # max_num_seqs 6 (the 0.11.2 gpt-oss-120b log of tests/data/published.json row 2481, whose
    # config line prints the sizes to 1024): the PIECEWISE list is not cut by it, FULL is
    modes = graph_modes(_dep("0.11.2", seqs=6), gpt)
    assert modes["PIECEWISE"] == to_1024 and modes["FULL"] == [1, 2, 4]
    assert capture_sizes(_dep("0.11.2", seqs=6, mnbt=512), gpt)[-1] == 512
    # before the model was added, and for any other architecture: the release's default
    assert capture_sizes(_dep("0.10.0", seqs=256), gpt)[-1] == 512
    assert capture_sizes(_dep("0.11.2", seqs=6), "LlamaForCausalLM") == [1, 2, 4, 8]
