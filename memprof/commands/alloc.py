"""``memprof alloc replay OPS``: an op file or a ``_dump_snapshot`` pickle replayed through the
caching-allocator simulator."""

from __future__ import annotations

from argparse import Namespace

from memprof.commands import SubCommand
from memprof.commands.common import MARKDOWN, check_format, check_markdown, emit, format_option
from memprof.commands.options import Option

FORMATS = ("table", "json", "markdown")


def replay_options() -> tuple[Option, ...]:
    """``alloc replay``'s rows."""
    return (Option(dest="ops", required=True, metavar="OPS",
                   help='An op file {"ops": [["a", id, nbytes], ["f", id], ["e"]]} or a '
                   "torch.cuda.memory._dump_snapshot pickle (a regular file, at most 2 GiB)."),
            Option(dest="conf", names=("--conf",), default="",
                   help="PYTORCH_CUDA_ALLOC_CONF, e.g. expandable_segments:True."),
            Option(dest="total", names=("--total",), kind="size",
                   help="Device memory the simulator may reserve (e.g. 80GiB); unbounded if "
                   "left out."),
            format_option(*FORMATS), MARKDOWN)


def replay(args: Namespace) -> int:
    """Replay allocations through a replica of PyTorch's CUDA caching allocator: allocated,
    reserved, inactive_split and segments after every op, and what fragmentation cost."""
    from pathlib import Path

    from memprof.alloc.config import parse_conf
    from memprof.alloc.replay import load_ops
    from memprof.alloc.replay import replay as run_replay
    from memprof.base.units import parse_size

    check_format(args.fmt, FORMATS)
    markdown = check_markdown(args.markdown)
    parse_conf(args.conf)  # a bad conf is refused before the file is read
    total_bytes = None if args.total is None else parse_size(args.total)
    result = run_replay(load_ops(Path(args.ops)), args.conf, total_bytes)
    emit(result, args.fmt, markdown)
    return 1 if result.oom_at is not None else 0


SUBCOMMANDS = {
    "replay": SubCommand(help="Replay an op file or a snapshot through the allocator simulator.",
                         description=replay.__doc__ or "", options=replay_options, run=replay),
}
