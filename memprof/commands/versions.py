"""``memprof versions``: the engine releases memprof models and its version rules, or — with
``--from`` and ``--to`` — what differs between two releases for the deployment the flags give."""

from __future__ import annotations

from argparse import Namespace

from memprof.commands.common import MARKDOWN, check_format, check_markdown, emit, format_option
from memprof.commands.flags import deployment, engine_release
from memprof.commands.options import Option, deployment_flags, deployment_options

FORMATS = ("table", "json", "markdown")


def options() -> tuple[Option, ...]:
    """The deployment flags, then ``--from`` / ``--to``."""
    return (*deployment_options(),
            Option(dest="from_version", names=("--from",), metavar="VERSION",
                   help="The older release, e.g. 0.7.3 (with --to: list what differs)."),
            Option(dest="to_version", names=("--to",), metavar="VERSION",
                   help="The newer release.", shown_default="the newest modelled"),
            format_option(*FORMATS), MARKDOWN)


def run(args: Namespace) -> int:
    """List the releases and version rules, or what differs between two releases."""
    check_format(args.fmt, FORMATS)
    markdown = check_markdown(args.markdown)
    if args.from_version is None and args.to_version is None:
        _no_deployment(args)
        emit(None, args.fmt, markdown, kind="rulebook")
        return 0
    from memprof.core.version_diff import version_diff

    if "engine_version" in getattr(args, "_given_flags", frozenset()):
        from memprof.base.errors import BadInput

        raise BadInput("--engine-version with --from/--to: the two releases compared are "
                       "--from and --to", hint="drop --engine-version (--to defaults to the "
                       "newest release modelled)")
    model, dep, gpu, gpu_memory = deployment(deployment_flags(args))
    a = _release(args.from_version, dep.engine, "--from")
    b = _release(args.to_version, dep.engine, "--to")
    d = version_diff(model, dep, a, b, gpu_name=gpu, gpu_memory_bytes=gpu_memory,
                     gpu_arch=args.gpu_arch)
    emit(d, args.fmt, markdown)
    return 0


def _no_deployment(args: Namespace) -> None:
    """The listing is every release and rule, whatever the deployment: a deployment flag given
    without ``--from`` / ``--to`` would be read by nothing (``versions --engine-version 0.40.0``
    listed every release and exited 0), so it is :class:`BadInput`."""
    from memprof.base.errors import BadInput

    given: frozenset[str] = getattr(args, "_given_flags", frozenset())
    named = [o.canonical for o in deployment_options() if o.dest in given]
    if named:
        raise BadInput(f"{named[0]} is read only with --from/--to: memprof versions alone lists "
                       "every release and rule, whatever the deployment",
                       hint=f"drop {named[0]}, or add --from VERSION (and --to VERSION) to list "
                       "what differs between two releases for that deployment")


def _release(version: str | None, engine: str, flag: str) -> str | None:
    """``--from`` / ``--to`` as ``--engine-version`` reads a release: a development or vendor
    build (``0.7.4.dev12``) at the release it maps to, with its note; anything else checked
    here, so that an error names the flag that gave it."""
    if version is None:
        return None
    from memprof.core.versions import resolve_version

    return resolve_version(engine_release(version, engine), engine, flag=flag)
