"""NCCL's NVLS buffers and vLLM V0's torch TP communicator (``memprof.core.terms.nccl_nvls``):
each figure counted by hand from NCCL's source (src/transport/nvls.cc, src/transport/p2p.cc,
src/init.cc at the tags named) and the rules' rows."""

from __future__ import annotations

from memprof.base.units import KiB, MiB
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu
from memprof.core.terms.nccl_nvls import (
    nccl_version,
    nvls_bytes,
    nvls_group,
    p2p_recv_bytes_per_channel,
)
from memprof.probes.serve_command import parse_tokens


def _comps(model: str, gpu: str, **dep: object) -> dict[str, int]:
    e = estimate(model, Deployment(**dep), gpu_name=gpu)  # type: ignore[arg-type]
    return {c.name: c.bytes for c in e.ranks[0].components if c.category == "non_torch"}


def test_nccl_2_21_buffer_by_hand() -> None:
    # v2.21.5-1 nvls.cc ncclNvlsSetup: nChannels × 2 × (buffSize + memSize) × nHeads, buffSize =
    # 128 KiB × 8 steps, memSize = 2 MiB; nChannels = max(24 ring channels, 16 NVLS channels);
    # one node: one head per GPU
    # (1,152 MiB at 8 ranks), rounded up to the recommended multicast granularity, 512 MiB
    # (nvlsGetProperties; memprof.core.terms.nvls_granularity): 1,536 MiB
    h200 = find_gpu("H200")
    asked = 24 * 2 * (128 * KiB * 8 + 2 * MiB) * 8
    assert asked == 1152 * MiB
    assert nvls_bytes("2.21.5", h200, 8, False)[0] == 3 * 512 * MiB
    # the cuMem switch does not gate 2.21's eager setup; 4 ranks ask 576 MiB: two granules
    assert nvls_bytes("2.21.5", h200, 4, True)[0] == 2 * 512 * MiB


def test_nccl_2_22_on_eager_only_without_cumem() -> None:
    # v2.26.2-1 ncclNvlsBufferSetup: nvlsChannels × 2 × 1 MiB × nHeads (16 channels on sm90),
    # plus ncclNvlsSetup's credit buffer (nChannels × 2 × 64 B × nHeads: one 2 MiB page); at init
    # only where runtimeConn is off (cuMemSupport && NCCL_RUNTIME_CONNECT)
    h100 = find_gpu("H100")
    assert nvls_bytes("2.26.2", h100, 8, False)[0] == 16 * 2 * MiB * 8 + 2 * MiB
    got, how = nvls_bytes("2.27", h100, 8, True)
    assert got == 0 and "256.00 MiB" in how and "not charged" in how
    # sm100: 32 NVLS channels in 2.26 (NVLS_NCHANNELS_SM100), 24 for one node in 2.27
    b200 = find_gpu("B200")
    assert nvls_bytes("2.26.2", b200, 8, False)[0] == 32 * 2 * MiB * 8 + 2 * MiB


def test_receive_connection_by_hand() -> None:
    # p2p.cc p2pRecvSetup: LL (8 × 512 × 8 × 16 B = 512 KiB) + LL128 (120 × 640 × 8 × 8 B) +
    # SIMPLE 4 MiB + ncclRecvMem, aligned to CUDA_IPC_MIN 2 MiB: 10 MiB; P2P read (NVLink
    # between sm80 GPUs) moves SIMPLE to the sender: 6 MiB
    assert 512 * KiB + 4_915_200 + 4 * MiB < 10 * MiB
    assert p2p_recv_bytes_per_channel(find_gpu("H100")) == 10 * MiB
    assert p2p_recv_bytes_per_channel(find_gpu("A100-80GB")) == 6 * MiB


def test_which_groups_get_nvls() -> None:
    h200, a100, l40s = find_gpu("H200"), find_gpu("A100-80GB"), find_gpu("L40S")
    dep = Deployment(tp=8, engine_version="0.7.3")
    assert nvls_group(dep, h200, "TP", 8)
    assert not nvls_group(dep, h200, "TP", 2)  # nvls.cc ncclNvlsInit: gpuCount <= 2 returns
    assert not nvls_group(dep, a100, "TP", 8)  # search.cc: ccMin < 90, no NVLS graph
    assert not nvls_group(dep, l40s, "TP", 4)  # no NVSwitch
    # SGLang's launcher sets NCCL_NVLS_ENABLE=0 unless --enable-nccl-nvls
    assert not nvls_group(Deployment(tp=8, engine="sglang"), h200, "TP", 8)


def test_nccl_version_by_release() -> None:
    assert nccl_version(Deployment(engine_version="0.7.1")) == "2.21.5"  # torch 2.5.1
    assert nccl_version(Deployment(engine_version="0.8.5")) == "2.21.5"  # torch 2.6.0
    assert nccl_version(Deployment(engine_version="0.9.0")) == "2.26.2"  # torch 2.7.0
    assert nccl_version(Deployment(engine_version="0.11.0")) == "2.27.3"  # torch 2.8.0
    assert nccl_version(Deployment(engine_version="0.19.1")) == "2.27.5"  # torch 2.10.0
    assert nccl_version(Deployment(engine_version="0.20.0")) == "2.28.9"  # torch 2.11.0
    assert nccl_version(Deployment(engine_version="0.27.1")) == "2.29.7"  # torch 2.13.0
    assert nccl_version(Deployment(engine_version="0.33.0")) == "2.30.7"  # torch 2.14.0


def test_v0_tp8_on_h200_charges_both_communicators() -> None:
    # 0.7.3 (V0, NCCL 2.21.5, NCCL_CUMEM_ENABLE=0): PyNccl's TP communicator and torch's (the
    # logits gather) each set NVLS up; torch's adds a second communicator's measured init (the
    # 4-rank cuMem-off row of reports/gpu/nccl-torch-gather, 872,415,232 B: nccl.second_comm_row)
    # and the driver's receive connections from 7 peers × 32 channels × 10 MiB + the first
    # send/recv's stack growth, derived for the card and NCCL 2.21.5's sm_90 kernel image
    # (nccl_stack.first_p2p_stack: 58 MiB on an H200; 62 MiB was the H100 / NCCL 2.28.9 measure)
    got = _comps("llama-3.1-8b", "H200", tp=8, engine_version="0.7.3")
    assert got["NCCL NVLS buffers (TP, 8 ranks)"] == 1536 * MiB
    assert got["NCCL NVLS buffers (TP (torch), 8 ranks)"] == 1536 * MiB
    torch_comm = got["NCCL TP communicator of torch's ProcessGroupNCCL (8 ranks, logits gather)"]
    assert torch_comm == 872_415_232 + 58 * MiB + 7 * 32 * 10 * MiB
    # V1 (0.8.0 default): PyNccl's NVLS stays (cuMem off, 2.21.5), and torch's TP communicator
    # of the logits all-gather (memprof.core.terms.nccl_torch: the 4-rank cuMem-off row of
    # reports/gpu/nccl-torch-gather) sets up its own NVLS buffers at init the same way
    v1 = _comps("llama-3.1-8b", "H200", tp=8, engine_version="0.8.0")
    assert v1["NCCL NVLS buffers (TP, 8 ranks)"] == 1536 * MiB
    assert v1["NCCL NVLS buffers (TP (torch), 8 ranks)"] == 1536 * MiB
    assert v1["torch's NCCL TP communicator (ProcessGroupNCCL, 8 ranks, logits all-gather)"] \
        == 872_415_232
    assert not any(n.startswith("NCCL TP communicator of torch's") for n in v1)


def test_no_nvls_where_nccl_sets_none_up() -> None:
    # A100's NVSwitch (sm80) and a 2-rank group: no NVLS row
    for gpu, tp in (("A100-80GB", 8), ("H100", 2)):
        assert not any("NVLS" in n for n in _comps("llama-3.1-8b", gpu, tp=tp,
                                                   engine_version="0.7.3"))
    # today's vLLM (cuMem on, NCCL 2.27): a 0-byte row that says why nothing is charged
    got = _comps("llama-3.1-8b", "H200", tp=8)
    assert got["NCCL NVLS buffers (TP, 8 ranks)"] == 0


def test_v0_gather_sender_ranks_hold_send_connections_only() -> None:
    # torch.distributed.gather is ncclSend to the root: a non-driver rank opens one send
    # connection per p2p channel, ncclSendMem aligned to 2 MiB (p2p.cc p2pSendSetup; no SIMPLE
    # buffer without P2P read, which sm90 lacks): the stack growth + 32 × 2 MiB past the init
    e = estimate("llama-3.1-8b", Deployment(tp=8, engine_version="0.7.3"), gpu_name="H200")
    name = "NCCL TP communicator of torch's ProcessGroupNCCL (8 ranks, logits gather)"
    by_rank = {r.coord.tp_rank: {c.name: c.bytes for c in r.components} for r in e.ranks}
    init = 872_415_232  # a second communicator's measured init (nccl.second_comm_row)
    assert by_rank[0][name] == init + 58 * MiB + 7 * 32 * 10 * MiB
    sender = next(t for t in by_rank if t != 0)
    assert by_rank[sender][name] == init + 58 * MiB + 32 * 2 * MiB
    # the engine sizes the KV cache from the smallest block count, the driver's
    assert e.ranks[0].kv.num_gpu_blocks == min(r.kv.num_gpu_blocks for r in e.ranks)


def test_nccl_nvls_enable_0_turns_the_buffers_off() -> None:
    # NCCL_NVLS_ENABLE=0: ncclNvlsInit returns before any NVLS setup (nvls.cc); torch's V0
    # communicator itself stays
    on = _comps("llama-3.1-8b", "H200", tp=8, engine_version="0.7.3")
    off = _comps("llama-3.1-8b", "H200", tp=8, engine_version="0.7.3", nccl_nvls_enable=0)
    assert {n for n in on if "NVLS" in n} and not {n for n in off if "NVLS" in n}
    assert sum(on.values()) - sum(off.values()) == 2 * 1536 * MiB


def test_nccl_nvls_enable_from_a_serve_command_and_refused_values() -> None:
    cmd = parse_tokens(["NCCL_NVLS_ENABLE=0", "vllm", "serve", "meta-llama/Llama-3.1-8B",
                        "-tp", "8"])
    assert cmd.settings["nccl_nvls_enable"] == 0
    assert run(["estimate", "-m", "llama-3.1-8b", "--gpu", "H200", "-tp", "8",
                "--nccl-nvls-enable", "3"]) == 2
