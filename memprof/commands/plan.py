"""``memprof plan``: the layouts that hold a workload, fewest GPUs first, then most KV tokens."""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from memprof.base.errors import EXIT_OK, EXIT_OOM
from memprof.commands.common import MARKDOWN, check_format, check_markdown, emit, format_option
from memprof.commands.options import Option

FORMATS = ("table", "json", "markdown")


def options() -> tuple[Option, ...]:
    """plan's flags; those it shares with estimate read the settings rows (help, kind)."""
    from memprof.commands.options import MEMPROF_DEPLOYMENT
    from memprof.core.flags import BY_FIELD

    def setting(field: str, **over: Any) -> Option:
        s = BY_FIELD[field]
        row: dict[str, Any] = {"dest": field, "names": s.cli_flags(), "kind": s.kind,
                               "help": s.help, "choices_from": s.choices_from, **over}
        return Option(**row)

    model, gpu, gpu_memory, gpu_arch = MEMPROF_DEPLOYMENT
    return (model._replace(names=("--model", "-m"), required=True, help="The model "
                    "(memprof models).", shown_default=""),
            Option(dest="requests", names=("--requests",), kind="int", required=True,
                   help="Requests served at once (each at full --context)."),
            Option(dest="context", names=("--context",), required=True, metavar="TOKENS",
                   help="Tokens per request: 32768, 32k (32,000) or 32K (32,768), as vLLM "
                   "reads --max-model-len."),
            gpu._replace(help="GPU from the catalog, or auto."),
            gpu_memory._replace(help="e.g. 79GiB (with --gpu-arch)"), gpu_arch,
            setting("engine", default="vllm"),
            setting("engine_version", shown_default="the newest"),
            setting("entrypoint", default="serve"),
            Option(dest="headroom", names=("--headroom",), kind="size", default="1GiB",
                   help="Run-time headroom every rank must keep."),
            Option(dest="max_gpus", names=("--max-gpus",), kind="int", default=64,
                   help="Largest layout tried."),
            setting("kv_cache_dtype", default="auto,fp8",
                    help="KV dtypes tried, comma-separated."),
            Option(dest="top", names=("--top",), kind="int", default=10, help="Rows shown."),
            format_option(*FORMATS), MARKDOWN)


def run(args: Namespace) -> int:
    """Find the layouts (TP × PP × DP × EP, KV dtype, max-num-seqs) that hold --requests
    requests of --context tokens with --headroom left, ranked by GPUs used then KV tokens.
    Exit 0 when one holds it, 1 when none does."""
    model, requests, context, gpu, gpu_memory = (args.model, args.requests, args.context,
                                                 args.gpu, args.gpu_memory)
    engine, engine_version, entrypoint = args.engine, args.engine_version, args.entrypoint
    headroom, max_gpus, kv_cache_dtype, top, fmt = (args.headroom, args.max_gpus,
                                                     args.kv_cache_dtype, args.top, args.fmt)
    from memprof.base.errors import BadInput
    from memprof.base.units import parse_size
    from memprof.batch.plan import plan as run_plan
    from memprof.batch.sweep import Evaluator, read_int
    from memprof.core.deployment import KV_CACHE_DTYPES, Deployment

    check_format(fmt, FORMATS)
    markdown = check_markdown(args.markdown)
    from memprof.core.engines import engine_named

    has_entrypoint = engine_named(engine).has_entrypoint  # an unknown --engine: BadInput
    from memprof.core.deployment import ENTRYPOINTS
    from memprof.core.versions import resolve_version

    if entrypoint not in ENTRYPOINTS:
        raise BadInput(f"unknown --entrypoint {entrypoint[:40]!r}",
                       hint="serve (vllm serve, the default) or llm (the Python LLM class)")
    if entrypoint != "serve" and not has_entrypoint:
        raise BadInput(f"--entrypoint is vLLM's and does not apply under --engine {engine}",
                       hint="drop --entrypoint, or add --engine vllm")
    from memprof.commands.flags import engine_release

    version = resolve_version(engine_release(engine_version, engine) if engine_version
                              else engine_version, engine)
    kvs = tuple(k.strip() for k in kv_cache_dtype.split(","))
    bad = [k for k in kvs if k not in KV_CACHE_DTYPES]
    if bad:
        raise BadInput(f"unknown --kv-cache-dtype {bad[0][:40]!r}",
                       hint="one or more of: " + ", ".join(KV_CACHE_DTYPES))
    if max_gpus < 1 or top < 1:
        raise BadInput("--max-gpus and --top must be at least 1", hint="e.g. --max-gpus 16")
    ctx = read_int(context, "--context")
    room = parse_size(headroom, zero_ok=True)  # --headroom 0: none kept
    from memprof.batch.plan import serve_model

    served, served_note = serve_model(model)
    ev = Evaluator()
    from memprof.commands.flags import gpu_of

    g = gpu_of(gpu, parse_size(gpu_memory) if gpu_memory else None, args.gpu_arch)
    rows = run_plan(model, g, requests=requests, context=ctx, headroom=room,
                    base=Deployment(engine=engine, engine_version=version,
                                    entrypoint=entrypoint), max_gpus=max_gpus, kv_dtypes=kvs,
                    evaluator=ev)
    from memprof.batch.plan_report import PlanReport

    report = PlanReport(model=model, gpu=g.name, requests=requests, context=ctx,
                        rows=tuple(rows[:top]), found=len(rows), served=served,
                        served_note=served_note, kv_dtypes=tuple(kvs))
    emit(report, fmt, markdown)
    return EXIT_OK if rows else EXIT_OOM
