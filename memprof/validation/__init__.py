"""What ``memprof validate`` runs: the orchestration that drives the decode kernels of
``memprof.kernels`` under each scratch policy, checks parity, graph cleanliness, memory against the
estimate and speed, and builds the frozen validation results that ``memprof.report.validate``
renders.

``registry`` holds the validation rows' shape, the one shape every result answers and the list
of modules that declare rows (it imports no torch); ``results`` the result of one run and its
JSON. One module per kernel family declares its rows (``VALIDATIONS``) beside its code:
``mla_tq`` (MLA and TurboQuant decode), ``dsv4`` (DeepSeek-V4 sparse MLA decode), ``dp_gather``
(SGLang's DP-attention gather); ``graph_clean`` is the CUDA-graph cleanliness check they share.
Those need the ``kernels`` extra (torch, triton), imported when one of them is;
``memprof.kernels`` never imports this package.
"""
