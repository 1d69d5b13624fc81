"""One error hierarchy; the CLI catches it once and maps it to an exit code.

Exit codes (documented in docs/exit-codes.md):
  0  fits / nothing regressed
  1  predicted OOM, or a gate regression
  2  bad input (config, layout, flag value, baseline) — one ``error:`` line plus a ``hint:``
  3  environment (no GPU, no driver) for commands that need one
  70 internal error: a bug of memprof's own (EX_SOFTWARE of sysexits.h) — never 1, so CI never
     reads a crash as a predicted OOM
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_OOM = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_INTERNAL = 70


class MemprofError(Exception):
    """Base class: a user-facing failure with a one-line message and a hint."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class BadInput(MemprofError):
    """The user gave something memprof cannot use (exit code 2)."""


class ConfigError(BadInput):
    """A model config.json is missing, unreadable, malformed or of an unknown architecture."""


class LayoutError(BadInput):
    """A parallel layout the engine would refuse (TP not dividing heads, PP > layers, ...)."""


class EnvironmentProblem(MemprofError):
    """No GPU, no driver, a missing optional library (exit code 3)."""

    exit_code = EXIT_ENVIRONMENT
