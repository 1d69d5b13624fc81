"""What ``memprof validate`` runs: the orchestration that drives the decode kernels of
``memprof.kernels`` under each scratch policy, checks parity, graph cleanliness, memory against the
estimate and speed, and builds the frozen validation results that ``memprof.report.validate``
renders.

Pure data, no torch: ``registry`` (the rows' shape, the one shape every result answers, the
modules that declare rows), ``results`` (one run and its JSON), ``checks`` (parity, bandwidth,
graph-clean records), and per kernel family a ``<name>_result`` module with its result type and
its rows (``VALIDATIONS``): ``mla_tq_result`` (MLA and TurboQuant decode), ``dsv4_result``
(DeepSeek-V4 sparse MLA decode), ``dp_gather_result`` (SGLang's DP-attention gather). Beside each,
the module that runs it (``mla_tq``, ``dsv4``, ``dp_gather``; ``graph_clean`` is the CUDA-graph
check they share): those need the ``kernels`` extra (torch, triton), imported when a row runs.
``memprof.kernels`` never imports this package.
"""
