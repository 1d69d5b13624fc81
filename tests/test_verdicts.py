"""Issue-3 acceptance: seed deployments end to end, verdicts, remedies, --compare, SGLang."""

import json

import pytest

from memprof.base.errors import BadInput
from memprof.base.units import GiB, MiB
from memprof.cli import run
from memprof.core.compare import diff, parse_changes
from memprof.core.deployment import Deployment
from memprof.core.engine_defaults import sglang_defaults
from memprof.core.estimate import Estimate, estimate
from memprof.core.gpus import find_gpu
from memprof.core.remedies import remedies
from memprof.core.terms import nccl_nvls

TQ = {"kv_cache_dtype": "turboquant_k8v4", "gpu_memory_utilization": 0.9, "max_num_seqs": 256}
TQ_SET = 278_986_752  # 4·256·64·(32·129 + 128 + 1): mid_o + output + lse, fp32


def comp(e: Estimate, name: str, rank: int = 0) -> int:
    return sum(c.bytes for c in e.ranks[rank].components if c.name.startswith(name))


def test_seed001_turboquant_per_layer_vs_shared() -> None:
    # published row 1, run at its release (memprof_engine_version 0.20.0)
    shared = estimate("qwen3-32b", Deployment(scratch="shared", engine_version="0.20.0", **TQ),
                      gpu_name="H200")
    per = estimate("qwen3-32b", Deployment(scratch="per-layer", engine_version="0.20.0", **TQ),
                   gpu_name="H200")
    # per layer: 60 TurboQuant layers × 278,986,752 B, registered at construction = model load
    c = next(x for x in per.ranks[0].components if x.name.endswith("(per layer)")
             and x.name.startswith("TurboQuant decode"))
    assert (c.count, c.bytes_each, c.where, c.profiled) == (60, TQ_SET, "budget", True)
    # shared: one WorkspaceManager set, 256-B aligned parts (already aligned here)
    assert comp(shared, "TurboQuant decode") == TQ_SET
    # with shared scratch, "GPU KV cache size" is within 3% of the 598,784 tokens vLLM logged
    # (607,376: +1.4%)
    assert abs(shared.kv_cache_tokens - 598_784) / 598_784 < 0.03
    # with per-layer scratch the KV budget drops by exactly that scratch
    drop = shared.ranks[0].available_kv_bytes - per.ranks[0].available_kv_bytes
    assert drop == 60 * TQ_SET
    assert per.kv_cache_tokens < 0.8 * shared.kv_cache_tokens


def test_seed001_pp2_tokens_within_3_percent() -> None:
    # published row 2 at 0.20.0: 1,812,432 tokens against 1,766,688 (+2.6%); tolerance 3%
    e = estimate("qwen3-32b", Deployment(pp=2, scratch="shared", engine_version="0.20.0", **TQ),
                 gpu_name="H200")
    assert abs(e.kv_cache_tokens - 1_766_688) / 1_766_688 < 0.03


def test_seed000_cutlass_mla_decode_out_per_layer_is_unprofiled_runtime_oom() -> None:
    dep = Deployment(tp=8, attention_backend="cutlass_mla", max_num_seqs=2048)
    per = estimate("deepseek-r1", dep.with_(scratch="per-layer"), gpu_name="B200")
    shared = estimate("deepseek-r1", dep.with_(scratch="shared"), gpu_name="B200")
    c = next(x for x in per.ranks[0].components
             if x.name == "CUTLASS MLA decode output (per layer)")
    assert (c.count, c.bytes_each) == (61, 268_435_456)  # 2048 × 128 × 512 × 2 B
    assert abs(c.bytes / GiB - 15.25) < 0.01 and not c.profiled and c.where == "runtime"
    assert comp(shared, "CUTLASS MLA decode output") == 268_435_456
    # the engine budgets neither, so the KV cache is the same size; only the verdict changes
    assert per.kv_cache_tokens == shared.kv_cache_tokens
    assert per.verdict == "runtime_oom" and shared.verdict == "fits"
    assert "CUTLASS MLA decode output (per layer)" in per.reasons[0]
    # the table's scratch section: what sharing would save
    assert ("CUTLASS MLA decode output", 61 * 268_435_456, 268_435_456) in \
        per.ranks[0].scratch_savings
    # remedies are evaluated and offered only when they fit with the minimum headroom (1 GiB),
    # same GPUs first: sharing (free) first
    fixes = remedies(per, "deepseek-r1")
    assert fixes[0].change == "--scratch shared" and fixes[0].verdict == "fits"
    assert all(f.verdict == "fits" and f.headroom_bytes >= GiB for f in fixes)
    assert [f.gpus for f in fixes] == sorted(f.gpus for f in fixes)  # same 8 GPUs first
    assert any(f.change.startswith("--max-num-seqs") for f in fixes)
    util = next(f for f in fixes if f.change.startswith("--gpu-memory-utilization"))
    assert GiB <= util.headroom_bytes < GiB + 256 * 2**20  # the utilisation that leaves 1 GiB


def test_pr37799_like_deployment_shows_what_is_outside_the_budget() -> None:
    # DeepSeek-R1 NVFP4 on GB200, DP4 + EP, fp8 KV, 1024 seqs, max_model_len 10240, util 0.9
    dep = Deployment(dp=4, enable_expert_parallel=True, kv_cache_dtype="fp8", max_num_seqs=1024,
                     max_model_len=10240, gpu_memory_utilization=0.9,
                     max_num_batched_tokens=8192, attention_backend="cutlass_mla")
    per = estimate("deepseek-r1-nvfp4", dep.with_(scratch="per-layer"), gpu_name="GB200")
    shared = estimate("deepseek-r1-nvfp4", dep.with_(scratch="shared"), gpu_name="GB200")
    runtime = {c.name: c.bytes for c in per.ranks[0].components if c.where == "runtime"}
    assert runtime["CUTLASS MLA decode output (per layer)"] == 61 * 1024 * 128 * 512 * 2
    lost = per.ranks[0].headroom_bytes - shared.ranks[0].headroom_bytes
    assert lost == -(61 - 1) * 1024 * 128 * 512 * 2
    assert {"CUDA context", "NCCL DP communicator (4 ranks)"} <= {
        c.name for c in per.ranks[0].components if c.where == "baseline"}


def test_sglang_dp_attention_gathered_buffer_with_formula() -> None:
    dep = Deployment(engine="sglang", tp=8, dp=8, enable_dp_attention=True)
    per = estimate("deepseek-v3", dep.with_(scratch="per-layer"), gpu_name="H200")
    shared = estimate("deepseek-v3", dep.with_(scratch="shared"), gpu_name="H200")
    p = next(c for c in per.ranks[0].components if c.name.startswith("SGLang DP-attention"))
    s = next(c for c in shared.ranks[0].components if c.name.startswith("SGLang DP-attention"))
    # (max_bs 512 × 1 token × dp 8, hidden 7168) bf16, persistent (#8280) or per forward
    assert p.bytes == s.bytes == 512 * 8 * 7168 * 2
    assert "#8280" in p.formula and "dp" in p.formula.lower()
    # both variants hold the same peak, so the verdict and KV budget do not move
    assert per.verdict == shared.verdict == "fits"
    assert per.kv_cache_tokens == shared.kv_cache_tokens > 0
    assert per.ranks[0].headroom_bytes == shared.ranks[0].headroom_bytes > 0


def test_deepseek_v4_aiter_per_step_vs_shared() -> None:
    dep = Deployment(tp=8, attention_backend="aiter_mla", max_model_len=200000)
    per = estimate("deepseek-v4-pro", dep.with_(scratch="per-layer"), gpu_name="MI355X")
    shared = estimate("deepseek-v4-pro", dep.with_(scratch="shared"), gpu_name="MI355X")
    blocks = per.ranks[0].kv.num_gpu_blocks
    assert blocks == shared.ranks[0].kv.num_gpu_blocks > 0
    dq_shared = comp(shared, "AITER DSv4")
    dq_per = comp(per, "AITER DSv4")
    assert dq_per > 40 * dq_shared  # 61 layers × per-step copies vs one shared set
    # shared: one bf16 + fp8 copy of the SWA and C4 scopes, 192 KiB per block, in the one
    # WorkspaceManager buffer (the component shows what it adds above the prefill workspace)
    k = next(c for c in shared.ranks[0].components if c.name.startswith("AITER DSv4 decode K"))
    assert f"{blocks * 192 * 1024:,} B" in k.formula
    assert per.verdict == "runtime_oom"  # every layer's dequant copy lands in the graph pool


def test_llama_8b_on_24gib_fits_at_20000_and_not_at_131072() -> None:
    # 131072: Llama-3.1's derived maximum (200000 is refused before any work, as vLLM does)
    ok = estimate("llama-3.1-8b", Deployment(max_model_len=20000), gpu_memory_bytes=24 * GiB,
                  gpu_arch="sm90")
    assert ok.verdict == "fits" and min(r.headroom_bytes for r in ok.ranks) > 0
    bad = estimate("llama-3.1-8b", Deployment(max_model_len=131072), gpu_memory_bytes=24 * GiB,
                  gpu_arch="sm90")
    assert bad.verdict == "startup_oom"
    est = bad.ranks[0].estimated_max_model_len
    assert 20000 < est < 131072 and f"estimated maximum model length is {est}" in bad.reasons[0]
    fixes = remedies(bad, "llama-3.1-8b")
    assert any(f.change == f"--max-model-len {est}" and f.verdict == "fits" for f in fixes)


def test_weights_larger_than_the_gpu_are_a_model_load_oom_and_its_remedies() -> None:
    e = estimate("llama-3.1-70b", Deployment(), gpu_name="H100")
    assert e.verdict == "startup_oom" and e.reasons[0].startswith("model load OOM")
    assert e.ranks[0].headroom_bytes < 0  # never positive headroom beside 131 GiB of weights
    fixes = remedies(e, "llama-3.1-70b")
    assert fixes and all(f.verdict == "fits" for f in fixes)
    assert fixes[0].change.startswith("-tp")


def test_no_memory_for_the_cache_blocks() -> None:
    e = estimate("qwen3-32b", Deployment(gpu_memory_utilization=0.8), gpu_name="H100")
    assert e.verdict == "startup_oom" and "No available memory" in e.reasons[0]
    assert e.ranks[0].available_kv_bytes < 0 and e.ranks[0].headroom_bytes >= 0


def test_requested_above_free_memory_is_a_startup_oom() -> None:
    e = estimate("qwen3-0.6b", Deployment(gpu_memory_utilization=1.0), gpu_name="H100")
    assert e.verdict == "startup_oom" and "less than the requested" in e.reasons[0]


def test_enforce_eager_removes_graph_terms() -> None:
    e = estimate("llama-3.1-8b", Deployment(enforce_eager=True), gpu_name="H100")
    assert comp(e, "CUDA-graph") == 0
    g = estimate("llama-3.1-8b", Deployment(), gpu_name="H100")
    assert comp(g, "CUDA-graph estimate") > 0


def test_compare_lists_the_changed_components() -> None:
    dep = Deployment(tp=8, attention_backend="cutlass_mla", max_num_seqs=2048,
                     scratch="per-layer")
    a = estimate("deepseek-r1", dep, gpu_name="B200")
    b = estimate("deepseek-r1", dep.with_(**parse_changes("scratch=shared")), gpu_name="B200")
    rows = {r.component: r for r in diff(a, b)}
    assert rows["CUTLASS MLA decode output (per layer)"].delta == -61 * 268_435_456
    assert rows["CUTLASS MLA decode output (shared)"].delta == 268_435_456
    assert parse_changes("--max-num-seqs=256, tensor-parallel-size=4") == {
        "max_num_seqs": 256, "tp": 4}
    with pytest.raises(BadInput):
        parse_changes("warp_speed=9")


def test_compare_in_the_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["estimate", "-m", "deepseek-r1", "--gpu", "B200", "-tp", "8",
                "--attention-backend", "cutlass_mla", "--max-num-seqs", "2048",
                "--scratch", "per-layer", "--compare", "scratch=shared", "-f", "json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 1 and d["summary"]["verdict"] == "runtime_oom"
    assert d["compare"]["summary"]["verdict"] == "fits"
    assert d["summary"]["remedies"][0]["change"] == "--scratch shared"


def test_sglang_budget_by_hand() -> None:
    # H100, one GPU, non-MLA: chunk 8192, max_bs 256 → reserved 512 + 12288 + 128 + 512 MiB of
    # nvidia-smi's 81,559 MiB, the total SGLang's heuristic reads (SGLANG_HEURISTIC_GPU_MEM)
    gpu = find_gpu("H100")
    mib = 81_559
    assert sglang_defaults(gpu, Deployment(engine="sglang")) == (
        8192, 256, round((mib - 13440) / mib, 3))
    e = estimate("llama-3.1-8b", Deployment(engine="sglang", mem_fraction_static=0.8),
                 gpu_name="H100")
    r = e.ranks[0]
    base = sum(c.bytes for c in r.components if c.where == "baseline")
    # SGLang's load is the drop in free memory; from 0.5.8 (main here) the process's first
    # kernel runs before it (GroupCoordinator's active_ranks: SGLANG_FIRST_KERNEL_BEFORE_LOAD),
    # so its 96,468,992 B sit in the baseline, not in the load
    assert any(c.where == "baseline" and c.bytes == 96_468_992 for c in r.components)
    loaded = sum(c.bytes for c in r.components
                 if c.where == "budget" and c.category in ("weights", "scratch"))
    assert r.available_kv_bytes == int(0.8 * (gpu.total_bytes - base)) - loaded
    assert e.kv_cache_tokens == r.available_kv_bytes // (32 * 8 * 256 * 2)  # page size 1


def test_row33_sglang_qwen3_235b_fp8_tokens() -> None:
    # "KV Cache is allocated. #tokens: 367404" (SGLang, --tp 4, mfs 0.93, H100); tolerance 5%:
    # memprof 383,269 (+4.3%) — SGLang's own load-time buffers are not all modelled.
    e = estimate("qwen3-235b-a22b", Deployment(engine="sglang", tp=4, quantization="fp8",
                                               mem_fraction_static=0.93), gpu_name="H100")
    assert abs(e.kv_cache_tokens - 367_404) / 367_404 < 0.05


def test_row32_vllm_available_kv_within_2_percent_at_its_release(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # "Available KV cache memory: 8.11 GiB" (vLLM mid-2025, LMCache connector, TP4, util 0.9),
    # run at the row's release (0.9.2), whose baseline precedes the NCCL communicator (0.9.2
    # v1/worker/gpu_worker.py init_device l.140 / l.158; non_torch.NCCL_PLACEMENT) and which sets
    # NCCL_CUMEM_ENABLE=0: the TP communicator is in the budget, at the 4-rank figure of its
    # largest rank (1,196 MiB; 908 MiB was the 2-rank figure used before the 4-rank golden).
    # 0.9.2's sampler sorts the logits of its 1,024 profile rows
    # (activation.V1_TORCH_SORT_SAMPLER: 3.48 GiB more than the Triton path at V = 151,936).
    # Together: 8.12 GiB, +0.1% (it was +46% before either rule); the stream pool inside the
    # measured row is charged apart since (vLLM's PyNccl communicator makes none, the profile
    # run's logits gather on ProcessGroupNCCL does: memprof.core.terms.pynccl_pool), in the same
    # budget, so the figure stays; NCCL's NVLink-multicast buffers on the NVSwitch host (130 MiB
    # with NCCL 2.26.2 and cuMem off, src/transport/nvls.cc ncclNvlsBufferSetup:
    # memprof.core.terms.nccl_nvls) leave 7.98 GiB, −1.6%. Not modelled: the LMCache connector.
    e = estimate("qwen3-235b-a22b", Deployment(tp=4, quantization="fp8", engine_version="0.9.2",
                                               gpu_memory_utilization=0.9), gpu_name="H100")
    nccl = [c for c in e.ranks[0].components if c.name.startswith("NCCL TP")]
    # 4 ranks, cuMem off: the largest rank's init (reports/gpu/nccl/nccl-matrix-4x-h100.json,
    # p2p-cumem-off, ranks 1 and 2) + the first all_reduce, less torch's stream pool, which
    # vLLM's PyNccl communicator does not make (memprof.core.terms.pynccl_pool)
    # (init's NCCL device code at 0.9.2's NCCL 2.26.2 sm_90 image, a page under the measured
    # 2.28.9 one: memprof.core.terms.nccl_image)
    assert [(c.where, c.bytes) for c in nccl] == [("budget",
                                                    1_059_061_760 + 195_035_136 - 73_400_320
                                                    - 2 * MiB)]
    # Since, torch's own TP communicator, which V1's logits all-gather makes on ProcessGroupNCCL
    # inside the budget (memprof.core.terms.nccl_torch: 832 MiB, the largest rank of the 4-rank
    # cuMem-off golden, + its NVLS buffers, 130 MiB), takes the row to -13%: the source says the
    # communicator is there, so published.json row 32's notes name what is over-charged instead.
    # That was the fused-MoE caches: 0.9.2's fused_experts_impl allocates them per call, so they
    # are never live beside the sampler, which is this profile run's peak stage
    # (memprof/core/terms/moe_caches.py TRITON_MOE_CACHES_PER_CALL); charged as a persistent 1 GiB
    # workspace before. With both rules the figure is within 2%, and without the communicator
    # (torch's, in the budget by 0.9.2's source) it would be 11% over:
    torch_comm = [c.bytes for c in e.ranks[0].components
                  if c.name.startswith("torch's NCCL TP communicator")
                  or c.name == "NCCL NVLS buffers (TP (torch), 4 ranks)"]
    assert torch_comm == [872_415_232, 130 * MiB]
    with_it = e.ranks[0].available_kv_bytes
    assert "fused-MoE workspace (WorkspaceManager)" not in {c.name for c in e.ranks[0].components}
    assert abs(with_it / GiB / 8.11 - 1) < 0.02
    monkeypatch.setattr(nccl_nvls, "torch_tp_comm_v1", lambda ctx: None)
    e = estimate("qwen3-235b-a22b", Deployment(tp=4, quantization="fp8", engine_version="0.9.2",
                                               gpu_memory_utilization=0.9), gpu_name="H100")
    assert e.ranks[0].available_kv_bytes - with_it == sum(torch_comm)
    assert e.ranks[0].available_kv_bytes / GiB / 8.11 - 1 > 0.10
