"""``memprof validate``: the real MLA and TurboQuant decode kernels run over all layers, once with
per-layer scratch and once with a shared workspace: parity, scratch bytes against the estimate,
speed."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from memprof.kernels.validate_mla_tq import KernelValidation

KERNELS = ("mla", "turboquant", "all")
# Defaults per kernel: the seed deployments (seed 000: DeepSeek-R1 TP8 on CUTLASS MLA, an SM100
# backend, so the estimate is taken on a B200; seed 001: Qwen3-32B on one H200).
MLA_DEFAULTS: dict[str, Any] = {"model": "deepseek-r1", "tp": 8, "batch": 64, "gpu": "B200",
                "backend": "cutlass_mla", "block_size": 64}
TQ_DEFAULTS: dict[str, Any] = {"model": "qwen3-32b", "tp": 1, "batch": 256, "gpu": "H200",
                               "block_size": 16}
CONTEXT_CUDA = {"mla": 8192, "tq": 4096}  # long enough for the bandwidth target (≥ 8k for MLA)
CONTEXT_CPU = 256  # the torch reference on a CPU: seconds, not minutes
MAX_BATCH = 8192
MAX_CONTEXT = 1 << 17


def _check_range(name: str, value: int | None, lo: int, hi: int) -> None:
    from memprof.base.errors import BadInput

    if value is not None and not lo <= value <= hi:
        raise BadInput(f"{name} {value} is out of range", hint=f"use {lo} to {hi}")


def validate(
    kernel: Annotated[str, typer.Option("--kernel", help="mla, turboquant or all")] = "all",
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="Model for the chosen --kernel (default: deepseek-r1 for mla, "
        "qwen3-32b for turboquant).")] = None,
    tensor_parallel_size: Annotated[int | None, typer.Option(
        "-tp", "--tensor-parallel-size", help="TP size: the rank's head count (default 8 for "
        "mla, 1 for turboquant).")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(
        "--max-num-seqs", help="Decode batch, the size the scratch is allocated for (default "
        "64 for mla, 256 for turboquant).")] = None,
    attention_backend: Annotated[str | None, typer.Option(
        "--attention-backend", help="mla: cutlass_mla (heads padded to 128) or flashinfer_mla."
    )] = None,
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="GPU the estimate is taken on (default B200 for mla, H200 for "
        "turboquant); the kernels run on the device you have.")] = None,
    context: Annotated[int | None, typer.Option(
        "--context", help="Longest context in the batch; others are 1/2 to 1× of it (default "
        "8192 mla / 4096 turboquant on CUDA, 256 on the CPU).")] = None,
    layers: Annotated[int, typer.Option(
        "--layers", help="Layers run (lower it when the per-layer scratch does not fit the "
        "GPU); the memory figures still scale to all layers of the model.")] = 4,
    steps: Annotated[int, typer.Option("--steps", help="Timed decode steps per round.")] = 10,
    device: Annotated[str, typer.Option(
        "--device", help="cuda (the Triton kernels) or cpu (the torch reference path).")
    ] = "cuda",
    seed: Annotated[int, typer.Option("--seed")] = 0,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Run the MLA (seed 000) and TurboQuant (seed 001) decodes over every layer, per-layer
    scratch then shared, and check parity, the scratch bytes against the estimate, and speed.
    Exit 0 when all hold, 1 when one fails, 2 bad input, 3 no GPU (use --device cpu)."""
    from memprof.base.errors import BadInput, EnvironmentProblem

    if fmt not in ("table", "json"):
        raise BadInput(f"unknown --format {fmt[:40]!r}", hint="table or json")
    if kernel not in KERNELS:
        raise BadInput(f"unknown --kernel {kernel[:40]!r}", hint="mla, turboquant or all")
    if device not in ("cuda", "cpu"):
        raise BadInput(f"unknown --device {device[:40]!r}", hint="cuda or cpu")
    if kernel == "all" and (model is not None or attention_backend is not None):
        raise BadInput("--model and --attention-backend apply to one kernel",
                       hint="add --kernel mla or --kernel turboquant")
    if attention_backend not in (None, "cutlass_mla", "flashinfer_mla") or (
            attention_backend is not None and kernel != "mla"):
        raise BadInput(f"--attention-backend {str(attention_backend)[:40]!r} is not an MLA "
                       "decode backend memprof runs", hint="cutlass_mla or flashinfer_mla, "
                       "with --kernel mla")
    _check_range("--max-num-seqs", max_num_seqs, 1, MAX_BATCH)
    _check_range("--context", context, 1, MAX_CONTEXT)
    _check_range("--layers", layers, 1, 1024)
    _check_range("--steps", steps, 1, 10_000)
    _check_range("--tensor-parallel-size", tensor_parallel_size, 1, 1024)
    try:
        import torch
    except ImportError:
        raise EnvironmentProblem("memprof validate needs torch",
                                 hint="pip install 'memprof-llm[trace]'") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise EnvironmentProblem("no CUDA GPU visible for the Triton kernels",
                                 hint="--device cpu runs the torch reference path")
    from memprof.core.models import load_model

    kinds = ("mla", "tq") if kernel == "all" else (("mla",) if kernel == "mla" else ("tq",))
    results = []
    for kind in kinds:
        d = MLA_DEFAULTS if kind == "mla" else TQ_DEFAULTS
        name = model or str(d["model"])
        spec = load_model(name)
        tp = tensor_parallel_size or int(d["tp"])
        want = "mla" if kind == "mla" else "gqa"
        if not any(lay.attention.kind == want for lay in spec.layers):
            raise BadInput(f"{spec.name} has no {want.upper()} attention layers for the "
                           f"{'MLA' if kind == 'mla' else 'TurboQuant'} decode",
                           hint="MLA: deepseek-r1, deepseek-v3; TurboQuant: qwen3-32b, "
                           "qwen3-8b (memprof models)")
        heads = spec.layers[0].attention.num_heads
        if heads % tp:
            raise BadInput(f"{heads} attention heads do not split over TP {tp}",
                           hint="use a TP size that divides the head count")
        ctx = context or (CONTEXT_CUDA[kind] if device == "cuda" else CONTEXT_CPU)
        if spec.max_position_embeddings is not None and ctx > spec.max_position_embeddings:
            raise BadInput(f"--context {ctx} is over {spec.name}'s max_position_embeddings "
                           f"{spec.max_position_embeddings}", hint="use a shorter --context")
        batch = max_num_seqs or int(d["batch"])
        try:
            results.append(_run(kind, name, tp, batch, ctx, layers, steps, device, seed,
                                gpu or str(d["gpu"]), attention_backend or str(
                                    d.get("backend", "turboquant")), int(d["block_size"])))
        except torch.OutOfMemoryError:
            raise EnvironmentProblem(
                f"the {kind} validation ran out of {device} memory (B={batch}, context {ctx}, "
                f"{layers} layers)", hint="lower --max-num-seqs, --context or --layers") from None
    from memprof.report.validate import render_json, render_table

    dev_name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    if fmt == "json":
        sys.stdout.write(render_json(results, torch.__version__, dev_name))
    else:
        tty = sys.stdout.isatty()
        sys.stdout.write(render_table(results, None if tty else 120, color=tty))
    if not all(r.passed for r in results):
        raise typer.Exit(1)


def _run(kind: str, model: str, tp: int, batch: int, ctx: int, layers: int, steps: int,
         device: str, seed: int, gpu: str, backend: str, block_size: int) -> KernelValidation:
    from memprof.kernels.validate_mla_tq import validate_mla, validate_tq

    if kind == "mla":
        return validate_mla(model=model, tp=tp, backend=backend, batch=batch, context_len=ctx,
                            layers=layers, device=device, block_size=block_size, gpu_name=gpu,
                            reps=steps, seed=seed)
    return validate_tq(model=model, tp=tp, batch=batch, context_len=ctx, layers=layers,
                       device=device, block_size=block_size, gpu_name=gpu, reps=steps,
                       seed=seed)
