"""``--no-gpu-peer-access``: a host whose driver gives its GPUs no peer-to-peer access (pods, VMs,
PCIe cards) runs the catalog card without it — NCCL over host shared memory (memprof's SHM rows,
memprof/core/terms/nccl.py) and no custom all-reduce (vLLM's ``CustomAllreduce`` disables itself:
"Custom allreduce is disabled because your platform lacks GPU P2P capability",
distributed/device_communicators/custom_all_reduce.py, 0.10.1.1).

The calibration cases are published rows 523 and 524 (vLLM 0.10.1.1, Qwen2-7B-Instruct TP 2 on
two A100 80GB of one host, whose log prints that warning)."""

from __future__ import annotations

import json

from memprof.base.units import MiB
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu
from memprof.core.terms.nccl import NCCL_ROWS
from memprof.core.terms.nccl_image import image_delta

DEP = dict(engine_version="0.10.1.1", tp=2, max_model_len=16384, gpu_memory_utilization=0.25,
           vllm_use_flashinfer_sampler=1)


def _comps(**kw: object) -> dict[str, int]:
    e = estimate("qwen2.5-7b-instruct", Deployment(**{**DEP, **kw}),  # type: ignore[arg-type]
                 gpu_name="A100-80GB")
    return {c.name: c.bytes for c in e.ranks[0].components}


def test_nccl_over_shm_and_no_custom_all_reduce() -> None:
    p2p, shm = _comps(), _comps(no_gpu_peer_access=True)
    nccl = "NCCL TP communicator (2 ranks)"
    custom = "custom all-reduce buffers (TP, 2 ranks)"
    # 0.10.1.1 sets NCCL_CUMEM_ENABLE=0: the cuMem-off rows, init + first all_reduce, less
    # torch's stream pool, which vLLM's PyNccl communicator does not make (terms.pynccl_pool)
    pool = 73_400_320
    # and the first all_reduce's stack reservation at the A100's 108 SMs × 2048 threads (NCCL
    # 2.26.2 reads 2.28.9's sm_80 kernel, 1,328 B: 66 MiB, not the H100's 186;
    # memprof.core.terms.nccl_stack)
    stack = -120 * MiB
    # and init's NCCL device code, 2.26.2's sm_80 image for the measured row's 2.28.9 sm_90 one
    # (memprof.core.terms.nccl_image)
    image = image_delta(find_gpu("A100-80GB"), "2.26.2")[0]
    assert image == -56 * MiB
    init, first, _src = NCCL_ROWS[(True, False, 2)]
    assert p2p[nccl] == init + first - pool + stack + image == 662 * MiB
    init, first, _src = NCCL_ROWS[(False, False, 2)]
    assert shm[nccl] == init + first - pool + stack + image == 126 * MiB
    # 0.10.1.1's budget holds the meta and IPC buffers; rank_data, a torch tensor, is outside it
    # (memprof.core.terms.custom_allreduce.RANK_DATA_UNBUDGETED)
    rank_data = "custom all-reduce rank_data (TP, 2 ranks)"
    assert p2p[custom] == 18 * MiB and p2p[rank_data] == 8 * MiB
    assert custom not in shm and rank_data not in shm


def test_row_523_moves_to_the_log() -> None:
    e = estimate("qwen2.5-7b-instruct", Deployment(**DEP, no_gpu_peer_access=True),  # type: ignore[arg-type]
                 gpu_name="A100-80GB")
    logged = 450_192
    # -5.3% (-2.8% before torch's V1 TP communicator was charged, memprof.core.terms.nccl_torch:
    # over SHM the first communicator's row less the pool stands in for it, 302 MiB; row 523's
    # notes name what is then over-charged); with peer access it is further off
    peer = estimate("qwen2.5-7b-instruct", Deployment(**DEP),  # type: ignore[arg-type]
                    gpu_name="A100-80GB")
    assert abs(e.kv_cache_tokens - logged) < abs(peer.kv_cache_tokens - logged)
    assert abs(e.kv_cache_tokens - logged) / logged < 0.06


def test_one_gpu_is_unchanged_and_the_flag_is_echoed(capsys) -> None:  # type: ignore[no-untyped-def]
    assert _comps(no_gpu_peer_access=True, tp=1) == _comps(tp=1)  # one GPU: no communicator
    assert run(["estimate", "--model", "qwen2.5-7b-instruct", "--gpu", "RTX-4090", "-tp", "2",
                "--max-model-len", "4096", "--no-gpu-peer-access", "--format", "json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["deployment"]["no_gpu_peer_access"] is True
