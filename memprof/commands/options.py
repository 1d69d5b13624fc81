"""Options as rows, and the one function that turns rows into an ``argparse`` parser.

Every command declares its flags as :class:`Option` rows; the deployment flags are not declared
by any command but generated from ``memprof.core.flags.SETTINGS`` (:func:`deployment_options`),
as vLLM builds its argparse from its config dataclasses (``EngineArgs.add_cli_args``,
vllm/engine/arg_utils.py). A row's kind picks the value parser (:data:`PARSERS`); a value that
does not parse, an unknown flag or a missing value becomes one ``error:`` line and a ``hint:``
(:class:`Parser.error` raises :class:`memprof.base.errors.BadInput`), never argparse's usage dump.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple, NoReturn

from memprof.base.errors import BadInput

Kind = Literal["int", "float", "bool", "str", "size", "tokens"]

_INT = re.compile(r"[+-]?[0-9]{1,4000}")  # Python's own limit is 4300 digits
_FLOAT = re.compile(r"[+-]?(?:[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})(?:[eE][+-]?[0-9]{1,3})?")


def parse_int(text: str) -> int:
    """A plain decimal integer (sign allowed, surrounding blanks ignored). A huge one is read as
    such: the core refuses it with what it is (``a 400-digit number``), as it did under click."""
    t = text.strip()
    if not _INT.fullmatch(t):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer")
    return int(t)


def parse_float(text: str) -> float:
    """A plain decimal number (``0.9``, ``.5``, ``1e-3``); never nan or inf."""
    t = text.strip()
    if t.endswith("%") and _FLOAT.fullmatch(t[:-1].strip()):
        # the engines read fractions (vLLM's --gpu-memory-utilization 0.9 is 90%), never "90%"
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a number: write it without the % sign (a fraction such as "
            f"--gpu-memory-utilization is {float(t[:-1]) / 100:g} for {t})")
    if not _FLOAT.fullmatch(t):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number")
    value = float(t)
    if value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is out of range")
    return value


def parse_tokens(text: str) -> int:
    """A token count as vLLM's ``human_readable_int`` reads ``--max-model-len`` (32k = 32,000;
    32K = 32,768; ``memprof.base.units.human_readable_int``); ``auto`` is -1, as vLLM's
    ``human_readable_int_or_auto`` reads it for ``--max-model-len`` (its auto-fit; the core
    refuses it for any other flag)."""
    from memprof.base.units import human_readable_int

    t = text.strip()
    if _INT.fullmatch(t):  # a plain integer, however long: the core says what it is
        return int(t)
    try:
        if len(t) > 40:
            raise ValueError(t)
        return human_readable_int(t)
    except ValueError:
        if t.lower() == "auto":  # vLLM's human_readable_int_or_auto: 'auto' is -1, its auto-fit
            return -1  # (memprof.core.auto_fit.AUTO_FIT; the core refuses it beside other flags)
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a token count (an integer, or 32k = 32,000, 32K = 32,768)"
        ) from None


def _text(text: str) -> str:
    return text


# a size stays text here: the command reads it (``memprof.base.units.parse_size``) with the
# rule of its flag (vLLM's bare bytes and letters for --kv-cache-memory-bytes)
PARSERS: dict[str, Callable[[str], Any]] = {"int": parse_int, "float": parse_float,
                                            "tokens": parse_tokens,
                                            "str": _text, "size": _text}
METAVARS = {"int": "N", "float": "X", "str": "TEXT", "size": "SIZE", "bool": "",
            "tokens": "N"}


class Option(NamedTuple):
    """One flag (or positional argument) of a command.

    ``names`` are the flag's spellings (empty for a positional); ``dest`` the attribute of the
    parsed arguments; ``kind`` how the value is read; ``repeat``: the flag may be given more than
    once (a list); ``rest``: a positional taking every remaining word (a pasted command after
    ``--``). Built by keyword. A named tuple rather than a frozen dataclass: every command's
    rows are built at each start, and a dataclass's generated methods cost a cold start ~3 ms
    (``benchmarks/bench_cold_start.py``)."""

    dest: str
    names: tuple[str, ...] = ()
    kind: Kind = "str"
    default: Any = None
    help: str = ""
    metavar: str = ""
    choices: tuple[str, ...] = ()  # shown in help; the command (or the core) checks the value
    choices_from: str = ""  # or "module:NAME" of core's constant, read only when help is shown
    shown_default: str = ""
    required: bool = False
    repeat: bool = False
    rest: bool = False
    deployment: bool = False  # generated from a Setting row (or a memprof deployment flag)

    def all_choices(self) -> tuple[str, ...]:
        """``choices``, else the constant ``choices_from`` names (imports its module)."""
        if self.choices or not self.choices_from:
            return self.choices
        import importlib

        module, _, name = self.choices_from.partition(":")
        return tuple(getattr(importlib.import_module(module), name))

    @property
    def positional(self) -> bool:
        return not self.names

    @property
    def canonical(self) -> str:
        """The flag as its help lists it first: its first long spelling (``--model``, not the
        longest, ``--model-path``)."""
        return next((n for n in self.names if n.startswith("--")), self.label)

    @property
    def label(self) -> str:
        """The flag as errors name it: its longest spelling (the positional's metavar)."""
        return max(self.names, key=len) if self.names else (self.metavar or self.dest).upper()


# memprof's own deployment flags: what to size and on which GPU (no engine has them)
MEMPROF_DEPLOYMENT: tuple[Option, ...] = (
    Option(dest="model", names=("--model", "-m", "--model-path"), deployment=True,
           help="Bundled name (memprof models), an HF repo id of a bundled model "
           "(Qwen/Qwen3-32B), a config.json, or a folder holding one. SGLang: --model-path.",
           shown_default="deepseek-r1"),
    Option(dest="gpu", names=("--gpu",), deployment=True,
           help="GPU from the catalog (memprof gpus), or auto (this host's, through NVML / "
           "AMD SMI).", shown_default="H100-80GB"),
    Option(dest="gpu_memory", names=("--gpu-memory",), kind="size", deployment=True,
           help="Total GPU memory as torch.cuda.mem_get_info reports it, with a unit, e.g. "
           "23.58GiB (overrides the catalog)."),
    Option(dest="gpu_arch", names=("--gpu-arch",), metavar="ARCH", deployment=True,
           help="The architecture of a --gpu-memory card the catalog lacks (sm75, sm89, 8.9, "
           "sm120, gfx942, ...: memprof gpus lists them), so that its kernels, backends and "
           "platform figures are that architecture's; --gpu-memory alone is refused."),
)


def deployment_options() -> tuple[Option, ...]:
    """The deployment flags of every command that builds a deployment: memprof's own, then one
    per ``SETTINGS`` row, named by both engines' flags, defaulting to ``Deployment()``'s."""
    from dataclasses import fields

    from memprof.core.deployment import Deployment
    from memprof.core.flags import SETTINGS

    defaults = {f.name: f.default for f in fields(Deployment)}
    rows = [Option(dest=s.field, names=s.cli_flags(), kind=s.kind,
                   default=defaults[s.field] if s.kind != "size" else None,
                   help=s.help, metavar=s.metavar, shown_default=s.shown_default,
                   choices_from=s.choices_from, deployment=True) for s in SETTINGS]
    return (*MEMPROF_DEPLOYMENT, *rows)


def _same_value(option: Option, a: str, b: str) -> bool:
    """Whether two values given for ``option`` are one: the same text, or the same value as
    the flag reads it (``-tp 2`` and ``--tensor-parallel-size 02``, ``0.9`` and ``.9``); a value
    the flag refuses compares as text (the parse then says what is wrong with it)."""
    if a == b:
        return True
    if option.kind == "bool":  # "on" / "off"
        return False
    read = PARSERS[option.kind]
    try:
        return bool(read(a) == read(b))
    except (argparse.ArgumentTypeError, ValueError):
        return False


class Parser(argparse.ArgumentParser):
    """argparse with memprof's error contract: every usage error raises :class:`BadInput`
    (one ``error:`` line and a ``hint:``), naming the flag and the value."""

    def __init__(self, prog: str, description: str) -> None:
        super().__init__(prog=prog, description=description, allow_abbrev=False,
                         add_help=False, formatter_class=argparse.RawDescriptionHelpFormatter)
        self.options: list[Option] = []  # the rows, in order (tests and did-you-mean read them)
        self.typed: list[str] = []  # the words being parsed (an error names the flag as typed)

    def error(self, message: str) -> NoReturn:
        raise BadInput(*explain_usage_error(self, message, self.typed))

    def flag_names(self) -> list[str]:
        """Every flag the parser accepts."""
        return ["-h", "--help", *(n for o in self.options for n in o.names)]

    def parse(self, argv: Sequence[str]) -> argparse.Namespace:
        """``argv`` parsed; a flag that takes a value takes the next word whatever it is (as
        click did: ``--kv-cache-memory -1GiB`` is a value the size reader refuses, not an
        unknown flag)."""
        takes = {n for o in self.options if not o.positional and o.kind != "bool"
                 for n in o.names}
        self.typed = list(argv)
        words: list[str] = []
        i = 0
        while i < len(argv):
            word = argv[i]
            if word == "--":
                if i == len(argv) - 1 and any(o.rest for o in self.options):
                    # an empty paste (an unset "$CMD"), never the defaults
                    raise BadInput("nothing after --: the pasted command is empty",
                                   hint="paste the serve command after -- (-- vllm serve "
                                   "Qwen/Qwen3-32B -tp 2), or leave -- out")
                words += argv[i:]
                break
            if word in takes and i + 1 < len(argv):
                words.append(f"{word}={argv[i + 1]}")
                i += 2
                continue
            words.append(word)
            i += 1
        self.check_repeats(words)
        ns = self.parse_args(words)
        ns._given_flags = self.given(words)
        return ns

    def check_repeats(self, words: Sequence[str]) -> None:
        """A flag that takes one value, given twice with two values (``-tp 2 … -tp 4``), is
        :class:`BadInput`: argparse would keep the last without a word, a silent guess at which
        one was meant. The same value twice is harmless; a pasted command after ``--`` is the
        engine's to read (its argparse keeps the last, as vLLM's and SGLang's do)."""
        option_of = {n: o for o in self.options
                     if not o.positional and not o.repeat and o.kind != "bool" for n in o.names}
        # a setting whose default is the engine's has both spellings (--x, --no-x): on and off
        either = {n: o for o in self.options
                  if o.kind == "bool" and o.deployment and o.default is None for n in o.names}
        seen: dict[str, tuple[str, str]] = {}  # dest -> (spelling, value) first given
        for word in words:
            if word == "--":
                break
            head, eq, value = word.partition("=")
            option = option_of.get(head)
            if option is None and not eq:
                on = either.get(word)
                off = either.get(f"--{word[5:]}") if word.startswith("--no-") else None
                option, value = (on, "on") if on is not None else (off, "off")
                if option is None:
                    continue
            elif option is None or not eq:
                continue
            first = seen.setdefault(option.dest, (head, value))
            if not _same_value(option, first[1], value):
                shown = (f"{first[0]} {first[1][:40]!r}", f"{head} {value[:40]!r}")
                if value in ("on", "off") and option.kind == "bool":
                    shown = (first[0], head)
                raise BadInput(f"{option.canonical} is given twice with different values "
                               f"({shown[0]} and {shown[1]})",
                               hint=f"give {option.canonical} once")

    def given(self, words: Sequence[str]) -> frozenset[str]:
        """The dests of the flags ``words`` name (before a ``--``), whatever their values: a
        flag typed at its default value is still given (explain lets it win over the log)."""
        names = {n: o.dest for o in self.options for n in o.names}
        out: set[str] = set()
        for word in words:
            if word == "--":
                break
            head = word.split("=", 1)[0]
            if head in names:
                out.add(names[head])
            elif head.startswith("--no-") and f"--{head[5:]}" in names:
                out.add(names[f"--{head[5:]}"])
        return frozenset(out)


def flag_names(parser: argparse.ArgumentParser) -> list[str]:
    """Every flag ``parser`` accepts (``-h/--help`` alone for a parser not built here)."""
    return parser.flag_names() if isinstance(parser, Parser) else ["-h", "--help"]


def _as_typed(names: str, typed: Sequence[str]) -> str:
    """An option (argparse's ``-a/--b/--c``) by its first long spelling, the one its help lists
    first, and the alias the user typed beside it where that was another long spelling
    (``--max-model-len (given as --context-length)``)."""
    spellings = names.split("/")
    canonical = next((n for n in spellings if n.startswith("--")), spellings[0])
    used = [n for n in spellings if any(w == n or w.startswith(f"{n}=") for w in typed)]
    if used and used[0] != canonical and used[0].startswith("--"):
        return f"{canonical} (given as {used[0]})"
    return canonical


def explain_usage_error(parser: argparse.ArgumentParser, message: str,
                        typed: Sequence[str] = ()) -> tuple[str, str]:
    """argparse's message as (error, hint): an unknown flag with the closest one, a missing
    value, a value that does not parse (flag and value named as ``typed`` spells them), a
    missing option."""
    prog = parser.prog
    more = f"run {prog} --help for the flags"
    m = re.match(r"unrecognized arguments: (.*)", message)
    if m:
        words = m.group(1).split()
        flag = next((w for w in words if w.startswith("-")), words[0] if words else "")
        if not flag.startswith("-"):
            return (f"unexpected argument {flag[:60]!r}", more)
        import difflib

        name = flag.split("=", 1)[0]
        # compared without their dashes, which every flag shares (--bogus is not like --gpu)
        bare = {f.lstrip("-"): f for f in flag_names(parser)}
        close = difflib.get_close_matches(name.lstrip("-"), list(bare), n=1, cutoff=0.6)
        hint = f"did you mean {bare[close[0]]}? ({more})" if close else more
        if name == "--json" and "--format" in bare.values():  # other tools' spelling
            hint = f"use --format json (-f json) ({more})"
        return (f"no such option: {name[:60]}", hint)
    m = re.match(r"argument ([^:]+): (.*)", message)
    if m:
        label = _as_typed(m.group(1), typed)
        what = m.group(2)
        if what.startswith("expected"):
            flag = label.split(" (given as ")[0]
            return (f"{label} needs a value", f"e.g. {flag} VALUE ({more})")
        return (f"bad value for {label}: {what}", more)
    m = re.match(r"the following arguments are required: (.*)", message)
    if m:
        missing = [max(n.split("/"), key=len) for n in m.group(1).split(", ")]
        return (f"missing {', '.join(missing)}", f"{prog} needs {', '.join(missing)} ({more})")
    return (" ".join(message.split())[:300], more)


def add(parser: argparse.ArgumentParser, option: Option, *, full_help: bool = True) -> None:
    """``option`` as an argument of ``parser``; ``full_help`` False: without the choices read
    from core's constants (a parser that will not print its help need not import them)."""
    helptext = option.help
    choices = option.all_choices() if full_help else option.choices
    if choices:
        helptext += f" One of: {', '.join(choices)}."
    if option.shown_default:
        helptext += f" Default: {option.shown_default}."
    elif option.default not in (None, False, "", ()) and not option.rest:
        helptext += f" Default: {option.default}."
    helptext = helptext.replace("%", "%%").strip()
    if option.rest:
        parser.add_argument(option.dest, nargs="*", help=helptext,
                            metavar=option.metavar or option.dest.upper())
        return
    if option.positional:
        parser.add_argument(option.dest, type=PARSERS[option.kind], help=helptext,
                            metavar=option.metavar or option.dest.upper(),
                            nargs=None if option.required else "?", default=option.default)
        return
    if option.kind == "bool" and option.deployment and option.default is None:
        # a setting whose default is the engine's (vLLM's --enable-prefix-caching): both
        # spellings, as vLLM's BooleanOptionalAction gives them; unset stays None
        parser.add_argument(*option.names, dest=option.dest,
                            action=argparse.BooleanOptionalAction, default=None,
                            help=helptext)
        return
    if option.kind == "bool":
        parser.add_argument(*option.names, dest=option.dest, action="store_true",
                            default=bool(option.default), help=helptext)
        return
    metavar = option.metavar or ("|".join(choices) if 0 < len(choices) <= 4
                                 else METAVARS[option.kind])
    parser.add_argument(*option.names, dest=option.dest, type=PARSERS[option.kind],
                        default=[] if option.repeat else option.default,
                        action="append" if option.repeat else "store", help=helptext,
                        metavar=metavar, required=option.required)


def build(prog: str, description: str, options: Sequence[Option], *, full_help: bool = True
          ) -> Parser:
    """The parser of one command: ``-h/--help`` and every row of ``options``, in order."""
    parser = Parser(prog, description)
    parser.add_argument("-h", "--help", action="help", help="Show this message and exit.")
    for option in options:
        add(parser, option, full_help=full_help)
        parser.options.append(option)
    return parser


def deployment_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The deployment flags of parsed ``args``, by field (``model``, ``gpu``, ``tp``, ...)."""
    return {o.dest: getattr(args, o.dest) for o in deployment_options()}
