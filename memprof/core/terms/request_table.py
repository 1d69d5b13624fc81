"""The table an engine allocates beside its KV pool once the pool is sized: SGLang's
request-to-token map (``memprof/core/engines/sglang_req_pool.py``), asked of the engine
(``Engine.request_table``), so this module names none.

Its size reads the pool's token count (``num_gpu_blocks × block_size``: SGLang's
``max_total_num_tokens`` in pages of ``--page-size``), so it is a runtime term: it is computed
after the KV cache is sized and moves no KV figure. It sits outside the engine's budget
(``where="runtime"``, not profiled): SGLang's ``used`` counts it against the
``(1 − mem_fraction_static)`` reserve, and explain's "free after the KV pool" subtracts it
(``pool_table_bytes``).
"""

from __future__ import annotations

from collections.abc import Iterable

from memprof.core.components import Component, TermContext
from memprof.core.engines import engine_of

REQUEST_TABLE = "request-to-token table"


def request_table_terms(ctx: TermContext) -> list[Component]:
    """One scratch component, "runtime", where the engine allocates such a table (its bytes and
    formula from ``Engine.request_table``); nothing for an engine that has none."""
    engine = engine_of(ctx.dep)
    if not engine.has_request_table:
        return []
    table = engine.request_table(ctx.dep, ctx.gpu, ctx.num_gpu_blocks * ctx.plan.block_size)
    if table is None:
        return []
    size, formula = table
    return [Component(name=REQUEST_TABLE, category="scratch", bytes=size, where="runtime",
                      profiled=False, formula=formula)]


def pool_table_bytes(components: Iterable[Component]) -> int:
    """The bytes of the request table among a rank's components (0 without one)."""
    return sum(c.bytes for c in components if c.name == REQUEST_TABLE)
