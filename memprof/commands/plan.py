"""``memprof plan``: the layouts that hold a workload, fewest GPUs first, then most KV tokens."""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from memprof.base.errors import EXIT_OK, EXIT_OOM
from memprof.commands.common import check_format, format_option
from memprof.commands.options import Option

FORMATS = ("table", "json")

if TYPE_CHECKING:
    from memprof.core.plan import PlanRow


def options() -> tuple[Option, ...]:
    """plan's flags; those it shares with estimate read the settings rows (help, kind)."""
    from memprof.commands.options import MEMPROF_DEPLOYMENT
    from memprof.core.flags import BY_FIELD

    def setting(field: str, **over: Any) -> Option:
        s = BY_FIELD[field]
        row: dict[str, Any] = {"dest": field, "names": s.cli_flags(), "kind": s.kind,
                               "help": s.help, "choices_from": s.choices_from, **over}
        return Option(**row)

    model, gpu, gpu_memory = MEMPROF_DEPLOYMENT
    return (replace(model, names=("--model", "-m"), required=True, help="The model "
                    "(memprof models).", shown_default=""),
            Option(dest="requests", names=("--requests",), kind="int", required=True,
                   help="Requests served at once (each at full --context)."),
            Option(dest="context", names=("--context",), required=True, metavar="TOKENS",
                   help="Tokens per request: 32768, 32k (32,000) or 32K (32,768), as vLLM "
                   "reads --max-model-len."),
            replace(gpu, help="GPU from the catalog, or auto."),
            replace(gpu_memory, help="e.g. 79GiB"),
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
            format_option(*FORMATS))


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
    from memprof.core.deployment import KV_CACHE_DTYPES, Deployment
    from memprof.core.plan import plan as run_plan
    from memprof.core.sweep import Evaluator, read_int

    check_format(fmt, FORMATS)
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
    from memprof.core.plan import serve_model

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
    return EXIT_OK if rows else EXIT_OOM


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
    from memprof.report.sweep import dataframe

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
    from memprof.report import output_width, render

    sys.stdout.write(render(dataframe(recs), "table", kind="frame", columns=cols, title=title,
                            width=output_width()))
    sys.stdout.write(f"best: {recs[0]['command']}\n")
    if served_note:
        sys.stdout.write(f"  ({served_note})\n")
