"""SGLang's DeepSeek-V3.2 (NSA) pool per release (memprof/core/engines/sglang_nsa.py): the KV
dtype and page size SGLang sets, the per-token bytes the pool stores, the cell
``profile_max_num_token`` divides the budget by, and the token count, each against a hand
calculation from SGLang's source (the 0.5.3 – 0.5.9 wheels) and the logs of SGLang PR #11309."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.base.units import GiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate
from tests.cli_helpers import completed

MODEL = "deepseek-v3.2"
LAYERS = 61  # configs/models/deepseek-v3.2.json num_hidden_layers (MTP layer not loaded)
LATENT = 512 + 64  # kv_lora_rank + qk_rope_head_dim
SLOT_FP8 = 512 + 512 // 128 * 4 + 64 * 2  # MLATokenToKVPool kv_cache_dim for NSA at fp8: 656
INDEXER = 128 + 128 // 128 * 4  # NSATokenToKVPool: 128 fp8 + one fp32 scale per 128: 132
PAGE = 64  # server_args.py: "self.page_size = 64" for NSA


def _est(version: str, gpu: str = "B200", **kw: object) -> Estimate:
    dep = Deployment(engine="sglang", engine_version=version, tp=8, dp=8,
                     enable_dp_attention=True, **kw)  # type: ignore[arg-type]
    return estimate(MODEL, dep, gpu_name=gpu)


def test_the_constants_reproduce_the_logged_kv_sizes() -> None:
    """SGLang PR #11309's logs: "KV size" is the pool's tensors, ``(size + page) × 656`` a layer
    for the latent and ``(size + page + 1) // page`` pages of ``page × 132`` for the indexer."""
    def pool(tokens: int) -> tuple[float, float]:
        mla = (tokens + PAGE) * SLOT_FP8 * LAYERS
        idx = (tokens + PAGE + 1) // PAGE * PAGE * INDEXER * LAYERS
        return mla / GiB, (mla + idx) / GiB

    assert round(pool(975_424)[1], 2) == 43.67  # with the PR: latent + indexer logged
    mla_only, both = pool(1_462_784)  # main before it: latent logged, 65.49 with the indexer
    assert (round(mla_only, 2), round(both, 2)) == (54.52, 65.49)


@pytest.mark.parametrize(("version", "cell"), [
    ("0.5.3", LATENT),  # profile_max_num_token: (kv_lora_rank + rope) × element size, no indexer
    ("0.5.4", LATENT + INDEXER),  # PR #11309: + the indexer's 132 B
    ("0.5.9", LATENT + INDEXER),  # get_cell_size_per_token (model_runner_kv_cache_mixin.py)
])
def test_blackwell_pool_stores_the_fp8_slot_and_sizes_by_the_release_cell(
        version: str, cell: int) -> None:
    e = _est(version)
    plan = e.ranks[0].plan
    assert e.deployment.kv_cache_dtype == "fp8_e4m3"
    assert plan.block_size == PAGE
    assert plan.bytes_per_token == LAYERS * (SLOT_FP8 + INDEXER) == 48_068
    assert plan.sized_block_bytes == PAGE * LAYERS * cell
    # the token count: rest // cell_size // page_size · page_size (model_runner.py
    # init_memory_pool), the pool then storing 788 B a layer per token
    rest = e.ranks[0].available_kv_bytes
    tokens = rest // (LAYERS * cell) // PAGE * PAGE
    assert e.kv_cache_tokens == tokens
    assert e.ranks[0].kv.kv_cache_bytes == tokens * 48_068
    assert e.ranks[0].kv.kv_cache_bytes > rest  # the pool outgrows the budget it was sized by


def test_main_sizes_by_the_stored_slot() -> None:
    """SGLang PR #27354 (main): the cell is calculate_mla_kv_cache_dim's 656 + the indexer."""
    e = _est("main@d315eb7")
    plan = e.ranks[0].plan
    assert (plan.sized_block_bytes, plan.bytes_per_token) == (0, 48_068)
    rest = e.ranks[0].available_kv_bytes
    assert e.kv_cache_tokens == rest // 48_068 // PAGE * PAGE


def test_mem_fraction_static_is_0_8_in_0_5_3_only() -> None:
    assert _est("0.5.3").mem_fraction_static == 0.8
    # 0.5.4: the _handle_gpu_memory_settings heuristic (B200: 512 + 1.5·16384 + 1024 + 2·512 +
    # 3·512·8 + 1.5·512·8 = 45,568 MiB reserved of nvidia-smi's 183,359 MiB, the total SGLang
    # reads (SGLANG_HEURISTIC_GPU_MEM) → round(0.75148, 3) = 0.751)
    assert _est("0.5.4").mem_fraction_static == 0.751


def test_kv_dtype_per_release_and_arch() -> None:
    # 0.5.3 / 0.5.4: fp8_e4m3 on compute capability >= 10 whatever was asked
    assert _est("0.5.4", kv_cache_dtype="bfloat16").deployment.kv_cache_dtype == "fp8_e4m3"
    # Hopper keeps what was asked (auto: the model's bf16, 1152 + 132 B a layer)
    h = _est("0.5.4", gpu="H200")
    assert h.deployment.kv_cache_dtype == "auto"
    assert h.ranks[0].plan.bytes_per_token == LAYERS * (2 * LATENT + INDEXER)
    assert h.ranks[0].plan.sized_block_bytes == 0  # bf16: the cell is what the pool stores
    # 0.5.5 on: auto → by architecture, an asked bfloat16 kept on Blackwell
    assert _est("0.5.5", gpu="H200").deployment.kv_cache_dtype == "bfloat16"
    assert _est("0.5.5").deployment.kv_cache_dtype == "fp8_e4m3"
    assert _est("0.5.5", kv_cache_dtype="bfloat16").deployment.kv_cache_dtype == "bfloat16"
    with pytest.raises(BadInput, match="bfloat16 or fp8_e4m3"):
        _est("0.5.5", kv_cache_dtype="fp8_e5m2")


def test_a_model_without_the_indexer_is_untouched() -> None:
    dep = Deployment(engine="sglang", engine_version="0.5.4", tp=8)
    e = estimate("deepseek-v3", dep, gpu_name="B200")
    assert (e.deployment.kv_cache_dtype, e.ranks[0].plan.block_size) == ("auto", 1)
    assert e.ranks[0].plan.sized_block_bytes == 0


def test_the_notes_say_what_sglang_set() -> None:
    notes = " ".join(_est("0.5.3").notes)
    assert "sets --kv-cache-dtype fp8_e4m3" in notes
    assert "sets --page-size 64" in notes
    assert "sets mem_fraction_static 0.8" in notes


def test_cli_refuses_a_kv_dtype_the_release_refuses() -> None:
    r = completed(["estimate", "--model", MODEL, "--gpu", "B200", "--engine", "sglang",
                   "--engine-version", "0.5.5", "--tp", "8", "--kv-cache-dtype", "fp8_e5m2"])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("error:") and lines[1].startswith("hint:"), r.stderr


@pytest.mark.parametrize(("version", "page"), [("0.5.7", 64), ("0.5.8", 1)])
def test_rocm_pages_from_0_5_8(version: str, page: int) -> None:
    """0.5.3 – 0.5.7 set page 64 on every non-NPU platform; 0.5.8 'if is_hip(): page_size = 1'
    (and gfx942 is compute capability 9: bfloat16)."""
    dep = Deployment(engine="sglang", engine_version=version, tp=8)
    e = estimate(MODEL, dep, gpu_name="MI300X")
    assert (e.deployment.kv_cache_dtype, e.ranks[0].plan.block_size) == ("bfloat16", page)


@pytest.mark.parametrize(("version", "asked_dp", "dp", "on"), [
    ("0.5.4", 1, 8, True),  # 0.5.3 – 0.5.5: enable_dp_attention = True, dp_size = tp_size
    ("0.5.6", 1, 1, False),  # 0.5.6 – 0.5.7: on, then off again at dp_size 1
    ("0.5.6", 2, 2, True),  # ... and on for the dp asked
    ("0.5.8", 2, 2, False),  # 0.5.8: as asked
])
def test_dp_attention_per_release(version: str, asked_dp: int, dp: int, on: bool) -> None:
    dep = Deployment(engine="sglang", engine_version=version, tp=8, dp=asked_dp)
    e = estimate(MODEL, dep, gpu_name="B200")
    assert (e.deployment.dp, e.deployment.enable_dp_attention) == (dp, on)


def test_forced_dp_attention_keeps_the_heuristic_of_the_layout_asked() -> None:
    """SGLang's mem_fraction_static heuristic runs before the NSA adjustments: without
    --enable-dp-attention no DP reserve (B200: 512 + 1.5·16384 + 1024 + 2·512 = 27,136 MiB of
    nvidia-smi's 183,359 MiB → round(0.85200, 3) = 0.852), though the server then runs DP
    attention (attention replicated)."""
    forced = estimate(MODEL, Deployment(engine="sglang", engine_version="0.5.4", tp=8),
                      gpu_name="B200")
    asked = _est("0.5.4")
    assert forced.mem_fraction_static == 0.852
    assert forced.weights_bytes_max == asked.weights_bytes_max  # the same DP-attention ranks
    assert any("turns on DP attention (--dp 8)" in n for n in forced.notes)
