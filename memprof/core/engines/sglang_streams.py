"""What makes torch's CUDA stream pool in an SGLang rank before its decode CUDA graphs, per release
(read in the PyPI wheels, 0.4.3 – 0.5.23).

The first ``torch.cuda.Stream()`` of a process makes torch's stream pool, about 70 MiB of device
memory outside the caching allocator (``memprof/core/terms/stream_pool.py``). memprof counts it
with the first decode graph (``memprof/core/terms/cudagraph.py`` ``graph_driver_first``) unless
something made it earlier. On a rank with an NCCL communicator the communicator did
(``stream_pool.nccl_made_stream_pool``); on a rank without one (TP1) SGLang makes a stream of its
own before "Capture cuda graph begin" from 0.4.4 on, so the capture's logged "mem usage" does not
hold the pool:

- 0.4.3: nothing before the capture. ``MHATokenToKVPool`` makes no stream, and the overlap
  scheduler's ``TpModelWorkerClient.forward_stream`` is made after ``TpModelWorker`` (which
  captures); the capture stream (``GroupCoordinator.graph_capture``: ``torch.cuda.Stream()``)
  makes the pool;
- 0.4.4 – 0.5.8: ``MHATokenToKVPool.__init__`` makes ``self.alt_stream`` right after its KV
  buffers (0.4.4 ``torch.cuda.Stream()``; from 0.4.7 only where ``_is_cuda``, so not on ROCm;
  from 0.5.5 also only with ``enable_alt_stream``, which ``ModelRunner.init_memory_pool`` passes
  as ``not enable_pdmux``, on by default). ``MLATokenToKVPool`` makes none. The scheduler's
  overlap streams (0.5.4 – 0.5.8 ``Scheduler.init_overlap``) come after its ``TpModelWorker``;
- 0.5.9 on: ``ModelRunner.__init__`` makes ``self.forward_stream`` unconditionally, after
  ``init_torch_distributed`` and before ``load_model`` (every device, MLA models too).

Not modelled [assumption]: the model classes' own streams made at load (``alt_stream`` in
``models/qwen3.py``, ``deepseek_v2.py`` and others): they matter only where no row above makes the
pool first (0.4.3, MLA pools before 0.5.9, ROCm 0.4.7 – 0.5.8), where memprof keeps the capture
stream's.
"""

from __future__ import annotations

from typing import Any

from memprof.core.engines.base import DeploymentView
from memprof.core.gpus import GPU
from memprof.core.versions import Rule, value_at

_READ = "read in the sglang {} wheel (first release with it)"

# What makes torch's stream pool before the decode capture on a rank without an NCCL
# communicator. value: "none", "MHA KV pool" (MHATokenToKVPool.alt_stream: MHA pools on CUDA,
# ROCm too before 0.4.7) or "model runner" (ModelRunner.forward_stream, every rank).
SGLANG_STREAM_BEFORE_GRAPHS: tuple[Rule, ...] = (
    Rule(name="sglang_stream_pool_before_graphs",
         changes="CUDA graphs: torch's stream pool made before the decode capture",
         since=None, until="0.4.4", value="none", engine="sglang",
         introduced_by="before 0.4.3", removed_by=_READ.format("0.4.4"),
         source="sglang 0.4.3 mem_cache/memory_pool.py MHATokenToKVPool (no stream); "
         "managers/tp_worker_overlap_thread.py TpModelWorkerClient.__init__: forward_stream "
         "after self.worker = TpModelWorker(...); distributed/parallel_state.py graph_capture: "
         "stream = torch.cuda.Stream()"),
    Rule(name="sglang_stream_pool_before_graphs",
         changes="CUDA graphs: torch's stream pool made before the decode capture",
         since="0.4.4", until="0.4.7", value="MHA KV pool", engine="sglang",
         introduced_by=_READ.format("0.4.4"), removed_by=_READ.format("0.4.7"),
         source="sglang 0.4.4 mem_cache/memory_pool.py MHATokenToKVPool.__init__: "
         "self.alt_stream = torch.cuda.Stream() after _create_buffers() (0.4.5, 0.4.6: "
         "self.device_module.Stream())"),
    Rule(name="sglang_stream_pool_before_graphs",
         changes="CUDA graphs: torch's stream pool made before the decode capture",
         since="0.4.7", until="0.5.9", value="MHA KV pool on CUDA", engine="sglang",
         introduced_by=_READ.format("0.4.7"), removed_by=_READ.format("0.5.9"),
         source="sglang 0.4.7 – 0.5.4 mem_cache/memory_pool.py MHATokenToKVPool.__init__: "
         "self.alt_stream = self.device_module.Stream() if _is_cuda else None; 0.5.5 – 0.5.8 "
         "'if _is_cuda and enable_alt_stream', model_executor/model_runner.py passing "
         "enable_alt_stream=not self.server_args.enable_pdmux; managers/scheduler.py "
         "init_overlap's streams after the TpModelWorker"),
    Rule(name="sglang_stream_pool_before_graphs",
         changes="CUDA graphs: torch's stream pool made before the decode capture",
         since="0.5.9", until=None, value="model runner", engine="sglang",
         introduced_by=_READ.format("0.5.9"),
         source="sglang 0.5.9, 0.5.10, 0.5.13, 0.5.18, 0.5.19, 0.5.23 model_executor/"
         "model_runner.py ModelRunner.__init__: self.forward_stream = "
         "torch.get_device_module(self.device).Stream() after init_torch_distributed(), before "
         "initialize() loads the model"),
)


def stream_pool_maker(dep: DeploymentView, gpu: GPU, spec: Any) -> tuple[str, bool] | None:
    """What makes torch's stream pool before the decode capture at ``dep.engine_version``
    (``SGLANG_STREAM_BEFORE_GRAPHS``), in words, and whether before the model loads (0.5.9 on:
    ``forward_stream`` is made before ``load_model``, so the pool is in "Load weight begin …
    avail mem" and the pool's ``mem_fraction_static`` share of it leaves the KV pool); None:
    nothing (the capture stream makes it)."""
    value = str(value_at(SGLANG_STREAM_BEFORE_GRAPHS, dep.engine_version, "model runner",
                         engine="sglang"))
    if value == "model runner":
        return "ModelRunner.__init__'s forward_stream (SGLang 0.5.9 on)", True
    mla = any(layer.attention.kv_lora_rank for layer in spec.layers)
    if value == "none" or mla or (value.endswith("on CUDA") and gpu.is_rocm):
        return None
    return "MHATokenToKVPool's alt_stream (SGLang 0.4.4 – 0.5.8)", False


RULES: tuple[tuple[Rule, ...], ...] = (SGLANG_STREAM_BEFORE_GRAPHS,)
"""The rows of this module (``memprof versions`` lists them with the engine's)."""
