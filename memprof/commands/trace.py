"""``memprof trace``: one rank at its true shapes, traced against its estimate (every estimate
flag, plus the device, the rank and what to record)."""

from __future__ import annotations

import sys
from argparse import Namespace

from memprof.commands.common import MARKDOWN, check_format, check_markdown, emit, format_option
from memprof.commands.flags import deployment
from memprof.commands.options import Option, deployment_flags, deployment_options


def show_progress(fmt: str, stdout_is_tty: bool) -> bool:
    """The progress bar (phases and layers, on stderr) shows for a table on a terminal only."""
    return stdout_is_tty and fmt == "table"


FORMATS = ("table", "json", "markdown")


def options() -> tuple[Option, ...]:
    """The deployment flags, then trace's own."""
    return (*deployment_options(),
            Option(dest="device", names=("--device",), choices=("cuda", "fake"),
                   help="cuda or fake (the same replica on fake tensors through the allocator "
                   "simulator).", shown_default="cuda when a GPU is visible, else fake"),
            Option(dest="rank", names=("--rank",), kind="int",
                   help="The global rank to trace.", shown_default="the first"),
            Option(dest="decode_steps", names=("--decode-steps",), kind="int", default=2,
                   help="Decode steps run."),
            Option(dest="graphs", names=("--graphs",), kind="int",
                   help="Capture at most this many CUDA graphs (largest first)."),
            Option(dest="alloc_conf", names=("--alloc-conf",), default="",
                   help="PYTORCH_CUDA_ALLOC_CONF for the fake device's simulator."),
            Option(dest="snapshot", names=("--snapshot",), metavar="FILE",
                   help="Write a _dump_snapshot pickle here."),
            format_option(*FORMATS), MARKDOWN)


MAX_DECODE_STEPS = 10_000  # as validate's --steps: far more than a trace needs, never a hang


def run(args: Namespace) -> int:
    """Build one rank in PyTorch at its true shapes, run it as the engine does, and put each
    traced figure beside the estimate's."""
    flags = deployment_flags(args)
    group: object = None
    device, rank, decode_steps, graphs = args.device, args.rank, args.decode_steps, args.graphs
    alloc_conf, snapshot, fmt = args.alloc_conf, args.snapshot, args.fmt
    from memprof.base.errors import BadInput

    check_format(fmt, FORMATS)
    markdown = check_markdown(args.markdown)
    if device not in (None, "cuda", "fake"):
        raise BadInput(f"unknown --device {device[:40]!r}", hint="cuda or fake")
    # the replica runs at least one decode step (its scratch is allocated at the first) and
    # keeps the largest --graphs capture sizes: a value outside these was run as another
    if not 1 <= decode_steps <= MAX_DECODE_STEPS:
        raise BadInput(f"--decode-steps {decode_steps} is out of range",
                       hint=f"use 1 to {MAX_DECODE_STEPS} (the decode scratch is allocated at "
                       "the first step)")
    if graphs is not None and graphs < 0:
        raise BadInput(f"--graphs {graphs} is out of range",
                       hint="use 0 (no graph) or more; leave it out for every capture size")
    if getattr(args, "enable_lora", False):  # before any work
        raise BadInput("trace builds the model's own tensors and not vLLM's LoRA buffers "
                       "(memprof/core/terms/lora.py)",
                       hint="drop --enable-lora to trace; memprof estimate --enable-lora adds "
                       "the LoRA buffers")
    from memprof.core.engines.vllm_pooling import pooling_convert

    if pooling_convert(str(getattr(args, "runner", None) or "generate"),
                       getattr(args, "convert", None), getattr(args, "task", None)) is not None:
        raise BadInput("trace runs a generation runner's profile run (the sampler's warm-up, the "
                       "lm_head) and not vLLM's pooling runner (memprof/core/engines/"
                       "vllm_pooling.py)", hint="drop --runner pooling / --task embed to trace; "
                       "memprof estimate --runner pooling models it")
    if getattr(args, "num_speculative_tokens", 0):
        raise BadInput("trace runs no speculative decoding (the rejection sampler's profile-run "
                       "warm-up, the drafter: memprof/core/speculative.py)",
                       hint="drop --num-speculative-tokens to trace; memprof estimate "
                       "--num-speculative-tokens models it")
    if snapshot is not None:  # before any work: a bad path must not cost the whole trace
        from memprof.base.files import check_output

        check_output(snapshot, flag="--snapshot")
    try:
        import torch
    except ImportError:
        from memprof.trace.run import torch_missing

        raise torch_missing() from None
    from memprof.report.trace import progress
    from memprof.trace.run import run_trace

    model, dep, gpu, gpu_memory = deployment(flags)
    tty = sys.stdout.isatty()
    on_fake = device == "fake"
    if device is None:
        from memprof.trace.device import cuda_available

        if not cuda_available():
            on_fake = True
            sys.stderr.write("note: no GPU visible: tracing on the fake device (allocator "
                             "simulator)\n")
    _check_alloc_conf(dep.pytorch_cuda_alloc_conf, alloc_conf, on_fake)
    from memprof.trace.dist import env_world

    world = env_world()
    connect = None
    if world is not None and world.size > 1:  # torchrun: each process traces its own rank
        from memprof.trace.dist import Communicators, check_layout, communicators, init_world

        check_layout(dep, world)
        if rank is not None:
            raise BadInput("--rank under torchrun: each process traces its own rank",
                           hint="drop --rank (or trace one rank alone, without torchrun)")
        rank = world.rank
        on_gpu = device != "fake" and _gpu()
        if on_gpu:  # the context on this process's GPU before anything touches CUDA
            torch.cuda.set_device(world.local_rank)

        def connect() -> Communicators:
            init_world(world, on_gpu)
            return communicators(dep, world, on_gpu)
    elif world is not None:  # a world of one under torchrun: its one rank, collectives real
        from memprof.trace.dist import default_group

        group, env_rank = default_group(dep)
        rank = env_rank if rank is None else rank
    if world is not None and world.size > 1 and snapshot:
        snapshot = _rank_path(snapshot, rank or 0)
    with progress(show_progress(fmt, tty) and (world is None or world.rank == 0)) as step:
        result = run_trace(model, dep, gpu_name=gpu, gpu_memory_bytes=gpu_memory,
                           gpu_arch=args.gpu_arch, device=device,
                           rank=rank, decode_steps=decode_steps, max_graphs=graphs,
                           alloc_conf=alloc_conf, snapshot=snapshot, progress=step,
                           group=group, connect=connect)
    if world is not None and world.size > 1:
        return _gather_and_report(result, world.rank, fmt, markdown)
    emit(result, fmt, markdown)
    if result.oom is not None:
        if result.oom.summary:
            sys.stderr.write(result.oom.summary + "\n")
        sys.stderr.write(f"error: CUDA out of memory in phase {result.oom.phase} while "
                         f"allocating {result.oom.component}\n")
        sys.stderr.write("hint: the traced components before the OOM are in the report; lower "
                         "--max-num-seqs / --gpu-memory-utilization or use --scratch shared\n")
        return 1
    return 0


def _check_alloc_conf(estimated: str | None, simulated: str, on_fake: bool) -> None:
    """--pytorch-cuda-alloc-conf sets the estimate's allocator (the model load's replay,
    ``memprof.core.terms.load_rounding``), not the traced one: the fake device's simulator runs
    --alloc-conf, and a GPU trace the PYTORCH_CUDA_ALLOC_CONF its process was launched with. A
    trace whose two allocators differ would put figures of two settings side by side."""
    if not estimated:
        return
    import os

    from memprof.base.errors import BadInput

    traced = simulated if on_fake else os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    if traced == estimated:
        return
    shown = estimated[:80]
    if on_fake:
        raise BadInput(f"--pytorch-cuda-alloc-conf {shown!r} sets the estimate's allocator, but "
                       f"the fake device's simulator runs --alloc-conf ({traced[:80] or 'unset'})",
                       hint=f"pass --alloc-conf {shown} as well")
    raise BadInput(f"--pytorch-cuda-alloc-conf {shown!r} sets the estimate's allocator, but this "
                   f"process's PYTORCH_CUDA_ALLOC_CONF is {traced[:80] or 'unset'}, which the "
                   "traced GPU allocator runs",
                   hint=f"launch as PYTORCH_CUDA_ALLOC_CONF={shown} memprof trace …")


def _gpu() -> bool:
    from memprof.trace.device import cuda_available

    return cuda_available()


def _rank_path(path: str, rank: int) -> str:
    """``snap.pickle`` → ``snap.rank1.pickle``: each rank's snapshot in its own file."""
    stem, dot, ext = path.rpartition(".")
    return f"{stem}.rank{rank}.{ext}" if dot and "/" not in ext else f"{path}.rank{rank}"


def _gather_and_report(result: object, rank: int, fmt: str, markdown: object) -> int:
    """Every rank's figures onto every rank; rank 0 prints one report (and writes
    ``--markdown``), the others nothing; each exits with the worst rank's code."""
    from memprof.trace.dist import all_gather, finish
    from memprof.trace.ranks import GatheredTrace, RankTrace
    from memprof.trace.run import TraceResult

    assert isinstance(result, TraceResult)
    gathered = all_gather(RankTrace.of(rank, result))
    finish()
    whole = GatheredTrace.build(result, gathered)
    oom = whole.worst_oom
    if rank == 0:
        _emit_gathered(whole, fmt, markdown)
        if oom is not None:
            r, o = oom
            sys.stderr.write(f"error: CUDA out of memory on rank {r} in phase {o.phase} while "
                             f"allocating {o.component}\n")
            sys.stderr.write("hint: the traced components before the OOM are in the report; "
                             "lower --max-num-seqs / --gpu-memory-utilization or use --scratch "
                             "shared\n")
    return 1 if oom is not None else 0


def _emit_gathered(whole: object, fmt: str, markdown: object) -> None:
    """JSON: version 2 of the contract (every rank in ``ranks``); table and Markdown: one per
    distinct rank, headed by the ranks it stands for."""
    import json

    from memprof.report import is_terminal, output_width, render
    from memprof.trace.contract import gathered_dict
    from memprof.trace.ranks import GatheredTrace, rank_span

    assert isinstance(whole, GatheredTrace)

    def text(kind: str, width: int | None, color: bool) -> str:
        if kind == "json":
            return json.dumps(gathered_dict(whole), indent=2) + "\n"
        parts = []
        for ranks, t in whole.distinct():
            head = f"{rank_span(ranks)} of {len(whole.results)}"
            parts.append((f"## {head}\n\n" if kind == "markdown" else f"{head}\n")
                         + render(t, kind, width=width, color=color))
        return "\n".join(parts)

    if markdown is not None:
        from memprof.base.files import write_atomic

        write_atomic(str(markdown), text("markdown", None, False))
    tty = is_terminal()
    sys.stdout.write(text(fmt, output_width(), tty))
