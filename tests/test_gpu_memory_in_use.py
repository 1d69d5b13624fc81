"""Memory other processes hold on the GPU (``--gpu-memory-in-use``, memprof/core/terms/in_use.py):
the flag through the CLI, what each engine's budget does with it, and ``memprof explain`` reading
it from a log's free memory before load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import invoke, one_error

from memprof.base.units import GiB, MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, load_figure
from memprof.core.explain import LOG_ROUNDING_BYTES, in_use_from_log, with_derived
from memprof.core.terms.non_torch import cuda_context

IN_USE = 800 * MiB

# row 167 of tests/data/published.json (github.com/jerryzsj/my-deepseek-r1, README.md): SGLang
# under Docker Desktop on WSL2, an RTX 3090
SGLANG_LOG = """\
[2025-02-04 05:21:40] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-R1-Distill-Qwen-7B', tp_size=1, mem_fraction_static=0.88, context_length=32768)
[2025-02-04 05:21:40 TP0] Init torch distributed begin.
[2025-02-04 05:21:40 TP0] Load weight begin. avail mem=22.76 GB
[2025-02-04 05:29:17 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=8.37 GB
[2025-02-04 05:29:17 TP0] KV Cache is allocated. K size: 2.82 GB, V size: 2.82 GB.
[2025-02-04 05:29:17 TP0] Memory pool end. avail mem=1.68 GB
[2025-02-04 05:29:20 TP0] max_total_num_tokens=105531, chunked_prefill_size=2048, max_prefill_tokens=16384, max_running_requests=2049, context_len=32768
"""  # noqa: E501

# vLLM V1's start-up check (0.11.0 v1/worker/gpu_worker.py Worker.init_device)
VLLM_LOG = """\
INFO 10-07 12:00:00 [api_server.py:1896] vLLM API server version 0.11.0
INFO 10-07 12:00:00 [utils.py:233] non-default args: {'model': 'Qwen/Qwen3-0.6B', 'max_model_len': 8192}
(EngineCore_DP0 pid=120) ValueError: Free memory on device cuda:0 (12.18/23.56 GiB) on startup is less than desired GPU memory utilization (0.9, 21.2 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.
"""  # noqa: E501


def _sglang(**kw: object) -> Deployment:
    return Deployment(engine="sglang", engine_version="0.4.9", tp=1, **kw)  # type: ignore[arg-type]


def test_sglang_pool_is_a_fraction_of_what_is_left() -> None:
    """SGLang: KV = mfs × (total − context − in use) − load (model_runner.py
    profile_max_num_token): the pool loses mfs × the memory in use."""
    plain = estimate("llama-3.1-8b", _sglang(), gpu_name="RTX-4090")
    held = estimate("llama-3.1-8b", _sglang(gpu_memory_in_use=IN_USE), gpu_name="RTX-4090")
    mfs = held.mem_fraction_static
    assert mfs == plain.mem_fraction_static
    r = held.ranks[0]
    total = held.gpu.total_bytes
    context = cuda_context(held.gpu)[0]  # the card's own (its stack reservation)
    # 0.4.9 runs its first kernel before the load (SGLANG_FIRST_KERNEL_BEFORE_LOAD: the
    # expert-location metadata), so its modules are held before the pool is sized too
    first = sum(c.bytes for c in r.components if c.where == "baseline"
                and c.name.startswith("first kernel"))
    assert first > 0
    assert r.available_kv_bytes == (int(mfs * (total - context - first - IN_USE))
                                    - load_figure(held, r))
    assert plain.ranks[0].available_kv_bytes - r.available_kv_bytes == pytest.approx(
        mfs * IN_USE, abs=2)
    comp = next(c for c in r.components if c.name.startswith("memory in use"))
    assert (comp.bytes, comp.where, comp.category) == (IN_USE, "baseline", "non_torch")


def test_vllm_after_0_9_1_refuses_to_start_below_the_requested() -> None:
    """vLLM V1 from 0.9.1: the init snapshot sees the memory in use, the profile does not
    charge it; start-up is refused when free < utilization × total."""
    base = Deployment(engine_version="0.11.0", max_model_len=8192)
    plain = estimate("qwen3-0.6b", base, gpu_name="H100")
    few = estimate("qwen3-0.6b", base.with_(gpu_memory_in_use=1 * GiB), gpu_name="H100")
    assert few.verdict == "fits"
    assert few.ranks[0].available_kv_bytes == plain.ranks[0].available_kv_bytes
    many = estimate("qwen3-0.6b", base.with_(gpu_memory_in_use=10 * GiB), gpu_name="H100")
    assert many.verdict == "startup_oom"
    assert "memory in use by other processes" in many.reasons[0]


def test_vllm_0_8_charges_it_to_the_budget() -> None:
    """vLLM V1 0.8.0 – 0.9.0 (gpu_worker.py determine_available_memory): non-torch = used −
    torch allocated, other processes included: the KV budget loses all of it."""
    base = Deployment(engine_version="0.8.5", max_model_len=8192)
    plain = estimate("qwen3-0.6b", base, gpu_name="H100")
    held = estimate("qwen3-0.6b", base.with_(gpu_memory_in_use=IN_USE), gpu_name="H100")
    assert plain.ranks[0].available_kv_bytes - held.ranks[0].available_kv_bytes == IN_USE


def test_flag_through_the_cli() -> None:
    code, out, err = invoke(["estimate", "--model", "llama-3.1-8b", "--gpu", "RTX-4090",
                             "--engine", "sglang", "--gpu-memory-in-use", "800MiB",
                             "--format", "json"])
    assert code == 0, err
    doc = json.loads(out)
    names = [c["name"] for r in doc["ranks"] for c in r["components"]]
    assert "memory in use by other processes (given)" in names


@pytest.mark.parametrize(("value", "text"), [
    ("-1", "cannot read the size '-1'"),
    ("lots", "cannot read the size 'lots'"),
    ("30GiB", "--gpu-memory-in-use 30.00 GiB is not less than the GPU's"),
])
def test_bad_values_are_refused(value: str, text: str) -> None:
    code, out, err = invoke(["estimate", "--model", "llama-3.1-8b", "--gpu", "RTX-4090",
                             "--gpu-memory-in-use", value])
    assert code == 2 and out == ""
    one_error(err, text)


def test_a_negative_value_in_code_is_refused() -> None:
    from memprof.base.errors import BadInput

    with pytest.raises(BadInput, match="zero or more"):
        estimate("llama-3.1-8b", _sglang(gpu_memory_in_use=-5), gpu_name="RTX-4090")


def test_derived_figures() -> None:
    """Free before load = after + mem usage; the 0.4.3 load = before − after."""
    got, notes = with_derived({"avail_after_load_bytes": 7.0 * GiB, "weights_bytes": 15.0 * GiB})
    assert got["avail_before_load_bytes"] == 22.0 * GiB and len(notes) == 1
    got, notes = with_derived({"avail_before_load_bytes": 22.0 * GiB,
                               "avail_after_load_bytes": 8.0 * GiB})
    assert got["weights_bytes"] == 14.0 * GiB and len(notes) == 1
    got, notes = with_derived({"weights_bytes": 15.0 * GiB})
    assert got == {"weights_bytes": 15.0 * GiB} and notes == []


def test_in_use_only_beyond_the_log_rounding() -> None:
    e = estimate("llama-3.1-8b", _sglang(), gpu_name="RTX-4090")
    # free before the load: the card less its context and (0.4.9) the first kernel's modules
    ours = e.gpu.total_bytes - sum(c.bytes for c in e.ranks[0].components
                                   if c.where == "baseline")
    assert ours < e.gpu.total_bytes - cuda_context(e.gpu)[0]
    assert in_use_from_log({"avail_before_load_bytes": ours - LOG_ROUNDING_BYTES}, e) is None
    assert in_use_from_log({"avail_before_load_bytes": ours + GiB}, e) is None
    took = in_use_from_log({"avail_before_load_bytes": ours - 300 * MiB}, e)
    assert took is not None and took[0] == 300 * MiB
    assert "--gpu-memory-in-use 300MiB" in took[1]


def test_explain_takes_it_from_an_sglang_log(tmp_path: Path) -> None:
    """Row 167: 22.76 GB free before load on a 23.57 GiB card, 546 MiB below the card less
    memprof's context (the RTX 3090's own, 82 SMs × 1536 threads of stack beside the sm86
    remainder vLLM 0.6.4.post1 printed, memprof/core/terms/published_context.py: 447 MiB below it
    with the H100's remainder, 306 MiB with the H100's whole context); with it the pool is
    0.88 × 22.76 − load."""
    log = tmp_path / "sglang.log"
    log.write_text(SGLANG_LOG, encoding="utf-8")
    code, out, err = invoke(["explain", str(log), "--model", "qwen2.5-7b-instruct", "--gpu",
                             "RTX-3090", "--format", "json"])
    assert code == 0, err
    doc = json.loads(out)
    took = next(n for n in doc["notes"] if "held by other processes" in n)
    assert "--gpu-memory-in-use 546MiB" in took
    fig = {f["key"]: f for f in doc["figures"]}
    assert fig["avail_before_load_bytes"]["reproduced"]
    # the 0.4.3 log prints no mem usage: the load is before − after
    assert fig["weights_bytes"]["measured"] == pytest.approx((22.76 - 8.37) * GiB, abs=1)
    tokens = fig["max_total_num_tokens"]
    assert tokens["measured"] == 105_531
    assert abs(tokens["delta_pct"]) < 2.5  # +8.3% without the memory in use


def test_explain_with_the_flag_given_keeps_it(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text(SGLANG_LOG, encoding="utf-8")
    code, out, err = invoke(["explain", str(log), "--model", "qwen2.5-7b-instruct", "--gpu",
                             "RTX-3090", "--gpu-memory-in-use", "0", "--format", "json"])
    assert code == 0, err
    doc = json.loads(out)
    assert not any("held by other processes" in n for n in doc["notes"])
    tokens = next(f for f in doc["figures"] if f["key"] == "max_total_num_tokens")
    assert tokens["delta_pct"] > 5


def test_explain_reads_vllms_free_memory_on_startup(tmp_path: Path) -> None:
    """The failed start's init snapshot shows 12.18 GiB free: 10.88 GiB in use, and the
    rebuilt deployment is refused as vLLM refused it."""
    log = tmp_path / "vllm.log"
    log.write_text(VLLM_LOG, encoding="utf-8")
    code, out, err = invoke(["explain", str(log), "--gpu", "RTX-3090", "--format", "json"])
    assert code == 1, err
    doc = json.loads(out)
    assert doc["verdict"] == "startup_oom"
    fig = {f["key"]: f for f in doc["figures"]}
    assert fig["free_at_start_bytes"]["measured"] == pytest.approx(12.18 * GiB, abs=1)
    assert fig["free_at_start_bytes"]["reproduced"]
    assert any("held by other processes" in n for n in doc["notes"])
