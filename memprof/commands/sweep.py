"""``memprof sweep``: a grid of deployments (``--set tp=1,2,4,8 --set max_model_len=8k,32k``)
estimated in-process into a pandas DataFrame, shown as a table and written as CSV, Parquet or
JSON lines."""

from __future__ import annotations

import sys
import typing
from argparse import Namespace
from dataclasses import replace

from memprof.commands.common import MARKDOWN, check_format, check_markdown, emit, format_option
from memprof.commands.flags import deployment, engine_release, gpu_of
from memprof.commands.options import Option, deployment_flags, deployment_options

if typing.TYPE_CHECKING:
    from memprof.batch.sweep import Axis

FORMATS = ("table", "json", "markdown", "csv", "jsonl")


def options() -> tuple[Option, ...]:
    """The deployment flags (the base deployment), then sweep's own."""
    return (*deployment_options(),
            Option(dest="sets", names=("--set",), repeat=True, metavar="KEY=V1,V2,...",
                   help="An axis: KEY=V1,V2,... (tp=1,2,4,8; max_model_len=8k,32k,128k; "
                   "kv_cache_dtype=auto,fp8; gpu=H100,H200). Repeat for a grid."),
            Option(dest="output", names=("--output", "-o"), metavar="FILE",
                   help="Write every column to FILE.csv, FILE.parquet or FILE.jsonl."),
            format_option(*FORMATS), MARKDOWN,
            Option(dest="plot", names=("--plot",), metavar="FILE",
                   help="Also draw KV tokens and max concurrency against the first --set axis "
                   "to FILE.png or FILE.svg (needs matplotlib: pip install "
                   "'memprof-llm[plot]')."))


def _builds_mapped(axis: Axis, engine: str) -> Axis:
    """An ``engine_version`` axis read as ``--engine-version`` reads a release: a development or
    vendor build (``0.7.4.dev12``) at the release it maps to, with its note (two values that
    map to one release are one point). A value that names no modelled release of ``engine``
    (``latest``, ``0.40.0``) is bad input before any work, as ``--engine-version`` is, not a
    grid point marked invalid as if the engine refused it."""
    if axis.field != "engine_version":
        return axis
    from memprof.core.versions import resolve_version

    values = [resolve_version(engine_release(str(v), engine), engine,
                              flag="--set engine_version") for v in axis.values]
    return replace(axis, values=tuple(dict.fromkeys(values)))


def _lora_axes_read(axes: list[Axis], enable_lora: bool) -> None:
    """An axis over a LoRA setting where no point turns LoRA on is bad input: vLLM reads the
    LoRA settings only with LoRA on (no LoRAConfig otherwise:
    ``memprof.core.deployment.set_without_lora``), so every point would be the same estimate."""
    from memprof.base.errors import BadInput
    from memprof.core.deployment import LORA_ONLY_SETTINGS

    if enable_lora or any(a.field == "enable_lora" and any(a.values) for a in axes):
        return
    for a in axes:
        if a.field in LORA_ONLY_SETTINGS:
            raise BadInput(f"--set {a.name}=... without --enable-lora: vLLM reads the LoRA "
                           "settings only with LoRA on, so every point would be the same",
                           hint="add --enable-lora (or an enable_lora axis)")


def run(args: Namespace) -> int:
    """Estimate every deployment of a grid (the other flags are the base deployment). Exit 0
    when the sweep ran (points that do not fit are rows with their verdict)."""
    flags = deployment_flags(args)
    sets, output, fmt, plot = args.sets, args.output, args.fmt, args.plot
    from memprof.base.errors import BadInput
    from memprof.batch.sweep import parse_axis
    from memprof.batch.sweep import sweep as run_sweep
    from memprof.report.sweep import SHOWN, dataframe, output_kind, write

    check_format(fmt, FORMATS)
    markdown = check_markdown(args.markdown)
    axes = [parse_axis(s) for s in sets or []]
    if not axes:
        raise BadInput("nothing to sweep", hint="add --set KEY=V1,V2,..., e.g. --set tp=1,2,4,8")
    given: frozenset[str] = getattr(args, "_given_flags", frozenset())
    for a in axes:  # a base flag the axis replaces at every point would be read by nothing
        if a.field in given:
            flag = next(o.canonical for o in deployment_options() if o.dest == a.field)
            raise BadInput(f"{flag} is given and swept by --set {a.name}=...: the axis sets it "
                           "at every point", hint=f"drop {flag}, or add its value to the axis")
    # a bad -o or --plot path or suffix, or a missing writer, fails before any work
    if output is not None:
        output_kind(output)
    if plot is not None:
        from memprof.base.files import check_output
        from memprof.report.plot import plot_format, pyplot

        plot_format(plot)
        check_output(plot, flag="--plot")
        pyplot()
    model, dep, gpu, gpu_memory = deployment(flags)
    _lora_axes_read(axes, dep.enable_lora)
    axes = [_builds_mapped(a, dep.engine) for a in axes]
    arch = flags["gpu_arch"]
    base_gpu = gpu_of(gpu, gpu_memory, arch) if gpu and gpu.strip().lower() == "auto" else None
    df = dataframe(run_sweep(model, dep, gpu, gpu_memory, axes, base_gpu=base_gpu,
                             gpu_arch=arch))
    if output is not None:
        kind = write(df, output)
        sys.stderr.write(f"wrote {len(df)} rows to {output} ({kind})\n")
    if plot is not None:
        from memprof.report.plot import save, sweep_figure

        kind = save(sweep_figure(df, [a.name for a in axes], f"{model}: {len(df)} deployments"),
                    plot)
        sys.stderr.write(f"wrote the plot to {plot} ({kind})\n")
    cols = [a.name for a in axes] + [c for c in SHOWN if c not in {a.name for a in axes}]
    title = f"{model}: {len(df)} deployments"
    if fmt in ("table", "markdown"):
        emit(df, fmt, markdown, kind="frame", columns=cols, title=title)
        return 0
    if markdown is not None:
        from memprof.base.files import write_atomic
        from memprof.report import render

        write_atomic(markdown, render(df, "markdown", kind="frame", columns=cols, title=title))
    if fmt == "csv":
        sys.stdout.write(df.to_csv(index=False))
    elif fmt == "jsonl":
        text = df.to_json(orient="records", lines=True) or ""
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        sys.stdout.write((df.to_json(orient="records", indent=2) or "[]") + "\n")
    return 0
