"""The deployment flags every command that builds a deployment takes (``estimate``, ``trace``),
declared once: a command's function takes ``**flags`` and ``with_deployment_flags`` gives it
these options, named as ``vllm serve`` (and, for SGLang settings, ``sglang.launch_server``)
name them."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import replace
from typing import Annotated, Any

import typer

from memprof.core.deployment import Deployment
from memprof.core.gpus import GPU

if typing.TYPE_CHECKING:
    from memprof.probes.serve_command import ServeCommand


def _size(text: str | None, *, vllm_bytes: bool = False) -> int | None:
    from memprof.base.units import parse_size

    if text is None:
        return None
    return parse_size(text, bare_bytes=vllm_bytes, vllm_letters=vllm_bytes)


def _flags(
    model: Annotated[str | None, typer.Option(
        "--model", "-m", "--model-path",
        help="Bundled name (memprof models), an HF repo id of a bundled model "
        "(Qwen/Qwen3-32B), a config.json, or a folder holding one. SGLang: --model-path. "
        "Default: deepseek-r1.")
    ] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU from the catalog (memprof gpus), "
                                            "or auto (this host's, through NVML / AMD SMI); "
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
    hf_overrides: Annotated[str | None, typer.Option(
        "--hf-overrides", "--json-model-override-args",
        help="JSON merged into the model's config.json before it is sized, as vLLM's "
        "--hf-overrides (SGLang: --json-model-override-args), e.g. "
        "'{\"num_hidden_layers\": 4}'.")] = None,
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
        "--gpu-memory-utilization", help="vLLM only; default 0.92 (0.9 before 0.20.0).")] = None,
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
    engine_version: Annotated[str | None, typer.Option(
        "--engine-version", help="The engine release to model (vLLM 0.7.1 to 0.33.0; "
        "memprof versions lists them); default: the newest modelled.")] = None,
    entrypoint: Annotated[str, typer.Option(
        "--entrypoint", help="vLLM only: serve (vllm serve, the default) or llm (the Python "
        "LLM class); vLLM's batch defaults differ by entry point.")] = "serve",
    mem_fraction_static: Annotated[float | None, typer.Option(
        "--mem-fraction-static", help="SGLang only; default: SGLang's heuristic.")] = None,
    enable_dp_attention: Annotated[bool, typer.Option(
        "--enable-dp-attention", help="SGLang only: DP attention (attention TP = tp / dp).")
    ] = False,
    chunked_prefill_size: Annotated[int | None, typer.Option(
        "--chunked-prefill-size", help="SGLang only; -1 turns chunked prefill off.")] = None,
    cuda_graph_max_bs: Annotated[int | None, typer.Option(
        "--cuda-graph-max-bs", help="SGLang only.")] = None,
) -> None:
    """The signature that carries the options (never called)."""


def _resolved(fn: Callable[..., Any], skip: str = "") -> list[inspect.Parameter]:
    """``fn``'s parameters with their annotations evaluated (typer reads them as objects)."""
    hints = typing.get_type_hints(fn, include_extras=True)
    return [p.replace(annotation=hints[p.name])
            for p in inspect.signature(fn).parameters.values() if p.name != skip]


FLAG_PARAMS = tuple(_resolved(_flags))
FLAG_NAMES = tuple(p.name for p in FLAG_PARAMS)


def with_deployment_flags(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give ``fn(flags: dict, **own)`` the deployment options beside its own."""
    own = _resolved(fn, skip="flags")
    required = [p for p in own if p.default is inspect.Parameter.empty]
    params = [*required, *FLAG_PARAMS, *(p for p in own if p not in required)]

    def wrapper(**kwargs: Any) -> Any:
        flags = {k: kwargs.pop(k) for k in FLAG_NAMES}
        return fn(flags, **kwargs)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


DEFAULT_MODEL = "deepseek-r1"


def deployment(flags: dict[str, Any], serve: ServeCommand | None = None
               ) -> tuple[str, Deployment, str | None, int | None]:
    """(model, deployment, --gpu, --gpu-memory bytes) from the flags, and from a pasted serve
    command when there is one (its settings win over defaults; a setting given both ways with
    two different values is an error)."""
    f = flags
    dep = Deployment(
        tp=f["tensor_parallel_size"], pp=f["pipeline_parallel_size"],
        dp=f["data_parallel_size"], enable_expert_parallel=f["enable_expert_parallel"],
        dtype=f["dtype"], hf_overrides=f["hf_overrides"], quantization=f["quantization"],
        kv_cache_dtype=f["kv_cache_dtype"],
        max_model_len=f["max_model_len"], max_num_seqs=f["max_num_seqs"],
        max_num_batched_tokens=f["max_num_batched_tokens"],
        gpu_memory_utilization=f["gpu_memory_utilization"], block_size=f["block_size"],
        kv_cache_memory_bytes=_size(f["kv_cache_memory"], vllm_bytes=True),
        enforce_eager=f["enforce_eager"], num_speculative_tokens=f["num_speculative_tokens"],
        attention_backend=f["attention_backend"], scratch=f["scratch"], engine=f["engine"],
        engine_version=f["engine_version"], entrypoint=f["entrypoint"],
        mem_fraction_static=f["mem_fraction_static"],
        enable_dp_attention=f["enable_dp_attention"],
        chunked_prefill_size=f["chunked_prefill_size"], cuda_graph_max_bs=f["cuda_graph_max_bs"],
    )
    model = f["model"]
    if serve is not None:
        model, dep = _merge(model, dep, serve)
    return model or DEFAULT_MODEL, dep, f["gpu"], _size(f["gpu_memory"])


def _merge(model: str | None, dep: Deployment, serve: ServeCommand
           ) -> tuple[str | None, Deployment]:
    from memprof.base.errors import BadInput
    from memprof.core.flags import flag_name

    default = Deployment()
    if dep.engine != default.engine and dep.engine != serve.engine:
        raise BadInput(f"--engine {dep.engine} but the pasted command runs {serve.engine}",
                       hint="drop --engine: the pasted command names its engine")
    changes: dict[str, Any] = {"engine": serve.engine}
    for fld, value in serve.settings.items():
        mine = getattr(dep, fld)
        if mine != getattr(default, fld) and mine != value:
            flag = flag_name(fld, serve.engine)
            raise BadInput(f"{flag} is {value} in the pasted command and {mine} in memprof's "
                           "flags", hint=f"give {flag} once")
        changes[fld] = value
    if model is not None and serve.model is not None and model != serve.model:
        raise BadInput(f"--model {model} but the pasted command serves {serve.model}",
                       hint="give the model once")
    return model or serve.model, dep.with_(**changes)


def gpu_of(name: str | None, memory: int | None) -> GPU:
    """``--gpu`` / ``--gpu-memory`` as a GPU; ``--gpu auto`` asks this host (exit 3 when it
    cannot say)."""
    from memprof.core.gpus import resolve_gpu

    if name is not None and name.strip().lower() == "auto":
        from memprof.probes.devices import local_gpu

        local = local_gpu()
        if memory is None:
            return local
        return replace(local, total_bytes=memory, exact=True, source="--gpu-memory")
    return resolve_gpu(name, memory)
