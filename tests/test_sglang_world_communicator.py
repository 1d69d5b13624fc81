"""SGLang's free-memory reading across ranks in ``init_torch_distributed`` and the NCCL
communicator it makes (``SGLANG_FREE_MEMORY_OVER_NCCL`` in memprof/core/engines/sglang.py).

Hand count from the wheels: 0.4.3 - 0.4.6 ``utils.get_available_gpu_memory(distributed=True)``
moves the free bytes to the rank's GPU and all-reduces them (MIN) on torch's default process
group, an NCCL one (``init_process_group(backend="nccl")`` without ``device_id``): its
ProcessGroupNCCL makes a communicator of the tp ranks at that first collective, after the TP
group's PyNccl one, before the load. From 0.4.7 the tensor stays on the CPU and goes over the
world group's gloo ``cpu_group``: no second communicator. On H100 with NCCL's cuMem off (SGLang's
launcher) a second communicator of 4 ranks is 872,415,232 B on its largest rank
(memprof/core/terms/nccl.py SECOND_COMM_ROWS, reports/gpu/nccl-torch-gather)."""

from __future__ import annotations

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms.non_torch import nccl_groups


def _sgl(version: str, **kw: object) -> Deployment:
    return Deployment(engine="sglang", engine_version=version, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("version", ["0.4.3", "0.4.4", "0.4.5", "0.4.6"])
def test_world_communicator_through_046(version: str) -> None:
    assert nccl_groups(_sgl(version, tp=4)) == [("TP", 4), ("world", 4)]
    assert nccl_groups(_sgl(version, tp=8)) == [("TP", 8), ("world", 8)]
    # tp 1: get_available_gpu_memory(distributed=self.tp_size > 1) reads locally
    assert nccl_groups(_sgl(version, tp=1)) == []


@pytest.mark.parametrize("version", ["0.4.7", "0.4.8", "0.4.10", "0.5.3", "0.5.9",
                                     "main@d315eb7"])
def test_no_world_communicator_from_047(version: str) -> None:
    assert ("world", 4) not in nccl_groups(_sgl(version, tp=4))


def _comms(version: str, gpu: str) -> dict[str, tuple[int, str]]:
    e = estimate("qwen3-32b", _sgl(version, tp=4), gpu_name=gpu)
    r = e.ranks[0]
    return {c.name: (c.bytes, c.where) for c in r.components if c.name.startswith("NCCL")}


def test_it_is_a_second_communicator_before_the_load() -> None:
    comms = _comms("0.4.6", "H100-80GB")
    assert set(comms) == {"NCCL TP communicator (4 ranks)", "NCCL world communicator (4 ranks)"}
    # the measured second communicator (cuMem off, P2P, 4 ranks, the largest rank), in the
    # baseline SGLang's budget reads before the load, like the TP group's
    assert comms["NCCL world communicator (4 ranks)"] == (872_415_232, "baseline")
    assert comms["NCCL TP communicator (4 ranks)"][1] == "baseline"
    assert set(_comms("0.4.7", "H100-80GB")) == {"NCCL TP communicator (4 ranks)"}


def test_the_baseline_grows_by_it_and_the_nccl_release() -> None:
    """0.4.6 and 0.4.7 differ here in this communicator and in the NCCL their torch pins (the
    same heuristics row): 0.4.6 (torch 2.6.0) runs NCCL 2.21.5, whose sm_90 all-reduce kernel
    needs a smaller stack than 2.28.9's (memprof/core/terms/nccl_stack.py), so the TP
    communicator's first all_reduce reserves less; the free memory before the load differs by
    the world communicator's bytes less that."""
    def baseline(version: str) -> int:
        e = estimate("qwen3-32b", _sgl(version, tp=4), gpu_name="H100-80GB")
        return sum(c.bytes for c in e.ranks[0].components if c.where == "baseline")
    tp = {v: _comms(v, "H100-80GB")["NCCL TP communicator (4 ranks)"][0]
          for v in ("0.4.6", "0.4.7")}
    # 186 - 62 MiB of stack reservation, and init's NCCL device code: 2.21.5's sm_90 image
    # (43 pages) under 2.26.2's (50, torch 2.7.1's NCCL; memprof.core.terms.nccl_image)
    assert tp["0.4.7"] - tp["0.4.6"] == 130_023_424 + 14 * MiB
    assert baseline("0.4.6") - baseline("0.4.7") == 872_415_232 - 130_023_424 - 14 * MiB
