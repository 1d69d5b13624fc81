"""Tables of many deployments (``memprof sweep``, ``memprof plan``): a pandas DataFrame from the
core's records, shown as a table readable at 80 columns, written as CSV, Parquet or JSON lines.
pandas is imported here, when a sweep or a plan is asked for, never by ``estimate``."""

from __future__ import annotations

import io
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
           "kv_cache_dtype": "kv", "rank": "#"}


def dataframe(records: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame.from_records(records)


def write(df: pd.DataFrame, path: str) -> str:
    """Write ``df`` by the file's suffix; returns the format written."""
    kind = WRITERS.get(Path(path).suffix.lower())
    if kind is None:
        raise BadInput(f"cannot tell the format of {path!r} from its suffix",
                       hint="--output FILE.csv, FILE.parquet or FILE.jsonl")
    try:
        if kind == "csv":
            df.to_csv(path, index=False)
        elif kind == "jsonl":
            df.to_json(path, orient="records", lines=True)
        else:
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise EnvironmentProblem("writing Parquet needs pyarrow",
                                         hint="pip install 'memprof-llm[parquet]', or write "
                                         ".csv / .jsonl") from None
            df.to_parquet(path, index=False)
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror}", hint="check the path") from None
    return kind


def _cell(col: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    if col.endswith("_bytes"):
        return fmt_bytes(int(value), 1)
    if col == "max_concurrency":
        return f"{float(value):.1f}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1000:
        return f"{value:,}"
    return str(value)


def render_table(df: pd.DataFrame, columns: list[str], title: str = "",
                 width: int | None = 80) -> str:
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, highlight=False)
    t = Table(title=title or None, title_justify="left", pad_edge=False)
    for col in columns:
        t.add_column(HEADERS.get(col, col), justify="left" if col in ("verdict", "layout")
                     else "right", no_wrap=True)
    for rec in df[columns].itertuples(index=False):
        t.add_row(*(_cell(c, v) for c, v in zip(columns, rec, strict=True)))
    con.print(t)
    return buf.getvalue()
