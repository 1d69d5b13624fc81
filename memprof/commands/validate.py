"""``memprof validate``: the real decode kernels run over all layers, once per scratch policy:
MLA and TurboQuant (per-layer vs shared workspace), DeepSeek-V4 sparse MLA (per-step vs shared,
with the CUDA-graph-clean check) and SGLang's DP-attention gather (per forward vs persistent):
parity, scratch bytes against the estimate, graph-clean, speed."""

from __future__ import annotations

import os
from argparse import Namespace
from typing import TYPE_CHECKING, Any

from memprof.commands.common import MARKDOWN, check_format, check_markdown, emit, format_option
from memprof.commands.options import Option

if TYPE_CHECKING:
    from memprof.report.validate import AnyValidation

KERNELS = ("mla", "turboquant", "dsv4", "dp_gather", "all")
# Defaults per kernel: the seed deployments (seed 000: DeepSeek-R1 TP8 on CUTLASS MLA, an SM100
# backend, so the estimate is taken on a B200; seed 001: Qwen3-32B on one H200).
MLA_DEFAULTS: dict[str, Any] = {"model": "deepseek-r1", "tp": 8, "batch": 64, "gpu": "B200",
                "backend": "cutlass_mla", "block_size": 64}
TQ_DEFAULTS: dict[str, Any] = {"model": "qwen3-32b", "tp": 1, "batch": 256, "gpu": "H200",
                               "block_size": 16}
# seed 003: DeepSeek-V4-Flash TP8 on AITER (ROCm: the estimate is taken on an MI355X); the KV pool
# the per-step dequant copies are sized by is set with --kv-cache-memory-bytes.
DSV4_DEFAULTS: dict[str, Any] = {"model": "deepseek-v4-flash", "tp": 8, "batch": 32,
                                 "gpu": "MI355X"}
DSV4_KV_BYTES = {"cuda": 1 << 30, "cpu": 64 << 20}
# seed 002: DeepSeek-R1 on SGLang, --tp 8 --dp 8 --enable-dp-attention, --cuda-graph-max-bs 64
DP_DEFAULTS: dict[str, Any] = {"model": "deepseek-r1", "tp": 8, "dp": 8, "batch": 64,
                               "gpu": "H200"}
# long enough for the bandwidth target (≥ 8k for MLA)
CONTEXT_CUDA = {"mla": 8192, "tq": 4096, "dsv4": 8192}
CONTEXT_CPU = 256  # the torch reference on a CPU: seconds, not minutes
# torch's intra-op threads for --device cpu (OMP_NUM_THREADS, when set, wins): the reference ops
# are small, and on a loaded machine two or more threads per op wait on each other for far
# longer than the op takes (benchmarks/bench_validate.py: 1 vs default threads).
CPU_THREADS = 1
MAX_BATCH = 8192
MAX_CONTEXT = 1 << 17


def _check_range(name: str, value: int | None, lo: int, hi: int) -> None:
    from memprof.base.errors import BadInput

    if value is not None and not lo <= value <= hi:
        raise BadInput(f"{name} {value} is out of range", hint=f"use {lo} to {hi}")


FORMATS = ("table", "json", "markdown")


def options() -> tuple[Option, ...]:
    """validate's flags; those named as the settings rows' read their spellings there."""
    from memprof.core.flags import BY_FIELD

    def names(field: str) -> tuple[str, ...]:
        return BY_FIELD[field].flags("vllm")

    return (Option(dest="kernel", names=("--kernel",), default="all", choices=KERNELS,
                   help="The decode to run."),
            Option(dest="model", names=("--model", "-m"),
                   help="Model for the chosen --kernel.",
                   shown_default="deepseek-r1 for mla, qwen3-32b for turboquant"),
            Option(dest="tensor_parallel_size", names=names("tp"), kind="int",
                   help="TP size: the rank's head count.",
                   shown_default="8 for mla, 1 for turboquant"),
            Option(dest="max_num_seqs", names=names("max_num_seqs"), kind="int",
                   help="Decode batch, the size the scratch is allocated for.",
                   shown_default="64 for mla, 256 for turboquant"),
            Option(dest="attention_backend", names=names("attention_backend"),
                   choices=("cutlass_mla", "flashinfer_mla"),
                   help="mla: cutlass_mla (heads padded to 128) or flashinfer_mla."),
            Option(dest="gpu", names=("--gpu",),
                   help="GPU the estimate is taken on; the kernels run on the device you have.",
                   shown_default="B200 for mla, H200 for turboquant"),
            Option(dest="context", names=("--context",), kind="int",
                   help="Longest context in the batch; others are 1/2 to 1x of it.",
                   shown_default="8192 mla / 4096 turboquant on CUDA, 256 on the CPU"),
            Option(dest="layers", names=("--layers",), kind="int", default=4,
                   help="Layers run (lower it when the per-layer scratch does not fit the "
                   "GPU); the memory figures still scale to all layers of the model."),
            Option(dest="steps", names=("--steps",), kind="int", default=10,
                   help="Timed decode steps per round."),
            Option(dest="device", names=("--device",), default="cuda", choices=("cuda", "cpu"),
                   help="cuda (the Triton kernels) or cpu (the torch reference path, on one "
                   "thread unless OMP_NUM_THREADS is set)."),
            Option(dest="seed", names=("--seed",), kind="int", default=0, help="Random seed."),
            Option(dest="dp", names=("--dp",), kind="int",
                   help="dp_gather: SGLang --dp (DP-attention ranks).", shown_default="8"),
            Option(dest="kv_cache_memory_bytes", names=("--kv-cache-memory-bytes",), kind="int",
                   help="dsv4: the KV pool the whole-pool dequant copies are sized by.",
                   shown_default="1 GiB on CUDA, 64 MiB on the CPU"),
            Option(dest="graph_steps", names=("--graph-steps",), kind="int",
                   help="dsv4, dp_gather: replays of the graph-clean check.",
                   shown_default="100 on CUDA, 3 simulated on the CPU"),
            format_option(*FORMATS), MARKDOWN)


def run(args: Namespace) -> int:
    """Run the MLA (seed 000), TurboQuant (seed 001), DeepSeek-V4 sparse MLA (seed 003) decodes
    and SGLang's DP-attention gather (seed 002) under each scratch policy, and check parity,
    the scratch bytes against the estimate, CUDA-graph cleanliness and speed.
    Exit 0 when all hold, 1 when one fails, 2 bad input, 3 no GPU (use --device cpu) or out of
    memory."""
    kernel, model, tensor_parallel_size = args.kernel, args.model, args.tensor_parallel_size
    max_num_seqs, attention_backend, gpu = args.max_num_seqs, args.attention_backend, args.gpu
    context, layers, steps, device, seed = (args.context, args.layers, args.steps, args.device,
                                            args.seed)
    dp, kv_cache_memory_bytes, graph_steps = args.dp, args.kv_cache_memory_bytes, args.graph_steps
    fmt, markdown = args.fmt, args.markdown
    from memprof.base.errors import BadInput, EnvironmentProblem

    check_format(fmt, FORMATS)
    if kernel not in KERNELS:
        raise BadInput(f"unknown --kernel {kernel[:40]!r}",
                       hint="mla, turboquant, dsv4, dp_gather or all")
    if device not in ("cuda", "cpu"):
        raise BadInput(f"unknown --device {device[:40]!r}", hint="cuda or cpu")
    if kernel == "all" and (model is not None or attention_backend is not None):
        raise BadInput("--model and --attention-backend apply to one kernel",
                       hint="add --kernel mla, turboquant, dsv4 or dp_gather")
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
    _check_range("--dp", dp, 1, 1024)
    _check_range("--kv-cache-memory-bytes", kv_cache_memory_bytes, 1 << 20, 1 << 40)
    _check_range("--graph-steps", graph_steps, 1, 10_000)
    if dp is not None and kernel != "dp_gather":
        raise BadInput("--dp applies to the DP-attention gather", hint="add --kernel dp_gather")
    if kv_cache_memory_bytes is not None and kernel != "dsv4":
        raise BadInput("--kv-cache-memory-bytes applies to the DeepSeek-V4 decode",
                       hint="add --kernel dsv4")
    md_path = check_markdown(markdown)  # before any work
    try:
        import torch
    except ImportError:
        raise EnvironmentProblem("memprof validate needs torch",
                                 hint="pip install 'memprof-llm[trace]'") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise EnvironmentProblem("no CUDA GPU visible for the Triton kernels",
                                 hint="--device cpu runs the torch reference path")
    threads = torch.get_num_threads()
    if device == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(CPU_THREADS)
    try:
        results = _validate_all(kernel, model, tensor_parallel_size, max_num_seqs,
                                attention_backend, gpu, context, layers, steps, device, seed, dp,
                                kv_cache_memory_bytes, graph_steps)
    finally:
        torch.set_num_threads(threads)
    dev_name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    emit(results, fmt, md_path, kind="validation", torch_version=torch.__version__,
         device_name=dev_name)
    return 0 if all(r.passed for r in results) else 1


def _validate_all(kernel: str, model: str | None, tensor_parallel_size: int | None,
                  max_num_seqs: int | None, attention_backend: str | None, gpu: str | None,
                  context: int | None, layers: int, steps: int, device: str, seed: int,
                  dp: int | None, kv_cache_memory_bytes: int | None,
                  graph_steps: int | None) -> list[AnyValidation]:
    """Every kernel ``--kernel`` names, in order; running out of memory is exit 3."""
    import torch

    from memprof.base.errors import EnvironmentProblem

    kinds = ("mla", "tq", "dsv4", "dp_gather") if kernel == "all" else (
        {"turboquant": "tq"}.get(kernel, kernel),)
    results: list[AnyValidation] = []
    for kind in kinds:
        try:
            if kind in ("mla", "tq"):
                results.append(_part1(kind, model, tensor_parallel_size, max_num_seqs,
                                      attention_backend, gpu, context, layers, steps, device,
                                      seed))
            elif kind == "dsv4":
                results.append(_dsv4(model, tensor_parallel_size, max_num_seqs, gpu, context,
                                     layers, steps, device, seed, kv_cache_memory_bytes,
                                     graph_steps))
            else:
                results.append(_dp_gather(model, tensor_parallel_size, dp, max_num_seqs, gpu,
                                          steps, device, seed, graph_steps))
        except torch.OutOfMemoryError:
            raise EnvironmentProblem(
                f"the {kind} validation ran out of {device} memory",
                hint="lower --max-num-seqs, --context, --layers or --kv-cache-memory-bytes"
            ) from None
    return results


def _part1(kind: str, model: str | None, tp_opt: int | None, batch_opt: int | None,
           backend_opt: str | None, gpu: str | None, context: int | None, layers: int,
           steps: int, device: str, seed: int) -> AnyValidation:
    from memprof.base.errors import BadInput
    from memprof.core.models import load_model

    d = MLA_DEFAULTS if kind == "mla" else TQ_DEFAULTS
    name = model or str(d["model"])
    spec = load_model(name)
    tp = tp_opt or int(d["tp"])
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
    ctx = _context(spec, context, kind, device)
    batch = batch_opt or int(d["batch"])
    return _run(kind, name, tp, batch, ctx, layers, steps, device, seed, gpu or str(d["gpu"]),
                backend_opt or str(d.get("backend", "turboquant")), int(d["block_size"]))


def _context(spec: Any, context: int | None, kind: str, device: str) -> int:
    from memprof.base.errors import BadInput

    ctx = context or (CONTEXT_CUDA[kind] if device == "cuda" else CONTEXT_CPU)
    if spec.max_position_embeddings is not None and ctx > spec.max_position_embeddings:
        raise BadInput(f"--context {ctx} is over {spec.name}'s max_position_embeddings "
                       f"{spec.max_position_embeddings}", hint="use a shorter --context")
    return int(ctx)


def _dsv4(model: str | None, tp_opt: int | None, batch_opt: int | None, gpu: str | None,
          context: int | None, layers: int, steps: int, device: str, seed: int,
          kv_bytes: int | None, graph_steps: int | None) -> AnyValidation:
    from memprof.base.errors import BadInput
    from memprof.core.models import load_model
    from memprof.validation.dsv4 import validate_dsv4

    d = DSV4_DEFAULTS
    name = model or str(d["model"])
    spec = load_model(name)
    if spec.layers[0].attention.kind != "dsv4":
        raise BadInput(f"{spec.name} has no DeepSeek-V4 attention layers for the sparse decode",
                       hint="deepseek-v4-flash or deepseek-v4-pro (memprof models)")
    tp = tp_opt or int(d["tp"])
    heads = spec.layers[0].attention.num_heads
    if heads % tp:
        raise BadInput(f"{heads} attention heads do not split over TP {tp}",
                       hint="use a TP size that divides the head count")
    return validate_dsv4(model=name, tp=tp, batch=batch_opt or int(d["batch"]),
                         context_len=_context(spec, context, "dsv4", device), layers=layers,
                         device=device, gpu_name=gpu or str(d["gpu"]),
                         kv_cache_memory_bytes=kv_bytes or DSV4_KV_BYTES[device],
                         graph_steps=graph_steps, reps=steps, seed=seed)


def _dp_gather(model: str | None, tp_opt: int | None, dp_opt: int | None,
               batch_opt: int | None, gpu: str | None, steps: int, device: str, seed: int,
               graph_steps: int | None) -> AnyValidation:
    from memprof.base.errors import BadInput
    from memprof.core.models import load_model
    from memprof.validation.dp_gather import validate_dp_gather

    d = DP_DEFAULTS
    name = model or str(d["model"])
    load_model(name)
    tp, dp = tp_opt or int(d["tp"]), dp_opt or int(d["dp"])
    if tp % dp:
        raise BadInput(f"SGLang DP attention needs --dp ({dp}) to divide the TP size ({tp})",
                       hint="use a --dp that divides -tp")
    return validate_dp_gather(model=name, tp=tp, dp=dp, max_bs=batch_opt or int(d["batch"]),
                              device=device, gpu_name=gpu or str(d["gpu"]),
                              graph_steps=graph_steps, reps=steps, seed=seed)


def _run(kind: str, model: str, tp: int, batch: int, ctx: int, layers: int, steps: int,
         device: str, seed: int, gpu: str, backend: str, block_size: int) -> AnyValidation:
    from memprof.validation.mla_tq import validate_mla, validate_tq

    if kind == "mla":
        return validate_mla(model=model, tp=tp, backend=backend, batch=batch, context_len=ctx,
                            layers=layers, device=device, block_size=block_size, gpu_name=gpu,
                            reps=steps, seed=seed)
    return validate_tq(model=model, tp=tp, batch=batch, context_len=ctx, layers=layers,
                       device=device, block_size=block_size, gpu_name=gpu, reps=steps,
                       seed=seed)
