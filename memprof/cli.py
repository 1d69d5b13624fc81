"""The ``memprof`` command line: parse flags, call the core, pick a reporter. No logic here.

Flags are named as ``vllm serve`` names them, so a user can paste their arguments.
Exit codes: 0 fits / nothing regressed, 1 predicted OOM / regression, 2 bad input, 3 environment.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from memprof.base.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_OOM,
    MemprofError,
)

if TYPE_CHECKING:
    from memprof.core.compare import Remedies
    from memprof.core.estimate import Estimate

try:  # typer >= 0.2x vendors click
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer depends on click
    from click.exceptions import ClickException  # type: ignore[no-redef,import-not-found,unused-ignore]

app = typer.Typer(
    name="memprof",
    help="Predict, trace and gate the GPU memory of LLM serving deployments (vLLM, SGLang).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

FORMATS = ("table", "json", "markdown")


def _size(text: str | None, *, vllm_bytes: bool = False) -> int | None:
    from memprof.base.units import parse_size

    if text is None:
        return None
    return parse_size(text, bare_bytes=vllm_bytes, vllm_letters=vllm_bytes)


@app.command()
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
    from memprof.core.compare import parse_changes, remedies

    other = None
    if compare:
        other = run_estimate(model, dep.with_(**parse_changes(compare)), gpu=result.gpu)
    fixes = remedies(result, result.spec)
    _emit(result, fmt, fixes, other, compare)
    raise typer.Exit(EXIT_OK if result.verdict == "fits" else EXIT_OOM)


def _emit(result: Estimate, fmt: str, rems: Remedies, b: Estimate | None,
          compare: str | None) -> None:
    if fmt == "json":
        from memprof.report.json_report import render_json

        sys.stdout.write(render_json(result, rems, b, compare))
    elif fmt == "markdown":
        from memprof.report.table import render_markdown

        sys.stdout.write(render_markdown(result, rems, b, compare))
    else:
        from rich.console import Console

        from memprof.report.table import render_table

        render_table(result, Console(), rems, b, compare)


@app.command()
def models() -> None:
    """List the bundled models."""
    from rich.console import Console
    from rich.table import Table

    from memprof.core.models import bundled_models, load_model

    t = Table()
    for col in ("name", "architecture", "layers", "hidden", "attention", "experts", "quant"):
        t.add_column(col, no_wrap=col == "name")
    for name in bundled_models():
        s = load_model(name)
        a = s.layers[0].attention
        t.add_row(name, s.architecture, str(s.num_layers), str(s.hidden_size), a.kind,
                  str(s.num_experts or "-"), s.quant.method if s.quant else s.dtype)
    Console().print(t)


@app.command()
def gpus() -> None:
    """List the GPU catalog (total memory as torch.cuda.mem_get_info reports it)."""
    from rich.console import Console
    from rich.table import Table

    from memprof.base.units import fmt_bytes
    from memprof.core.gpus import catalog

    t = Table()
    for col in ("name", "total", "bytes", "arch", "exact"):
        t.add_column(col, no_wrap=col == "name")
    for g in catalog():
        t.add_row(g.name, fmt_bytes(g.total_bytes), f"{g.total_bytes:,}", g.arch,
                  "yes" if g.exact else "approx.")
    Console().print(t)


def _register_subcommands() -> None:
    from memprof.cli_gate import register

    register(app)


_register_subcommands()


def _fail(message: str, hint: str, code: int) -> int:
    sys.stderr.write(f"error: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    return code


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; every user mistake becomes one ``error:`` line, and
    a bug of memprof's own one ``internal error:`` line with exit code 70 (never 1, which means
    a predicted OOM or a regression)."""
    command = typer.main.get_command(app)
    try:
        rv = command.main(args=argv, prog_name="memprof", standalone_mode=False)
    except MemprofError as exc:
        return _fail(exc.message, exc.hint, exc.exit_code)
    except ClickException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            sys.stdout.write(exc.format_message() + "\n")
            return EXIT_OK
        text = " ".join(exc.format_message().split())
        if len(text) > 300:
            text = text[:300] + "…"
        return _fail(text, "run memprof --help (or COMMAND --help) for the flags",
                     EXIT_BAD_INPUT)
    except typer.Abort:
        return _fail("aborted", "", EXIT_BAD_INPUT)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except BrokenPipeError:  # pragma: no cover - e.g. piping into head
        return EXIT_OK
    except KeyboardInterrupt:
        return _fail("interrupted", "", EXIT_BAD_INPUT)
    except Exception as exc:  # a bug of memprof's own: say so, never as an OOM
        where = _origin(exc)
        sys.stderr.write(f"internal error: {type(exc).__name__} in {where}: "
                         f"{' '.join(str(exc).split())[:200]}\n")
        sys.stderr.write("hint: this is a bug in memprof, not in your input; please report it "
                         "with the command line that caused it\n")
        return EXIT_INTERNAL
    return rv if isinstance(rv, int) else EXIT_OK


def _origin(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of memprof's own code that raised ``exc``."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "memprof" in f.filename]
    if not frames:
        return "memprof"
    f = frames[-1]
    return f"{f.filename.rsplit('memprof', 1)[-1].lstrip('/')}:{f.lineno}"


def main() -> None:
    sys.exit(run())
