"""SGLang's request-to-token table: ``ReqToTokenPool.req_to_token``, the int32 map from a running
request's slot to the KV-pool indices of its tokens, per release.

SGLang allocates it in ``ModelRunner.init_memory_pool`` right after ``profile_max_num_token`` sized
the KV pool, so it is not part of ``mem_fraction_static × free``: it comes out of the
``(1 − mem_fraction_static)`` reserve, beside activations and CUDA graphs (``SGLang.used``).
Its shape (``mem_cache/memory_pool.py`` ``ReqToTokenPool.__init__``: ``torch.zeros((size,
max_context_len), dtype=torch.int32)``, the same in every release read, 0.4.3 – 0.5.9)::

    bytes        = rows × (context_len + pad) × 4
    rows         = max_num_reqs (+ 1 before 0.4.7)
    max_num_reqs = --max-running-requests, else
                   min(max(int(max_total_num_tokens / context_len × 512), 2048), 4096)

``max_total_num_tokens`` is the pool the profile sized, before ``--max-total-tokens`` caps it
(the default reads it first). One row of ``SGLANG_REQ_TO_TOKEN`` per change, each with the
release it was read in. Not modelled, and said so in the component's formula where it applies:
PD disaggregation's decode pool (``DecodeReqToTokenPool``, from 0.4.7: twice the rows when
``max_num_reqs`` ≤ 32), speculative decoding (the draft worker shares the table; from 0.5.1 the
pad grows by ``--speculative-num-draft-tokens``; EAGLE's default ``max_running_requests`` 48), and
the hybrid GDN/Mamba cap (``HybridReqToTokenPool``; memprof refuses those models on SGLang).
"""

from __future__ import annotations

from typing import NamedTuple

from memprof.core.engines.base import DeploymentView
from memprof.core.versions import Rule, value_at

INT32_BYTES = 4  # torch.int32
# the default max_num_reqs: min(max(int(tokens / context_len * 512), 2048), 4096), unchanged in
# every release read (0.4.3 – 0.5.9 model_runner.py / model_runner_kv_cache_mixin.py)
PER_CONTEXT, FLOOR, CEILING = 512, 2048, 4096


class ReqTable(NamedTuple):
    """What one release's ``init_memory_pool`` makes the table from: rows beyond
    ``max_num_reqs`` (``extra_rows``), the context padding (``pad``), whether speculative
    decoding's draft tokens add to the padding (``draft_pad``, not modelled), and the hybrid
    GDN/Mamba cap on ``max_num_reqs`` (``hybrid_cap``, text: memprof refuses those models on
    SGLang)."""

    extra_rows: int
    pad: int
    draft_pad: bool
    hybrid_cap: str

    def __str__(self) -> str:
        rows = "max_num_reqs" + (f" + {self.extra_rows}" if self.extra_rows else "")
        text = f"int32 ({rows}) × (context + {self.pad}"
        text += " + draft tokens)" if self.draft_pad else ")"
        return text + (f"; hybrid GDN/Mamba: {self.hybrid_cap}" if self.hybrid_cap else "")


_READ = "read in the sglang {} wheel (first release with it)"
_SRC = "model_executor/model_runner.py ModelRunner.init_memory_pool"

SGLANG_REQ_TO_TOKEN: tuple[Rule, ...] = (
    Rule(name="sglang_req_to_token", changes="pool: request-to-token table",
         since=None, until="0.4.7", value=ReqTable(1, 4, False, ""), engine="sglang",
         introduced_by="before 0.4.3 (read in the sglang 0.4.3 wheel, the oldest release "
         "modelled)", removed_by=_READ.format("0.4.7"),
         source=f"sglang 0.4.3 (0.4.4, 0.4.5, 0.4.6 the same) {_SRC}: ReqToTokenPool("
         "size=max_num_reqs + 1, max_context_len=context_len + 4); max_num_reqs = "
         "max_running_requests or min(max(int(max_total_num_tokens / context_len * 512), "
         "2048), 4096), read before the --max-total-tokens cap"),
    Rule(name="sglang_req_to_token", changes="pool: request-to-token table",
         since="0.4.7", until="0.5.1", value=ReqTable(0, 4, False, ""), engine="sglang",
         introduced_by=_READ.format("0.4.7"), removed_by=_READ.format("0.5.1"),
         source=f"sglang 0.4.7 (0.4.8, 0.4.9, 0.4.10 the same) {_SRC}: ReqToTokenPool("
         "size=max_num_reqs, max_context_len=context_len + 4); with --disaggregation-mode "
         "decode a DecodeReqToTokenPool with pre_alloc_size = 2 * max_num_reqs when "
         "max_num_reqs <= 32 (not modelled)"),
    Rule(name="sglang_req_to_token", changes="pool: request-to-token table",
         since="0.5.1", until="0.5.2", value=ReqTable(0, 4, True, ""), engine="sglang",
         introduced_by=_READ.format("0.5.1"), removed_by=_READ.format("0.5.2"),
         source=f"sglang 0.5.1 {_SRC}: extra_max_context_len = 4 (+ "
         "speculative_num_draft_tokens when set, not modelled); size=max_num_reqs"),
    Rule(name="sglang_req_to_token", changes="pool: request-to-token table",
         since="0.5.2", until="0.5.4", value=ReqTable(0, 4, True, "min(max_num_reqs, "
         "max_mamba_cache_size)"), engine="sglang",
         introduced_by=_READ.format("0.5.2"), removed_by=_READ.format("0.5.4"),
         source=f"sglang 0.5.2 (0.5.3 the same) {_SRC}: a hybrid GDN model's "
         "HybridReqToTokenPool, max_num_reqs = min(max_num_reqs, max_mamba_cache_size) "
         "(max_mamba_cache_size: --max-running-requests or 512, // dp_size with DP attention)"),
    Rule(name="sglang_req_to_token", changes="pool: request-to-token table",
         since="0.5.4", until=None, value=ReqTable(0, 4, True, "min(max_num_reqs, "
         "max_mamba_cache_size // ratio)"), engine="sglang",
         introduced_by=_READ.format("0.5.4"),
         source=f"sglang 0.5.4 (0.5.5 – 0.5.6 the same; 0.5.7 – 0.5.9 "
         "model_runner_kv_cache_mixin.py init_memory_pool, and init_memory at sgl-project/sglang "
         f"main 001ccef) {_SRC}: a Mamba-ish model's max_num_reqs = min(max_num_reqs, "
         "max_mamba_cache_size // ratio), ratio = 3 (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO; "
         "1 without the radix cache; 0.5.9: + 1 or 2 with the mamba extra buffer)"),
)


def default_max_num_reqs(pool_tokens: int, context_len: int) -> int:
    """SGLang's ``max_num_reqs`` when ``--max-running-requests`` is not given."""
    return min(max(int(pool_tokens / context_len * PER_CONTEXT), FLOOR), CEILING)


class ReqTableSize(NamedTuple):
    """The table of one rank: ``rows × columns`` int32 (``bytes``), how ``rows`` was reached."""

    rows: int
    columns: int
    bytes: int
    formula: str


def req_to_token_table(dep: DeploymentView, pool_tokens: int, given_requests: int | None,
                       stand_in: int | None = None) -> ReqTableSize:
    """The request-to-token table of a rank whose KV pool holds ``pool_tokens`` tokens, at the
    deployment's release (``SGLANG_REQ_TO_TOKEN``); ``given_requests``: ``--max-running-requests``
    as given (None: SGLang's default from the pool); ``stand_in``: the ``max_num_seqs`` memprof
    fills in for a deployment that gives none, which is read as not given (said in the
    formula)."""
    row = value_at(SGLANG_REQ_TO_TOKEN, dep.engine_version, SGLANG_REQ_TO_TOKEN[-1].value,
                   engine="sglang")
    assert isinstance(row, ReqTable)
    context = dep.max_model_len or 0
    if given_requests is not None:
        reqs, how = given_requests, f"--max-running-requests {given_requests:,}"
    else:
        reqs = default_max_num_reqs(pool_tokens, context) if context else FLOOR
        how = (f"max_num_reqs = min(max(int({pool_tokens:,} pool tokens / {context:,} × "
               f"{PER_CONTEXT}), {FLOOR}), {CEILING}) = {reqs:,}")
    rows = reqs + row.extra_rows
    columns = context + row.pad
    size = rows * columns * INT32_BYTES
    extra = f" + {row.extra_rows}" if row.extra_rows else ""
    formula = (f"SGLang ReqToTokenPool.req_to_token: int32 ({reqs:,}{extra} rows × "
               f"(context {context:,} + {row.pad})) = {size:,} B, allocated after the KV pool "
               f"was sized (outside mem_fraction_static); {how}")
    notes = []
    if given_requests is None and stand_in is not None:
        notes.append(f"--max-running-requests read as not given (memprof's max_num_seqs "
                     f"{stand_in:,} is the stand-in it fills in, and a given {stand_in:,} "
                     "reads the same)")
    if given_requests is None and dep.max_total_tokens is not None:
        notes.append("the pool tokens are read after --max-total-tokens caps them (SGLang reads "
                     "them before: the same rows unless the capped pool holds fewer than 8 "
                     "contexts of tokens)")
    if dep.num_speculative_tokens:
        notes.append("speculative decoding not modelled (the draft worker shares the table; "
                     "from 0.5.1 the context pad grows by the draft tokens)")
    notes.append("PD-disaggregation decode pre-allocation not modelled")
    return ReqTableSize(rows, columns, size, formula + "; " + "; ".join(notes))
