"""``memprof trace``: one rank at its true shapes, traced against its estimate (every estimate
flag, plus the device, the rank and what to record)."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer

from memprof.commands.flags import deployment, with_deployment_flags


def show_progress(fmt: str, stdout_is_tty: bool) -> bool:
    """The progress bar (phases and layers, on stderr) shows for a table on a terminal only."""
    return stdout_is_tty and fmt == "table"


@with_deployment_flags
def trace(
    flags: dict[str, Any],
    device: Annotated[str | None, typer.Option(
        "--device", help="cuda or fake (default: cuda when a GPU is visible, else fake: the "
        "same replica on fake tensors through the allocator simulator).")] = None,
    rank: Annotated[int | None, typer.Option(
        "--rank", help="The global rank to trace (default: the first).")] = None,
    decode_steps: Annotated[int, typer.Option("--decode-steps")] = 2,
    graphs: Annotated[int | None, typer.Option(
        "--graphs", help="Capture at most this many CUDA graphs (largest first).")] = None,
    alloc_conf: Annotated[str, typer.Option(
        "--alloc-conf", help="PYTORCH_CUDA_ALLOC_CONF for the fake device's simulator.")] = "",
    snapshot: Annotated[str | None, typer.Option(
        "--snapshot", help="Write a _dump_snapshot pickle here.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Build one rank in PyTorch at its true shapes, run it as the engine does, and put each
    traced figure beside the estimate's."""
    from memprof.base.errors import BadInput

    if fmt not in ("table", "json"):
        raise BadInput(f"unknown --format {fmt[:40]!r}", hint="table or json")
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
    from memprof.report.trace import progress, render_json, render_table
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
    if fmt == "json":
        sys.stdout.write(render_json(result))
    else:
        sys.stdout.write(render_table(result, None if tty else 100, color=tty))
    if result.oom is not None:
        if result.oom.summary:
            sys.stderr.write(result.oom.summary + "\n")
        sys.stderr.write(f"error: CUDA out of memory in phase {result.oom.phase} while "
                         f"allocating {result.oom.component}\n")
        sys.stderr.write("hint: the traced components before the OOM are in the report; lower "
                         "--max-num-seqs / --gpu-memory-utilization or use --scratch shared\n")
        raise typer.Exit(1)
