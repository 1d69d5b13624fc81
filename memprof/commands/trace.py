"""``memprof trace``: one rank at its true shapes, traced against its estimate (every estimate
flag, plus the device, the rank and what to record)."""

from __future__ import annotations

import os
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


def run(args: Namespace) -> int:
    """Build one rank in PyTorch at its true shapes, run it as the engine does, and put each
    traced figure beside the estimate's."""
    flags = deployment_flags(args)
    device, rank, decode_steps, graphs = args.device, args.rank, args.decode_steps, args.graphs
    alloc_conf, snapshot, fmt = args.alloc_conf, args.snapshot, args.fmt
    from memprof.base.errors import BadInput

    check_format(fmt, FORMATS)
    markdown = check_markdown(args.markdown)
    if device not in (None, "cuda", "fake"):
        raise BadInput(f"unknown --device {device[:40]!r}", hint="cuda or fake")
    if snapshot is not None:  # before any work: a bad path must not cost the whole trace
        from memprof.base.files import check_output

        check_output(snapshot, flag="--snapshot")
    try:
        import torch  # noqa: F401
    except ImportError:
        from memprof.trace.run import torch_missing

        raise torch_missing() from None
    from memprof.report.trace import progress
    from memprof.trace.run import run_trace

    model, dep, gpu, gpu_memory = deployment(flags)
    tty = sys.stdout.isatty()
    if device is None:
        from memprof.trace.device import cuda_available

        if not cuda_available():
            sys.stderr.write("note: no GPU visible: tracing on the fake device (allocator "
                             "simulator)\n")
    group = None
    if os.environ.get("WORLD_SIZE"):  # launched by torchrun: trace this process's rank
        from memprof.trace.dist import default_group

        group, env_rank = default_group(dep)
        rank = env_rank if rank is None else rank
    with progress(show_progress(fmt, tty)) as step:
        result = run_trace(model, dep, gpu_name=gpu, gpu_memory_bytes=gpu_memory, device=device,
                           rank=rank, decode_steps=decode_steps, max_graphs=graphs,
                           alloc_conf=alloc_conf, snapshot=snapshot, progress=step,
                           group=group)

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
