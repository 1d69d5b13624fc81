"""A sweep's DataFrame (``memprof sweep``) as table, Markdown, CSV, Parquet or JSON lines.

Reporters of many deployments (``memprof sweep``; ``memprof plan`` lays its table out here
too): a pandas DataFrame of the core's records (``memprof.batch.sweep``, already JSON-able), shown
as a table readable at 80 columns or as GitHub Markdown (the same rows), written as CSV, Parquet
or JSON lines. pandas is imported here, when a sweep or a plan is asked for, never by
``estimate``."""

from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprof.base.errors import BadInput, EnvironmentProblem
from memprof.base.units import fmt_bytes

if TYPE_CHECKING:
    import pandas as pd

WRITERS = {".csv": "csv", ".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl",
           ".ndjson": "jsonl"}
# columns of the terminal table (all columns go to files), in order
SHOWN = ("gpus", "verdict", "kv_cache_tokens", "max_concurrency", "headroom_bytes")
HEADERS = {"gpus": "GPUs", "verdict": "verdict", "kv_cache_tokens": "KV tokens",
           "max_concurrency": "conc.", "headroom_bytes": "headroom",
           "total_kv_tokens": "KV tokens (all)", "max_num_seqs": "seqs", "layout": "layout",
           "kv_cache_dtype": "kv", "rank": "#", "gpu_memory_utilization": "util",
           "max_model_len": "max len", "max_num_batched_tokens": "batched tokens",
           "block_size": "block", "enable_expert_parallel": "EP",
           "num_speculative_tokens": "spec. tokens", "mem_fraction_static": "mem fraction"}


def header(col: str) -> str:
    """A column's header: a short name for a result or a setting (under any of its flag names:
    ``tensor_parallel_size`` is ``tp``), else the column's name."""
    from memprof.core.flags import field_for

    return HEADERS.get(col) or HEADERS.get(field_for(col) or "") or (field_for(col) or col)


def dataframe(records: list[dict[str, Any]]) -> pd.DataFrame:
    """The records as a DataFrame; a column whose values are all integers (or missing, as the
    results of an invalid point are) stays integral: pandas' nullable ``Int64``, not float."""
    import pandas as pd

    df = pd.DataFrame.from_records(records)
    for col in df.columns:
        values = [r.get(col) for r in records]
        present = [v for v in values if v is not None]
        if present and len(present) < len(values) and all(
                type(v) is int for v in present):
            df[col] = pd.array(values, dtype="Int64")
    return df


def write(df: pd.DataFrame, path: str) -> str:
    """Write ``df`` by the file's suffix, whole or not at all (``write_atomic``); returns the
    format written. The path was checked by :func:`output_kind` before the sweep ran."""
    from memprof.base.files import write_atomic

    kind = output_kind(path)
    if kind == "csv":
        write_atomic(path, df.to_csv(index=False))
    elif kind == "jsonl":
        write_atomic(path, df.to_json(orient="records", lines=True) or "")
    else:
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        write_atomic(path, buf.getvalue())
    return kind


def output_kind(path: str) -> str:
    """The format of ``-o path`` by its suffix, once the path can be written (its folder
    exists; ``check_output``) and, for Parquet, pyarrow is installed: checked before any work."""
    from memprof.base.files import check_output

    kind = WRITERS.get(Path(path).suffix.lower())
    if kind is None:
        raise BadInput(f"cannot tell the format of {path!r} from its suffix",
                       hint="--output FILE.csv, FILE.parquet or FILE.jsonl")
    check_output(path, flag="--output")
    if kind == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise EnvironmentProblem("writing Parquet needs pyarrow",
                                     hint="pip install 'memprof-llm[parquet]', or write "
                                     ".csv / .jsonl") from None
    return kind


def _cell(col: str, value: Any) -> str:
    """A value that is there (``render_table`` shows a missing one as "—")."""
    if col.endswith("_bytes"):
        return fmt_bytes(int(value), 1)
    if col == "max_concurrency":
        return f"{float(value):.1f}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1000:
        return f"{value:,}"
    return str(value)


LEFT = ("verdict", "layout", "kv_cache_dtype")
GAP = "  "  # between columns
MARKS = "¹²³⁴⁵⁶⁷⁸⁹"


def _words(text: str) -> list[str]:
    """A header's pieces: broken after ``_`` or ``-`` and at spaces."""
    return re.findall(r"[^ _-]*[_-]|[^ _-]+", text) or [text]


def _header_lines(text: str, room: int) -> list[str]:
    """``text`` in lines of at most ``room`` cells, broken after ``_`` or ``-`` or at spaces
    (a piece longer than ``room`` is cut)."""
    lines: list[str] = []
    for w in _words(text):
        while len(w) > room:
            lines.append(w[:room])
            w = w[room:]
        glue = "" if lines and lines[-1][-1:] in "_-" else " "
        if lines and len(lines[-1]) + len(glue) + len(w) <= room:
            lines[-1] += glue + w
        else:
            lines.append(w)
    return lines


def render_table(df: pd.DataFrame, columns: list[str], title: str = "",
                 width: int | None = 80) -> str:
    """``columns`` of ``df`` as plain text, one line per row, in ``width`` cells (``None``: the
    terminal's). A long header wraps over several lines (at ``_``) rather than widen its
    column; an invalid point's verdict carries a mark whose error is listed below the table.
    When the columns do not fit ``width`` even so, each row is printed as ``name=value`` pairs
    wrapped to ``width`` (and the output says so), so that no column shrinks to nothing.
    Plain string work, no rich: 10,000 rows take well under a second."""
    import shutil

    if width is None:
        width = shutil.get_terminal_size((80, 24)).columns
    heads = [header(c) for c in columns]
    cols = _cells(df, columns)
    errors: dict[str, str] = {}
    if "verdict" in columns and "error" in df.columns:
        vi = columns.index("verdict")
        for i, err in enumerate(df["error"].tolist()):
            if cols[vi][i] == "invalid" and isinstance(err, str) and err:
                mark = errors.setdefault(err, MARKS[len(errors)] if len(errors) < len(MARKS)
                                         else f"[{len(errors) + 1}]")
                cols[vi][i] = f"invalid{mark}"
    # a column is as wide as its widest value and its header; where that is too wide, headers
    # wrap (the widest first), down to their longest piece
    values = [max(map(len, cs), default=1) for cs in cols]
    widths = [max(v, len(h)) for v, h in zip(values, heads, strict=True)]
    least = [max(v, *map(len, _words(h))) for v, h in zip(values, heads, strict=True)]
    # two spaces between columns, one where two do not fit
    gap = GAP if sum(least) + len(GAP) * (len(least) - 1) <= width else " "
    room = width - len(gap) * (len(widths) - 1)
    for i in sorted(range(len(widths)), key=lambda i: least[i] - widths[i]):
        if sum(widths) <= room:
            break
        widths[i] = max(least[i], widths[i] - (sum(widths) - room))
    out = [title] if title else []
    if sum(widths) > room:
        out += _records(heads, cols, width)
    else:
        out += _grid(columns, heads, cols, widths, gap)
    if errors:
        out.append("invalid points (the engine refuses them, or memprof does not model them):")
        for err, mark in errors.items():
            out += textwrap.wrap(f"{mark} {err}", width, initial_indent="  ",
                                 subsequent_indent="    ")
    return "\n".join(out) + "\n"


def _cells(df: pd.DataFrame, columns: list[str]) -> list[list[str]]:
    """``columns`` of ``df`` as text, column by column; a missing value is "—"."""
    import pandas as pd

    na = pd.NA
    return [["—" if v is None or v is na or (isinstance(v, float) and v != v) else _cell(c, v)
             for v in df[c].tolist()] for c in columns]


def render_markdown(df: pd.DataFrame, columns: list[str], title: str = "") -> str:
    """``columns`` of ``df`` as a GitHub Markdown table (the terminal table's headers and
    cells; an invalid point's error in its own column when ``df`` has one)."""
    cols = _cells(df, columns)
    heads = [header(c) for c in columns]
    errors = df["error"].tolist() if "error" in df.columns and "verdict" in columns else None
    if errors is not None:
        heads.append("error")
        cols.append([e if isinstance(e, str) and e else "" for e in errors])
    out = [f"### {title}", ""] if title else []
    out.append("| " + " | ".join(heads) + " |")
    out.append("|" + "|".join("---" if c in LEFT or c == "error" else "---:"
                              for c in [*columns, *(["error"] if errors is not None else [])])
               + "|")
    out += ["| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in row) + " |"
            for row in zip(*cols, strict=True)]
    return "\n".join(out) + "\n"


def _grid(columns: list[str], heads: list[str], cols: list[list[str]], widths: list[int],
          gap: str) -> list[str]:
    left = [c in LEFT for c in columns]
    hl = [_header_lines(h, w) for h, w in zip(heads, widths, strict=True)]
    depth = max(map(len, hl))
    out = []
    for k in range(depth):  # headers aligned to their column's bottom
        cells = [(lines[k - depth + len(lines)] if k - depth + len(lines) >= 0 else "")
                 for lines in hl]
        out.append(_line(cells, widths, left, gap))
    out.append(gap.join("─" * w for w in widths))
    out += [_line(row, widths, left, gap) for row in zip(*cols, strict=True)]
    return out


def _line(cells: Any, widths: list[int], left: list[bool], gap: str) -> str:
    return gap.join(c.ljust(w) if lf else c.rjust(w)
                    for c, w, lf in zip(cells, widths, left, strict=True)).rstrip()


def _records(heads: list[str], cols: list[list[str]], width: int) -> list[str]:
    out = textwrap.wrap(f"({len(heads)} columns do not fit in {width}: one row per line as "
                        "name=value, wrapped)", width)
    for row in zip(*cols, strict=True):
        line = ""
        for h, c in zip(heads, row, strict=True):
            item = f"{h}={c}"
            if line and len(line) + 2 + len(item) > width:
                out.append(line)
                line = "    " + item
            else:
                line = f"{line}  {item}" if line else item
        out.append(line)
    return out
