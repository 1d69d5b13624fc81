"""``memprof versions``: the engine releases memprof models and its version rules, or — with
``--from`` and ``--to`` — what differs between two releases for the deployment the flags give."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from memprof.commands.flags import deployment, with_deployment_flags


@with_deployment_flags
def versions(
    flags: dict[str, Any],
    from_version: Annotated[str | None, typer.Option(
        "--from", help="The older release, e.g. 0.7.3 (with --to: list what differs).")] = None,
    to_version: Annotated[str | None, typer.Option(
        "--to", help="The newer release; default the newest modelled.")] = None,
) -> None:
    """List the releases and version rules, or what differs between two releases."""
    from memprof.report.versions import render_rulebook, render_version_diff

    if from_version is None and to_version is None:
        sys.stdout.write(render_rulebook())
        return
    from memprof.core.version_diff import version_diff

    model, dep, gpu, gpu_memory = deployment(flags)
    d = version_diff(model, dep, from_version, to_version, gpu_name=gpu,
                     gpu_memory_bytes=gpu_memory)
    sys.stdout.write(render_version_diff(d))
