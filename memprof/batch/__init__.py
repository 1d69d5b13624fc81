"""Many deployments at once, and the caching that makes them fast: ``sweep`` (a grid of
settings) and ``plan`` (the layouts that hold a workload) estimate each point through an
``Evaluator`` that wraps the estimator's steps, ``memo`` (a term remembered by the settings it
reads), ``replay`` (the allocator replay shared by points with the same weights).

Nothing in ``memprof.core`` imports this package: the estimator is a model, and caching wraps it
from outside (``tools/check_imports.py`` places this layer above ``memprof.core``).
"""
