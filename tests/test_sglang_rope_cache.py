"""SGLang's RoPE caches (``sglang_rope_terms``, memprof/core/terms/rope_cache.py): its
``get_rope`` keeps one instance per distinct rotary, as vLLM's does, but
``RotaryEmbedding.__init__`` keeps ``cos_sin_cache`` in fp32 on CUDA (``if not _is_cuda: cache
= cache.to(dtype)``, sglang 0.4.3 – 0.5.9 ``layers/rotary_embedding.py``), and the LongRoPE class
registers the short cache, the long cache and their concatenation in the model dtype. Hand
counts from the bundled configs."""

from __future__ import annotations

import copy

from memprof.core.components import TermContext
from memprof.core.deployment import Deployment, ranks
from memprof.core.engine_defaults import resolve
from memprof.core.estimate import estimate
from memprof.core.gpus import GPU, find_gpu
from memprof.core.kvcache import kv_plan
from memprof.core.models import ModelSpec, load_model
from memprof.core.models.load import load_config, spec_from_config
from memprof.core.terms.rope_cache import rope_cache_terms


def _rope(spec: ModelSpec, dep: Deployment, gpu: GPU) -> list[int]:
    dep = resolve(dep, spec, gpu)
    coord = ranks(dep)[0]
    c = TermContext(spec=spec, dep=dep, gpu=gpu, coord=coord,
                    plan=kv_plan(spec, dep, coord, "bfloat16", gpu.arch), weights_bytes=0,
                    model_dtype="bfloat16")
    return [x.bytes for x in rope_cache_terms(c)]


SGL = Deployment(engine="sglang", engine_version="0.5.3")
H100, MI300X = find_gpu("H100-80GB"), find_gpu("MI300X")


def test_llama3_cache_is_fp32_on_cuda() -> None:
    # Llama-3.1-8B: llama3 scaling keeps max_position_embeddings (131072) positions × head_dim
    # 128; fp32 on CUDA: 64 MiB (vLLM: the model dtype, 32 MiB)
    spec = load_model("llama-3.1-8b")
    assert _rope(spec, SGL, H100) == [131072 * 128 * 4] == [67_108_864]
    assert _rope(spec, Deployment(), H100) == [131072 * 128 * 2]


def test_model_dtype_on_rocm() -> None:
    assert _rope(load_model("llama-3.1-8b"), SGL, MI300X) == [131072 * 128 * 2]


def test_deepseek_yarn_positions_in_fp32() -> None:
    # DeepseekScalingRotaryEmbedding: original 4096 × factor 40 = 163840 positions ×
    # qk_rope_head_dim 64; MLA and the NSA indexer share the instance (same get_rope key)
    for model in ("deepseek-v3", "deepseek-v3.2"):
        spec = load_model(model)
        assert _rope(spec, Deployment(engine="sglang", engine_version="0.5.4", tp=8),
                     H100) == [163840 * 64 * 4] == [41_943_040]


def test_longrope_keeps_short_long_and_both() -> None:
    # phi-4's shapes (head_dim 5120 / 40 = 128) with a LongRoPE rope_scaling: short
    # (original 4096) + long (16384) + their concatenation (20480), each × 128 × bf16
    _, cfg, _ = load_config("phi-4")
    cfg = copy.deepcopy(cfg)
    cfg["original_max_position_embeddings"] = 4096
    cfg["rope_scaling"] = {"type": "longrope", "short_factor": [1.0] * 64,
                           "long_factor": [1.0] * 64}
    spec = spec_from_config(cfg, name="phi-4-longrope")
    assert spec.max_position_embeddings == 16384
    assert _rope(spec, SGL, H100) == [2 * (4096 + 16384) * 128 * 2] == [10_485_760]
    assert _rope(spec, Deployment(), H100) == [(4096 + 16384) * 128 * 2]


def test_in_the_load_drop_of_an_sglang_estimate() -> None:
    # the cache is built under the target device: part of what "Load weight end ... mem usage"
    # measures (row 166 of tests/data/published.json: 15.11 GB = 14.9575 GiB of Llama-3.1-8B
    # weights + the first kernel's 92 MiB + this 64 MiB)
    e = estimate("llama-3.1-8b", SGL, gpu_name="H100-80GB")
    rope = [c for c in e.ranks[0].components if c.name.startswith("RoPE")]
    assert [c.bytes for c in rope] == [67_108_864] and rope[0].category == "weights"
