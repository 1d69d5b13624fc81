"""SGLang's DP-attention gather over gloo (a world of one): the buffer per forward vs
persistent, its bytes against the estimate, and the simulated graph-clean result."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from memprof.kernels.dp_gather import DPGatherBuffer, dp_gather_forward, process_group  # noqa: E402
from memprof.validation.dp_gather import validate_dp_gather  # noqa: E402


def test_gather_scatter_on_gloo() -> None:
    with process_group(torch.device("cpu")):
        assert dist.get_backend() == "gloo" and dist.get_world_size() == 1
        V, R, H = 4, 3, 16  # 4 DP ranks stand in this process
        local = torch.randn((V, R, H)).to(torch.bfloat16)
        local[1, 2:] = 0  # MAX_LEN padding
        w = torch.full((H,), 2.0, dtype=torch.bfloat16)
        out = torch.empty_like(local)
        for policy in ("per-forward", "persistent"):
            h = DPGatherBuffer(policy, V * R, H, dtype=torch.bfloat16, device="cpu")
            dp_gather_forward(local, h, w, out)
            assert torch.equal(out, local * 2)
            assert h.held_bytes == (0 if policy == "per-forward" else V * R * H * 2)
            assert h.num_allocs == 1
            dp_gather_forward(local, h, w, out)
            assert h.num_allocs == (2 if policy == "per-forward" else 1)
        with pytest.raises(ValueError, match="world"):
            dp_gather_forward(local, DPGatherBuffer("persistent", 5, H, dtype=torch.bfloat16,
                                                    device="cpu"), w, out)
    assert not dist.is_initialized()


def test_validate_dp_gather_equals_the_estimate() -> None:
    r = validate_dp_gather(max_bs=4, dp=4, tp=8)
    assert r.passed and r.memory_passed and r.graph_passed
    assert (r.rows, r.hidden, r.tokens_per_bs) == (4 * 4, 7168, 1)
    by = {x.policy: x for x in r.runs}
    assert by["persistent"].estimate_bytes == by["persistent"].buffer_bytes == 16 * 7168 * 2
    assert by["per-forward"].estimate_match and by["per-forward"].held_bytes == 0
    g = by["per-forward"].graph
    # on the CPU each forward's fresh buffer is an allocation during "replay"; whether its
    # address moves depends on the host allocator (a freed mmap is often handed back as is)
    assert g is not None and not g.clean and g.replay_allocations > 0
    assert set(g.pointers_changed) <= {"gathered_buffer"}
    assert by["persistent"].graph is not None and by["persistent"].graph.clean


def test_an_estimate_that_cannot_run_fails_the_memory_check() -> None:
    # the estimate does not model SGLang's speculative decoding: no figure, so no pass
    r = validate_dp_gather(max_bs=1, dp=2, tp=2, speculative_tokens=1, check_graph=False)
    assert r.tokens_per_bs == 2 and r.parity_passed and not r.memory_passed and not r.passed
    assert any("failed" in n for n in r.notes)
