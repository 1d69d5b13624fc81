"""The CLI's own coercion of plain option values (``memprof.cli._plain_value``, which spares a
cold start typer's pydantic import) gives what typer's coercion gives, errors included."""

from typing import Any

import pytest
import typer
import typer._click as click
import typer.core

from memprof.cli import app

VALUES: list[Any] = [None, "8", "0", "007", "-1", "+3", " 5", "1_000", "1e3", "0.9", "0.90",
                     ".5", "1.", "abc", "H200", "", "nan", "99999999999999999999", 3, 2.5, True,
                     ("a", "b"), ["x"], (), "true"]


def _outcome(fn: Any, param: Any, ctx: Any, value: Any) -> tuple[str, str, str]:
    param._runtime_param = None
    try:
        out = fn(param, ctx, value)
    except Exception as exc:  # the same error, same message
        return ("error", type(exc).__name__, str(getattr(exc, "message", exc)))
    return ("ok", type(out).__name__, repr(out))


def test_plain_values_coerced_as_typer_does() -> None:
    patched = typer.core._TyperParameter.process_value
    if not getattr(patched, "_memprof_plain", False):
        pytest.skip("this typer has no process_value to shortcut")
    original = next(c.cell_contents for c in patched.__closure__ or ()
                    if getattr(c.cell_contents, "__name__", "") == "process_value")
    group = typer.main.get_command(app)
    checked = 0
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        subs = command.commands.items() if hasattr(command, "commands") else [(name, command)]
        for _sub, cmd in subs:
            ctx = click.Context(cmd)
            for param in cmd.params:
                for value in VALUES:
                    assert _outcome(patched, param, ctx, value) == \
                        _outcome(original, param, ctx, value), (cmd.name, param.name, value)
                    checked += 1
    assert checked > 1000
