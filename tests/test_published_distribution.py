"""Every published start-up log of ``tests/data/published.json`` through memprof's estimate, at
the log's release, with the distribution of the errors per figure and a ratchet on it.

For each row the deployment is built in-process from the row's fields (the log's command or args
line; ``memprof_run`` overrides them where a row says how the logged checkpoint maps onto memprof,
with the reason beside it), estimated at ``memprof_engine_version``, and compared on:

* ``weights``: the per-rank load figure ("Model loading took", "Loading model weights took",
  "model weights take", SGLang's "mem usage") against the load figure of the rank with the most
  weights (``memprof.core.estimate.load_figure``: what is allocated while loading, so not V0's
  LoRA buffers built after the load's profiler; SGLang's is the drop in free memory, with the
  first kernel's non-torch memory at TP1);
* ``kv``: the one KV-capacity figure the log prints, in this order of preference: tokens ("GPU KV
  cache size", "#tokens", "maximum number of tokens"), blocks, then the available KV memory;
* ``graph``: "Graph capturing finished ... took X GiB" against memprof's prediction of that
  free-memory delta at the log's release (``memprof.core.graph_log``: the graph pool, the graph
  executables, the cuBLAS workspace the eager warm-up leaves and, where the release makes the stream
  inside the window, torch's stream pool); the largest such rank; SGLang's "Capture cuda graph
  end. … mem usage=X GB" (the drop in free memory across its decode graph runner's construction)
  against memprof's decode-graph memory (``memprof.core.engines.sglang_graphs``);
* ``verdict``: a logged start-up failure (or a start) against memprof's ``startup_oom`` verdict.

A row memprof cannot run is *refused*, with the reason: the model, GPU, release or parallel layout
the log does not state, or the ``error:`` memprof itself gives (an unknown architecture, GPU or
quantisation format). ``memprof_run.unstated`` refuses a row whose run depends on a memory setting
the log does not give: a string refuses the whole row; a mapping ``{figure: reason}`` leaves those
figures alone uncompared (the host state a budget read that no line shows), and the row's other
figures are still compared. ``memprof_run.unmodelled`` refuses a row whose run used a feature
memprof has no model of (batch-invariant kernels, SGLang's CPU weight offload), naming it.
``pytest -n0 -s`` prints the table; ``tests/data/published_floors.json`` holds the floors
this test asserts, so that a change which makes memprof worse on the logs fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from memprof.base.errors import MemprofError
from memprof.base.units import GiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate, load_figure
from memprof.core.explain import in_use_from_log, with_derived
from memprof.core.gpus import PRINTED_ROUNDING, find_gpu, gpu_from_total
from memprof.core.graph_log import logged_graph
from memprof.core.terms.cudagraph import PREFILL_GRAPHS
from memprof.probes.startup_log import parse_log
from tests.row_memo import remembered

DATA = Path(__file__).parent / "data"
ROWS: list[dict[str, Any]] = json.loads((DATA / "published.json").read_text())["rows"]
FLOORS: dict[str, Any] = json.loads((DATA / "published_floors.json").read_text())

BINS = (0.01, 0.02, 0.05)
FIGURES = ("weights", "kv", "graph")
# issue 26's acceptance for the graph figure: within 25% for >= 80% of the logs that print one
GRAPH_BIN = 0.25

# observed key -> what memprof reports for it; the first key a row has is the one compared
WEIGHT_KEYS = ("weights_gib", "weights_gb", "weights_gib_per_rank")
KV_KEYS: tuple[tuple[str, Callable[[Estimate], float]], ...] = (
    ("kv_tokens", lambda e: float(e.kv_cache_tokens)),
    ("num_gpu_blocks", lambda e: float(min(r.kv.num_gpu_blocks for r in e.ranks))),
    ("kv_cache_gib", lambda e: min(r.available_kv_bytes for r in e.ranks) / GiB),
)
DEPLOYMENT_FIELDS = ("engine", "tp", "pp", "dp", "max_model_len", "gpu_memory_utilization",
                     "mem_fraction_static", "kv_cache_dtype", "quantization", "max_num_seqs",
                     "max_num_batched_tokens", "enforce_eager", "enable_expert_parallel",
                     "enable_dp_attention", "scratch", "entrypoint", "block_size",
                     "disable_custom_all_reduce", "vllm_use_flashinfer_sampler",
                     "no_gpu_peer_access", "nnodes", "enable_lora", "max_loras",
                     "max_lora_rank", "lora_extra_vocab_size", "lora_dtype",
                     "fully_sharded_loras", "enable_lora_bias", "specialize_active_lora",
                     "vllm_rocm_use_aiter", "vllm_use_v1", "pytorch_cuda_alloc_conf",
                     "max_total_tokens", "hf_overrides", "attention_backend", "compile_cache",
                     "cuda_graph_max_bs", "dtype", "num_speculative_tokens", "speculative_method",
                     "speculative_model",
                     "limit_mm_per_prompt")


class Refused(Exception):
    """A row memprof cannot run; the message is the reason."""


@dataclass
class Outcome:
    id: int
    refused: str | None = None
    errors: dict[str, float] = field(default_factory=dict)  # figure -> relative error
    pairs: dict[str, tuple[str, float, float]] = field(default_factory=dict)  # key, log, memprof
    verdict: tuple[bool, bool] | None = None  # (log failed, memprof predicts failure)
    in_use: int = 0  # memory other processes held, read from the log's free memory before load
    unstated: dict[str, str] = field(default_factory=dict)  # figure -> why it is not compared


def _run_args(row: dict[str, Any]) -> tuple[str, Deployment, str | None, int | None]:
    """The model, deployment and GPU a row asks for, or :class:`Refused` with the reason."""
    run = {**row, **{k: v for k, v in (row.get("memprof_run") or {}).items() if k != "why"}}
    unmodelled = run.get("unmodelled")
    if unmodelled:  # a feature of the run that memprof has no model of: no figure of it is
        raise Refused(f"memprof does not model {unmodelled}")  # memprof's to compare
    model = run.get("memprof_model") or run.get("hf_id")
    if not model:
        raise Refused("the log does not name a checkpoint memprof can load")
    gpu = run.get("gpu")
    gpu = None if not gpu or gpu == "not stated" else str(gpu)
    mem = run.get("gpu_mem_gib")
    # a named card at a total of the row's own (``--gpu X --gpu-memory Y``): only where
    # ``memprof_run`` gives that total itself, with the reason in its ``why``; else a named card
    # at the total its quote prints (``printed_total``)
    own_total = "gpu_mem_gib" in (row.get("memprof_run") or {})
    mem_bytes = round(mem * GiB) if mem and (gpu is None or own_total) else None
    if gpu is not None and not own_total:
        mem_bytes = printed_total(row, gpu)
    if gpu is None and mem_bytes is None:
        raise Refused("the log does not state the GPU")
    if run.get("tp") is None:
        raise Refused("the log does not state the parallel layout")
    unstated = run.get("unstated")
    if isinstance(unstated, str) and unstated:  # a memory setting the run used that the log
        raise Refused(f"the log does not state {unstated}")  # does not give
    version = run.get("memprof_engine_version")
    if not version:
        raise Refused("the log does not state its release")
    kwargs: dict[str, Any] = {k: run[k] for k in DEPLOYMENT_FIELDS if run.get(k) is not None}
    kwargs.setdefault("engine", "vllm")
    for k in ("pp", "dp"):  # not on the log's command line: the engine's default
        kwargs.setdefault(k, 1)
    if (run.get("ep") or 1) > 1:
        kwargs["enable_expert_parallel"] = True
    return str(model), Deployment(engine_version=str(version), **kwargs), gpu, mem_bytes


def unstated_figures(row: dict[str, Any]) -> dict[str, str]:
    """The figures of the row that are not compared, each with what its log does not state
    (``memprof_run.unstated`` as a mapping ``{figure: reason}``): a figure the engine sized from
    state outside the log (a unified-memory GPU's host memory, which vLLM's and SGLang's budgets
    read as free memory: ``memprof/core/engines/unified_memory.py``), while its other figures
    are the log's own."""
    unstated = (row.get("memprof_run") or {}).get("unstated")
    return dict(unstated) if isinstance(unstated, dict) else {}


def printed_total(row: dict[str, Any], gpu: str) -> int | None:
    """The card's total the row's quote prints, where it is not the catalog ``gpu``'s: the
    row then runs that card at the printed total, the total the engine saw (torch's
    ``mem_get_info``: vLLM's "Free memory on device (94.05/95.01 GiB)", "total_gpu_memory=
    23.58GiB", torch's OOM "GPU 0 has a total capacity of 23.54 GiB"), read as ``memprof
    explain`` reads it (``memprof.probes.log_deployment.log_gpu``), so that the two run on the
    same total. None where the quote prints no total or prints the catalog card's (within the
    0.01 GiB it is rounded to: ``memprof.core.gpus.PRINTED_ROUNDING``)."""
    try:
        log = parse_log(str(row.get("quote") or ""))
        card = find_gpu(gpu)
    except MemprofError:  # no line explain reads / a card memprof refuses (the row says so)
        return None
    total = log.get("total_gpu_bytes") or log.get("oom_total_bytes")
    if not total or abs(card.total_bytes - total) <= PRINTED_ROUNDING:
        return None
    return int(total)


# observed key (GiB, as the log prints it) -> the key memprof explain reads it under
FREE_KEYS = {"avail_mem_before_load_gb": "avail_before_load_bytes",
             "avail_mem_after_load_gb": "avail_after_load_bytes", "weights_gb": "weights_bytes",
             # torch's OOM line: total, free, this process (explain's ``_in_use_at_oom``)
             "oom_total_gib": "oom_total_bytes", "oom_free_gib": "oom_free_bytes",
             "oom_process_gib": "oom_process_bytes",
             # vLLM's free-memory check at start-up ("Free memory on device (X/Y GiB) on
             # startup"): the free memory before load, as explain reads it
             "free_at_start_gib": "free_at_start_bytes"}


def capped_pool(row: dict[str, Any]) -> bool:
    """Whether the log's KV tokens are the run's own ``--max-total-tokens`` (SGLang sizes the
    pool at ``min(cap, what the budget holds)``: ``model_runner.py`` ``init_memory_pool``), so
    the figure is the user's setting, not a capacity memprof predicts: it is not compared (the
    row's load, graph and verdict figures still are)."""
    run = {**row, **(row.get("memprof_run") or {})}
    cap = run.get("max_total_tokens")
    return bool(cap) and any(row["observed"].get(k) == cap for k in ("kv_tokens",
                                                                     "max_total_num_tokens"))


def logged_free(obs: dict[str, Any]) -> dict[str, float]:
    """The row's free-memory and load figures, in bytes, keyed as the log parser keys them."""
    return {FREE_KEYS[k]: float(v) * GiB for k, v in obs.items() if k in FREE_KEYS}


def row_estimate(row: dict[str, Any]) -> tuple[Estimate, int]:
    """The estimate of the row (:class:`Refused` or memprof's error where it cannot run) and
    the memory other processes held that it includes: the log's free memory before load, where
    it shows such memory, taken as ``memprof explain`` takes it (``in_use_from_log``), so that
    ``tests/test_explain_calibration.py`` compares explain with this same estimate. Built once
    per process for each row (``tests/row_memo.py``)."""
    return remembered("estimate", row, _row_estimate)


def _row_estimate(row: dict[str, Any]) -> tuple[Estimate, int]:
    model, dep, gpu, mem = _run_args(row)
    if gpu is None and mem is not None:  # the log prints a total, not the card: the card
        # that total stands for, as ``memprof explain`` takes it
        e = estimate(model, dep, gpu=gpu_from_total(mem))
    else:
        e = estimate(model, dep, gpu_name=gpu, gpu_memory_bytes=mem)
    took = in_use_from_log(with_derived(logged_free(row["observed"]))[0], e)
    if took is not None and dep.gpu_memory_in_use is None:
        return estimate(model, dep.with_(gpu_memory_in_use=took[0]), gpu=e.gpu), took[0]
    return e, 0


def outcome(row: dict[str, Any]) -> Outcome:
    """The row's figures against memprof's (or why it is refused), once per process for each
    row (``tests/row_memo.py``; each caller gets its own copy)."""
    return remembered("outcome", row, _outcome, mutable=True)


def _outcome(row: dict[str, Any]) -> Outcome:
    out = Outcome(id=row["id"])
    try:
        e, out.in_use = row_estimate(row)
    except Refused as exc:
        out.refused = str(exc)
        return out
    except MemprofError as exc:
        out.refused = "memprof: " + exc.message
        return out
    obs = row["observed"]
    out.unstated = unstated_figures(row)

    def compare(figure: str, key: str, got: float) -> None:
        if figure in out.unstated:
            return
        want = float(obs[key])
        out.pairs[figure] = (key, want, got)
        out.errors[figure] = abs(got - want) / abs(want) if want else abs(got)

    key = next((k for k in WEIGHT_KEYS if k in obs), None)
    if key:
        # the engine's load figure (``load_figure``) of the rank with the most weights: what
        # is allocated while loading, plus what the engine's line holds beyond the allocations
        # (SGLang's free-memory drop: the first kernel at TP1); weights built after the load's
        # profiler (V0's LoRA manager before 0.8.0: ``LORA_BUDGETED``) are not in the line
        top = max(e.ranks, key=lambda r: r.weights_bytes)
        compare("weights", key, load_figure(e, top) / GiB)
    kv = next(((k, f) for k, f in KV_KEYS if k in obs), None)
    if kv and not capped_pool(row):
        compare("kv", kv[0], kv[1](e))
    if "graph_gib" in obs:
        logged = [g.total for g in (logged_graph(e, r) for r in e.ranks) if g is not None]
        compare("graph", "graph_gib", max(logged, default=0) / GiB)
    elif "graph_mem_usage_gb" in obs:  # SGLang's decode graphs: every cudagraph component
        compare("graph", "graph_mem_usage_gb", max(  # but the prefill graphs' own line's
            sum(c.bytes for c in r.components
                if c.category == "cudagraph" and c.name != PREFILL_GRAPHS) for r in e.ranks)
            / GiB)
    failed = bool(obs.get("startup_failed") or obs.get("oom"))
    out.verdict = (failed, e.verdict == "startup_oom")
    return out


def distribution(outcomes: list[Outcome]) -> dict[str, dict[str, int]]:
    """Per figure: rows within 1% / 2% / 5%, worse, and compared; plus refused and verdicts."""
    dist: dict[str, dict[str, int]] = {}
    for fig in FIGURES:
        errs = [o.errors[fig] for o in outcomes if fig in o.errors]
        d = {f"within_{round(b * 100)}pct": sum(x <= b for x in errs) for b in BINS}
        d["worse"] = sum(x > BINS[-1] for x in errs)
        d["compared"] = len(errs)
        if fig == "graph":
            d["within_25pct"] = sum(x <= GRAPH_BIN for x in errs)
        dist[fig] = d
    verdicts = [o.verdict for o in outcomes if o.verdict is not None]
    dist["verdict"] = {"agree": sum(a == b for a, b in verdicts), "compared": len(verdicts),
                       "logged_failures": sum(a for a, _ in verdicts)}
    dist["rows"] = {"total": len(outcomes), "run": len(verdicts),
                    "refused": sum(o.refused is not None for o in outcomes)}
    return dist


def _table(outcomes: list[Outcome]) -> str:
    lines = [f"{'row':>4}  {'figure':<8} {'log key':<22} {'log':>12} {'memprof':>12} {'error':>8}"]
    for o in outcomes:
        if o.refused:
            lines.append(f"{o.id:>4}  refused: {o.refused}")
            continue
        if o.in_use:
            lines.append(f"{o.id:>4}  in use   {o.in_use / GiB:.3f} GiB held by other processes "
                         "(the log's free memory before load, or its OOM line)")
        for fig, (key, want, got) in o.pairs.items():
            lines.append(f"{o.id:>4}  {fig:<8} {key:<22} {want:>12.6g} {got:>12.6g} "
                         f"{o.errors[fig] * 100:>7.1f}%")
        for fig, why in o.unstated.items():
            lines.append(f"{o.id:>4}  {fig:<8} not compared: the log does not state {why}")
        if o.verdict is not None:
            log, mp = o.verdict
            lines.append(f"{o.id:>4}  verdict  log {'failed' if log else 'started'}, memprof "
                         f"{'startup_oom' if mp else 'starts'}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def outcomes() -> list[Outcome]:
    return [outcome(r) for r in ROWS]


def test_every_row_has_its_source_quote_and_release() -> None:
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids))
    for r in ROWS:
        assert r["source"].startswith("https://"), r["id"]
        assert r["quote"].strip(), r["id"]
        assert r["engine"] in ("vllm", "sglang"), r["id"]
        assert r["engine_version"], r["id"]
        assert isinstance(r["verified_in_corpus"], bool), r["id"]
        assert r["observed"], r["id"]
        if r.get("memprof_run"):
            assert r["memprof_run"].get("why"), r["id"]


def test_unstated_figures_are_figures_the_row_prints(outcomes: list[Outcome]) -> None:
    by_id = {r["id"]: r for r in ROWS}
    for o in outcomes:
        for fig, why in o.unstated.items():
            assert fig in FIGURES and why.strip(), (o.id, fig)
            assert fig not in o.errors, o.id
            obs = by_id[o.id]["observed"]
            keys = {"weights": WEIGHT_KEYS, "kv": tuple(k for k, _ in KV_KEYS),
                    "graph": ("graph_gib", "graph_mem_usage_gb")}[fig]
            assert any(k in obs for k in keys), (o.id, fig)  # a figure the log does print


def test_kv_of_a_unified_memory_gpu_is_not_compared(outcomes: list[Outcome]) -> None:
    """On an integrated GPU the free memory an engine's budget reads is the host's: CUDA's
    ``cuMemGetInfo`` returns what the OS has free, and vLLM from 0.11.1 / SGLang from 0.5.4 read
    ``psutil.virtual_memory().available`` instead (``memprof/core/engines/unified_memory.py``).
    The KV figure then holds what the host took during load and profiling, which no start-up
    line prints: a row run on such a card leaves its KV figure to ``memprof_run.unstated``."""
    by_id = {r["id"]: r for r in ROWS}
    integrated = [o for o in outcomes
                  if not o.refused and row_estimate(by_id[o.id])[0].gpu.integrated]
    assert integrated  # the GB10 row(s) of the set run (their load figures are compared)
    for o in integrated:
        assert "kv" not in o.errors and "kv" in o.unstated, o.id


def test_distribution_holds_its_floors(outcomes: list[Outcome]) -> None:
    dist = distribution(outcomes)
    print("\n" + _table(outcomes))
    print("\npublished start-up logs, memprof's error per figure:")
    for fig in FIGURES:
        d = dist[fig]
        extra = f", 25% {d['within_25pct']:>3}" if "within_25pct" in d else ""
        print(f"  {fig:<8} compared {d['compared']:>3}: within 1% {d['within_1pct']:>3}, "
              f"2% {d['within_2pct']:>3}, 5% {d['within_5pct']:>3}, worse {d['worse']:>3}"
              + extra)
    v, rows = dist["verdict"], dist["rows"]
    print(f"  verdict  compared {v['compared']:>3}: agree {v['agree']:>3} "
          f"(logged failures {v['logged_failures']})")
    print(f"  rows {rows['total']}, run {rows['run']}, refused {rows['refused']}")
    reasons: dict[str, int] = {}
    for o in outcomes:
        if o.refused:
            reasons[o.refused] = reasons.get(o.refused, 0) + 1
    for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"    refused {n:>3}: {why}")
    floors = FLOORS["floors"]
    assert rows["total"] >= floors["rows_min"]
    assert rows["refused"] <= floors["refused_max"]
    for fig in FIGURES:
        for b in ("within_1pct", "within_2pct", "within_5pct"):
            assert dist[fig][b] >= floors[fig][b], (fig, b, dist[fig][b])
    assert dist["graph"]["within_25pct"] >= floors["graph"].get("within_25pct", 0)
    assert v["agree"] >= floors["verdict_agree_min"]
