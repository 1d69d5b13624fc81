"""Plans: the layouts (TP × PP × DP × EP), KV dtypes and ``max_num_seqs`` that hold a workload
("64 requests of 32k on H200s") with the headroom asked, fewest GPUs first, then most KV tokens.

A candidate holds the workload when memprof's verdict is ``fits`` with at least ``headroom``
left on every rank, and its KV cache holds every request at full context: each engine (a vLLM
DP rank; the one SGLang server) takes ``ceil(requests / engines)`` sequences and its maximum
concurrency at ``context`` tokens is at least that.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memprof.base.errors import BadInput
from memprof.base.files import path_kind
from memprof.batch.sweep import Evaluator
from memprof.core.deployment import (
    LONG_CONTEXT_ENV,
    Deployment,
    beyond_derived_len,
    long_context_allowed,
)
from memprof.core.engines import engine_named
from memprof.core.gpus import GPU
from memprof.core.models import ModelSpec

TP_SIZES = (1, 2, 4, 8)
PP_SIZES = (1, 2, 4)
DP_SIZES = (1, 2, 4, 8)
KV_DTYPES = ("auto", "fp8")


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One layout to try."""

    tp: int
    pp: int
    dp: int
    ep: bool
    kv_cache_dtype: str

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRow:
    """A candidate that holds the workload, with what memprof estimates for it."""

    candidate: Candidate
    deployment: Deployment
    gpus: int
    max_num_seqs: int  # per engine
    kv_cache_tokens: int  # per engine (the smallest rank's)
    total_kv_tokens: int  # over all engines
    max_concurrency: float
    headroom_bytes: int
    verdict: str

    @property
    def layout(self) -> str:
        c = self.candidate
        text = f"TP{c.tp}" + (f" PP{c.pp}" if c.pp > 1 else "") + (f" DP{c.dp}" if c.dp > 1
                                                                     else "")
        return text + (" EP" if c.ep else "")


def candidates(spec: ModelSpec, engine: str, max_gpus: int,
               kv_dtypes: tuple[str, ...] = KV_DTYPES) -> Iterator[Candidate]:
    """Every layout of at most ``max_gpus`` GPUs: vLLM TP × PP × DP (× EP for MoE models);
    SGLang TP × PP (its ``--dp`` splits the same GPUs for attention)."""
    dps = DP_SIZES if engine_named(engine).dp_replicates else (1,)
    eps = (False, True) if spec.is_moe else (False,)
    for tp in TP_SIZES:
        for pp in PP_SIZES:
            for dp in dps:
                if tp * pp * dp > max_gpus:
                    continue
                for ep in eps:
                    if ep and tp * dp == 1:
                        continue  # EP over one rank is no EP
                    for kv in kv_dtypes:
                        yield Candidate(tp=tp, pp=pp, dp=dp, ep=ep, kv_cache_dtype=kv)


def engines(c: Candidate, engine: str) -> int:
    return c.dp if engine_named(engine).dp_replicates else 1


def evaluate(ev: Evaluator, model: str | ModelSpec, gpu: GPU, c: Candidate, base: Deployment,
             requests: int, context: int, headroom: int) -> PlanRow | None:
    """The candidate's row when it holds the workload, else None."""
    seqs = math.ceil(requests / engines(c, base.engine))
    dep = base.with_(tp=c.tp, pp=c.pp, dp=c.dp, enable_expert_parallel=c.ep,
                     kv_cache_dtype=c.kv_cache_dtype, max_model_len=context, max_num_seqs=seqs)
    try:
        e = ev.estimate(model, dep, gpu, notes=False)  # (a plan row holds no notes)
    except BadInput:
        return None
    head = min(r.headroom_bytes for r in e.ranks)
    if e.verdict != "fits" or head < headroom or e.max_concurrency < seqs:
        return None
    return PlanRow(candidate=c, deployment=e.deployment, gpus=e.deployment.world_size,
                   max_num_seqs=seqs, kv_cache_tokens=e.kv_cache_tokens,
                   total_kv_tokens=e.kv_cache_tokens * engines(c, base.engine),
                   max_concurrency=e.max_concurrency, headroom_bytes=head, verdict=e.verdict)


def rank_key(row: PlanRow) -> tuple[int, int, int, int, int, str]:
    """Fewest GPUs, then most KV tokens; ties by the simplest layout (less TP, PP, no EP)."""
    c = row.candidate
    return (row.gpus, -row.total_kv_tokens, c.pp, c.tp, int(c.ep), c.kv_cache_dtype)


def plan(model: str | ModelSpec, gpu: GPU, *, requests: int, context: int, headroom: int,
         base: Deployment | None = None, max_gpus: int = 64,
         kv_dtypes: tuple[str, ...] = KV_DTYPES, evaluator: Evaluator | None = None
         ) -> list[PlanRow]:
    """Every candidate that holds ``requests`` sequences of ``context`` tokens with
    ``headroom`` bytes left, ranked by ``rank_key``."""
    if requests < 1 or context < 1:
        raise BadInput("--requests and --context must be at least 1", hint="e.g. --requests 64 "
                       "--context 32k")
    ev = evaluator or Evaluator()
    base = base or Deployment()
    spec = ev.spec(model, base.speculative_mtp)
    # a context the engine refuses for the model is bad input, not "no layout holds it"
    over = beyond_derived_len(base.with_(max_model_len=context), spec)
    if over is not None and not long_context_allowed(base.engine):
        name = engine_named(base.engine).display
        raise BadInput(f"--context {context:,} is longer than {spec.name}'s derived maximum "
                       f"{over[0]:,} ({over[1]}); {name} refuses it on any layout",
                       hint=f"use --context {over[0]} or less, or set "
                       f"{LONG_CONTEXT_ENV[base.engine]}=1 (as {name} needs it)")
    rows = [row for c in candidates(spec, base.engine, max_gpus, kv_dtypes)
            if (row := evaluate(ev, spec, gpu, c, base, requests, context, headroom))
            is not None]
    return sorted(rows, key=rank_key)


def serve_model(model: str) -> tuple[str, str | None]:
    """What to put after ``vllm serve`` (or ``--model-path``) for the ``--model`` a user gave,
    and a note where it is not exactly what they typed: an HF repo id stays as given; a
    bundled name becomes its model's HF repo id (the first of the config's ``_hf_ids``); a
    folder stays as given; a config.json becomes the folder holding it (the engines load a
    folder or a repo id, not a config file)."""
    from memprof.core.models import hf_ids
    from memprof.core.models.load import bundled_models

    text = model.strip()
    key = text.lower()
    bundled = bundled_models()
    if key in bundled:
        first = _first_hf_id(bundled[key])
        if not first:
            return text, (f"{text} is memprof's bundled name and its config names no HF repo "
                          "id: replace it with the model's id or folder")
        return first, f"{first}: the HF repo id of memprof's bundled {text}"
    if key in hf_ids() and path_kind(Path(text).expanduser()) == "missing":
        return text, None
    path = Path(text).expanduser()
    if path_kind(path) == "file":
        folder = str(path.parent) if str(path.parent) else "."
        return folder, f"the engine loads the folder {folder}, not its config.json"
    return text, None


def _first_hf_id(path: Path) -> str:
    import json

    try:
        ids = json.loads(path.read_text(encoding="utf-8")).get("_hf_ids") or []
    except (OSError, ValueError):
        return ""
    return str(ids[0]) if ids else ""
