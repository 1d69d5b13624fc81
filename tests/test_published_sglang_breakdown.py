"""memprof term by term against the memory figures SGLang prints at start-up.

``tests/data/published.json`` compares one KV figure per SGLang log. SGLang prints more: the free
memory around each step of ``ModelRunner`` start-up (``model_executor/model_runner.py``, every
release modelled, 0.4.3 to SGL@d315eb7; "GB" there is ``/ (1 << 30)``, GiB):

* ``D``  "Init torch distributed ends. mem usage=" (0.5.x): free before − free after
  ``init_torch_distributed`` (the process groups, their NCCL communicators, custom all-reduce);
  memprof: its baseline less the CUDA context and memory other processes hold;
* ``F0`` "Load weight begin. avail mem=": free before ``load_model``; memprof: total − baseline;
* ``L``  "Load weight end. ... mem usage=" (0.4.4 on): free before − free after the load;
  memprof: the engine's load figure (``Engine.load_figure``);
* ``F1`` "Load weight end. ... avail mem=": free after the load; memprof: F0 − L;
* ``KV`` "KV Cache is allocated. ... KV size:" (or "K size" + "V size"): the pool's bytes;
  memprof: the KV cache component;
* ``T``  "#tokens:" (or "max_total_num_tokens="): the pool's tokens; memprof: the KV tokens;
* ``F2`` "Memory pool end. avail mem=": free after ``init_memory_pool`` (the KV pool and the
  request-to-token table beside it); memprof: F1 − KV − R;
* ``R``  derived where F1, KV and F2 are all printed: F1 − KV − F2, what ``init_memory_pool``
  allocates beside the KV pool; memprof: the request-to-token table
  (``memprof/core/engines/sglang_req_pool.py``) and the caching allocator's rounding of each
  of the pool's tensors (``memprof/core/engines/sglang_pool.py``), which "KV size" leaves out.

The pool is sized on the free memory after loading, less ``(1 − mem_fraction_static)`` × the free
memory before it (``profile_max_num_token``), so a KV figure memprof misses is a miss in F0 (the
baseline) or in L (the load); this table says which. The data file
(``tests/data/published_sglang_breakdown.json``) holds each SGLang row's verbatim lines (from its
quote), the figures read from them, the terms memprof misses (``off``) and what is known of why
(``finding``). ``pytest -n0 -s`` prints the table. The figures are the engine's; they are
compared, never fitted to.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from breakdown_helpers import log_memprof_cells

from memprof.base.errors import MemprofError
from memprof.base.units import GiB
from memprof.core.estimate import Estimate
from memprof.core.explain import ESTIMATED
from memprof.core.kvcache import kv_tensor_sizes
from memprof.core.terms.allocator import allocation_size
from memprof.core.terms.request_table import pool_table_bytes
from tests.test_published_distribution import ROWS, Refused, row_estimate

DATA = Path(__file__).parent / "data"
BREAKDOWN: dict[str, Any] = json.loads((DATA / "published_sglang_breakdown.json").read_text())
ENTRIES: list[dict[str, Any]] = BREAKDOWN["rows"]
BY_ID = {r["id"]: r for r in ROWS}
SGLANG_IDS = {r["id"] for r in ROWS if r.get("engine") == "sglang"}

TERMS = ("D", "F0", "L", "F1", "KV", "R", "F2", "T")
_NUM = r"([\d.]+)"
PATTERNS: dict[str, tuple[str, ...]] = {
    "D": (r"Init torch distributed ends\. mem usage=" + _NUM + " GB",),
    "F0": (r"Load weight begin\. avail mem=" + _NUM + " GB",),
    "L": (r"Load weight end\..* mem usage=" + _NUM + " GB",),
    "F1": (r"Load weight end\..* avail mem=" + _NUM + " GB",),
    "KV": (r"KV Cache is allocated\..* KV size: " + _NUM + " GB",),
    "T": (r"KV Cache is allocated\. #tokens: (\d+)", r"max_total_num_tokens=(\d+)"),
    "F2": (r"Memory pool end\. avail mem=" + _NUM + " GB",),
}
_KV_SPLIT = r"K size: " + _NUM + " GB, V size: " + _NUM + " GB"


def parse(lines: list[str]) -> dict[str, float]:
    """Every term the lines print (GiB; T in tokens): the first line that prints it."""
    out: dict[str, float] = {}
    for term, patterns in PATTERNS.items():
        for line in lines:
            hit = next((m for p in patterns if (m := re.search(p, line))), None)
            if hit:
                out[term] = float(hit.group(1))
                break
    if "KV" not in out:
        hit = next((m for line in lines if (m := re.search(_KV_SPLIT, line))), None)
        if hit:
            out["KV"] = round(float(hit.group(1)) + float(hit.group(2)), 2)
    return out


def derived(p: dict[str, float]) -> dict[str, float]:
    """The log's terms with those its figures imply: F0 = F1 + L where the begin line is not
    quoted (both are ``get_available_gpu_memory`` readings around ``load_model``), R = F1 − KV −
    F2 where all three are printed."""
    out = dict(p)
    if "F0" not in out and {"F1", "L"} <= out.keys():
        out["F0"] = round(out["F1"] + out["L"], 2)
    if {"F1", "KV", "F2"} <= out.keys():
        out["R"] = round(out["F1"] - out["KV"] - out["F2"], 2)
    return out


def test_every_entry_is_an_sglang_row_with_its_lines() -> None:
    ids = [e["id"] for e in ENTRIES]
    assert len(ids) == len(set(ids))
    listed = {w["id"] for w in BREAKDOWN["without_lines"]}
    # every entry is an SGLang row of published.json, with lines or with why it has none; rows
    # added to published.json after this file was written are printed until someone reads them
    assert set(ids) | listed <= SGLANG_IDS and not listed & set(ids)
    if SGLANG_IDS - set(ids) - listed:
        print("SGLang rows not searched for breakdown lines yet:",
              sorted(SGLANG_IDS - set(ids) - listed))
    assert all(w["why_none"] for w in BREAKDOWN["without_lines"])
    for e in ENTRIES:
        row = BY_ID[e["id"]]
        assert e["found_in"] == "quote" and e["source"] == row["source"], e["id"]
        assert e["lines"], e["id"]
        for line in e["lines"]:  # verbatim
            assert line in row["quote"], (e["id"], line)
        assert e["release"] == row.get("memprof_engine_version"), e["id"]
        assert set(e.get("not_compared", {})) <= set(TERMS), e["id"]


def test_parsed_figures_are_the_lines_own() -> None:
    for e in ENTRIES:
        assert parse(e["lines"]) == e["parsed"], e["id"]


def test_lines_agree_with_the_published_row() -> None:
    """The tokens and pool figures read here are those ``published.json`` records."""
    keys = {"T": ("kv_tokens",), "L": ("weights_gb",),
            "F1": ("avail_mem_after_load_gb", "avail_after_load_gb"),
            "F2": ("avail_mem_after_pool_gb", "avail_after_pool_gb"),
            "F0": ("avail_mem_before_load_gb",)}
    for e in ENTRIES:
        obs = BY_ID[e["id"]]["observed"]
        for term, names in keys.items():
            for name in names:
                if term in e["parsed"] and name in obs:
                    assert e["parsed"][term] == obs[name], (e["id"], term, name)


# --- memprof's side ---------------------------------------------------------------------------


def tolerance(term: str, log: float) -> float:
    """How far memprof may be from the log (GiB; T in tokens): the load 1% (issue 24's weights
    bin), the pool and its tokens 2% (its KV bin), the free-memory readings and the rest 3%,
    at least 0.05 GiB (ten times the lines' two-decimal rounding)."""
    if term == "L":
        return 0.01 * log
    if term == "T":
        return 0.02 * log
    return max(0.05, (0.02 if term == "KV" else 0.03) * log)


@dataclass
class Compared:
    id: int
    refused: str | None = None
    log: dict[str, float] = field(default_factory=dict)
    memprof: dict[str, float] = field(default_factory=dict)

    def off(self) -> set[str]:
        return {t for t in self.log.keys() & self.memprof.keys()
                if abs(self.memprof[t] - self.log[t]) > tolerance(t, self.log[t])}


def memprof_terms(e: Estimate) -> dict[str, float]:
    """memprof's figure for each term, on the rank with the most weights (GiB; T in tokens)."""
    r = max(e.ranks, key=lambda x: x.weights_bytes)
    base = sum(c.bytes for c in r.components if c.where == "baseline")
    own = sum(c.bytes for c in r.components if c.where == "baseline"
              and not c.name.startswith(("CUDA context", "memory in use")))
    f0 = ESTIMATED["avail_before_load_bytes"](e, r)
    load = ESTIMATED["weights_bytes"](e, r)
    # beside the pool: the request-to-token table and the caching allocator's 2 MiB rounding of
    # each pool tensor (SGLang's own tensors: memprof/core/engines/sglang_pool.py)
    rounding = sum(allocation_size(n) - n for n in kv_tensor_sizes(r.plan, r.kv.num_gpu_blocks))
    table = pool_table_bytes(r.components) + rounding
    out = {"D": own, "F0": f0, "L": load, "F1": f0 - load, "KV": r.kv.kv_cache_bytes,
           "R": table, "F2": ESTIMATED["avail_after_pool_bytes"](e, r) - rounding}
    assert e.gpu.total_bytes - base == f0
    gib = {t: v / GiB for t, v in out.items()}
    gib["T"] = float(e.kv_cache_tokens)
    return gib


def compared(entry: dict[str, Any]) -> Compared:
    log = derived(entry["parsed"])
    for term in entry.get("not_compared", {}):
        log.pop(term, None)
    c = Compared(id=entry["id"], log=log)
    try:
        e, _ = row_estimate(BY_ID[entry["id"]])
    except Refused as exc:
        c.refused = str(exc)
        return c
    except MemprofError as exc:
        c.refused = "memprof: " + exc.message
        return c
    c.memprof = memprof_terms(e)
    return c


def render(rows: list[Compared]) -> str:
    head = f"{'row':>5}" + "".join(f"{t:>17}" for t in TERMS)
    out = [head, f"{'':>5}" + "".join(f"{'log/memprof':>17}" for _ in TERMS)]
    for c in rows:
        if c.refused:
            out.append(f"{c.id:>5} refused: {c.refused}")
            continue
        cells = log_memprof_cells(c.log, c.memprof, c.off(), TERMS, (8, 7),
                                  lambda t: ".0f" if t == "T" else ".2f")
        out.append(f"{c.id:>5}" + cells)
    out.append("(GiB, T in tokens; * memprof outside the term's tolerance, the entry's finding "
               "says why)")
    return "\n".join(out)


def test_the_table_and_the_terms_memprof_misses() -> None:
    """On every entry, the terms memprof misses are exactly those the entry lists under
    ``off``, each explained in its ``finding``; an entry memprof refuses says so
    (``refused``). A change that closes a gap (or opens one) fails here until the data file
    says so."""
    table = [compared(e) for e in ENTRIES]
    print("\nSGLang's start-up lines against memprof's terms:")
    print(render(table))
    by_id = {e["id"]: e for e in ENTRIES}
    for c in table:
        entry = by_id[c.id]
        if entry.get("refused"):
            assert c.refused, c.id
            continue
        assert c.refused is None, (c.id, c.refused)
        assert c.off() == set(entry.get("off", [])), (c.id, sorted(c.off()))
        if c.off():
            assert entry.get("finding"), c.id


def test_the_load_is_within_one_percent_where_printed() -> None:
    """What holds today: SGLang's "mem usage" of the load, on every row memprof runs, within
    1% of memprof's load figure but for the rows whose ``off`` lists L."""
    by_id = {e["id"]: e for e in ENTRIES}
    table = [compared(e) for e in ENTRIES if "L" in e["parsed"]]
    runs = [c for c in table if not c.refused]
    assert len(runs) >= 6
    for c in runs:
        assert ("L" in c.off()) == ("L" in by_id[c.id].get("off", [])), c.id


def test_memprof_free_after_pool_is_its_terms() -> None:
    """memprof's own identity the table relies on: F2 = total − baseline − L − KV − R."""
    for e in ENTRIES:
        c = compared(e)
        if c.refused:
            continue
        m = c.memprof
        assert abs(m["F0"] - m["L"] - m["KV"] - m["R"] - m["F2"]) < 1e-6, c.id
