"""``Estimate`` and a sweep's DataFrame (``--plot``) as PNG or SVG figures.

``--plot FILE.png|svg``: the estimate as stacked bars (one per distinct rank, the segments of
the terminal bar) and a sweep as KV tokens and max concurrency against its first axis.

matplotlib is an optional extra (``pip install 'memprof-llm[plot]'``), imported here only when
a plot is asked for; the file is written whole or not at all (``memprof.base.files``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprof.base.errors import BadInput, EnvironmentProblem
from memprof.report.bar import segments, title

if TYPE_CHECKING:
    import pandas as pd

    from memprof.core.estimate import Estimate

SUFFIXES = {".png": "png", ".svg": "svg"}
GIB = 1 << 30
# matplotlib colours of the bar's colours (rich names)
COLORS = {"blue": "tab:blue", "green": "tab:green", "red": "tab:red", "magenta": "tab:purple",
          "cyan": "tab:cyan", "yellow": "tab:olive", "bright_black": "tab:gray",
          "white": "whitesmoke"}


def plot_format(path: str) -> str:
    """The format of ``--plot path`` by its suffix (``png`` or ``svg``); anything else is bad
    input (exit 2), found before any work is done."""
    fmt = SUFFIXES.get(Path(path).suffix.lower())
    if fmt is None:
        raise BadInput(f"cannot plot to {path!r}: unknown suffix",
                       hint="--plot FILE.png or FILE.svg")
    return fmt


def pyplot() -> Any:
    """matplotlib's pyplot on the non-interactive Agg backend, or exit 3 with the extra to
    install."""
    try:
        import matplotlib
    except ImportError:
        raise EnvironmentProblem("--plot needs matplotlib, which is not installed",
                                 hint="pip install 'memprof-llm[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def estimate_figure(e: Estimate) -> Any:
    """Stacked bars, one per distinct rank (GiB), with the GPU's total as a line."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(e.ranks) + 3), 5.0))
    labels = [title(e, r).removeprefix("memory of ").split(":")[0] for r in e.ranks]
    segs = [segments(r, e.gpu.total_bytes) for r in e.ranks]
    bottoms = [0.0] * len(e.ranks)
    for i, first in enumerate(segs[0]):
        heights = [s[i].bytes / GIB for s in segs]
        if not any(heights):
            continue
        color = "gainsboro" if first.name == "unused" else COLORS.get(first.color, first.color)
        ax.bar(labels, heights, bottom=bottoms, label=first.name, color=color,
               edgecolor="black", linewidth=0.3)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.axhline(e.gpu.total_bytes / GIB, color="black", linestyle="--", linewidth=1)
    ax.annotate(f"{e.gpu.name} total", (0, e.gpu.total_bytes / GIB), xytext=(2, 2),
                textcoords="offset points", xycoords=("axes fraction", "data"), fontsize=8)
    ax.set_ylabel("GiB")
    ax.set_title(f"{e.spec.name} on {e.deployment.world_size}× {e.gpu.name}: {e.verdict}",
                 fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def sweep_figure(df: pd.DataFrame, axes: list[str], title_text: str) -> Any:
    """KV tokens and max concurrency against the first swept axis, one line per combination of
    the other axes; points that do not fit are crosses, invalid points are left out."""
    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7.0, 6.0))
    x_axis, rest = axes[0], axes[1:]
    xs = list(dict.fromkeys(df[x_axis].tolist()))  # the swept values, in order
    pos = {v: i for i, v in enumerate(xs)}
    groups = df.groupby(rest, sort=False) if rest else [((), df)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{a}={v}" for a, v in zip(rest, key, strict=True)) or None
        part = part[part["verdict"] != "invalid"]
        for ax, col in ((top, "kv_cache_tokens"), (bottom, "max_concurrency")):
            x = [pos[v] for v in part[x_axis]]
            y = [float(v) for v in part[col]]
            (line,) = ax.plot(x, y, marker="o", label=label)
            bad = [(a, b) for a, b, v in zip(x, y, part["verdict"], strict=True) if v != "fits"]
            if bad:
                ax.plot([a for a, _ in bad], [b for _, b in bad], linestyle="none", marker="x",
                        markersize=10, color=line.get_color())
    top.set_ylabel("KV tokens (per rank)")
    bottom.set_ylabel("max concurrency")
    bottom.set_xticks(range(len(xs)), [str(v) for v in xs])
    bottom.set_xlabel(x_axis)
    top.set_title(title_text + " (× does not fit)", fontsize=10)
    if rest:
        top.legend(fontsize=8)
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def save(fig: Any, path: str) -> str:
    """Write ``fig`` to ``path`` whole or not at all (``memprof.base.files.write_atomic``);
    returns the format written. The path was checked (``check_output``) before the work."""
    import io

    from memprof.base.files import write_atomic

    fmt = plot_format(path)
    buf = io.BytesIO()
    try:
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        fig.savefig(buf, format=fmt, metadata=metadata)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    write_atomic(path, buf.getvalue())
    return fmt
