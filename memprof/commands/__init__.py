"""The commands of ``memprof``, one module each, registered by ``memprof.cli`` from ``COMMANDS``.

A command module declares its own flags as rows (``options()``, beside the deployment flags that
``memprof.commands.options`` generates from the settings table) and a ``run(args) -> int`` body:
flags → core → ``memprof.report.render``. A new command is a module and a line here.

The registry names each command's module without importing it: ``memprof estimate`` imports
(and builds the parser of) the estimate command only, and ``memprof --help`` lists every
command from
the one-line helps below without importing any command module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple


class Command(NamedTuple):
    """A command of the CLI: its name, the one line ``memprof --help`` shows for it, and the
    module that declares it (imported only by :meth:`module_object`): its ``options()`` rows and
    its ``run(args) -> int`` body, or ``SUBCOMMANDS`` (``alloc replay``)."""

    name: str
    help: str
    module: str

    def module_object(self) -> Any:
        """The command's module (imports it)."""
        return importlib.import_module(self.module)


class SubCommand(NamedTuple):
    """A subcommand (``alloc replay``): its one-line help, its rows and its body."""

    help: str
    description: str
    options: Callable[[], Sequence[Any]]
    run: Callable[[Any], int]


COMMANDS: tuple[Command, ...] = (
    Command("estimate", "Estimate every rank's memory and KV cache, and whether it fits.",
            "memprof.commands.estimate"),
    Command("explain", "Put a start-up log's figures beside memprof's estimate of them.",
            "memprof.commands.explain"),
    Command("plan", "Find the layouts that hold a workload, fewest GPUs first.",
            "memprof.commands.plan"),
    Command("sweep", "Estimate every deployment of a grid of settings.", "memprof.commands.sweep"),
    Command("trace", "Build one rank in PyTorch at its true shapes and trace its memory.",
            "memprof.commands.trace"),
    Command("alloc", "The CUDA caching-allocator simulator.", "memprof.commands.alloc"),
    Command("validate", "Run the decode kernels under each scratch policy and check them.",
            "memprof.commands.validate"),
    Command("gate", "Compare the scenarios with the baseline; exit 1 on a regression.",
            "memprof.commands.gate"),
    Command("versions", "List the engine releases and version rules, or diff two releases.",
            "memprof.commands.versions"),
    Command("models", "List the bundled models.", "memprof.commands.models"),
    Command("gpus", "List the GPU catalog.", "memprof.commands.gpus"),
    Command("devices", "List this host's GPUs, their memory and the processes using it.",
            "memprof.commands.devices"),
)


def commands() -> tuple[Command, ...]:
    """Every command, in the order ``memprof --help`` lists them."""
    return COMMANDS


def find(name: str) -> Command | None:
    """The command called ``name``, or None."""
    return next((c for c in COMMANDS if c.name == name), None)
