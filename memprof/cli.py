"""The ``memprof`` command line: the typer app, the commands of ``memprof.commands`` built lazily
(only the one invoked is imported and built), and the one place where errors become exit codes.

Exit codes: 0 fits / nothing regressed, 1 predicted OOM / regression, 2 bad input,
3 environment, 70 internal error (a bug of memprof's own).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, MutableMapping
from typing import Annotated, Any

import typer
import typer.core

from memprof.base.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    MemprofError,
)
from memprof.commands import COMMANDS, Command, find

_UNHANDLED = object()
_DIGITS = re.compile(r"0|[1-9][0-9]{0,17}")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,17})?")


def _plain_value(param: Any, value: Any) -> Any:
    """``value`` coerced as typer's pydantic adapter coerces it, for the plain cases only: None,
    a str for ``str``, an int or a plain decimal for ``int`` / ``float``, strs for ``list[str]``;
    ``_UNHANDLED`` for anything else (typer's own coercion then runs, errors and all)."""
    desc = getattr(param, "type_descriptor", None)
    info = getattr(desc, "parameter_info", None)
    if desc is None or info is None or info.parser is not None or info.min is not None or (
            info.max is not None or desc.file_annotation is not None):
        return _UNHANDLED
    multi = param.multiple or param.nargs == -1
    if value is None:
        return () if multi else None
    ann = desc.annotation
    if multi:
        if ann == list[str] and isinstance(value, (list, tuple)) and all(
                type(v) is str for v in value):
            return list(value)
        return _UNHANDLED
    if ann is str and type(value) is str:
        return value
    if ann is int:
        if type(value) is int:
            return value
        if type(value) is str and _DIGITS.fullmatch(value):
            return int(value)
    if ann is float:
        if type(value) is float:
            return value
        if type(value) is str and _DECIMAL.fullmatch(value):
            return float(value)
    return _UNHANDLED


def _skip_pydantic_for_plain_values() -> None:
    """typer (0.2x) coerces every option through a pydantic TypeAdapter, and importing pydantic
    is a quarter of a cold ``memprof estimate``. Plain values (``8``, ``0.9``, ``H200``) are
    coerced here to what the adapter returns; anything else goes to typer as before."""
    core = sys.modules.get("typer.core")
    cls = getattr(core, "_TyperParameter", None)
    original = getattr(cls, "process_value", None)
    if cls is None or original is None or getattr(original, "_memprof_plain", False):
        return
    missing = getattr(getattr(typer, "_click", None), "exceptions", None)
    missing_error = getattr(missing, "MissingParameter", None)
    if missing_error is None:
        return

    def process_value(self: Any, ctx: Any, value: Any) -> Any:
        plain = _plain_value(self, value)
        if plain is _UNHANDLED:
            return original(self, ctx, value)
        if self.required and self.value_is_missing(plain):
            raise missing_error(ctx=ctx, param=self)
        if self.callback is not None:
            plain = self.callback(ctx, self, plain)
        return plain

    process_value._memprof_plain = True  # type: ignore[attr-defined]
    cls.process_value = process_value


_skip_pydantic_for_plain_values()

HELP_OPTIONS = ["-h", "--help"]  # every command inherits them from the top-level context


def _build(entry: Command) -> Any:
    """The click command of ``entry`` as typer builds it (public typer API only): a function
    through a one-command app, a typer group through an app it is added to."""
    target = entry.load()
    holder = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=entry.name, short_help=entry.help)
        group = typer.main.get_command(holder)
        return group.commands[entry.name]  # type: ignore[attr-defined]
    holder.command(entry.name, short_help=entry.help)(target)
    return typer.main.get_command(holder)


class _Commands(MutableMapping[str, Any]):
    """The top-level group's commands: every name of the registry, each command built (and its
    module imported) the first time it is looked up."""

    def __init__(self) -> None:
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            entry = find(name)
            if entry is None:
                raise KeyError(name)
            self._built[name] = _build(entry)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        names = [c.name for c in COMMANDS]
        return iter([*names, *(n for n in self._built if n not in names)])

    def __len__(self) -> int:
        return len(list(iter(self)))

    def __contains__(self, name: object) -> bool:
        return name in self._built or (isinstance(name, str) and find(name) is not None)


class LazyGroup(typer.core.TyperGroup):
    """memprof's top-level group: ``list_commands`` names every command without importing one,
    ``get_command`` imports and builds only the command asked for, and the top-level help lists
    the registry's one-line helps (no command module imported)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _Commands()
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names only: nothing is imported or built

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = find(cmd_name)
        if self._listing and entry is not None:
            return typer.core.TyperCommand(entry.name, help=entry.help, short_help=entry.help)
        return self.commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def _version(value: bool) -> None:
    """``--version``: ``memprof <version>`` of the installed distribution (memprof-llm), else of
    the package; exit 0."""
    if not value:
        return
    from importlib import metadata

    try:
        version = metadata.version("memprof-llm")
    except metadata.PackageNotFoundError:
        from memprof import __version__ as version
    sys.stdout.write(f"memprof {version}\n")
    raise typer.Exit(EXIT_OK)


app = typer.Typer(
    name="memprof",
    help="Predict, trace and gate the GPU memory of LLM serving deployments (vLLM, SGLang).",
    cls=LazyGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": HELP_OPTIONS},
)


@app.callback()
def _main_options(
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version,
        help="Print memprof's version and exit.")] = False,
) -> None:
    """The top-level options (the app's help is the Typer's)."""


_GROUP: list[Any] = []


def _group() -> Any:
    """The click group of ``app``, built once per process (its commands are built on use)."""
    if not _GROUP:
        _GROUP.append(typer.main.get_command(app))
    return _GROUP[0]


def _fail(message: str, hint: str, code: int) -> int:
    sys.stderr.write(f"error: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    return code


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; every user mistake becomes one ``error:`` line, and
    a bug of memprof's own one ``internal error:`` line with exit code 70 (never 1, which means
    a predicted OOM or a regression)."""
    command = _group()
    try:
        rv = command.main(args=argv, prog_name="memprof", standalone_mode=False)
    except MemprofError as exc:
        return _fail(exc.message, exc.hint, exc.exit_code)
    except typer.Abort:
        return _fail("aborted", "", EXIT_BAD_INPUT)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.TyperException as exc:  # typer's usage errors (click's, vendored)
        fmt = getattr(exc, "format_message", None)
        message = str(fmt()) if callable(fmt) else str(exc)
        if type(exc).__name__ == "NoArgsIsHelpError":
            sys.stdout.write(message + "\n")
            return EXIT_OK
        text = " ".join(message.split())
        if len(text) > 300:
            text = text[:300] + "…"
        return _fail(text, "run memprof --help (or COMMAND --help) for the flags",
                     EXIT_BAD_INPUT)
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
    return rv if isinstance(rv, int) else EXIT_OK


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
