"""Goldens of the listing commands through the CLI in every format (``memprof models``, ``gpus``,
``versions`` as JSON and Markdown beside the tables of ``tests/test_golden_commands.py``) and of
``memprof devices``: on a host whose probe reports two made-up GPUs, and on a CPU-only host (no
NVIDIA driver, no AMD SMI: exit 3, one ``error:`` and one ``hint:`` line on stderr, nothing on
stdout). The probe's libraries are replaced, so the goldens do not depend on this machine.

Regenerate with ``pytest tests/test_golden_cli_devices_listings.py --update-goldens`` and
review the diff."""

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


# the reporter golden each CLI output must equal (the command adds nothing to the rendering)
LISTINGS = {
    "cli-models.json": (["models", "-f", "json"], "models.json"),
    "cli-models.md": (["models", "-f", "markdown"], "models.md"),
    "cli-gpus.json": (["gpus", "-f", "json"], "gpus.json"),
    "cli-gpus.md": (["gpus", "-f", "markdown"], "gpus.md"),
    "cli-versions.json": (["versions", "-f", "json"], "versions.json"),
    "cli-versions.md": (["versions", "-f", "markdown"], "versions.md"),
}


@pytest.mark.parametrize("name", sorted(LISTINGS))
def test_listing_goldens_through_the_cli(name: str, request: pytest.FixtureRequest) -> None:
    argv, reporter_golden = LISTINGS[name]
    out, err = _cli(argv)
    assert err == ""
    check(name, out, request)
    assert out == (GOLDEN / reporter_golden).read_text(encoding="utf-8")


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


@pytest.mark.parametrize(("fmt", "name"), [("table", "cli-devices-none.txt"),
                                           ("json", "cli-devices-none-json.txt")])
def test_devices_on_a_cpu_only_host(cpu_only: None, fmt: str, name: str,
                                    request: pytest.FixtureRequest) -> None:
    out, err = _cli(["devices", "-f", fmt], code=3)
    lines = err.splitlines()
    assert out == "" and len(lines) == 2
    assert lines[0].startswith("error: no GPU found") and lines[1].startswith("hint: ")
    check(name, err, request)
    if fmt == "json":  # the refusal does not depend on the format
        assert err == (GOLDEN / "cli-devices-none.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize(("fmt", "name", "reporter_golden"), [
    ("table", "cli-devices.txt", "devices.txt"), ("json", "cli-devices.json", "devices.json"),
    ("markdown", "cli-devices.md", "devices.md")])
def test_devices_of_a_host_with_gpus(two_gpus: None, fmt: str, name: str,
                                     reporter_golden: str,
                                     request: pytest.FixtureRequest) -> None:
    out, err = _cli(["devices", "-f", fmt])
    assert err == ""
    check(name, out, request)
    assert out == (GOLDEN / reporter_golden).read_text(encoding="utf-8")
