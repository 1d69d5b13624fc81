"""Memory other processes hold on the GPU before the engine starts (``--gpu-memory-in-use``): a
desktop's display server, Docker Desktop's WSL2 VM, another server on the same card. memprof
cannot see it; the user states it, or ``memprof explain`` reads it from a log's free memory
before load (``memprof.core.explain.in_use_from_log``). Never guessed: without the flag it is 0
and the term adds nothing.

Where it falls is where the CUDA context falls (``non_torch.nccl_placement``), because the
engines see both the same way, as device memory that is not free when they look:

- SGLang (0.4.3 – 0.5.9 ``model_runner.py``: ``init_torch_distributed`` returns
  ``get_available_gpu_memory`` = ``torch.cuda.mem_get_info`` free, and ``profile_max_num_token``
  sizes the pool as ``free after load − (1 − mem_fraction_static) × that``): before the engine's
  baseline, so it shrinks the free memory the budget is a fraction of (the heuristic's
  ``mem_fraction_static`` reads the card's total, nvidia-smi ``memory.total`` in
  ``get_nvgpu_memory_capacity``, which it does not change);
- vLLM V0, and V1 from 0.9.1 (``init_snapshot = MemorySnapshot()`` before the profile): in the
  baseline snapshot, so the profile does not charge it; V1 refuses to start when the snapshot's
  free memory is below ``gpu_memory_utilization × total`` (0.9.2 and 0.10.1
  v1/worker/gpu_worker.py ``Worker.init_device``, from 0.14.1 v1/worker/utils.py
  ``request_memory``: "Free memory on device ... is less than desired GPU memory
  utilization"; not in 0.9.0). V0 (0.7.3 worker/worker.py) has no such check: it budgets
  ``gpu_memory_utilization × total`` all the same and then fails allocating the cache blocks
  about where V1 refuses, so memprof's verdict (``Engine.startup_budget_refusal``) calls both a
  start-up failure;
- vLLM V1 0.8.0 – 0.9.0 (v1/worker/gpu_worker.py ``determine_available_memory``:
  ``non_torch_allocations = (total − free) − torch allocated``): charged to the budget, as the
  CUDA context is.
"""

from __future__ import annotations

from memprof.base.errors import BadInput
from memprof.base.units import fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.terms.non_torch import nccl_placement


def in_use_terms(ctx: TermContext) -> list[Component]:
    """One component of ``dep.gpu_memory_in_use`` bytes (none when it is unset or 0), category
    ``non_torch``, placed where the release's CUDA context is; refused when it leaves the GPU
    nothing."""
    held = ctx.dep.gpu_memory_in_use or 0
    where = nccl_placement(ctx.dep).context
    gpu = ctx.gpu
    if held <= 0:
        return []
    if held >= gpu.total_bytes:
        raise BadInput(f"--gpu-memory-in-use {fmt_bytes(held)} is not less than the GPU's "
                       f"{fmt_bytes(gpu.total_bytes)} ({gpu.name})",
                       hint="give the memory other processes hold on one GPU, less than its "
                       "total (nvidia-smi shows it before the engine starts)")
    return [Component(name="memory in use by other processes (given)", category="non_torch",
                      bytes=held, where=where, profiled=True,
                      formula="--gpu-memory-in-use: held on the GPU before the engine starts, "
                      "as stated (memprof cannot see other processes)")]
