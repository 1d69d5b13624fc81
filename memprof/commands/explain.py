"""``memprof explain LOG``: a start-up log's figures beside memprof's estimate of them."""

from __future__ import annotations

import sys
from dataclasses import fields
from typing import Annotated, Any

import typer

from memprof.base.errors import EXIT_OK, EXIT_OOM
from memprof.commands.flags import deployment, with_deployment_flags


@with_deployment_flags
def explain(
    flags: dict[str, Any],
    log: Annotated[str, typer.Argument(help="A vLLM (V0 or V1) or SGLang start-up log.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Read a start-up log, rebuild its deployment, and show every logged figure beside
    memprof's estimate, the difference, what explains it, and the cheapest change that makes
    it start. Settings the log does not show can be given as estimate's flags (--model, --gpu,
    -tp, ...); they win over the log. Exit 0 when the rebuilt deployment fits by memprof's
    estimate, 1 when memprof predicts an OOM, 2 on a log it cannot read."""
    from memprof.base.errors import BadInput
    from memprof.core.deployment import Deployment
    from memprof.probes.log_deployment import rebuild
    from memprof.probes.startup_log import read_log

    if fmt not in ("table", "json"):
        raise BadInput(f"unknown --format {fmt[:40]!r}", hint="table or json")
    parsed = read_log(log)
    _, mine, _, _ = deployment(flags)
    default = Deployment()
    overrides = {f.name: getattr(mine, f.name) for f in fields(Deployment)
                 if getattr(mine, f.name) != getattr(default, f.name)}
    rb = rebuild(parsed, model=flags["model"], gpu=flags["gpu"], gpu_memory=flags["gpu_memory"],
                 overrides=overrides)
    from memprof.core.explain import explain as run_explain

    x = run_explain(rb.measured, rb.model, rb.deployment, rb.gpu, given=rb.given,
                    failed=parsed.failed, engine_fix=rb.engine_fix)
    notes = [*parsed.notes, *rb.notes]
    about: dict[str, Any] = {"path": log, "engine": parsed.engine, "generation": parsed.generation,
             "version": parsed.version, "error": parsed.errors[0] if parsed.errors else None,
             "notes": notes}
    if fmt == "json":
        from memprof.report.explain import render_explain_json

        sys.stdout.write(render_explain_json(x, about))
    else:
        from memprof.report.explain import render_explain_table

        width = None if sys.stdout.isatty() else 80
        sys.stdout.write(render_explain_table(x, about, width))
        for n in notes:
            if width is None:
                sys.stdout.write(f"note: {n}\n")
            else:
                import textwrap

                sys.stdout.write(textwrap.fill(f"note: {n}", width, subsequent_indent="  ")
                                 + "\n")
    raise typer.Exit(EXIT_OK if x.estimate.verdict == "fits" else EXIT_OOM)
