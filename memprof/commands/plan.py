"""``memprof plan``: the layouts that hold a workload, fewest GPUs first, then most KV tokens."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from memprof.base.errors import EXIT_OK, EXIT_OOM

if TYPE_CHECKING:
    from memprof.batch.plan import PlanRow


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
    shown = rows[:top]
    if fmt == "json":
        sys.stdout.write(json.dumps({"model": model, "gpu": g.name, "requests": requests,
                                     "context": ctx, "plans": [_record(i, r, served) for i, r in
                                                               enumerate(shown, 1)]},
                                    indent=2) + "\n")
    else:
        _table(shown, model, g.name, requests, ctx, len(rows), served, served_note)
    raise typer.Exit(EXIT_OK if rows else EXIT_OOM)


def _command(r: PlanRow, model: str) -> str:
    """The serve command of a plan, to paste: ``model`` is what the engine loads
    (``serve_model``), shell-quoted."""
    import shlex

    c, d = r.candidate, r.deployment
    model = shlex.quote(model)
    if d.engine == "sglang":
        parts = [f"python -m sglang.launch_server --model-path {model} --tp {c.tp}"]
        parts += [f"--pp-size {c.pp}"] if c.pp > 1 else []
        parts += ["--ep-size", str(c.tp)] if c.ep else []
        parts += [f"--context-length {d.max_model_len}",
                  f"--max-running-requests {r.max_num_seqs}"]
    else:
        parts = [f"vllm serve {model} -tp {c.tp}"]
        parts += [f"-pp {c.pp}"] if c.pp > 1 else []
        parts += [f"-dp {c.dp}"] if c.dp > 1 else []
        parts += ["--enable-expert-parallel"] if c.ep else []
        parts += [f"--max-model-len {d.max_model_len}", f"--max-num-seqs {r.max_num_seqs}"]
    if c.kv_cache_dtype != "auto":
        parts.append(f"--kv-cache-dtype {c.kv_cache_dtype}")
    return " ".join(parts)


def _record(i: int, r: PlanRow, model: str) -> dict[str, object]:
    c = r.candidate
    return {"rank": i, "gpus": r.gpus, "tp": c.tp, "pp": c.pp, "dp": c.dp,
            "enable_expert_parallel": c.ep, "kv_cache_dtype": c.kv_cache_dtype,
            "max_num_seqs": r.max_num_seqs, "kv_cache_tokens": r.kv_cache_tokens,
            "total_kv_tokens": r.total_kv_tokens, "max_concurrency": round(r.max_concurrency, 4),
            "headroom_bytes": r.headroom_bytes, "command": _command(r, model)}


def _table(rows: list[PlanRow], model: str, gpu: str, requests: int, ctx: int,
           found: int, served: str, served_note: str | None) -> None:
    from memprof.report.sweep import dataframe, render_table

    title = (f"{model} on {gpu}: {requests} requests × {ctx:,} tokens — {found} layouts "
             "hold it")
    if not rows:
        sys.stdout.write(title.replace(f"{found} layouts hold it", "no layout holds it") +
                         "\nhint: raise --max-gpus, add --kv-cache-dtype fp8, or lower "
                         "--requests / --context\n")
        return
    recs = []
    for i, r in enumerate(rows, 1):
        d = _record(i, r, served)
        d["layout"] = r.layout
        recs.append(d)
    cols = ["rank", "gpus", "layout", "kv_cache_dtype", "max_num_seqs", "total_kv_tokens",
            "max_concurrency", "headroom_bytes"]
    width = None if sys.stdout.isatty() else 80
    sys.stdout.write(render_table(dataframe(recs), cols, title=title, width=width))
    sys.stdout.write(f"best: {recs[0]['command']}\n")
    if served_note:
        sys.stdout.write(f"  ({served_note})\n")
