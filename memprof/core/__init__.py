"""Pure core of memprof: model specs, deployments, memory terms, estimates, verdicts.

Nothing in this package imports torch, rich, typer or pynvml: the estimator must run on a laptop
in well under a second.
"""
