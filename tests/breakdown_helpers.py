"""Helper of the breakdown tests (vLLM's and SGLang's): one row of a log/memprof table."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping


def log_memprof_cells(log: Mapping[str, float], memprof: Mapping[str, float], off: set[str],
                      terms: Iterable[str], widths: tuple[int, int],
                      fmt: Callable[[str], str] = lambda _t: ".2f") -> str:
    """The cells ``log/memprof`` of ``terms`` (``-`` where either lacks one), each marked ``*``
    where the term is ``off``; ``widths``: of the log and the memprof figure."""
    lw, mw = widths
    cells = []
    for t in terms:
        if t in log and t in memprof:
            f = fmt(t)
            mark = "*" if t in off else " "
            cells.append(f"{log[t]:>{lw}{f}}/{memprof[t]:<{mw}{f}}{mark}")
        else:
            cells.append(f"{'-':>{lw + mw + 2}}")
    return "".join(cells)
