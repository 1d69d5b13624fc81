"""``memprof validate``: flags → the validation registry (``memprof.validation.registry``) → each
chosen validation's run → its reporter. A validation runs real decode kernels over all layers,
once per scratch policy, and checks parity, the scratch bytes against the estimate, CUDA-graph
cleanliness and speed; which ones exist, their ``--kernel`` names, defaults and the flags only
they take are their rows', never this module's."""

from __future__ import annotations

import os
from argparse import Namespace
from typing import TYPE_CHECKING

from memprof.commands.common import MARKDOWN, check_format, check_markdown, emit, format_option
from memprof.commands.options import Option

if TYPE_CHECKING:
    from memprof.core.gpus import GPU
    from memprof.validation.registry import Request, Validation, ValidationRow

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
DEVICES = ("cuda", "cpu")
REGISTRY = "memprof.validation.registry"


def options() -> tuple[Option, ...]:
    """validate's flags; those named as the settings rows' read their spellings there. What
    each validation takes by default is its row's (``memprof.validation.registry``)."""
    from memprof.core.flags import BY_FIELD

    def names(field: str) -> tuple[str, ...]:
        return BY_FIELD[field].flags("vllm")

    seed = "the chosen --kernel's seed deployment"
    return (Option(dest="kernel", names=("--kernel",), default="all",
                   choices_from=f"{REGISTRY}:KERNELS",
                   help="The validation to run (all: every one, in turn)."),
            Option(dest="model", names=("--model", "-m"),
                   help="Model for the chosen --kernel.", shown_default=seed),
            Option(dest="tensor_parallel_size", names=names("tp"), kind="int",
                   help="TP size: the rank's head count.", shown_default=seed),
            Option(dest="max_num_seqs", names=names("max_num_seqs"), kind="int",
                   help="Decode batch, the size the scratch is allocated for.",
                   shown_default=seed),
            Option(dest="attention_backend", names=names("attention_backend"),
                   choices_from=f"{REGISTRY}:BACKENDS",
                   help="The decode backend, for a --kernel that runs several."),
            Option(dest="gpu", names=("--gpu",),
                   help="GPU the estimate is taken on; the kernels run on the device you have.",
                   shown_default=seed),
            Option(dest="context", names=("--context",), kind="tokens",
                   help="Longest context in the batch; others are 1/2 to 1x of it.",
                   shown_default="the --kernel's on CUDA, 256 on the CPU"),
            Option(dest="layers", names=("--layers",), kind="int", default=4,
                   help="Layers run (lower it when the per-layer scratch does not fit the "
                   "GPU); the memory figures still scale to all layers of the model."),
            Option(dest="steps", names=("--steps",), kind="int", default=10,
                   help="Timed decode steps per round."),
            Option(dest="device", names=("--device",), default="cuda", choices=DEVICES,
                   help="cuda (the Triton kernels) or cpu (the torch reference path, on one "
                   "thread unless OMP_NUM_THREADS is set)."),
            Option(dest="seed", names=("--seed",), kind="int", default=0, help="Random seed."),
            Option(dest="dp", names=("--dp",), kind="int",
                   help="SGLang --dp (DP-attention ranks), for the --kernel that gathers "
                   "over them.", shown_default="8"),
            Option(dest="kv_cache_memory_bytes", names=("--kv-cache-memory-bytes",), kind="size",
                   help="The KV pool whole-pool dequant copies are sized by, for the --kernel "
                   "that makes them, as estimate reads it (bytes, 64M, 64MiB).",
                   shown_default="1 GiB on CUDA, 64 MiB on the CPU"),
            Option(dest="graph_steps", names=("--graph-steps",), kind="int",
                   help="Replays of the graph-clean check, for a --kernel that has one.",
                   shown_default="100 on CUDA, 3 simulated on the CPU"),
            format_option(*FORMATS), MARKDOWN)


# Request fields a row may own (``ValidationRow.own``) → their flag
OWNABLE = {"dp": "--dp", "kv_cache_memory_bytes": "--kv-cache-memory-bytes"}


def run(args: Namespace) -> int:
    """Run the decode validations (``--kernel``, or all of them) under each scratch policy, and
    check parity, the scratch bytes against the estimate, CUDA-graph cleanliness and speed.
    Exit 0 when all hold, 1 when one fails, 2 bad input, 3 no torch, no GPU (use --device cpu)
    or out of memory."""
    from memprof.base.errors import BadInput, EnvironmentProblem
    from memprof.validation.registry import ALL, Request, by_flag, rows

    check_format(args.fmt, FORMATS)
    all_rows = rows()
    kernel, device = args.kernel, args.device
    row = by_flag(kernel)
    if kernel != ALL and row is None:
        raise BadInput(f"unknown --kernel {kernel[:40]!r}",
                       hint="one of: " + ", ".join((*(r.flag for r in all_rows), ALL)))
    if device not in DEVICES:
        raise BadInput(f"unknown --device {device[:40]!r}", hint=" or ".join(DEVICES))
    chosen = all_rows if row is None else (row,)
    pool = args.kv_cache_memory_bytes
    if pool is not None:  # read as estimate's --kv-cache-memory-bytes (vLLM's forms)
        from memprof.base.units import parse_size

        pool = parse_size(pool, bare_bytes=True, vllm_letters=True)
    if args.gpu is not None:  # an unknown card is bad input, not a failed memory check
        from memprof.core.gpus import resolve_gpu

        try:
            card = resolve_gpu(args.gpu, None, None)
        except BadInput as exc:  # its hint names estimate's --gpu-memory, no flag of validate
            raise BadInput(exc.message, hint="validate takes a card of the catalog by name "
                           "(memprof gpus lists them), or leave out --gpu") from None
        _check_backend_runs_on(card, args.attention_backend, chosen)
    req = Request(model=args.model, tp=args.tensor_parallel_size, batch=args.max_num_seqs,
                  backend=args.attention_backend, gpu=args.gpu, context=args.context,
                  layers=args.layers, steps=args.steps, device=device, seed=args.seed,
                  dp=args.dp, kv_cache_memory_bytes=pool, graph_steps=args.graph_steps)
    _check(req, chosen, all_rows)
    md_path = check_markdown(args.markdown)  # before any work
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
        results = _validate_all(chosen, req)
    finally:
        torch.set_num_threads(threads)
    from memprof.validation.results import ValidationRun

    dev_name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    result = ValidationRun(tuple(results), torch.__version__, dev_name)
    emit(result, args.fmt, md_path)
    return 0 if result.passed else 1


def _check_backend_runs_on(card: GPU, asked: str | None,
                           chosen: tuple[ValidationRow, ...]) -> None:
    """A decode backend the engine refuses on ``--gpu`` (cutlass_mla on an H100) is bad input
    before any work: the estimate the scratch is checked against cannot be taken there, and the
    memory check read it as a failed kernel (exit 1)."""
    from memprof.base.errors import BadInput
    from memprof.core.attention_backends import BY_NAME, arch_refusal
    from memprof.core.gpus import catalog

    for row in chosen:
        if not row.backends or (asked is not None and asked not in row.backends):
            continue
        backend = asked or row.backends[0]
        why = arch_refusal(BY_NAME[backend], card.name, card.arch, card.is_rocm,
                           row.attention or "mla")
        if why is not None:
            runs = [g.name for g in catalog() if arch_refusal(
                BY_NAME[backend], g.name, g.arch, g.is_rocm, row.attention or "mla") is None]
            raise BadInput(f"--gpu {card.name}: {why}, so the {row.what}'s estimate cannot be "
                           "taken there", hint=f"name a card it runs on ({', '.join(runs[:4])}"
                           f"{', ...' if len(runs) > 4 else ''}) or leave out --gpu (the "
                           f"{row.what}'s default is {row.gpu})"
                           + ("" if asked is not None or len(chosen) == 1
                              else f", or run another --kernel than {row.flag}"))


def _check(req: Request, chosen: tuple[ValidationRow, ...],
           all_rows: tuple[ValidationRow, ...]) -> None:
    """Bad input, before any work: flags that apply to one validation given for another (or
    for all), numbers out of range."""
    from memprof.base.errors import BadInput

    if len(chosen) > 1 and (req.model is not None or req.backend is not None):
        raise BadInput("--model and --attention-backend apply to one kernel",
                       hint="add --kernel " + ", ".join(r.flag for r in all_rows))
    if req.backend is not None and req.backend not in chosen[0].backends:
        runs = [r for r in all_rows if r.backends]
        raise BadInput(f"--attention-backend {req.backend[:40]!r} is not an "
                       f"{' or '.join(r.what for r in runs)} backend memprof runs",
                       hint=" or ".join(b for r in runs for b in r.backends) + ", with "
                       "--kernel " + " or ".join(r.flag for r in runs))
    _check_range("--max-num-seqs", req.batch, 1, MAX_BATCH)
    _check_range("--context", req.context, 1, MAX_CONTEXT)
    _check_range("--layers", req.layers, 1, 1024)
    _check_range("--steps", req.steps, 1, 10_000)
    _check_range("--tensor-parallel-size", req.tp, 1, 1024)
    _check_range("--dp", req.dp, 1, 1024)
    _check_range("--kv-cache-memory-bytes", req.kv_cache_memory_bytes, 1 << 20, 1 << 40)
    _check_range("--graph-steps", req.graph_steps, 1, 10_000)
    for field, flag in OWNABLE.items():
        if getattr(req, field) is not None and any(field not in r.own for r in chosen):
            owner = next(r for r in all_rows if field in r.own)
            raise BadInput(f"{flag} applies to the {owner.what}",
                           hint=f"add --kernel {owner.flag}")


def _validate_all(chosen: tuple[ValidationRow, ...], req: Request) -> list[Validation]:
    """Every chosen validation, in order; running out of memory is exit 3."""
    import torch

    from memprof.base.errors import EnvironmentProblem

    results: list[Validation] = []
    for row in chosen:
        try:
            results.append(_run(row, req))
        except torch.OutOfMemoryError:
            raise EnvironmentProblem(
                f"the {row.name} validation ran out of {req.device} memory",
                hint="lower --max-num-seqs, --context, --layers or --kv-cache-memory-bytes"
            ) from None
    return results


def _run(row: ValidationRow, req: Request) -> Validation:
    return row.run(req)
