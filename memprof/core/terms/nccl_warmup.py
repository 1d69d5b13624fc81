"""The process's first kernel where an NCCL communicator's warm-up runs it before the engine's
free-memory baseline and the communicator's measured row does not hold it.

Every NCCL row of ``memprof.core.terms.nccl`` but one was measured after a context step that had
already run a fill kernel (``torch.zeros``), so it leaves out the one-time memory the process's
first kernel brings in (the driver's device-side assert/printf reservation, made at the load of
its module, which calls ``__assertfail``), 96,468,992 B on H100 and the card's own step elsewhere
(``memprof.core.terms.first_kernel``; reports/gpu/nccl/README.md,
reports/gpu/nccl/first-kernel-2x-h100.json); only the (NVLink P2P, cuMem on) row holds it
(``memprof.core.terms.nccl.FIRST_KERNEL_IN_ROW``). vLLM before 0.18.0 ran it before its
snapshot in ``set_device`` (V1 0.10.0-0.17.x, ``non_torch.FIRST_KERNEL_AT_SET_DEVICE``) or in
its profile run (``memprof.core.terms.non_torch.profile_run_increase``); from 0.18.0 its
worker builds the communicators before the snapshot with no kernel run yet, so PyNccl's warm-up
runs it there, before the budget (``FIRST_KERNEL_AT_WARM_UP``'s vLLM row). An engine whose
KV pool is sized from the free memory before its load sees it there instead, where its
communicators' warm-up runs the process's first kernel before the load
(``memprof.core.terms.nccl.FIRST_KERNEL_AT_WARM_UP``; the profile run's own increase then
holds the cuBLAS step alone, as after a row that holds the kernel): SGLang's
``GroupCoordinator`` builds a ``PyNcclCommunicator`` for every group of more than one rank,
whose constructor warms up with an all_reduce of a ``torch.zeros`` tensor, before
``load_model``; and its pool is ``mem_fraction_static`` × the free
memory before the load − the load's drop (``memprof.core.engines`` SGLang budget), so a
first kernel that the row leaves out belongs before the baseline. With NCCL's cuMem off, which
SGLang's launcher sets (``memprof.core.terms.non_torch.NCCL_CUMEM``), the P2P rows do not hold
it; over SHM neither setting's row does.
"""

from __future__ import annotations

from memprof.base.units import fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.terms.nccl import FIRST_KERNEL_AT_WARM_UP
from memprof.core.terms.non_torch import (
    card_first_kernel,
    nccl_comm,
    nccl_groups,
    nccl_placement,
)
from memprof.core.versions import rule_in_force


def warm_up_first_kernel(ctx: TermContext) -> list[Component]:
    """The first kernel's module memory at the communicators' warm-up, where
    ``FIRST_KERNEL_AT_WARM_UP`` holds, the rank has an NCCL communicator, and no communicator
    row holds the kernel already; placed where the communicators are (``nccl_placement``)."""
    dep, gpu = ctx.dep, ctx.gpu
    if rule_in_force(FIRST_KERNEL_AT_WARM_UP, dep.engine_version, dep.engine) is None:
        return []
    groups = list(nccl_groups(dep))
    if not groups or any(nccl_comm(dep, gpu, name, size).first_kernel for name, size in groups):
        return []
    size, how = card_first_kernel(gpu)
    return [Component(
        name="first kernel's modules (NCCL warm-up)", category="non_torch",
        bytes=size, where=nccl_placement(dep).nccl, profiled=True,
        formula=f"{fmt_bytes(size)}: the process's first kernel "
        "(PyNccl's warm-up torch.zeros), which the communicator's measured row leaves out "
        f"(reports/gpu/nccl/first-kernel-2x-h100.json; {how})")]
