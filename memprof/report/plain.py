"""The estimate's table as plain text, laid out as rich would, for a pipe or a file.

``memprof estimate`` printed to a pipe or a file has no colour, and rich's import (~25 ms) and
layout (~12 ms) were a third of a cold start. This module lays out the same text the way rich
(15.x) does for the few things the estimate prints: a paragraph wrapped at word boundaries, a
``box.SIMPLE_HEAD`` table with no edge and collapsed padding, its left-justified title. It only
answers where that layout is certain: every function returns ``None`` when rich would do more
than this module knows (a word longer than the line, a character that is not one cell wide,
markup or emoji codes in a title, a table wider than the line), and the caller then lets rich
draw the whole report. ``tests/test_plain_layout.py`` holds the two to the same bytes
over every bundled model, the gate's scenarios and several widths.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# characters known to take one cell in a terminal (rich's cell table agrees): printable ASCII,
# Latin-1 but the soft hyphen, and the symbols memprof's reports draw (×, †, ‡, …, superscripts,
# arrows, box and block elements, the minus sign, Greek); anything else makes the caller fall
# back to rich
_ONE_CELL_RANGES = ((0xA0, 0xAC), (0xAE, 0xFF), (0x2B0, 0x2FF), (0x370, 0x3FF),
                    (0x1D00, 0x1DBF), (0x2010, 0x2027), (0x2030, 0x205E), (0x2070, 0x209F),
                    (0x2190, 0x22FF), (0x2500, 0x25FF))
_WORD = re.compile(r"\s*\S+\s*")  # rich._wrap.re_word: a word and the spaces after it
_EMOJI_CODE = re.compile(r":\S*?:")  # what rich's emoji replacement could take for a code

JUSTIFY = ("left", "right", "center")


def one_cell(text: str) -> bool:
    """Whether every character of ``text`` takes exactly one cell."""
    if text.isascii():
        return text.isprintable()
    return all((c.isascii() and c.isprintable())
               or any(lo <= ord(c) <= hi for lo, hi in _ONE_CELL_RANGES) for c in text)


def wrap(text: str, width: int) -> list[str] | None:
    """``text`` as rich prints a ``Text`` at ``width`` cells (justify and overflow defaults):
    each line split at word starts so that a word (without its trailing spaces) ends within
    the width, a line's trailing spaces kept up to the width; ``None`` when a word is longer
    than the width (rich folds it) or a character is not one cell wide."""
    if width < 1 or not one_cell(text.replace("\n", " ")):
        return None
    out: list[str] = []
    for para in text.split("\n"):
        breaks: list[int] = []
        used = 0
        for m in _WORD.finditer(para):
            word = m.group(0)
            length = len(word.rstrip())
            if width - used >= length:
                used += len(word)
            elif length > width:
                return None
            elif used and m.start():
                breaks.append(m.start())
                used = len(word)
        for a, b in zip([0, *breaks], [*breaks, len(para)], strict=True):
            out.append(para[a:b][:width] if len(para[a:b]) > width
                       else para[a:b])
    return out


def _align(cell: str, width: int, justify: str) -> str:
    excess = width - len(cell)
    if justify == "right":
        return " " * excess + cell
    if justify == "center":
        return " " * (excess // 2) + cell + " " * (excess - excess // 2)
    return cell + " " * excess


def table(title: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[str]],
          width: int) -> list[str] | None:
    """The lines rich draws for ``Table(title=title, title_justify="left",
    box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)`` with
    ``columns`` (header, justify; every column ``no_wrap``) and ``rows`` at ``width`` cells:
    the title wrapped and padded to the table's width, the header, a rule, the rows; ``None``
    when the table does not fit the width as it is, or a cell or the title is not plain
    one-cell text (rich would then shrink, fold or parse it)."""
    if not rows or any(j not in JUSTIFY for _, j in columns):
        return None
    cells = [[h for h, _ in columns], *[list(r) for r in rows]]
    if any(len(r) != len(columns) or not all(one_cell(c) and "\n" not in c for c in r)
           for r in cells):
        return None
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    if 0 in widths:  # rich keeps an empty column one cell wide
        return None
    total = sum(widths) + 2 * (len(widths) - 1)  # a column's right pad and the divider
    # a title is parsed as console markup and emoji codes, and wraps at the table's width
    if total > width or "[" in title or _EMOJI_CODE.search(title):
        return None
    heading = wrap(title, total) if title else []
    if heading is None:
        return None
    out = [line + " " * (total - len(line)) for line in heading]
    for r in cells[:1]:
        out.append("  ".join(_align(c, w, j) for c, w, (_, j) in zip(r, widths, columns,
                                                                      strict=True)))
    out.append("─" * total)
    for r in cells[1:]:
        out.append("  ".join(_align(c, w, j) for c, w, (_, j) in zip(r, widths, columns,
                                                                      strict=True)))
    return out
