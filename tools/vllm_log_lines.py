"""Write ``configs/vllm_log_lines.json``: for each vLLM release, the source lines of the logger
calls whose messages a start-up log shows with a ``[file.py:LINE]`` tag.

vLLM's log format prints the file name and line of the logging call (``%(filename)s:%(lineno)d``;
Python gives the first line of a call that spans several). Those lines move from release to
release, so the tags of a log that names no release say which releases could have printed it
(``memprof/probes/release_lines.py``). The table is read from each release's wheel
(``pip download vllm==X --no-deps --only-binary :all:``, unpacked): for each message below, every
``logger.*(...)`` call whose text holds it, or that logs a variable built from it just above (V0's
budget lines), as the span of lines the call covers, by file name.

It also writes, under ``formats``, the releases that print each message format of
``memprof.probes.release_lines.FORMATS`` (a format only some releases print places a log whose
lines carry no tag): a release prints it where one of its logging calls for the format's
message holds every literal of the format (within the call, or the message built up to
``AHEAD`` lines above it).

Usage::

    python tools/vllm_log_lines.py SRC_DIR > configs/vllm_log_lines.json
    python tools/vllm_log_lines.py --formats SRC_DIR configs/vllm_log_lines.json > NEW.json

where ``SRC_DIR/<release>/vllm/...`` holds each release's unpacked Python files. The second form
rewrites only the table's ``formats`` from the releases in ``SRC_DIR``: a release not there
prints none of a format's lines where the table shows no logging call of its message, and where
it shows one the tool stops and names the wheel to read.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

# message fragments a start-up log shows after its tag (memprof.probes.release_lines.MESSAGES)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from memprof.probes.release_lines import FORMATS, MESSAGES

_CALL = re.compile(r"\blogger\.\w+\(")
BACK = 8  # lines above a fragment searched for the call that holds it
AHEAD = 25  # lines below a fragment searched for the call that logs the message built from it


def _span(lines: list[str], start: int) -> tuple[int, int]:
    """The 1-based first and last line of the call that opens on ``lines[start]``."""
    depth = 0
    opened = False
    for i in range(start, min(len(lines), start + 60)):
        text = lines[i]
        if i == start:
            text = text[_CALL.search(text).start():]  # type: ignore[union-attr]
        for ch in text:
            if ch == "(":
                depth += 1
                opened = True
            elif ch == ")":
                depth -= 1
                if opened and depth == 0:
                    return start + 1, i + 1
    return start + 1, start + 1


def spans(source: str, fragment: str) -> list[tuple[int, int]]:
    lines = source.splitlines()
    out: set[tuple[int, int]] = set()
    for i, line in enumerate(lines):
        if fragment not in line:
            continue
        found = None
        for j in range(i, max(-1, i - BACK), -1):
            if _CALL.search(lines[j]):
                s = _span(lines, j)
                if s[0] <= i + 1 <= s[1]:
                    found = s
                break
        if found is None:
            for j in range(i + 1, min(len(lines), i + AHEAD)):
                if _CALL.search(lines[j]):
                    found = _span(lines, j)
                    break
        if found is not None:
            out.add(found)
    return sorted(out)


def release_table(root: Path) -> dict[str, dict[str, list[list[int]]]]:
    table: dict[str, dict[str, list[list[int]]]] = {}
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8", errors="replace")
        for fragment in MESSAGES:
            for a, b in spans(source, fragment):
                table.setdefault(fragment, {}).setdefault(path.name, []).append([a, b])
    return table


def prints(source: str, call: tuple[int, int], literals: tuple[str, ...]) -> bool:
    """Whether the logging call spanning lines ``call`` (1-based) holds every literal, in the
    call or the message built up to ``AHEAD`` lines above it."""
    lines = source.splitlines()
    text = "\n".join(lines[max(0, call[0] - 1 - AHEAD):call[1]])
    return all(lit in text for lit in literals)


def release_formats(root: Path) -> list[str]:
    """The ``FORMATS`` the release unpacked at ``root`` prints."""
    out = []
    for name, fmt in FORMATS.items():
        for path in sorted(root.rglob("*.py")):
            source = path.read_text(encoding="utf-8", errors="replace")
            if any(prints(source, call, fmt.source) for call in spans(source, fmt.message)):
                out.append(name)
                break
    return out


def formats_table(root: Path, releases: list[str],
                  lines: dict[str, dict[str, dict[str, list[list[int]]]]]) -> dict[str, list[str]]:
    """Format name -> the releases (of ``releases``, in order) that print it: read from the
    release's files under ``root`` where they are there, else none where ``lines`` (the
    release's table of logging calls) shows no call of the format's message."""
    read = {r: release_formats(root / r) for r in releases if (root / r / "vllm").is_dir()}
    out: dict[str, list[str]] = {}
    for name, fmt in FORMATS.items():
        out[name] = []
        for r in releases:
            if r in read:
                if name in read[r]:
                    out[name].append(r)
            elif lines.get(r, {}).get(fmt.message):
                sys.exit(f"release {r} logs {fmt.message!r}: unpack its wheel into the source "
                         "directory to tell whether it prints the format")
    return out


ABOUT = ("The source lines of vLLM's logger calls for the messages a start-up log shows with a "
         "[file.py:LINE] tag, per release: message -> file name -> [first, last] line of each "
         "call (a call logs at its first line); and under 'formats', the releases that print "
         "each message format of memprof/probes/release_lines.py FORMATS. memprof/probes/"
         "release_lines.py places a vLLM log that names no release among the releases whose "
         "lines hold every tag the log shows and that print every such format it shows. "
         "Written by tools/vllm_log_lines.py.")


def main(src: str) -> None:
    from memprof.core.releases import VLLM_RELEASES
    from memprof.core.versions import version_key

    root = Path(src)
    releases = sorted((p.name for p in root.iterdir() if (p / "vllm").is_dir()),
                      key=version_key)
    missing = [r for r in VLLM_RELEASES if r not in releases]
    doc = {
        "_about": ABOUT,
        "_source": "each release's wheel on PyPI (https://pypi.org/project/vllm/#history), "
                   "its Python files read as shipped",
        "_missing": missing,
        "releases": {r: release_table(root / r) for r in releases},
    }
    doc["formats"] = formats_table(root, releases, doc["releases"])
    json.dump(doc, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


def main_formats(src: str, table: str) -> None:
    """The table at ``table`` with its ``formats`` read again (from the releases in ``src``,
    and the table's own logging calls for the others)."""
    doc = json.loads(Path(table).read_text(encoding="utf-8"))
    doc["_about"] = ABOUT
    doc["formats"] = formats_table(Path(src), list(doc["releases"]), doc["releases"])
    json.dump(doc, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if sys.argv[1] == "--formats":
        main_formats(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1])
