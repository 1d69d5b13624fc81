"""``memprof estimate``: flags in, the estimate out through ``memprof.report.render``.

Flags are named as ``vllm serve`` (and, for SGLang settings, ``sglang.launch_server``) name
them, so a user can paste their arguments; they are generated from the settings table
(``memprof.commands.options.deployment_options``). No logic here: the core estimates, the
reporters render.
"""

from __future__ import annotations

import sys
from argparse import Namespace
from typing import TYPE_CHECKING

from memprof.base.errors import EXIT_OK, EXIT_OOM
from memprof.commands.common import MARKDOWN, check_format, check_markdown, emit, format_option
from memprof.commands.flags import deployment, engine_release, gpu_of
from memprof.commands.options import Option, deployment_flags, deployment_options

if TYPE_CHECKING:
    from memprof.probes.serve_command import ServeCommand

FORMATS = ("table", "json", "markdown")


def options() -> tuple[Option, ...]:
    """The deployment flags, then estimate's own."""
    return (*deployment_options(),
            Option(dest="compare", names=("--compare",), metavar="KEY=VALUE[,...]",
                   help="Estimate again with changes and show the difference per component, "
                   "e.g. --compare scratch=shared or --compare "
                   "kv_cache_dtype=fp8,max_num_seqs=256."),
            format_option(*FORMATS),
            Option(dest="from_file", names=("--from-file",), metavar="FILE",
                   help="Read the serve command from a shell script, a docker-compose file (a "
                   "service's command:) or a Kubernetes manifest (a container's "
                   "command/args)."),
            Option(dest="plot", names=("--plot",), metavar="FILE",
                   help="Also draw the estimate to FILE.png or FILE.svg: stacked bars, one per "
                   "distinct rank (needs matplotlib: pip install 'memprof-llm[plot]')."),
            MARKDOWN,
            Option(dest="serve", rest=True, metavar="-- SERVE_COMMAND",
                   help="A pasted serve command after --: memprof estimate --gpu H200 -- vllm "
                   "serve Qwen/Qwen3-32B -tp 2 … (or python -m sglang.launch_server …)."))


def run(args: Namespace) -> int:
    """Estimate the memory of every rank, the KV-cache budget and whether it fits.

    Paste the command you run after ``--`` (or give --from-file): its memory flags are
    applied, the others are listed once as ignored."""
    from memprof.core.estimate import estimate as run_estimate

    check_format(args.fmt, FORMATS)
    # a bad --compare, plot or markdown path or suffix, or no matplotlib fails before any work
    changes = None
    if args.compare is not None:
        from memprof.core.compare import parse_changes

        changes = parse_changes(args.compare)
    plot = args.plot
    if plot is not None:
        from memprof.base.files import check_output
        from memprof.report.plot import plot_format, pyplot

        plot_format(plot)
        check_output(plot, flag="--plot")
        pyplot()
    markdown = check_markdown(args.markdown)
    command = _serve_command(args.serve, args.from_file)
    model, dep, gpu, gpu_memory = deployment(deployment_flags(args), command)
    if changes is not None and changes.get("engine_version") is not None:
        # as --engine-version reads it (a development build 0.7.4.dev12: 0.7.3), before any work
        from memprof.core.versions import resolve_version

        engine = str(changes.get("engine", dep.engine))
        changes["engine_version"] = resolve_version(
            engine_release(str(changes["engine_version"]), engine), engine,
            flag="--compare engine_version")
    if command is not None:
        from memprof.probes.serve_command import check_release

        check_release(command, dep.engine_version)
    for line in command.describe(dep.engine_version) if command else ():
        sys.stderr.write(line + "\n")
    result = run_estimate(model, dep, gpu=gpu_of(gpu, gpu_memory, args.gpu_arch))
    from memprof.core.remedies import remedies

    other = None
    if changes is not None:
        other = run_estimate(model, dep.with_(**changes), gpu=result.gpu)
    fixes = remedies(result, result.spec)
    from memprof.core.contract import CommandFlags, EstimateReport

    flags = (CommandFlags(ignored=command.ignored, not_modelled=command.not_modelled)
             if command is not None else None)
    emit(EstimateReport(estimate=result, remedies=fixes, other=other, changes=args.compare,
                        command=flags), args.fmt, markdown)
    if plot is not None:
        from memprof.report.plot import estimate_figure, save

        kind = save(estimate_figure(result), plot)
        sys.stderr.write(f"wrote the plot to {plot} ({kind})\n")
    return EXIT_OK if result.verdict == "fits" else EXIT_OOM


def _serve_command(serve: list[str] | None, from_file: str | None) -> ServeCommand | None:
    """The pasted command (after ``--``) or the one in ``--from-file``."""
    from memprof.base.errors import BadInput

    if serve and from_file:
        raise BadInput("both a pasted command and --from-file", hint="give one of them")
    if not serve and not from_file:
        return None
    from memprof.probes.serve_command import parse_file, parse_tokens

    if serve and len(serve) == 1 and serve[0].split() != serve[0:1]:  # blanks in the one word
        serve = _split_quoted(serve[0])
    return parse_tokens(serve) if serve else parse_file(from_file or "")


def _split_quoted(text: str) -> list[str]:
    """A command pasted after ``--`` inside one pair of quotes (``-- 'vllm serve M -tp 2'``)
    reaches memprof as one word; split as the shell would have split it unquoted (its
    ``read as`` line on stderr shows what was read). Quotes that do not close are bad input."""
    import shlex

    from memprof.base.errors import BadInput

    try:
        words = shlex.split(text, comments=True)
    except ValueError as exc:
        raise BadInput(f"the pasted command: cannot split it ({exc})",
                       hint="paste it after -- without the quotes around it") from None
    if not words:
        raise BadInput("the pasted command is empty (blanks or a comment)",
                       hint="paste the serve command after -- (-- vllm serve Qwen/Qwen3-32B "
                       "-tp 2), or leave -- out")
    return words
