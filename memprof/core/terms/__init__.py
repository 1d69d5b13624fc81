"""The memory terms between the weights and the KV cache, one module each: ``activation``,
``cudagraph``, ``non_torch``, ``allocator``, the model-load buffers ``rope_cache`` and
``init_buffers``, the allocator's rounding inside the model-load figure ``load_rounding``,
the allocator holes vLLM 0.8.0–0.9.0.1 charge to the budget ``reserved_charge`` (and
``kv_cache``, the KV component itself).

Each term is a pure function ``(TermContext) -> list[Component]`` with its formula in the
docstring and a citation; ``memprof.core.terms.registry`` lists which run before the KV cache is
sized and which after. This ``__init__`` imports nothing: Python runs it before any term module,
so a term module imported from outside the package (``memprof.core.terms.allocations`` imports two)
does not import every other term with it.
"""
