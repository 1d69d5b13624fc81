"""What ``memprof validate`` runs: the orchestration that drives the decode kernels of
``memprof.kernels`` under each scratch policy, checks parity, graph cleanliness, memory against the
estimate and speed, and builds the frozen validation results (and their JSON dicts) that
``memprof.report.validate`` renders.

One module per kernel family: ``mla_tq`` (MLA and TurboQuant decode), ``dsv4`` (DeepSeek-V4
sparse MLA decode), ``dp_gather`` (SGLang's DP-attention gather); ``graph_clean`` is the
CUDA-graph cleanliness check they share. Needs the ``kernels`` extra (torch, triton), imported
when a module here is; ``memprof.kernels`` never imports this package.
"""
