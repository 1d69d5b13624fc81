"""``memprof estimate``: flags in, the estimate out through the reporter of ``--format``.

Flags are named as ``vllm serve`` (and, for SGLang settings, ``sglang.launch_server``) name
them, so a user can paste their arguments. No logic here: the core estimates, the reporters
render.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from memprof.base.errors import EXIT_OK, EXIT_OOM

if TYPE_CHECKING:
    from memprof.core.contract import EstimateReport

def _size(text: str | None, *, vllm_bytes: bool = False) -> int | None:
    from memprof.base.units import parse_size

    if text is None:
        return None
    return parse_size(text, bare_bytes=vllm_bytes, vllm_letters=vllm_bytes)


def estimate(
    model: Annotated[str, typer.Option(
        "--model", "-m", "--model-path",
        help="Bundled name (memprof models), an HF repo id of a bundled model "
        "(Qwen/Qwen3-32B), a config.json, or a folder holding one. SGLang: --model-path.")
    ] = "deepseek-r1",
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU from the catalog (memprof gpus); "
                                            "default H100-80GB.")] = None,
    gpu_memory: Annotated[str | None, typer.Option(
        "--gpu-memory", help="Total GPU memory as torch.cuda.mem_get_info reports it, with a "
        "unit, e.g. 23.58GiB (overrides the catalog).")] = None,
    tensor_parallel_size: Annotated[int, typer.Option(
        "-tp", "--tensor-parallel-size", "--tp", "--tp-size",
        help="TP size (SGLang: --tp/--tp-size, the GPUs of one server).")] = 1,
    pipeline_parallel_size: Annotated[int, typer.Option(
        "-pp", "--pipeline-parallel-size", "--pp-size")] = 1,
    data_parallel_size: Annotated[int, typer.Option(
        "-dp", "--data-parallel-size", "--dp", "--dp-size",
        help="DP size (SGLang: --dp/--dp-size).")] = 1,
    enable_expert_parallel: Annotated[bool, typer.Option("--enable-expert-parallel")] = False,
    dtype: Annotated[str, typer.Option("--dtype", help="auto, bfloat16, float16, float32")] = (
        "auto"),
    quantization: Annotated[str | None, typer.Option(
        "--quantization", "-q", help="fp8, mxfp4, modelopt_fp4 (nvfp4), awq, gptq; default: "
        "the config's quantization_config.")] = None,
    kv_cache_dtype: Annotated[str, typer.Option(
        "--kv-cache-dtype", help="auto, fp8, fp8_e4m3, fp8_e5m2, fp8_ds_mla, turboquant_k8v4, "
        "turboquant_4bit_nc, turboquant_k3v4_nc, turboquant_3bit_nc")] = "auto",
    max_model_len: Annotated[int | None, typer.Option(
        "--max-model-len", "--context-length", help="SGLang: --context-length.")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(
        "--max-num-seqs", "--max-running-requests",
        help="SGLang: --max-running-requests.")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option(
        "--max-num-batched-tokens", help="vLLM only.")] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option(
        "--gpu-memory-utilization", help="vLLM only; default 0.92.")] = None,
    block_size: Annotated[int | None, typer.Option(
        "--block-size", "--page-size", help="SGLang: --page-size.")] = None,
    kv_cache_memory: Annotated[str | None, typer.Option(
        "--kv-cache-memory-bytes", "--kv-cache-memory",
        help="vLLM only: the KV cache size, as vLLM reads it (bytes, 16G binary, 16g "
        "decimal, or 16GiB); overrides --gpu-memory-utilization.")] = None,
    enforce_eager: Annotated[bool, typer.Option(
        "--enforce-eager", "--disable-cuda-graph", help="SGLang: --disable-cuda-graph.")
    ] = False,
    num_speculative_tokens: Annotated[int, typer.Option(
        "--num-speculative-tokens", help="vLLM only: MTP draft tokens (DeepSeek); adds the MTP "
        "layer.")] = 0,
    attention_backend: Annotated[str | None, typer.Option(
        "--attention-backend", help="vLLM only: cutlass_mla, flashinfer_mla, flashmla, "
        "triton_mla, flash_attn, flashinfer, turboquant, aiter_mla, triton_attn; default: what "
        "vLLM picks for the model, GPU and KV dtype.")] = None,
    scratch: Annotated[str | None, typer.Option(
        "--scratch", help="per-layer or shared decode scratch; default: what current engine "
        "releases do.")] = None,
    engine: Annotated[str, typer.Option("--engine", help="vllm or sglang")] = "vllm",
    mem_fraction_static: Annotated[float | None, typer.Option(
        "--mem-fraction-static", help="SGLang only; default: SGLang's heuristic.")] = None,
    enable_dp_attention: Annotated[bool, typer.Option(
        "--enable-dp-attention", help="SGLang only: DP attention (attention TP = tp / dp).")
    ] = False,
    chunked_prefill_size: Annotated[int | None, typer.Option(
        "--chunked-prefill-size", help="SGLang only; -1 turns chunked prefill off.")] = None,
    cuda_graph_max_bs: Annotated[int | None, typer.Option(
        "--cuda-graph-max-bs", help="SGLang only.")] = None,
    compare: Annotated[str | None, typer.Option(
        "--compare", help="Estimate again with changes and show the difference per component, "
        "e.g. --compare scratch=shared or --compare kv_cache_dtype=fp8,max_num_seqs=256.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json or markdown")] = "table",
) -> None:
    """Estimate the memory of every rank, the KV-cache budget and whether it fits."""
    from memprof.base.errors import BadInput
    from memprof.core.deployment import Deployment
    from memprof.core.estimate import estimate as run_estimate
    from memprof.report import FORMATS

    if fmt not in FORMATS:
        raise BadInput(f"unknown --format {fmt[:40]!r}", hint="table, json or markdown")
    dep = Deployment(
        tp=tensor_parallel_size, pp=pipeline_parallel_size, dp=data_parallel_size,
        enable_expert_parallel=enable_expert_parallel, dtype=dtype, quantization=quantization,
        kv_cache_dtype=kv_cache_dtype, max_model_len=max_model_len, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        gpu_memory_utilization=gpu_memory_utilization, block_size=block_size,
        kv_cache_memory_bytes=_size(kv_cache_memory, vllm_bytes=True),
        enforce_eager=enforce_eager, num_speculative_tokens=num_speculative_tokens,
        attention_backend=attention_backend, scratch=scratch, engine=engine,
        mem_fraction_static=mem_fraction_static, enable_dp_attention=enable_dp_attention,
        chunked_prefill_size=chunked_prefill_size, cuda_graph_max_bs=cuda_graph_max_bs,
    )
    result = run_estimate(model, dep, gpu_name=gpu, gpu_memory_bytes=_size(gpu_memory))
    from memprof.core.compare import parse_changes
    from memprof.core.remedies import remedies

    other = None
    if compare:
        other = run_estimate(model, dep.with_(**parse_changes(compare)), gpu=result.gpu)
    fixes = remedies(result, result.spec)
    from memprof.core.contract import EstimateReport

    _emit(EstimateReport(estimate=result, remedies=fixes, other=other, changes=compare), fmt)
    raise typer.Exit(EXIT_OK if result.verdict == "fits" else EXIT_OOM)


def _emit(report: EstimateReport, fmt: str) -> None:
    from memprof.report import reporter

    tty = sys.stdout.isatty()
    sys.stdout.write(reporter(fmt)(report, None if tty else 100, **(
        {"color": tty} if fmt == "table" else {})))
