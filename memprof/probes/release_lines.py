"""A log that names no release, placed by the ``[file.py:LINE]`` tags of its lines.

vLLM prints the file and line of each logging call (``INFO 02-06 03:33:32
[gpu_model_runner.py:4130] Model loading took ...``; V0 of 0.7 without the opening bracket).
The calls move from release to release, so the tags of a few well-known messages narrow the
releases that could have printed a log. ``configs/<engine>_log_lines.json`` holds, per release,
the lines of the logger calls for each message of ``MESSAGES`` (read from each release's wheel
by ``tools/vllm_log_lines.py``); a release is consistent with a log when each tagged message of
the log sits at a line its call covers in that release. A log consistent with no release whose
tags all lie between the calls of two consecutive releases is a build between them
(``between``). An engine without such a table is never placed this way.

The tag's own form tells releases apart too: vLLM's ``_FORMAT`` (``vllm/logger.py``) writes
``%(filename)s:%(lineno)d]`` without the opening bracket up to 0.7.3 and ``[%(filename)s:...]``
from 0.8.0 (``TAG_BRACKETS``), so a bare tag is never placed at a release that brackets its
tags, nor a bracketed one at a release that does not; a build between two releases takes the
form of one of them (a 0.7.4 development build brackets its tags, as 0.8.0 does).

A line without a tag (a pasted excerpt, a log written through another handler) can still place
a log where its message's format is one only some releases print: ``FORMATS`` names such
formats by the literals of the logging call's format string, and the table's ``formats`` key
lists the releases whose call holds them (read from the same wheels); ``printing`` gives the
releases that print every format a log shows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from memprof.core.versions import Rule, value_at

# messages of the start-up path, as their logging calls write them (a fragment that no format
# argument splits)
MESSAGES = (
    "Available KV cache memory",
    "GPU KV cache size",
    "Maximum concurrency for",
    "Model loading took",
    "Loading model weights took",
    "Graph capturing finished",
    "EngineCore failed to start",
    "non-default args",
    "Using max model len",
    "Chunked prefill is enabled",
    "Memory profiling takes",
    "Memory profiling results",  # 0.6.4 / 0.6.4.post1's one-line budget report
    "the current vLLM instance can use",
    "# CPU blocks",  # V0's "# cuda blocks: N, # CPU blocks: M" (the source: "# %s blocks")
    "# GPU blocks",
    "Starting to load model",
)


# V1's start-up failure as a quote often keeps it: only the exception's last line, e.g.
# "ERROR 06-03 14:24:40 [core.py:1165] ValueError: To serve at least one request with the
# model's max seq len (30000), ..." (published rows 150, 307-309). run_engine_core (vllm/v1/
# engine/core.py) logs an exception raised while EngineCore is built with
# logger.exception("EngineCore failed to start."), and vLLM's NewLineFormatter
# (vllm/logging_utils/formatter.py) prefixes every line of the record, the traceback's too,
# with that call's header: the traceback's tag is the call's line. The KV-cache checks that
# raise these (check_enough_kv_cache_memory, vllm/v1/core/kv_cache_utils.py) run only while
# EngineCore is built (_initialize_kv_caches). Releases before 0.8.5 log the failure under
# another message the table does not hold, so such a tag places a log only where it agrees with
# its other tags (``consistent``); it never brackets a build (``between``).
STARTUP_TRACEBACK = "EngineCore failed to start (its traceback)"
_STARTUP_ERRORS = re.compile(r"To serve at least one request with the models?'?s? max seq len|"
                             r"No available memory for the cache blocks")


@dataclass(frozen=True, slots=True)
class Format:
    """A message's format that only some releases print: the ``MESSAGES`` fragment its logging
    call logs, the literals of the call's format string that tell it from the message's other
    formats (all within the call, or the message built just above it), and how a printed line
    of it reads."""

    message: str
    source: tuple[str, ...]
    line: re.Pattern[str]


FORMATS: dict[str, Format] = {
    # V0's budget report as one line with the usage before the profile run: 0.6.4's and
    # 0.6.4.post1's vllm/worker/worker.py Worker.determine_num_available_blocks; 0.6.3.post1
    # logs no budget, 0.6.5 the multi-line "Memory profiling takes ... the current vLLM instance
    # can use ..." report, and builds between 0.6.4.post1 and 0.6.5 a comma-separated line that
    # opens with "duration=" (published rows 8, 125), which no release prints
    "one-line memory profiling results with initial_memory_usage": Format(
        "Memory profiling results",
        ("Memory profiling results: total_gpu_memory=%.2fGiB", " initial_memory_usage=%.2fGiB"),
        re.compile(r"Memory profiling results: total_gpu_memory=[0-9.]+GiB "
                   r"initial_memory_usage=")),
}

# Whether the release's log format brackets the tag: ``[file.py:LINE]`` (True) or
# ``file.py:LINE]`` (False)
TAG_BRACKETS: tuple[Rule, ...] = (
    Rule(name="log_tag_brackets", changes="start-up log: the [file.py:LINE] tag's form",
         since=None, until="0.8.0", value=False, introduced_by="before 0.6.0",
         removed_by="'[%(filename)s:%(lineno)d]' (first read in the 0.8.0 wheel)",
         source="0.6.3.post1 / 0.6.4.post1 / 0.7.1 / 0.7.2 / 0.7.3 vllm/logger.py _FORMAT: "
         "'%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s'", applies_to="all"),
    Rule(name="log_tag_brackets", changes="start-up log: the [file.py:LINE] tag's form",
         since="0.8.0", until=None, value=True,
         introduced_by="'[%(filename)s:%(lineno)d]' (first read in the 0.8.0 wheel)",
         source="0.8.0 / 0.8.4 vllm/logger.py _FORMAT '... [%(filename)s:%(lineno)d] "
         "%(message)s'; 0.13.0 / 0.17.1 / 0.27.1 '[%(fileinfo)s:%(lineno)d]'",
         applies_to="all"),
)

# a tag and the message after it; group 1 is the opening bracket where the format has one
_TAG = re.compile(r"(?:^|(\[)|\s)([A-Za-z_][\w]*\.py):([0-9]{1,6})\]\s*(.*)")

Tag = tuple[str, int, str, bool]  # file name, line, message fragment, bracketed


def tags(lines: list[str]) -> tuple[Tag, ...]:
    """The (file, line, message, bracketed) of each log line that carries a tag and a message
    of ``MESSAGES``, once each."""
    out: list[Tag] = []
    for line in lines:
        m = _TAG.search(line)
        if not m:
            continue
        message = m.group(4)
        frag = next((f for f in MESSAGES if message.startswith(f) or f in message[:80]), None)
        if frag is None and _STARTUP_ERRORS.search(message[:200]):
            frag = STARTUP_TRACEBACK
        if frag is not None:
            tag = (m.group(2), int(m.group(3)), frag, m.group(1) is not None)
            if tag not in out:
                out.append(tag)
    return tuple(out)


def _form_fits(release: str, tag: Tag) -> bool:
    """The tag has the form the release's log format writes (``TAG_BRACKETS``)."""
    return value_at(TAG_BRACKETS, release, True) == tag[3]


def formats(lines: list[str]) -> tuple[str, ...]:
    """The names of the ``FORMATS`` the log's lines print (tagged or not), in ``FORMATS``'
    order."""
    return tuple(name for name, f in FORMATS.items() if any(f.line.search(ln) for ln in lines))


@lru_cache(maxsize=4)
def _table(engine: str) -> dict[str, Any] | None:
    from memprof.core.models.load import configs_dir

    path = configs_dir() / f"{engine}_log_lines.json"
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _holds(release: dict[str, dict[str, list[list[int]]]], tag: Tag) -> bool:
    file, line, frag = tag[:3]
    if frag == STARTUP_TRACEBACK:
        frag = "EngineCore failed to start"
    return any(a <= line <= b for a, b in release.get(frag, {}).get(file, []))


def consistent(engine: str, found: tuple[Tag, ...]) -> list[str] | None:
    """The releases whose logging calls sit where every tag of ``found`` says, in the form the
    release's log format writes (``TAG_BRACKETS``), oldest first (the table's order); ``None``
    where the engine has no table or the log no tag. A ``STARTUP_TRACEBACK`` tag that no release
    holds together with the others is left out (the release may log the failure under another
    message); alone, it is as no tag."""
    table = _table(engine)
    if table is None or not found:
        return None
    out = [r for r, calls in table["releases"].items()
           if all(_holds(calls, t) and _form_fits(r, t) for t in found)]
    others = tuple(t for t in found if t[2] != STARTUP_TRACEBACK)
    if not out and others != found:  # a release that logs the failure under another message
        return consistent(engine, others) if others else None
    return out


def printing(engine: str, shown: tuple[str, ...]) -> list[str] | None:
    """The releases that print every format of ``shown`` (names of ``FORMATS``), oldest first;
    ``None`` where the engine has no table of formats or the log shows none."""
    table = _table(engine)
    if table is None or "formats" not in table or not shown:
        return None
    return [r for r in table["releases"] if all(r in table["formats"].get(f, []) for f in shown)]


def _firsts(release: dict[str, dict[str, list[list[int]]]], tag: Tag) -> list[int]:
    file, frag = tag[0], tag[2]
    return [a for a, _b in release.get(frag, {}).get(file, [])]


def between(engine: str, found: tuple[Tag, ...]) -> tuple[str, str] | None:
    """The two consecutive releases (older, newer) between whose logging calls every tag of
    ``found`` sits, where no release's calls hold them all (a build between two releases: its
    files have changed since the older, not yet into the newer, and its tags have the form of
    one of them: ``TAG_BRACKETS``); ``None`` where the engine has no table, the log no tag, or
    no single pair of releases brackets every tag."""
    found = tuple(t for t in found if t[2] != STARTUP_TRACEBACK)
    table = _table(engine)
    if table is None or not found:
        return None
    from itertools import pairwise

    pairs = []
    for old, new in pairwise(table["releases"]):
        if all(_brackets(table["releases"][old], table["releases"][new], tag)
               and (_form_fits(old, tag) or _form_fits(new, tag)) for tag in found):
            pairs.append((old, new))
    return pairs[0] if len(pairs) == 1 else None


def _brackets(old: dict[str, dict[str, list[list[int]]]],
              new: dict[str, dict[str, list[list[int]]]], tag: Tag) -> bool:
    """Both releases log the tag's message from its file, and its line lies between theirs."""
    a, b = _firsts(old, tag), _firsts(new, tag)
    return bool(a and b) and min(a + b) <= tag[1] <= max(a + b)
