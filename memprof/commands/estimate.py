"""``memprof estimate``: flags in, the estimate out through the reporter of ``--format``.

Flags are named as ``vllm serve`` (and, for SGLang settings, ``sglang.launch_server``) name
them, so a user can paste their arguments. No logic here: the core estimates, the reporters
render.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memprof.base.errors import EXIT_OK, EXIT_OOM
from memprof.commands.flags import deployment, gpu_of, with_deployment_flags

if TYPE_CHECKING:
    from memprof.core.contract import EstimateReport
    from memprof.probes.serve_command import ServeCommand


@with_deployment_flags
def estimate(
    flags: dict[str, Any],
    compare: Annotated[str | None, typer.Option(
        "--compare", help="Estimate again with changes and show the difference per component, "
        "e.g. --compare scratch=shared or --compare kv_cache_dtype=fp8,max_num_seqs=256.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json or markdown")] = "table",
    from_file: Annotated[str | None, typer.Option(
        "--from-file", help="Read the serve command from a shell script, a docker-compose "
        "file (a service's command:) or a Kubernetes manifest (a container's command/args).")
    ] = None,
    plot: Annotated[str | None, typer.Option(
        "--plot", help="Also draw the estimate to FILE.png or FILE.svg: stacked bars, one per "
        "distinct rank (needs matplotlib: pip install 'memprof-llm[plot]').")] = None,
    serve: Annotated[list[str] | None, typer.Argument(
        help="A pasted serve command after --: memprof estimate --gpu H200 -- vllm serve "
        "Qwen/Qwen3-32B -tp 2 … (or python -m sglang.launch_server …).",
        show_default=False)] = None,
) -> None:
    """Estimate the memory of every rank, the KV-cache budget and whether it fits.

    Paste the command you run after ``--`` (or give --from-file): its memory flags are
    applied, the others are listed once as ignored."""
    from memprof.base.errors import BadInput
    from memprof.core.estimate import estimate as run_estimate
    from memprof.report import FORMATS

    if fmt not in FORMATS:
        raise BadInput(f"unknown --format {fmt[:40]!r}", hint="table, json or markdown")
    from memprof.core.compare import parse_changes

    # a bad --compare, plot path or suffix, or no matplotlib fails before any work
    changes = parse_changes(compare) if compare is not None else None
    if plot is not None:
        from memprof.base.files import check_output
        from memprof.report.plot import plot_format, pyplot

        plot_format(plot)
        check_output(plot, flag="--plot")
        pyplot()
    command = _serve_command(serve, from_file)
    model, dep, gpu, gpu_memory = deployment(flags, command)
    for line in command.describe() if command else ():
        sys.stderr.write(line + "\n")
    result = run_estimate(model, dep, gpu=gpu_of(gpu, gpu_memory))
    from memprof.core.remedies import remedies

    other = None
    if changes is not None:
        other = run_estimate(model, dep.with_(**changes), gpu=result.gpu)
    fixes = remedies(result, result.spec)
    from memprof.core.contract import EstimateReport

    _emit(EstimateReport(estimate=result, remedies=fixes, other=other, changes=compare), fmt)
    if plot is not None:
        from memprof.report.plot import estimate_figure, save

        kind = save(estimate_figure(result), plot)
        sys.stderr.write(f"wrote the plot to {plot} ({kind})\n")
    raise typer.Exit(EXIT_OK if result.verdict == "fits" else EXIT_OOM)


def _serve_command(serve: list[str] | None, from_file: str | None) -> ServeCommand | None:
    """The pasted command (after ``--``) or the one in ``--from-file``."""
    from memprof.base.errors import BadInput

    if serve and from_file:
        raise BadInput("both a pasted command and --from-file", hint="give one of them")
    if not serve and not from_file:
        return None
    from memprof.probes.serve_command import parse_file, parse_tokens

    return parse_tokens(serve) if serve else parse_file(from_file or "")


def _emit(report: EstimateReport, fmt: str) -> None:
    from memprof.report import reporter

    tty = sys.stdout.isatty()
    sys.stdout.write(reporter(fmt)(report, None if tty else _columns(100), **(
        {"color": tty} if fmt == "table" else {})))


def _columns(default: int) -> int:
    """The width of output that is not a terminal: ``$COLUMNS`` when set, else ``default``."""
    import os

    text = os.environ.get("COLUMNS", "")
    return int(text) if text.isdigit() and int(text) > 0 else default
