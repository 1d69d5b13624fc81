"""vLLM's symmetric-memory all-reduce (memprof/core/terms/symm_mem.py): the buffer each TP rank
holds from 0.11.0, as measured (reports/gpu/symm-mem/), and the smaller custom all-reduce beside
it on a multicast NVSwitch host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms.symm_mem import SIGNAL_PAD_BYTES

GOLDEN = Path(__file__).resolve().parents[1] / "reports" / "gpu" / "symm-mem"


@pytest.mark.parametrize("rank", [0, 1])
def test_each_buffer_costs_its_size_and_the_signal_pad_outside_torch(rank: int) -> None:
    rec = json.loads((GOLDEN / f"symm-mem-rank{rank}.json").read_text())
    assert rec["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    for step in rec["steps"]:
        assert step["empty_used_bytes"] == step["max_size_mib"] * MiB + SIGNAL_PAD_BYTES
        assert step["empty_reserved_bytes"] == 0  # not torch's caching allocator
        assert step["rendezvous_used_bytes"] == 0 and step["multicast_ptr"] == 0


def _rows(gpu: str, tp: int, version: str, **kw: object) -> dict[str, object]:
    e = estimate("qwen3-32b", Deployment(tp=tp, engine_version=version, **kw),  # type: ignore[arg-type]
                 gpu_name=gpu)
    return {c.name.split(" (")[0]: c for c in e.ranks[0].components}


@pytest.mark.parametrize(("gpu", "tp", "version", "buffer_mib", "custom_ar_mib"), [
    ("H100", 2, "0.33.0", 64, 26),      # TP2 on 9.0: max_size min(64, 8) MiB, unchanged
    ("H100", 8, "0.33.0", 64, 12),      # TP8: 256 KiB max_size, one 2 MiB page each buffer
    ("B200", 8, "0.33.0", 128, 12),     # 10.0 at TP8: 128 MiB buffer, 1 MiB max_size
    ("GH200", 2, "0.22.0", 64, 26),     # no multicast NVSwitch: buffer kept, custom AR as is
    ("B300", 8, "0.19.0", 64, 18),      # 10.3 from 0.19.0: 4 MiB max_size (6 + 4 + 8 MiB)
    ("B300", 8, "0.18.0", None, 26),    # ... and not before
    ("H100", 2, "0.10.2", None, 26),    # VLLM_ALLREDUCE_USE_SYMM_MEM default 0 before 0.11.0
    ("RTX-4090", 2, "0.33.0", None, None),  # 8.9: not in vLLM's table (and no P2P)
])
def test_the_buffer_and_the_custom_all_reduce_per_card_and_release(
        gpu: str, tp: int, version: str, buffer_mib: int | None,
        custom_ar_mib: int | None) -> None:
    rows = _rows(gpu, tp, version)
    symm = rows.get("symmetric-memory all-reduce buffer")
    if buffer_mib is None:
        assert symm is None
    else:
        assert symm is not None and symm.bytes == buffer_mib * MiB + SIGNAL_PAD_BYTES  # type: ignore[attr-defined]
        assert symm.where == "baseline"  # type: ignore[attr-defined]  # with the communicators
    ar = rows.get("custom all-reduce buffers")
    if custom_ar_mib is None:
        assert ar is None
    else:
        extra = rows.get("custom all-reduce rank_data")  # before 0.11.0: its own row
        got = ar.bytes + (extra.bytes if extra is not None else 0)  # type: ignore[attr-defined]
        assert got == custom_ar_mib * MiB


def test_the_buffer_is_outside_the_budget_from_0_11_0() -> None:
    # made before the engine's snapshot with the communicators: the KV cache is not moved, the
    # memory held before the baseline grows by the buffer
    def rank(switch: int | None) -> object:
        return estimate("qwen3-32b", Deployment(tp=2, engine_version="0.33.0",
                                                vllm_allreduce_use_symm_mem=switch),
                        gpu_name="H100").ranks[0]

    on, off = rank(None), rank(0)
    assert on.available_kv_bytes == off.available_kv_bytes  # type: ignore[attr-defined]
    assert on.kv.num_gpu_blocks == off.kv.num_gpu_blocks  # type: ignore[attr-defined]

    def baseline(r: object) -> int:
        return sum(c.bytes for c in r.components if c.where == "baseline")  # type: ignore[attr-defined]

    assert baseline(on) - baseline(off) == 64 * MiB + SIGNAL_PAD_BYTES


def test_the_switch_turns_the_buffer_off_and_on_where_the_release_has_it() -> None:
    assert "symmetric-memory all-reduce buffer" not in _rows(
        "H100", 2, "0.33.0", vllm_allreduce_use_symm_mem=0)
    on = _rows("H100", 2, "0.10.2", vllm_allreduce_use_symm_mem=1)
    row = on["symmetric-memory all-reduce buffer"]
    assert row.bytes == 66 * MiB and row.where == "budget"  # type: ignore[attr-defined]
    # 0.10.1.1 has no SymmMemCommunicator (no symm_mem.py): the variable does nothing
    assert "symmetric-memory all-reduce buffer" not in _rows(
        "H100", 2, "0.10.1.1", vllm_allreduce_use_symm_mem=1)


def test_the_switch_is_read_from_a_pasted_launch_and_checked() -> None:
    from memprof.probes.serve_command import parse_tokens

    cmd = parse_tokens(["VLLM_ALLREDUCE_USE_SYMM_MEM=0", "vllm", "serve", "Qwen/Qwen3-32B",
                        "-tp", "2"])
    assert cmd.settings["vllm_allreduce_use_symm_mem"] == 0
    # vLLM reads the variable with bool(int(...)): 2 is on, as 1
    two = _rows("H100", 2, "0.33.0", vllm_allreduce_use_symm_mem=2)
    one = _rows("H100", 2, "0.33.0", vllm_allreduce_use_symm_mem=1)
    assert {k: c.bytes for k, c in two.items()} == {k: c.bytes for k, c in one.items()}


@pytest.mark.parametrize(("gpu", "tp", "version", "why"), [
    ("MI300X", 2, "0.33.0", "ROCm GPU"), ("H100", 1, "0.33.0", "TP 1"),
    ("H100", 2, "0.10.1", "has no SymmMemCommunicator"), ("A100-80GB", 2, "0.33.0", "sm80 at TP 2"),
    ("H100", 2, "0.33.0", None)])
def test_a_switch_that_changes_nothing_says_why(gpu: str, tp: int, version: str,
                                                why: str | None) -> None:
    e = estimate("qwen3-32b", Deployment(tp=tp, engine_version=version,
                                         vllm_allreduce_use_symm_mem=1), gpu_name=gpu)
    said = [n for n in e.notes if "changes nothing" in n]
    if why is None:
        assert not said
    else:
        assert len(said) == 1 and why in said[0]
    off = estimate("qwen3-32b", Deployment(tp=tp, engine_version=version), gpu_name=gpu)
    assert not any("changes nothing" in n for n in off.notes)
