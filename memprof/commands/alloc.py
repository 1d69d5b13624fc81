"""``memprof alloc replay OPS``: an op file or a ``_dump_snapshot`` pickle replayed through the
caching-allocator simulator."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

alloc = typer.Typer(help="The CUDA caching-allocator simulator.", no_args_is_help=True)


@alloc.command("replay")
def replay(
    ops: Annotated[Path, typer.Argument(
        help='An op file {"ops": [["a", id, nbytes], ["f", id], ["e"]]} or a '
        "torch.cuda.memory._dump_snapshot pickle (a regular file, at most 2 GiB).")],
    conf: Annotated[str, typer.Option(
        "--conf", help="PYTORCH_CUDA_ALLOC_CONF, e.g. expandable_segments:True.")] = "",
    total: Annotated[str | None, typer.Option(
        "--total", help="Device memory the simulator may reserve (e.g. 80GiB); unbounded if "
        "left out.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Replay allocations through a replica of PyTorch's CUDA caching allocator: allocated,
    reserved, inactive_split and segments after every op, and what fragmentation cost."""
    from memprof.alloc.config import parse_conf
    from memprof.alloc.replay import load_ops
    from memprof.alloc.replay import replay as run_replay
    from memprof.base.errors import BadInput
    from memprof.base.units import parse_size

    if fmt not in ("table", "json"):
        raise BadInput(f"unknown --format {fmt[:40]!r}", hint="table or json")
    parse_conf(conf)  # a bad conf is refused before the file is read
    total_bytes = None if total is None else parse_size(total)
    result = run_replay(load_ops(ops), conf, total_bytes)
    from memprof.report.alloc import render_json, render_table

    sys.stdout.write(render_json(result) if fmt == "json" else render_table(result))
    if result.oom_at is not None:
        raise typer.Exit(1)
