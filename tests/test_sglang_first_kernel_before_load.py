"""Where SGLang's process runs its first CUDA kernel at TP1, per release
(``SGLANG_FIRST_KERNEL_BEFORE_LOAD`` in memprof/core/engines/sglang.py): inside ``load_model``
(0.4.3 - 0.4.6, and 0.4.10 - 0.5.7 for the models memprof keeps there), or before it — the
expert-location metadata's kernels (0.4.7 - 0.4.9) or the world group's ``active_ranks``
``torch.ones`` (from 0.5.8) — where its module memory leaves the load's drop and joins the
baseline the pool's free-memory-before-load reading sees, against hand counts."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.engines.sglang import first_kernel_before_load
from memprof.core.estimate import estimate, load_figure
from memprof.core.terms.non_torch import first_kernel_in_load

# Llama-3.1-8B on an H100, as tests/test_sglang_load_figure.py counts it by hand: the weights,
# SGLang's fp32 get_rope cache and the load's allocator segments at TP1
WEIGHTS, ROPE, SEGMENTS_TP1 = 16_060_522_496, 131_072 * 128 * 4, 2 * 2**20 - 65 * 4096 * 2
LOADED = WEIGHTS + ROPE + SEGMENTS_TP1
FIRST_KERNEL = 96_468_992  # reports/gpu/nccl/README.md, the first fill kernel before any GEMM
CUBLAS = 69_206_016  # the cuBLAS step after the first kernel (non_torch.py)
CONTEXT = 552_402_944  # the H100's measured CUDA context
H100 = 85_017_493_504  # configs/gpus.json
TOKEN = 32 * 8 * 128 * 2 * 2  # KV bytes a token: layers × KV heads × head dim × (K, V) × bf16
EARLY = "first kernel's modules (before the load)"

BEFORE = ("0.4.7", "0.4.8", "0.4.8.post1", "0.4.9", "0.4.9.post5", "0.5.8", "0.5.9", "0.5.10",
          "0.5.13", "0.5.18", "0.5.19", "main@d315eb7")
IN_LOAD = ("0.4.3", "0.4.4", "0.4.6", "0.4.10", "0.5.1", "0.5.5", "0.5.7")


def _sglang(version: str, tp: int = 1) -> Deployment:
    return Deployment(engine="sglang", engine_version=version, tp=tp)


def test_the_rule_by_release() -> None:
    assert all(first_kernel_before_load(v) for v in BEFORE)
    assert not any(first_kernel_before_load(v) for v in IN_LOAD)


@pytest.mark.parametrize("version", ("0.4.9", "0.5.10"))
def test_tp1_load_leaves_the_first_kernel_out(version: str) -> None:
    e = estimate("llama-3.1-8b", _sglang(version), gpu_name="H100")
    r = e.ranks[0]
    assert first_kernel_in_load(e.deployment, e.gpu) == 0
    assert load_figure(e, r) == LOADED
    by_name = {c.name: c for c in r.components if c.category == "non_torch"}
    assert by_name[EARLY].bytes == FIRST_KERNEL and by_name[EARLY].where == "baseline"
    # the profile run's own increase keeps the cuBLAS step alone
    assert by_name["non-torch increase (profile run)"].bytes == CUBLAS


@pytest.mark.parametrize("version", ("0.4.4", "0.5.5"))
def test_tp1_load_holds_it_where_nothing_ran_before(version: str) -> None:
    e = estimate("llama-3.1-8b", _sglang(version), gpu_name="H100")
    r = e.ranks[0]
    assert load_figure(e, r) == LOADED + FIRST_KERNEL
    assert EARLY not in {c.name for c in r.components}


def test_pool_sees_it_before_the_load() -> None:
    """0.4.8, TP1, H100: KV = mfs × (total − context − first kernel) − the load."""
    e = estimate("llama-3.1-8b", _sglang("0.4.8"), gpu_name="H100")
    kv = int(e.mem_fraction_static * (H100 - CONTEXT - FIRST_KERNEL)) - LOADED
    assert e.ranks[0].available_kv_bytes == kv
    assert e.kv_cache_tokens == kv // TOKEN


def test_init_line_of_the_logs() -> None:
    """"Init torch distributed ends. … mem usage" is the free memory init_torch_distributed
    takes: 0.09 GB at TP1 in rows 1451 (0.5.10) and 1455 (0.5.18), 0.00 GB in row 404 (0.5.5),
    SGLang's GB being 2**30 B: the first kernel's module memory, or nothing."""
    assert f"{FIRST_KERNEL / 2**30:.2f}" == "0.09"
    for version, printed in (("0.5.10", "0.09"), ("0.5.18", "0.09"), ("0.5.5", "0.00")):
        e = estimate("llama-3.1-8b", _sglang(version), gpu_name="H100")
        early = sum(c.bytes for c in e.ranks[0].components if c.name == EARLY)
        assert f"{early / 2**30:.2f}" == printed


def test_a_communicator_rank_is_unchanged() -> None:
    """At TP2 PyNccl's warm-up ran the first kernel (its row or the warm-up term holds it):
    no component of this rule, the load the allocations alone."""
    for version in ("0.4.8", "0.5.10"):
        e = estimate("llama-3.1-8b", _sglang(version, tp=2), gpu_name="H100")
        assert first_kernel_in_load(e.deployment, e.gpu) == 0
        assert all(EARLY not in {c.name for c in r.components} for r in e.ranks)


def test_vllm_is_unchanged() -> None:
    e = estimate("llama-3.1-8b", Deployment(tp=1, engine_version="0.9.2"), gpu_name="H100")
    assert EARLY not in {c.name for c in e.ranks[0].components}
    assert first_kernel_in_load(e.deployment, e.gpu) == FIRST_KERNEL


def test_the_expert_layout_range_says_what_it_assumed() -> None:
    """0.4.10 - 0.5.7 run the kernel before the load only for a class with an expert layout,
    which memprof cannot tell: a MoE model's estimate there says so; a dense one's, another
    release's, or a rank with a communicator does not."""
    def said(model: str, version: str, tp: int = 1) -> bool:
        e = estimate(model, _sglang(version, tp), gpu_name="H100")
        return any("expert layout" in n for n in e.notes)

    assert said("qwen3-30b-a3b", "0.5.5")
    assert said("qwen3-30b-a3b", "0.4.10")
    assert not said("llama-3.1-8b", "0.5.5")
    assert not said("qwen3-30b-a3b", "0.5.10")
    assert not said("qwen3-30b-a3b", "0.4.9")
    assert not said("qwen3-30b-a3b", "0.5.5", tp=2)
