"""Byte-for-byte check of ``memprof estimate`` across a restructuring.

Every bundled model (``configs/models``) is run through ``memprof estimate`` under the settings of
every gate scenario (``configs/scenarios``, the scenario's own model replaced) plus the model's
defaults on each catalog GPU named by a scenario, in JSON and as a 100-column table. Each run's
exit code, stdout and stderr is recorded. ``--save FILE`` writes the record; ``--check FILE``
runs again and lists every run whose record differs (exit 1 on any difference).

Runs go through the command line in-process (``memprof.cli.run``), so a change of the flag
layer is checked as well as the estimator behind it.

Usage::

    python tools/compare_estimates.py --save /tmp/before.json   # on the tree before
    python tools/compare_estimates.py --check /tmp/before.json  # on the tree after
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def _flag(key: str, value: object) -> list[str]:
    name = "--" + key.replace("_", "-")
    if isinstance(value, bool):
        return [name] if value else []
    return [name, str(value)]


def cases() -> list[tuple[str, list[str]]]:
    """(name, argv after ``memprof estimate``) for every model × (scenario or default on a GPU)."""
    models = sorted(p.stem for p in (ROOT / "configs" / "models").glob("*.json"))
    scenarios = []
    gpus: list[str] = []
    for path in sorted((ROOT / "configs" / "scenarios").glob("*.toml")):
        data = tomllib.loads(path.read_text())
        flags: list[str] = []
        for key, value in data.items():
            if key in ("model", "description"):
                continue
            flags += _flag(key, value)
            if key == "gpu" and value not in gpus:
                gpus.append(str(value))
        scenarios.append((path.stem, flags))
    out = []
    for model in models:
        for name, flags in scenarios:
            out.append((f"{model} @ {name}", ["--model", model, *flags]))
        for gpu in gpus:
            out.append((f"{model} @ default {gpu}", ["--model", model, "--gpu", gpu]))
    return out


def run_case(argv: list[str]) -> dict[str, object]:
    from memprof.cli import run

    record: dict[str, object] = {}
    for fmt in ("json", "table"):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = run(["estimate", *argv, "--format", fmt])
            except SystemExit as exc:  # a CLI that exits instead of returning
                rc = exc.code if isinstance(exc.code, int) else 1
        record[fmt] = {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}
    return record


def collect() -> dict[str, object]:
    os.environ["COLUMNS"] = "100"
    sys.path.insert(0, str(ROOT))
    return {name: run_case(argv) for name, argv in cases()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", metavar="FILE", help="record every run to FILE")
    group.add_argument("--check", metavar="FILE", help="compare every run with FILE")
    args = ap.parse_args()
    now = collect()
    if args.save:
        Path(args.save).write_text(json.dumps(now, indent=1, sort_keys=True))
        print(f"recorded {len(now)} deployments × 2 formats to {args.save}")
        return 0
    before = json.loads(Path(args.check).read_text())
    diff = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    for name in diff:
        b, a = before.get(name), now.get(name)
        if b is None or a is None:
            print(f"{name}: {'new' if b is None else 'gone'}")
            continue
        for fmt in ("json", "table"):
            for part in ("rc", "stdout", "stderr"):
                if b[fmt][part] != a[fmt][part]:
                    print(f"{name}: {fmt} {part} differs")
    print(f"{len(now)} deployments × 2 formats: {len(diff)} differ")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
