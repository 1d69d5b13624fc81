"""The commands of ``memprof``, one module each, registered by ``memprof.cli`` from ``COMMANDS``.

A command module holds its typer function (flags and help) and nothing else: it calls the core
and hands the result to a reporter. A new command is a module and a line here.

The registry names each command's module without importing it: ``memprof estimate`` imports
(and typer builds) the estimate command only, and ``memprof --help`` lists every command from
the one-line helps below without importing any command module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Command:
    """A command of the CLI: its name, the one line ``memprof --help`` shows for it, and where
    its typer function (or typer group of subcommands, such as ``alloc replay``) lives:
    ``module``'s attribute ``attr``, imported only by :meth:`load`."""

    name: str
    help: str
    module: str
    attr: str

    def load(self) -> Callable[..., Any] | Any:
        """The typer function or typer group (imports its module)."""
        return getattr(importlib.import_module(self.module), self.attr)


COMMANDS: tuple[Command, ...] = (
    Command("estimate", "Estimate every rank's memory and KV cache, and whether it fits.",
            "memprof.commands.estimate", "estimate"),
    Command("explain", "Put a start-up log's figures beside memprof's estimate of them.",
            "memprof.commands.explain", "explain"),
    Command("plan", "Find the layouts that hold a workload, fewest GPUs first.",
            "memprof.commands.plan", "plan"),
    Command("sweep", "Estimate every deployment of a grid of settings.",
            "memprof.commands.sweep", "sweep"),
    Command("trace", "Build one rank in PyTorch at its true shapes and trace its memory.",
            "memprof.commands.trace", "trace"),
    Command("alloc", "The CUDA caching-allocator simulator.",
            "memprof.commands.alloc", "alloc"),
    Command("validate", "Run the decode kernels under each scratch policy and check them.",
            "memprof.commands.validate", "validate"),
    Command("gate", "Compare the scenarios with the baseline; exit 1 on a regression.",
            "memprof.commands.gate", "gate"),
    Command("versions", "List the engine releases and version rules, or diff two releases.",
            "memprof.commands.versions", "versions"),
    Command("models", "List the bundled models.", "memprof.commands.listing", "models"),
    Command("gpus", "List the GPU catalog.", "memprof.commands.listing", "gpus"),
    Command("devices", "List this host's GPUs, their memory and the processes using it.",
            "memprof.commands.devices", "devices"),
)


def commands() -> tuple[Command, ...]:
    """Every command, in the order ``memprof --help`` lists them."""
    return COMMANDS


def find(name: str) -> Command | None:
    """The command called ``name``, or None."""
    return next((c for c in COMMANDS if c.name == name), None)
