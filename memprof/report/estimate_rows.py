"""``EstimateReport`` as the rows and lines its table and Markdown reporters share.

The rows and lines a human reads in an estimate; the table and Markdown reporters render them."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from memprof.base.units import fmt_bytes
from memprof.core.components import Component
from memprof.core.deployment import Deployment
from memprof.core.engine_log import engine_log
from memprof.core.engines import engine_of
from memprof.core.estimate import Estimate, RankEstimate, load_figure
from memprof.core.kvcache import KVPlan
from memprof.core.lora import DEFAULT_MAX_LORA_RANK, DEFAULT_MAX_LORAS
from memprof.core.remedies import Remedies

if TYPE_CHECKING:
    from memprof.core.compare import DiffRow


class Row(NamedTuple):
    """One row of the estimate table, as text (a named tuple: built for every row of every
    estimate, it needs no dataclass machinery at import)."""

    component: str
    category: str
    each: str
    total: str
    share: str
    profiled: str
    note: str
    name: str = ""  # the component's name without its note


ENTRY_NAMES = {"serve": "(vllm serve)", "llm": "(LLM class)"}


def headline(e: Estimate) -> str:
    d = e.deployment
    par = f"TP{d.tp}" + (f" PP{d.pp}" if d.pp > 1 else "") + (f" DP{d.dp}" if d.dp > 1 else "")
    if d.enable_expert_parallel:
        par += f" EP{d.ep_size}"
    q = e.quant.method if e.quant else e.model_dtype
    entry = (" " + ENTRY_NAMES.get(d.entrypoint, d.entrypoint)
             if engine_of(d).has_entrypoint else "")
    return (f"{e.spec.name} ({e.spec.architecture}, {q}) on {d.world_size}× {e.gpu.name} "
            f"({fmt_bytes(e.gpu.total_bytes)}), {par}, {d.engine} {d.engine_version}"
            f"{entry}, "
            f"kv {d.kv_cache_dtype}, "
            f"max_model_len {_length(e)}"
            + f", max_num_seqs {d.max_num_seqs}, "
            f"max_num_batched_tokens {e.max_num_batched_tokens}{lora(d)}{_speculative(d)}")


def _speculative(d: Deployment) -> str:
    """The drafter the headline names where draft tokens are on (memprof/core/speculative.py)."""
    if not d.num_speculative_tokens:
        return ""
    head = f", head {d.speculative_model}" if d.speculative_model else ""
    return f", {d.speculative_method} speculation ({d.num_speculative_tokens} draft tokens{head})"


def _length(e: Estimate) -> str:
    """The max_model_len the headline shows: with --max-model-len auto the fitted length and the
    derived one it was fitted from, or that no length fits (vLLM's 'Cannot auto-fit' refusal
    comes before any length is logged: memprof/core/auto_fit.py)."""
    if e.auto_fit_from is None:
        return str(e.max_model_len)
    if e.max_model_len == 0:
        return f"auto (no length fits; derived {e.auto_fit_from})"
    return f"{e.max_model_len} (auto, fitted from {e.auto_fit_from})"


def _request_tokens(e: Estimate) -> int:
    """The request length the concurrency line is for: the length one request's KV is sized at
    (the derived length where auto-fit fits none, not 0)."""
    if e.auto_fit_from is not None and e.max_model_len == 0:
        return e.auto_fit_from
    return e.max_model_len


def lora(d: Deployment) -> str:
    """", LoRA: 2 adapters, rank 16" where the deployment turns LoRA on (memprof/core/lora.py
    defaults for the sizes left out), else ""."""
    if not d.enable_lora:
        return ""
    n = DEFAULT_MAX_LORAS if d.max_loras is None else d.max_loras
    r = DEFAULT_MAX_LORA_RANK if d.max_lora_rank is None else d.max_lora_rank
    return (f", LoRA: {n} adapter{'s' if n != 1 else ''}, rank {r}"
            + (", fully sharded" if d.fully_sharded_loras else "")
            + (", bias" if d.enable_lora_bias else "")
            + (", graphs per active-LoRA count" if d.specialize_active_lora else ""))


def rank_title(r: RankEstimate) -> str:
    c = r.coord
    who = f"rank {c.rank}" if len(r.same_as) == 1 else f"{len(r.same_as)} ranks like rank {c.rank}"
    ep = "" if c.ep_rank is None else f" ep {c.ep_rank}"
    return f"{who} (tp {c.tp_rank}, pp {c.pp_stage}, dp {c.dp_rank}{ep})"


def rows(e: Estimate, r: RankEstimate) -> list[Row]:
    total = e.gpu.total_bytes

    def row(c: Component) -> Row:
        each = f"{c.count} × {fmt_bytes(c.bytes_each)}" if c.count > 1 else ""
        note = "placeholder: not modelled yet" if c.placeholder else {
            "baseline": "before the engine's baseline", "runtime": "outside the budget"}.get(
            c.where, "")
        name = f"{c.name} ({note})" if note else c.name
        profiled = "—" if c.where == "baseline" else ("yes" if c.profiled else "NO")
        return Row(name, c.category, each, fmt_bytes(c.bytes), f"{100 * c.bytes / total:.1f}%",
                   profiled, note, c.name)

    return [row(c) for c in r.components]


def budget_lines(e: Estimate, r: RankEstimate) -> list[str]:
    d = e.deployment
    if d.kv_cache_memory_bytes:
        budget = f"KV = --kv-cache-memory {fmt_bytes(d.kv_cache_memory_bytes)}"
    elif not engine_of(d).budget_by_utilization:  # mem_fraction_static × free before load
        allocated = sum(c.bytes for c in r.components
                        if c.where == "budget" and c.category in ("weights", "scratch"))
        loaded = load_figure(e, r)  # the free-memory drop across the load
        what = f"loaded {fmt_bytes(loaded)}" + (
            "" if loaded == allocated else f" (allocated {fmt_bytes(allocated)} + the first "
            f"kernel's non-torch {fmt_bytes(loaded - allocated)})")
        budget = (f"KV = mem_fraction_static {e.mem_fraction_static} × free before load = "
                  f"{fmt_bytes(r.requested_bytes)} − {what} = "
                  f"{fmt_bytes(r.available_kv_bytes)}")
    else:
        terms = " − ".join(
            f"{cat} {fmt_bytes(n)}" for cat, n in _budget_terms(r))
        budget = (f"KV = ceil({d.gpu_memory_utilization} × {fmt_bytes(e.gpu.total_bytes)}) "
                  f"= {fmt_bytes(r.requested_bytes)} − {terms} = "
                  f"{fmt_bytes(r.available_kv_bytes)}")
    log = engine_log(e, r)
    if log and log[0].startswith("the current vLLM instance"):  # V0: what that release logs
        engine = [f"vLLM {d.engine_version} (V0) logs: {log[0]}", *(f"  {x}" for x in log[1:])]
    else:
        engine = [
            f"GPU KV cache size: {r.kv.tokens:,} tokens",
            f"Maximum concurrency for {_request_tokens(e):,} tokens per request: "
            f"{r.kv.max_concurrency:.2f}x (one request needs {fmt_bytes(r.kv.request_bytes)})"]
    return [
        budget,
        f"KV cache: {r.kv.num_gpu_blocks} blocks × {fmt_bytes(r.plan.block_bytes)} "
        f"(block {r.plan.block_size} tokens; {_per_token(r.plan)}) = "
        f"{fmt_bytes(r.kv.kv_cache_bytes)}",
        *engine,
        f"headroom at run time: {fmt_bytes(r.headroom_bytes)} (total − before-baseline − "
        f"{'requested' if engine_of(d).budget_by_utilization else 'envelope'} − unbudgeted)",
        *[f"scratch {name}: per layer {fmt_bytes(per)}, shared {fmt_bytes(shared)} — sharing "
          f"saves {fmt_bytes(per - shared)}" for name, per, shared in r.scratch_savings],
    ]


def _per_token(plan: KVPlan) -> str:
    """The block's bytes a token of context adds; where every layer is sliding-window, none past
    the window (``KVPlan.bytes_per_token`` 0), so the block's share of one token is shown."""
    if plan.bytes_per_token:
        return f"{plan.bytes_per_token} B/token"
    return (f"{plan.block_bytes // plan.block_size} B a token within the sliding window, "
            "nothing past it")


def _budget_terms(r: RankEstimate) -> list[tuple[str, int]]:
    """(category, bytes) of what the engine's budget subtracts, per category."""
    cats: dict[str, int] = {}
    for c in r.components:
        if c.category != "kv_cache" and c.in_budget and c.profiled:
            cats[c.category] = cats.get(c.category, 0) + c.bytes
    return list(cats.items())


def verdict_line(e: Estimate) -> str:
    text = f"verdict: {e.verdict}"
    if e.reasons:
        text += " — " + "; ".join(e.reasons)
    elif e.verdict == "fits":
        text += f", headroom {fmt_bytes(min(r.headroom_bytes for r in e.ranks))}"
    return text


def remedy_lines(remedies: Remedies | None) -> list[str]:
    if remedies is None or not remedies.tried:
        return []
    return [remedies.summary(), *(f"  {r.change}: {r.detail}" for r in remedies)]


def compare_title(e: Estimate, other: Estimate, changes: str | None) -> str:
    return (f"compare with {changes}: KV tokens {e.kv_cache_tokens:,} → "
            f"{other.kv_cache_tokens:,}, verdict {e.verdict} → {other.verdict}")


def compare_rows(e: Estimate, other: Estimate) -> list[DiffRow]:
    from memprof.core.compare import diff  # only an estimate with --compare has rows

    return diff(e, other)


NO_COMPONENT_CHANGES = "no component's bytes change"
