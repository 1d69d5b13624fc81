"""``memprof plan``: the layouts that hold a workload, fewest GPUs first, then most KV tokens."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from memprof.base.errors import EXIT_OK, EXIT_OOM


def plan(
    model: Annotated[str, typer.Option("--model", "-m", help="The model (memprof models).")],
    requests: Annotated[int, typer.Option(
        "--requests", help="Requests served at once (each at full --context).")],
    context: Annotated[str, typer.Option(
        "--context", help="Tokens per request: 32768, 32k (32,000) or 32K (32,768), as vLLM "
        "reads --max-model-len.")],
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU from the catalog, or auto.")
                   ] = None,
    gpu_memory: Annotated[str | None, typer.Option("--gpu-memory", help="e.g. 79GiB")] = None,
    engine: Annotated[str, typer.Option("--engine", help="vllm or sglang")] = "vllm",
    engine_version: Annotated[str | None, typer.Option(
        "--engine-version", help="The engine release to model; default: the newest.")] = None,
    entrypoint: Annotated[str, typer.Option(
        "--entrypoint", help="vLLM: serve (default) or llm (the Python LLM class).")
    ] = "serve",
    headroom: Annotated[str, typer.Option(
        "--headroom", help="Run-time headroom every rank must keep.")] = "1GiB",
    max_gpus: Annotated[int, typer.Option("--max-gpus", help="Largest layout tried.")] = 64,
    kv_cache_dtype: Annotated[str, typer.Option(
        "--kv-cache-dtype", help="KV dtypes tried, comma-separated.")] = "auto,fp8",
    top: Annotated[int, typer.Option("--top", help="Rows shown.")] = 10,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Find the layouts (TP × PP × DP × EP, KV dtype, max-num-seqs) that hold --requests
    requests of --context tokens with --headroom left, ranked by GPUs used then KV tokens.
    Exit 0 when one holds it, 1 when none does."""
    from memprof.base.errors import BadInput
    from memprof.base.units import parse_size
    from memprof.batch.plan import plan as run_plan
    from memprof.batch.sweep import Evaluator, read_int
    from memprof.core.deployment import KV_CACHE_DTYPES, Deployment

    if fmt not in ("table", "json"):
        raise BadInput(f"unknown --format {fmt[:40]!r}", hint="table or json")
    if engine not in ("vllm", "sglang"):
        raise BadInput(f"unknown --engine {engine[:40]!r}", hint="vllm or sglang")
    from memprof.core.deployment import ENTRYPOINTS
    from memprof.core.versions import resolve_version

    if entrypoint not in ENTRYPOINTS:
        raise BadInput(f"unknown --entrypoint {entrypoint[:40]!r}",
                       hint="serve (vllm serve, the default) or llm (the Python LLM class)")
    if entrypoint != "serve" and engine == "sglang":
        raise BadInput("--entrypoint is vLLM's and does not apply under --engine sglang",
                       hint="drop --entrypoint, or add --engine vllm")
    version = resolve_version(engine_version, engine)
    kvs = tuple(k.strip() for k in kv_cache_dtype.split(","))
    bad = [k for k in kvs if k not in KV_CACHE_DTYPES]
    if bad:
        raise BadInput(f"unknown --kv-cache-dtype {bad[0][:40]!r}",
                       hint="one or more of: " + ", ".join(KV_CACHE_DTYPES))
    if max_gpus < 1 or top < 1:
        raise BadInput("--max-gpus and --top must be at least 1", hint="e.g. --max-gpus 16")
    ctx = read_int(context, "--context")
    from memprof.batch.plan import serve_model

    served, served_note = serve_model(model)
    ev = Evaluator()
    from memprof.commands.flags import gpu_of

    g = gpu_of(gpu, parse_size(gpu_memory) if gpu_memory else None)
    rows = run_plan(model, g, requests=requests, context=ctx, headroom=parse_size(headroom),
                    base=Deployment(engine=engine, engine_version=version,
                                    entrypoint=entrypoint), max_gpus=max_gpus, kv_dtypes=kvs,
                    evaluator=ev)
    from memprof.batch.plan_report import PlanReport
    from memprof.report.plan import render_json, render_table

    report = PlanReport(model=model, gpu=g.name, requests=requests, context=ctx,
                        rows=tuple(rows[:top]), found=len(rows), served=served,
                        served_note=served_note)
    sys.stdout.write(render_json(report) if fmt == "json" else
                     render_table(report, None if sys.stdout.isatty() else 80))
    raise typer.Exit(EXIT_OK if rows else EXIT_OOM)

