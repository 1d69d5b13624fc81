"""The ``memprof`` command line: the top level (help, ``--version``, the command's name), the
parser of the one command invoked (built from its rows by ``memprof.commands.options``; only
that command's module is imported), and the one place where errors become exit codes.

Exit codes: 0 fits / nothing regressed, 1 predicted OOM / regression, 2 bad input,
3 environment, 70 internal error (a bug of memprof's own).
"""

from __future__ import annotations

import sys
from typing import Any

from memprof.base.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    BadInput,
    MemprofError,
)
from memprof.commands import COMMANDS, Command, find

SUMMARY = "Predict, trace and gate the GPU memory of LLM serving deployments (vLLM, SGLang)."
HELP_OPTIONS = ("-h", "--help")


def top_help() -> str:
    """``memprof --help``: the commands and their one-line helps, from the registry alone (no
    command module is imported)."""
    width = max(len(c.name) for c in COMMANDS) + 2
    lines = ["usage: memprof [-h] [--version] COMMAND [ARGS]...", "", SUMMARY, "",
             "commands:"]
    lines += [f"  {c.name:<{width}}{c.help}" for c in COMMANDS]
    lines += ["", "options:", f"  {'-h, --help':<{width + 2}}Show this message and exit.",
              f"  {'--version':<{width + 2}}Print memprof's version and exit.", "",
              "Run memprof COMMAND --help for a command's flags."]
    return "\n".join(lines) + "\n"


def version() -> str:
    """``memprof <version>`` of the installed distribution (memprof-llm), else of the package."""
    from importlib import metadata

    try:
        v = metadata.version("memprof-llm")
    except metadata.PackageNotFoundError:
        from memprof import __version__ as v
    return f"memprof {v}\n"


def parser_of(entry: Command, sub: str | None = None, *, full_help: bool = True) -> Any:
    """The parser of command ``entry`` (of its subcommand ``sub``), built from its rows;
    ``full_help`` False: a parser that will not print help (choices from core not read)."""
    from memprof.commands.options import build

    module = entry.module_object()
    prog = f"memprof {entry.name}" + (f" {sub}" if sub else "")
    # the description is shown by --help alone: not cleaned (textwrap) for a parser that
    # will not print help
    if sub is not None:
        spec = module.SUBCOMMANDS[sub]
        return build(prog, _clean(spec.description) if full_help else "", spec.options(),
                     full_help=full_help)
    return build(prog, _description(module.run) if full_help else "", module.options(),
                 full_help=full_help)


def _description(fn: Any) -> str:
    return _clean(fn.__doc__ or "")


def _clean(doc: str) -> str:
    """A docstring with its indentation removed (``inspect.cleandoc`` without importing
    inspect, which costs a cold start ~15 ms)."""
    import textwrap

    first, _, rest = doc.strip("\n").partition("\n")
    return (first.strip() + "\n" + textwrap.dedent(rest)).strip()


def _sub_help(entry: Command, module: Any) -> str:
    width = max(len(n) for n in module.SUBCOMMANDS) + 2
    lines = [f"usage: memprof {entry.name} [-h] COMMAND [ARGS]...", "", entry.help, "",
             "commands:"]
    lines += [f"  {n:<{width}}{s.help}" for n, s in module.SUBCOMMANDS.items()]
    return "\n".join(lines) + "\n"


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in HELP_OPTIONS:
        sys.stdout.write(top_help())
        return EXIT_OK
    if argv[0] == "--version":
        sys.stdout.write(version())
        return EXIT_OK
    name = argv[0]
    entry = find(name)
    if entry is None:
        import difflib

        if name.startswith("-"):
            raise BadInput(f"no such option: {name[:60]}",
                           hint="run memprof --help for the commands and options")
        close = difflib.get_close_matches(name, [c.name for c in COMMANDS], n=1)
        also = f" (did you mean {close[0]!r}?)" if close else ""
        raise BadInput(f"no such command {name[:60]!r}{also}",
                       hint="run memprof --help for the commands")
    rest = argv[1:]
    module = entry.module_object()
    subs = getattr(module, "SUBCOMMANDS", None)
    if subs is not None:
        if not rest or rest[0] in HELP_OPTIONS:
            sys.stdout.write(_sub_help(entry, module))
            return EXIT_OK
        if rest[0] not in subs:
            raise BadInput(f"no such command 'memprof {entry.name} {rest[0][:60]}'",
                           hint=f"one of: {', '.join(subs)} (memprof {entry.name} --help)")
        spec = subs[rest[0]]
        helping = any(a in HELP_OPTIONS for a in rest[1:])
        args = parser_of(entry, rest[0], full_help=helping).parse(rest[1:])
        return int(spec.run(args))
    helping = any(a in HELP_OPTIONS for a in rest)
    args = parser_of(entry, full_help=helping).parse(rest)
    return int(module.run(args))


def _one_line(text: str) -> str:
    """``text`` with every character that is not printable (control characters, line and
    paragraph separators: a key of a user's config.json may hold any) written as its escape, so
    an error stays one line whatever it quotes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _fail(message: str, hint: str, code: int) -> int:
    sys.stderr.write(f"error: {_one_line(message)}\n")
    if hint:
        sys.stderr.write(f"hint: {_one_line(hint)}\n")
    return code


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; every user mistake becomes one ``error:`` line, and
    a bug of memprof's own one ``internal error:`` line with exit code 70 (never 1, which means
    a predicted OOM or a regression)."""
    try:
        return _dispatch(list(sys.argv[1:] if argv is None else argv))
    except MemprofError as exc:
        return _fail(exc.message, exc.hint, exc.exit_code)
    except SystemExit as exc:  # argparse's --help
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except BrokenPipeError:  # pragma: no cover - e.g. piping into head
        return EXIT_OK
    except KeyboardInterrupt:
        return _fail("interrupted", "", EXIT_BAD_INPUT)
    except Exception as exc:  # a bug of memprof's own: say so, never as an OOM
        where = _origin(exc)
        sys.stderr.write(f"internal error: {type(exc).__name__} in {where}: "
                         f"{' '.join(str(exc).split())[:200]}\n")
        sys.stderr.write("hint: this is a bug in memprof, not in your input; please report it "
                         "with the command line that caused it\n")
        return EXIT_INTERNAL


def _origin(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of memprof's own code that raised ``exc``."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "memprof" in f.filename]
    if not frames:
        return "memprof"
    f = frames[-1]
    return f"{f.filename.rsplit('memprof', 1)[-1].lstrip('/')}:{f.lineno}"


def main() -> None:
    sys.exit(run())
