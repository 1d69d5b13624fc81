"""Write ``configs/vllm_release_dates.json``: the date each vLLM release was published, as PyPI
records it.

A release's date is the upload time of its first file on PyPI (the smallest
``upload_time_iso_8601`` of the release's files in PyPI's JSON API,
https://pypi.org/pypi/vllm/json), to the second, in UTC. Releases from ``FIRST`` on are kept
(the releases memprof models and the ones between them it maps to a modelled one, such as
0.7.0), oldest first. ``memprof/probes/log_dates.py`` reads the table to place a start-up log
that names no release by the date its lines print.

Usage::

    curl -s https://pypi.org/pypi/vllm/json > vllm.json
    python tools/vllm_release_dates.py vllm.json > configs/vllm_release_dates.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

FIRST = (0, 6, 0)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.replace(".post", ".").split("."))


def table(pypi: dict[str, Any]) -> dict[str, Any]:
    """The file's content from PyPI's JSON document of the ``vllm`` project."""
    dates: list[tuple[str, str]] = []
    for version, files in pypi["releases"].items():
        if not files or _key(version) < FIRST:
            continue
        first = min(f["upload_time_iso_8601"] for f in files)
        dates.append((first[:19] + "Z", version))  # to the second, UTC
    dates.sort()
    return {
        "_about": "The date each vLLM release was published: the upload time (UTC) of its first "
                  "file on PyPI, oldest first. memprof/probes/log_dates.py places a start-up "
                  "log that names no release by the date its lines print. Written by "
                  "tools/vllm_release_dates.py.",
        "_source": "PyPI's upload time of each release's files: https://pypi.org/pypi/vllm/json "
                   "(releases -> files -> upload_time_iso_8601, the earliest of each release)",
        "releases": dict((v, t) for t, v in dates),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    doc = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    print(json.dumps(table(doc), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
