"""The recommended multicast granularity NCCL 2.20/2.21 round their NVLS buffer up to
(``memprof.core.terms.nvls_granularity``): the rounding by hand, the NCCL versions it applies
to, and the vLLM V0 TP8 H200 estimates it moves (rows 803 and 1304 of
tests/data/published.json)."""

from __future__ import annotations

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms.nvls_granularity import MC_GRANULARITY_RECOMMENDED_BYTES, mc_rounded


def test_rounding_by_hand() -> None:
    # cuMulticastGetGranularity(RECOMMENDED) on an 8x H100 HGX: 512 MiB
    assert MC_GRANULARITY_RECOMMENDED_BYTES == 536_870_912
    # 2.21.x at 8 ranks asks 24 channels × 2 × (1 + 2) MiB × 8 heads = 1,152 MiB: three granules
    assert mc_rounded(1152 * MiB, "2.21.5") == 1536 * MiB
    # 4 ranks ask 576 MiB: two granules; an exact multiple stays
    assert mc_rounded(576 * MiB, "2.21.5") == 1024 * MiB
    assert mc_rounded(1024 * MiB, "2.21.5") == 1024 * MiB
    # 2.20.x (4 MiB SIMPLE buffers) at 8 ranks asks 2,304 MiB: five granules
    assert mc_rounded(2304 * MiB, "2.20.5") == 2560 * MiB


def test_not_applied_from_nccl_2_22() -> None:
    # 2.22+ split the setup (ncclNvlsBufferSetup); its allocations are sized as they were
    for version in ("2.26.2", "2.27.3", "2.27.5", "2.28.9"):
        assert mc_rounded(258 * MiB, version) == 258 * MiB


def test_v0_tp8_h200_pays_the_rounding_on_both_communicators() -> None:
    # vLLM 0.7.3 V0 (NCCL 2.21.5, cuMem off): PyNccl's TP communicator and torch's (the logits
    # gather) each hold one NVLS buffer, 1,536 MiB instead of 1,152: 768 MiB more a rank,
    # all of it inside V0's budget (non-torch), so the KV cache loses it
    e = estimate("deepseek-r1", Deployment(tp=8, engine_version="0.7.3",
                                           gpu_memory_utilization=0.85, max_model_len=128000,
                                           max_num_batched_tokens=32000, max_num_seqs=1024),
                 gpu_name="H200")
    comps = {c.name: c for c in e.ranks[0].components}
    for name in ("NCCL NVLS buffers (TP, 8 ranks)", "NCCL NVLS buffers (TP (torch), 8 ranks)"):
        assert comps[name].bytes == 1536 * MiB
        assert comps[name].where == "budget"
        assert "rounded up to the recommended multicast granularity" in comps[name].formula
