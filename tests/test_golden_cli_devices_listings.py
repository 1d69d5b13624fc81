"""The listing commands and ``memprof devices`` through the CLI, against the goldens: ``memprof
models``, ``gpus`` and ``versions`` as JSON and Markdown print their reporter goldens of
``tests/test_golden_commands.py`` (whose tables are checked there through the CLI too);
``memprof devices`` on a host whose probe reports two made-up GPUs prints the devices goldens in
every format, and on a CPU-only host (no NVIDIA driver, no AMD SMI) refuses with exit 3, one
``error:`` and one ``hint:`` line on stderr (``cli-devices-none.txt``) and nothing on stdout. The
probe's libraries are replaced, so nothing depends on this machine.

Regenerate ``cli-devices-none.txt`` with ``pytest tests/test_golden_cli_devices_listings.py
--update-goldens`` and review the diff (the reporter goldens with test_golden_commands.py)."""

from __future__ import annotations

import contextlib
import io
import types
from typing import Any

import pytest

from memprof.cli import run
from tests.test_golden_commands import GOLDEN, ROOT, check, made_up_devices


@pytest.fixture(autouse=True)
def _pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    """80 columns, no colour, the repo's paths (as tests/test_golden_commands.py pins them)."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(ROOT)


def _cli(argv: list[str], code: int = 0) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        got = run(argv)
    assert got == code, err.getvalue()
    return out.getvalue(), err.getvalue()


def _golden(name: str) -> str:
    return (GOLDEN / name).read_text(encoding="utf-8")


# the reporter golden each CLI output must equal (the command adds nothing to the rendering)
LISTINGS = {"models.json": ["models", "-f", "json"], "models.md": ["models", "-f", "markdown"],
            "gpus.json": ["gpus", "-f", "json"], "gpus.md": ["gpus", "-f", "markdown"],
            "versions.json": ["versions", "-f", "json"],
            "versions.md": ["versions", "-f", "markdown"]}


@pytest.mark.parametrize("name", sorted(LISTINGS))
def test_listings_through_the_cli_print_their_goldens(name: str) -> None:
    out, err = _cli(LISTINGS[name])
    assert err == "" and out == _golden(name)


class _NoLibrary(Exception):
    """What pynvml raises where libnvidia-ml.so is missing (its class name is what counts)."""


_NoLibrary.__name__ = "NVMLError_LibraryNotFound"


def _fake_pynvml() -> Any:
    def init() -> None:
        raise _NoLibrary("NVML Shared Library Not Found")

    return types.SimpleNamespace(nvmlInit=init)


@pytest.fixture
def cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-ml-py installed but no driver, amdsmi not installed: a CPU-only host."""
    from memprof.probes import devices as probe

    libraries = {"pynvml": _fake_pynvml(), "amdsmi": None}
    monkeypatch.setattr(probe, "_import", lambda name: libraries[name])


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    from memprof.probes import devices as probe

    monkeypatch.setattr(probe, "probe", lambda: probe.Probe(
        devices=tuple(made_up_devices()), failures=("amdsmi is not installed",)))


def test_devices_on_a_cpu_only_host(cpu_only: None, request: pytest.FixtureRequest) -> None:
    out, err = _cli(["devices"], code=3)
    lines = err.splitlines()
    assert out == "" and len(lines) == 2
    assert lines[0].startswith("error: no GPU found") and lines[1].startswith("hint: ")
    check("cli-devices-none.txt", err, request)
    for fmt in ("json", "markdown"):  # the refusal does not depend on the format
        assert _cli(["devices", "-f", fmt], code=3) == ("", err)


@pytest.mark.parametrize(("fmt", "name"), [("table", "devices.txt"), ("json", "devices.json"),
                                           ("markdown", "devices.md")])
def test_devices_of_a_host_with_gpus_print_their_goldens(two_gpus: None, fmt: str,
                                                         name: str) -> None:
    out, err = _cli(["devices", "-f", fmt])
    assert err == "" and out == _golden(name)
