"""``memprof gate``: evaluate the reference scenarios and compare them with a committed baseline.

::

    memprof gate                                  # configs/scenarios vs reports/baseline.json
    memprof gate --tolerance 0.5 --markdown gate.md
    memprof gate --update                         # accept the current estimates as the baseline

Exit codes: 0 nothing regressed (or baseline written), 1 regression, 2 bad input (a scenario
that does not load or evaluate, a missing, corrupt or other-schema baseline, a bad flag).

``--update`` evaluates every scenario first, then rewrites the baseline whole or not at all
(``memprof.base.files.write_atomic``): a failing, interrupted or killed run leaves the old file
as it was and no temporary file. ``--baseline`` (with ``--update``) and ``--markdown`` are
checked before any work; their folders must exist. A corrupt or empty baseline is an error
(exit 2, file untouched) unless ``--update`` is given, which regenerates it: ``--update`` means
"the current estimates are the baseline", and the old content is not needed for that.

"""

from __future__ import annotations

import json
import os
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

from memprof.base.errors import EXIT_OK, EXIT_OOM, BadInput
from memprof.base.files import path_kind, write_atomic  # the one rule: whole or not at all
from memprof.commands.options import Option

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


BASELINE_CAP = 16 << 20
"""The most bytes of a baseline read (the committed one is about 22 KiB for 11 scenarios)."""


def read_baseline(path: Path) -> dict[str, dict[str, Any]]:
    """The baseline's scenarios; :class:`BadInput` (one line + hint) for anything unreadable:
    a missing file, one that is not a regular file (a FIFO, ``/dev/zero``) or is larger than
    ``BASELINE_CAP``, not JSON, another schema, or one with no scenarios."""
    from memprof.base.files import read_capped
    from memprof.core.contract import SCHEMA_VERSION
    from memprof.core.gate import validate_baseline

    if path_kind(path) == "missing":
        raise BadInput(f"the baseline {path} does not exist",
                       hint=f"create it with: memprof gate --update --baseline {path}")
    raw = read_capped(path, what="the baseline", cap=BASELINE_CAP,
                      hint=f"restore it (git checkout -- {path}) or regenerate it with "
                      "memprof gate --update")
    try:
        doc = json.loads(raw.decode("utf-8-sig"))  # a byte-order mark is no part of the JSON
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        what = " ".join(str(exc).split()) or "empty file"
        raise BadInput(
            f"the baseline {path} is not valid JSON ({what[:80]}; {len(raw)} bytes)",
            hint=f"restore it (git checkout -- {path}) or regenerate it with "
            "memprof gate --update") from None
    scenarios = validate_baseline(doc, where=str(path), estimate_schema_version=SCHEMA_VERSION)
    if not scenarios:
        raise BadInput(f"the baseline {path} has no scenarios: a gate against it checks nothing",
                       hint=f"regenerate it with memprof gate --update --baseline {path} "
                       "(and review the diff)")
    return scenarios


def _write_markdown(text: str, markdown: Path | None) -> None:
    if markdown is not None:
        write_atomic(markdown, text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            sys.stderr.write(f"warning: cannot append to $GITHUB_STEP_SUMMARY ({summary}): "
                             f"{exc.strerror}\n")


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
    if not 0.0 <= tolerance < 100.0:
        raise BadInput(f"--tolerance must be a percentage in [0, 100), got {tolerance}",
                       hint="e.g. --tolerance 1 (one percent)")
    from memprof.base.files import check_output

    # output paths first: a bad one costs nothing (folders are never created)
    if update:
        check_output(baseline, flag="--baseline")
    if markdown is not None:
        check_output(markdown, flag="--markdown")
    current = current_snapshots(scenarios or default_scenarios())
    from memprof.report import is_terminal, output_width, render

    def show(result: Any) -> None:
        sys.stdout.write(render(result, "table", width=output_width(), color=is_terminal()))
    if update:
        try:
            old: dict[str, dict[str, Any]] | None = read_baseline(baseline)
        except BadInput as exc:
            old = None
            if path_kind(baseline) != "missing":
                sys.stderr.write(f"note: {exc.message}; --update regenerates it\n")
        if old is not None:
            result = compare(old, current, tolerance, floor_bytes)
            show(result)
            _write_markdown(render(result, "markdown"), markdown)
        doc = baseline_doc(current, tool_version=__version__,
                           estimate_schema_version=SCHEMA_VERSION)
        write_atomic(baseline, dump_baseline(doc))
        sys.stdout.write(f"memprof gate: wrote {baseline} ({len(current)} scenarios)\n")
        return EXIT_OK
    result = compare(read_baseline(baseline), current, tolerance, floor_bytes)
    show(result)
    _write_markdown(render(result, "markdown"), markdown)
    return EXIT_REGRESSION if result.regressed else EXIT_OK


def options() -> tuple[Option, ...]:
    """gate's flags."""
    return (Option(dest="scenarios", names=("--scenarios",), metavar="DIR",
                   help="Folder of scenario *.toml files.",
                   shown_default="./configs/scenarios, else the bundled ones"),
            Option(dest="baseline", names=("--baseline",), metavar="FILE",
                   default=str(DEFAULT_BASELINE), help="The committed baseline JSON."),
            Option(dest="tolerance", names=("--tolerance",), kind="float", default=1.0,
                   help="Percent a figure may worsen before it is a regression."),
            Option(dest="update", names=("--update",), kind="bool",
                   help="Write the current estimates as the new baseline (atomically)."),
            Option(dest="markdown", names=("--markdown",), metavar="FILE",
                   help="Also write the table as Markdown to this file."),
            Option(dest="floor", names=("--floor",), kind="size", default="16MiB",
                   help="Bytes a figure must also grow by to be a regression, so small "
                   "components do not flap (e.g. 16MiB)."))


def run(args: Namespace) -> int:
    """Compare every scenario's estimate with the baseline; exit 1 on a regression.

    Regression: memory grown by more than --tolerance % and --floor, KV-cache tokens shrunk by
    more than --tolerance %, or an OOM.

    The table also goes to $GITHUB_STEP_SUMMARY when that is set.
    """
    from memprof.base.units import parse_size

    return run_gate(scenarios=None if args.scenarios is None else Path(args.scenarios),
                    baseline=Path(args.baseline), tolerance=args.tolerance, update=args.update,
                    markdown=None if args.markdown is None else Path(args.markdown),
                    floor_bytes=parse_size(args.floor, zero_ok=True))
