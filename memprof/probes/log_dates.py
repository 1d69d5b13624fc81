"""The date a start-up log was printed, and the releases published by then: a log that names no
release (or names a development build) is placed by its date.

vLLM stamps every line with the month and day alone: its logger's ``_DATE_FORMAT`` is
``"%m-%d %H:%M:%S"`` (``vllm/logger.py``, read in the 0.6.0 and 0.33.0 wheels: ``INFO 08-16
09:49:18 [...]``; 0.33.0 opens the line with ``(EngineCore pid=1)``), the host's local time. A
year comes only from another stamp pasted with the log: a timestamp with its year (``2025-08-16
09:49:18``: Python's default ``asctime``, Ray's and SGLang's lines, ``docker logs -t``'s
``2025-08-16T09:49:18.123Z``) or the C ``asctime`` form of ``date`` and nvidia-smi's header
(``Sat Aug 16 09:49:18 2025``). ``read_date`` reads the first such stamp; a stamp that is no
calendar date (month 13, February 30, hour 25) is a damaged or edited log, an error.

SGLang stamps every line with its full date: ``configure_logger`` sets the format
``"[%(asctime)s{prefix}] %(message)s"`` with ``datefmt="%Y-%m-%d %H:%M:%S"`` (``sglang/srt/
utils.py`` in the 0.4.3 wheel, ``sglang/srt/utils/common.py`` in the 0.5.23 wheel, which adds
``.%(msecs)03d`` under ``SGLANG_LOG_MS``): ``[2025-04-29 10:11:12] ...``, ``[2025-04-29
10:11:12 TP0] ...``, the host's local time. ``read_date`` reads it as any stamp with a year.

``configs/<engine>_release_dates.json`` holds, per release, PyPI's upload time of its first
file (``tools/vllm_release_dates.py``); an engine without it takes the dates
``memprof.core.releases.PUBLISHED`` holds (SGLang's releases; its source snapshots are no
releases and are left out); an engine with neither is never placed by date. The log's
stamp is the host's local time and PyPI's is UTC, so a release counts as out when the log printed
only if it was uploaded at least 14 hours before the stamp (``ZONE_SLACK``: UTC+14 is the
earliest time zone); a log printed on a release's own day is not placed at it.

- A log with a year is placed at the newest release out by its stamp (``published_by``); among
  the releases its ``[file.py:LINE]`` tags fit (``memprof.probes.release_lines``), at the newest
  of those out by then, or at the first of them where none is (a build on the way to it, whose
  lines are already its) (``among``): the tags come first.
- A month-day with no year fixes the date where it falls once in the span the log's other
  evidence allows, read as the span in which that evidence was current: for the releases the
  tags fit, from the publication of the release before the first of them to that of the release
  after the last (``among``); for a development build ``X.devN`` (setuptools-scm names a build
  after vW ``X.devN``, X the release after W), from W's publication to that of the release after
  X (``dev_build``). Outside that assumption (a release run long after newer ones were out) the
  date would mislead, so the note states it.
- With a month-day alone and nothing to fix its year, the date does not place the log: the
  release is unknown, and explain says which it assumed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache

from memprof.base.errors import BadInput
from memprof.core.releases import DISPLAY_NAMES, PUBLISHED
from memprof.core.versions import version_key

_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)"
_TIME = r"([0-9]{2}):([0-9]{2}):([0-9]{2})"
# vLLM's logger: "%(levelname)s %(asctime)s ..." with "%m-%d %H:%M:%S"
_VLLM = re.compile(r"(?<![\w-])" + _LEVEL + r"\s+([0-9]{2})-([0-9]{2}) " + _TIME + r"(?![\d-])")
# a timestamp with its year: "2025-08-16 09:49:18", "2025-08-16T09:49:18.123Z",
# "[2025-10-07 23:17:19 TP0]"
_ISO = re.compile(r"(?<![\w.-])([0-9]{4})-([0-9]{2})-([0-9]{2})[ T]" + _TIME + r"(?![\d:])")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# C asctime (date(1), nvidia-smi's header): "Sat Aug 16 09:49:18 2025", "... 09:49:18 UTC 2025"
_CTIME = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (" + "|".join(_MONTHS) + r") +"
                    r"([0-9]{1,2}) " + _TIME + r"(?: [A-Z]{2,5})? ([0-9]{4})\b")

_DEMO_LEAP = 2000  # a leap year: a month-day with no year is checked against it (02-29 is one)


@dataclass(frozen=True, slots=True)
class LogDate:
    """The date of a log's first stamp: month and day, and the year where the log shows one
    (its own stamp's, or that of another stamp near it); ``text`` and ``line`` say where it
    was read."""

    month: int
    day: int
    year: int | None
    text: str
    line: int
    clock: tuple[int, int, int] = (0, 0, 0)  # the stamp's hour, minute and second

    @property
    def day_text(self) -> str:
        md = f"{self.month:02d}-{self.day:02d}"
        return md if self.year is None else f"{self.year:04d}-{md}"

    def on(self, year: int) -> date | None:
        """This month-day in ``year``, or None where it is no date there (02-29)."""
        try:
            return date(year, self.month, self.day)
        except ValueError:
            return None

    def at(self, day: date) -> datetime:
        """The stamp's time of day on ``day`` (the host's local time)."""
        return datetime(day.year, day.month, day.day, *self.clock)


def _check(n: int, text: str, year: int | None, month: int, day: int, hh: int, mm: int,
           ss: int) -> None:
    why = ""
    if year is not None and year < 1970:
        why = f"the year {year} is before any clock a log runs on"
    elif not 1 <= month <= 12:
        why = f"there is no month {month}"
    elif hh > 23 or mm > 59 or ss > 60:
        why = "the time of day is no time"
    else:
        try:
            date(year if year is not None else _DEMO_LEAP, month, day)
        except ValueError:
            why = (f"{_MONTHS[month - 1]} has no day {day}"
                   + (f" in {year}" if year is not None else ""))
    if why:
        raise BadInput(f"the log line {n}: the stamp {text!r} is no date ({why})",
                       hint="the log is damaged or edited; pass the log as the engine wrote it")


def _full_stamp(line: str) -> tuple[str, int, int, int, int, int, int] | None:
    """The first stamp with a year on ``line``: its text, year, month, day, hour, minute and
    second; None where there is none."""
    if iso := _ISO.search(line):
        year, month, day, hh, mm, ss = (int(g) for g in iso.groups())
        return iso.group(0), year, month, day, hh, mm, ss
    if ct := _CTIME.search(line):
        day, hh, mm, ss, year = (int(g) for g in ct.groups()[1:])
        return ct.group(0), year, _MONTHS.index(ct.group(1)) + 1, day, hh, mm, ss
    return None


def read_date(lines: list[str]) -> LogDate | None:
    """The log's date: its first vLLM stamp (month-day), its year from the first stamp with a
    year (the year that puts the month-day nearest that stamp: a log that runs over New Year
    or a stamp taken days later); the first stamp with a year where no line has vLLM's stamp;
    ``None`` where no line has either. A stamp that is no calendar date is an error."""
    first: LogDate | None = None
    full: LogDate | None = None
    for n, line in enumerate(lines, 1):
        if first is None and (m := _VLLM.search(line)):
            month, day, hh, mm, ss = (int(g) for g in m.groups())
            _check(n, m.group(0), None, month, day, hh, mm, ss)
            first = LogDate(month, day, None, m.group(0).strip(), n, (hh, mm, ss))
        if full is None and (got := _full_stamp(line)) is not None:
            text, year, month, day, hh, mm, ss = got
            _check(n, text, year, month, day, hh, mm, ss)
            full = LogDate(month, day, year, text.strip(), n, (hh, mm, ss))
        if first is not None and full is not None:
            break
    if first is None:
        return full
    if full is None or full.year is None:
        return first
    ref = date(full.year, full.month, full.day)
    days = [(abs((d - ref).days), d) for y in (full.year - 1, full.year, full.year + 1)
            if (d := first.on(y)) is not None]
    return LogDate(first.month, first.day, min(days)[1].year, first.text, first.line,
                   first.clock)


# The host's clock is local time, UTC-12 to UTC+14: a stamp is certainly after an upload (UTC)
# made this much before it, whatever the host's time zone
ZONE_SLACK = timedelta(hours=14)


@lru_cache(maxsize=4)
def release_dates(engine: str) -> dict[str, datetime] | None:
    """Each release's publication (PyPI's upload time of its first file, UTC, naive) from
    ``configs/<engine>_release_dates.json``, or else ``memprof.core.releases.PUBLISHED``,
    oldest first; ``None`` where the engine has neither."""
    from memprof.core.models.load import configs_dir

    path = configs_dir() / f"{engine}_release_dates.json"
    if path.is_file():
        rows = json.loads(path.read_text(encoding="utf-8"))["releases"].items()
    elif engine in PUBLISHED:
        rows = PUBLISHED[engine]
    else:
        return None
    return {r: datetime.fromisoformat(t.rstrip("Z")) for r, t in rows}


def _out(published: datetime, stamp: datetime) -> bool:
    """The release was out when the log printed ``stamp`` (local time), in any time zone."""
    return published + ZONE_SLACK <= stamp


def _once(when: LogDate, lo: date, hi: date) -> date | None:
    """The one day with ``when``'s month-day in [lo, hi), or None (none, or more than one)."""
    days = [d for y in range(lo.year, hi.year + 1)
            if (d := when.on(y)) is not None and lo <= d < hi]
    return days[0] if len(days) == 1 else None


@dataclass(frozen=True, slots=True)
class Placed:
    """A release placed by date, and the note that says how."""

    release: str
    note: str


def _day(t: datetime) -> str:
    return t.date().isoformat()


def published_by(engine: str, when: LogDate) -> Placed | None:
    """A log with a year: the newest release published before its stamp in any time zone (a
    release of the table: ``memprof.core.release_names`` maps it to a modelled one). None where
    the engine has no table, the date has no year, or it precedes every release of the
    table."""
    table = release_dates(engine)
    if table is None or when.year is None:
        return None
    day = when.on(when.year)
    assert day is not None  # read_date checked it
    stamp = when.at(day)
    out = [r for r, t in table.items() if _out(t, stamp)]
    if not out:
        return None
    last = list(table)[-1]
    tail = (f"; that is over a month after {last}'s, the newest release memprof knows the date "
            "of, so a newer one may have run" if out[-1] == last
            and stamp - table[last] > timedelta(days=31) else "")
    shown = DISPLAY_NAMES.get(engine, engine)
    return Placed(out[-1], f"{out[-1]} is the newest {shown} release published before "
                  f"{day.isoformat()}, the log's date (line {when.line}: {when.text!r}; PyPI's "
                  f"upload of {out[-1]}: {_day(table[out[-1]])}){tail}")


def _neighbours(table: dict[str, datetime], first: str, last: str) -> tuple[str, str] | None:
    """The release before ``first`` and the one after ``last`` in the table's order; None
    where either is not there."""
    names = list(table)
    i, j = names.index(first), names.index(last)
    if i == 0 or j + 1 >= len(names):
        return None
    return names[i - 1], names[j + 1]


def among(engine: str, found: list[str], when: LogDate) -> Placed | None:
    """Of ``found`` (the releases the log's tags fit, oldest first), the one its date places:
    the newest of them published before the log's stamp, or the first where the stamp precedes
    them all. A month-day with no year is taken in the one year that puts it between the
    publication of the release before the first of ``found`` and that of the release after the
    last. None where the engine has no table, the year cannot be fixed, or a date with its year
    lies outside that span (past the release after them all, or before the code their lines
    are could exist: the date then does not choose)."""
    table = release_dates(engine)
    if table is None or not found or any(r not in table for r in found):
        return None
    pair = _neighbours(table, found[0], found[-1])
    if when.year is not None:
        day = when.on(when.year)
        how = f"its date, {when.day_text} (line {when.line}: {when.text!r})"
        if day is None or (pair is not None and not
                           table[pair[0]].date() <= day < table[pair[1]].date()):
            return None  # outside the span they were current in: the tags decide
    else:
        if pair is None:
            return None
        before, after = pair
        day = _once(when, table[before].date(), table[after].date())
        if day is None:
            return None
        how = (f"its date {when.day_text} (line {when.line}, no year) falls once between "
               f"{before}'s publication ({_day(table[before])}) and {after}'s "
               f"({_day(table[after])}), the span in which those releases were current: "
               f"{day.isoformat()}, assuming it ran then")
    stamp = when.at(day)
    out = [r for r in found if _out(table[r], stamp)]
    if out:
        pick = out[-1]
        why = (f"{pick} is the newest of them published before it in any time zone "
               f"({_day(table[pick])}, PyPI's upload)")
    else:
        pick = found[0]
        why = (f"it is not after their publication (the first, {pick}, on {_day(table[pick])}, "
               f"PyPI's upload): a build on the way to {pick} whose lines are already its")
    return Placed(pick, f"{how}; {why}")


_DEV = re.compile(r"^v?([0-9]+(?:\.[0-9]+){1,3})\.?dev[0-9]*(?:\+.*)?$", re.I)


def dev_build(engine: str, name: str, when: LogDate) -> Placed | None:
    """A development build ``X.devN`` (setuptools-scm's name for a commit after the release
    before X) whose log is stamped after X's publication in any time zone: X, the newest
    release out when it was built (the main branch had X's changes by then). The year of a
    month-day is the one that puts it between the publication of the release before X and that
    of the release after X. None where the name is no dev build, X is not out by the stamp, or
    the year cannot be fixed."""
    m = _DEV.match(name.strip())
    table = release_dates(engine)
    if m is None or table is None:
        return None
    target = m.group(1)
    try:
        key = version_key(target)
    except ValueError:
        return None
    older = [r for r in table if version_key(r) < key]
    newer = [r for r in table if version_key(r) > key]
    if target not in table or not older or not newer:
        return None
    lo, hi = table[older[-1]], table[newer[0]]
    if when.year is not None:
        day = when.on(when.year)
        how = f"its date {when.day_text} (line {when.line})"
    else:
        day = _once(when, lo.date(), hi.date())
        how = (f"its date {when.day_text} (line {when.line}, no year) falls once between "
               f"{older[-1]}'s publication ({_day(lo)}), the release the build follows, and "
               f"{newer[0]}'s ({_day(hi)}): {day.isoformat() if day else ''}")
    if day is None or not _out(table[target], when.at(day)):
        return None
    return Placed(target, f"{how}, after {target}'s publication ({_day(table[target])}, PyPI's "
                  f"upload) in any time zone: a build of the main branch after {target} was "
                  f"released, modelled at {target}, the newest release out by then")
