"""The commands of ``memprof``, one module each, registered by ``memprof.cli`` from ``COMMANDS``.

A command module holds its typer function (flags and help) and nothing else: it calls the core
and hands the result to a reporter. A new command is a module and a line here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Command:
    """A command of the CLI: its name and its typer function (or a typer group of
    subcommands, such as ``alloc replay``)."""

    name: str
    fn: Callable[..., Any] | Any


def commands() -> tuple[Command, ...]:
    """Every command, in the order ``memprof --help`` lists them."""
    from memprof.commands.alloc import alloc
    from memprof.commands.devices import devices
    from memprof.commands.estimate import estimate
    from memprof.commands.explain import explain
    from memprof.commands.gate import gate
    from memprof.commands.listing import gpus, models
    from memprof.commands.plan import plan
    from memprof.commands.sweep import sweep
    from memprof.commands.trace import trace
    from memprof.commands.validate import validate
    from memprof.commands.versions import versions

    return (Command("estimate", estimate), Command("explain", explain),
            Command("plan", plan), Command("sweep", sweep), Command("trace", trace),
            Command("alloc", alloc), Command("validate", validate),
            Command("gate", gate), Command("versions", versions), Command("models", models),
            Command("gpus", gpus), Command("devices", devices))
