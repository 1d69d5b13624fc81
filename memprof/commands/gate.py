"""``memprof gate``: evaluate the reference scenarios and compare them with a committed baseline.

::

    memprof gate                                  # configs/scenarios vs reports/baseline.json
    memprof gate --tolerance 0.5 --markdown gate.md
    memprof gate --update                         # accept the current estimates as the baseline

Exit codes: 0 nothing regressed (or baseline written), 1 regression, 2 bad input (a scenario
that does not load or evaluate, a missing, corrupt or other-schema baseline, a bad flag).

``--update`` evaluates every scenario first, then rewrites the baseline atomically (a temporary
file in the same folder, fsync, ``os.replace``): a failing or interrupted run leaves the old file
as it was. A corrupt baseline is an error (exit 2, file untouched) unless ``--update`` is given,
which regenerates it: ``--update`` means "the current estimates are the baseline", and the old
content is not needed for that.

"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from memprof.base.errors import EXIT_OK, EXIT_OOM, BadInput

DEFAULT_BASELINE = Path("reports/baseline.json")
DEFAULT_SCENARIOS = Path("configs/scenarios")
EXIT_REGRESSION = EXIT_OOM  # 1


def default_scenarios() -> Path:
    """``./configs/scenarios`` when it exists, else the scenarios bundled with memprof."""
    if DEFAULT_SCENARIOS.is_dir():
        return DEFAULT_SCENARIOS
    from memprof.core.models import configs_dir

    return configs_dir() / "scenarios"


def current_snapshots(directory: Path) -> dict[str, dict[str, Any]]:
    """Evaluate every scenario of ``directory``: name -> gate snapshot."""
    from memprof.core.contract import estimate_dict
    from memprof.core.gate import snapshot
    from memprof.core.scenarios import evaluate_scenario, load_scenarios

    out: dict[str, dict[str, Any]] = {}
    for s in load_scenarios(directory):
        out[s.name] = snapshot(estimate_dict(evaluate_scenario(s)), inputs=s.inputs,
                               description=s.description)
    return out


def read_baseline(path: Path) -> dict[str, dict[str, Any]]:
    """The baseline's scenarios; :class:`BadInput` (one line + hint) for anything unreadable."""
    from memprof.core.contract import SCHEMA_VERSION
    from memprof.core.gate import validate_baseline

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"the baseline {path} does not exist",
                       hint=f"create it with: memprof gate --update --baseline {path}") from None
    except OSError as exc:
        raise BadInput(f"cannot read the baseline {path}: {exc.strerror}",
                       hint="check the path and its permissions") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        what = " ".join(str(exc).split()) or "empty file"
        raise BadInput(
            f"the baseline {path} is not valid JSON ({what}; {len(raw)} bytes)",
            hint=f"restore it (git checkout -- {path}) or regenerate it with "
            "memprof gate --update") from None
    return validate_baseline(doc, where=str(path), estimate_schema_version=SCHEMA_VERSION)


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically: temp file in the same folder, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:  # make the rename durable (POSIX); not every platform can open a directory
        dfd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(dfd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(dfd)


def _check_writable(path: Path) -> None:
    """Refuse a baseline path that cannot be written, before anything is evaluated or written."""
    if path.is_dir():
        raise BadInput(f"--baseline {path} is a folder", hint="pass the baseline's file path, "
                       "e.g. reports/baseline.json")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise BadInput(f"--baseline {path}: {parent} is a file, not a folder",
                               hint="pass a path whose folders exist or can be created")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise BadInput(f"--baseline {path}: the folder {parent} is not writable",
                               hint="pick a writable folder, or fix its permissions")
            break


def _write_markdown(text: str, markdown: Path | None) -> None:
    if markdown is not None:
        try:
            markdown.parent.mkdir(parents=True, exist_ok=True)
            markdown.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise BadInput(f"cannot write --markdown {markdown}: {exc.strerror}",
                           hint="pick a writable path") from None
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            sys.stderr.write(f"warning: cannot append to $GITHUB_STEP_SUMMARY ({summary}): "
                             f"{exc.strerror}\n")


def _console() -> Any:
    from rich.console import Console

    # piped (CI logs, files): 80 columns, the width every log viewer shows whole
    return Console(width=None if sys.stdout.isatty() else 80)


def run_gate(*, scenarios: Path | None, baseline: Path, tolerance: float, update: bool,
             markdown: Path | None, floor_bytes: int | None = None) -> int:
    """The command's logic; returns the exit code (raises MemprofError for bad input).
    ``floor_bytes`` None: ``memprof.core.gate.DEFAULT_FLOOR_BYTES`` (imported here, not when
    the CLI starts)."""
    from memprof import __version__
    from memprof.core.contract import SCHEMA_VERSION
    from memprof.core.gate import DEFAULT_FLOOR_BYTES, baseline_doc, compare, dump_baseline
    if floor_bytes is None:
        floor_bytes = DEFAULT_FLOOR_BYTES
    from memprof.report.gate import render_markdown, render_table

    if not 0.0 <= tolerance < 100.0:
        raise BadInput(f"--tolerance must be a percentage in [0, 100), got {tolerance}",
                       hint="e.g. --tolerance 1 (one percent)")
    if update:
        _check_writable(baseline)
    current = current_snapshots(scenarios or default_scenarios())
    console = _console()
    if update:
        try:
            old: dict[str, dict[str, Any]] | None = read_baseline(baseline)
        except BadInput as exc:
            old = None
            if baseline.exists():
                sys.stderr.write(f"note: {exc.message}; --update regenerates it\n")
        if old is not None:
            result = compare(old, current, tolerance, floor_bytes)
            render_table(result, console)
            _write_markdown(render_markdown(result), markdown)
        doc = baseline_doc(current, tool_version=__version__,
                           estimate_schema_version=SCHEMA_VERSION)
        _check_writable(baseline)
        try:
            write_atomic(baseline, dump_baseline(doc))
        except OSError as exc:
            raise BadInput(f"cannot write the baseline {baseline}: {exc.strerror or exc}",
                           hint="pass --baseline a file path in a writable folder") from None
        console.print(f"memprof gate: wrote {baseline} ({len(current)} scenarios)",
                      highlight=False)
        return EXIT_OK
    result = compare(read_baseline(baseline), current, tolerance, floor_bytes)
    render_table(result, console)
    _write_markdown(render_markdown(result), markdown)
    return EXIT_REGRESSION if result.regressed else EXIT_OK


def gate(
    scenarios: Annotated[Path | None, typer.Option(
        "--scenarios", help="Folder of scenario *.toml files (default: ./configs/scenarios, "
        "else the bundled ones).")] = None,
    baseline: Annotated[Path, typer.Option(
        "--baseline", help="The committed baseline JSON.")] = DEFAULT_BASELINE,
    tolerance: Annotated[float, typer.Option(
        "--tolerance", help="Percent a figure may worsen before it is a regression.")] = 1.0,
    update: Annotated[bool, typer.Option(
        "--update", help="Write the current estimates as the new baseline (atomically).")] = False,
    markdown: Annotated[Path | None, typer.Option(
        "--markdown", help="Also write the table as Markdown to this file.")] = None,
    floor: Annotated[str, typer.Option(
        "--floor", help="Bytes a figure must also grow by to be a regression, so small "
        "components do not flap (e.g. 16MiB).")] = "16MiB",
) -> None:
    """Compare every scenario's estimate with the baseline; exit 1 on a regression.

    Regression: memory grown by more than --tolerance % and --floor, KV-cache tokens shrunk by
    more than --tolerance %, or an OOM.

    The table also goes to $GITHUB_STEP_SUMMARY when that is set.
    """
    from memprof.base.units import parse_size

    code = run_gate(scenarios=scenarios, baseline=baseline, tolerance=tolerance, update=update,
                    markdown=markdown, floor_bytes=parse_size(floor))
    raise typer.Exit(code)
