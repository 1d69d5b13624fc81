"""``memprof explain LOG``: a start-up log's figures beside memprof's estimate of them."""

from __future__ import annotations

import sys
from argparse import Namespace
from dataclasses import fields
from typing import Any

from memprof.base.errors import EXIT_OK, EXIT_OOM
from memprof.commands.common import MARKDOWN, check_format, check_markdown, emit, format_option
from memprof.commands.flags import deployment
from memprof.commands.options import Option, deployment_flags, deployment_options

FORMATS = ("table", "json", "markdown")


def options() -> tuple[Option, ...]:
    """The start-up log, the deployment flags (they win over the log), ``--format``."""
    return (Option(dest="log", required=True, metavar="LOG",
                   help="A vLLM (V0 or V1) or SGLang start-up log."),
            *deployment_options(), format_option(*FORMATS), MARKDOWN)


def run(args: Namespace) -> int:
    """Read a start-up log, rebuild its deployment, and show every logged figure beside
    memprof's estimate, the difference, what explains it, and the cheapest change that makes
    it start. Settings the log does not show can be given as estimate's flags (--model, --gpu,
    -tp, ...); they win over the log. Exit 0 when the rebuilt deployment fits by memprof's
    estimate, 1 when memprof predicts an OOM, 2 on a log it cannot read."""
    flags = deployment_flags(args)
    log, fmt = args.log, args.fmt
    from memprof.core.deployment import Deployment
    from memprof.probes.log_deployment import rebuild
    from memprof.probes.startup_log import read_log

    check_format(fmt, FORMATS)
    markdown = check_markdown(args.markdown)
    parsed = read_log(log)
    _, mine, _, _ = deployment(flags)
    default = Deployment()
    # a flag the user typed wins even at its default value (--tp 1 on a TP2 log, --engine vllm
    # on an SGLang one); a field no flag set is the log's
    typed: frozenset[str] = getattr(args, "_given_flags", frozenset())
    overrides = {f.name: getattr(mine, f.name) for f in fields(Deployment)
                 if getattr(mine, f.name) != getattr(default, f.name) or f.name in typed}
    _flags_of_the_log_engine(parsed.engine, overrides, typed)
    rb = rebuild(parsed, model=flags["model"], gpu=flags["gpu"], gpu_memory=flags["gpu_memory"],
                 gpu_arch=flags["gpu_arch"],
                 overrides=overrides)
    from memprof.core.explain import explain as run_explain

    x = run_explain(rb.measured, rb.model, rb.deployment, rb.gpu, given=rb.given,
                    failed=parsed.failed, engine_fix=rb.engine_fix)
    # a release the user gives replaces the one the log's reading placed: its note goes
    placement = "(--engine-version to choose another)"
    given = "engine_version" in overrides
    notes = [n for n in (*parsed.notes, *rb.notes) if not (given and placement in n)]
    notes = _lora_sizes_given(notes, {**parsed.settings, **overrides})
    about: dict[str, Any] = {"path": log, "engine": parsed.engine, "generation": parsed.generation,
             "version": parsed.version, "error": parsed.errors[0] if parsed.errors else None,
             "notes": notes}
    from memprof.report import output_width

    width = output_width()
    emit(x, fmt, markdown, about=about)
    if fmt == "table":
        for n in notes:
            if width is None:
                sys.stdout.write(f"note: {n}\n")
            else:
                import textwrap

                sys.stdout.write(textwrap.fill(f"note: {n}", width, subsequent_indent="  ")
                                 + "\n")
    return EXIT_OK if x.estimate.verdict == "fits" else EXIT_OOM


def _lora_sizes_given(notes: list[str], settings: dict[str, Any]) -> list[str]:
    """``notes`` with the log's note of the LoRA sizes it assumes (``startup_log.
    lora_sizes_note``) said again for what the user's flags leave assumed, or dropped where they
    give every size."""
    from memprof.probes.startup_log import LORA_SIZES_ASSUMED, lora_sizes_note

    out = []
    for n in notes:
        if n.startswith(LORA_SIZES_ASSUMED):
            again = lora_sizes_note(settings)
            if again is not None:
                out.append(again)
        else:
            out.append(n)
    return out


def _flags_of_the_log_engine(engine: str | None, overrides: dict[str, Any],
                             typed: frozenset[str]) -> None:
    """A flag of the other engine than the one that wrote the log is bad input, said as such:
    the estimate's check (``check_engine_flags``) would offer ``--engine`` of the other, which
    explain refuses on this log."""
    from memprof.core.engines import NAMES, engine_named
    from memprof.core.flags import SETTINGS

    if engine not in NAMES or "engine" in typed:
        return
    for s in SETTINGS:
        if s.field in overrides and not s.flags(engine):
            other = next((n for n in NAMES if n != engine and s.flags(n)), None)
            if other is None:
                continue
            from memprof.base.errors import BadInput

            flag = max(s.flags(other), key=len)
            raise BadInput(f"{flag} is {engine_named(other).display}'s flag, and the log was "
                           f"written by {engine_named(engine).display}: {s.note}",
                           hint=f"drop {flag}: explain rebuilds the engine that wrote the log")
