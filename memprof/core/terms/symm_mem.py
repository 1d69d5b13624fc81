"""vLLM's torch symmetric-memory all-reduce (``SymmMemCommunicator``): the buffer it holds on each
TP rank, and the smaller custom all-reduce it leaves where it runs.

From 0.11.0 ``VLLM_ALLREDUCE_USE_SYMM_MEM`` defaults to 1 (envs.py; 0.10.2, the first release
with the communicator: 0; ``--vllm-allreduce-use-symm-mem`` states the variable), and the TP
group's ``CudaCommunicator`` (only the TP group: "custom allreduce or torch symm mem can be used
only by tp", device_communicators/cuda_communicator.py) builds a ``SymmMemCommunicator`` on CUDA
whatever ``--disable-custom-all-reduce`` says. Its constructor (device_communicators/
symm_mem.py, read in 0.11.0, 0.14.0, 0.17.0, 0.20.0, 0.22.0 and 0.33.0) returns early where the
card's compute capability or the TP size is not a key of ``SYMM_MEM_ALL_REDUCE_MAX_SIZES``
(all_reduce_utils.py: 9.0 and 10.0 at TP 2, 4, 6, 8; 10.3 added in 0.19.0), and otherwise
allocates ``torch_symm_mem.empty(max_size // 2, dtype=bfloat16)`` and rendezvouses it over the
group; where the rendezvous gives no multicast address (no multicast NVSwitch) it marks itself
disabled and keeps the buffer, as it does where the rendezvous raises (0.14.0 on catch it). The
communicator lives with the process, so every such rank holds the buffer.

What the buffer holds (reports/gpu/symm-mem/, 2× H100, torch 2.11): its size plus 2 MiB (torch's
signal pad, at the driver's 2 MiB granularity), outside torch's caching allocator, and the
rendezvous nothing more without multicast. It is made with the communicators, so it falls where
they do (``nccl_placement``: before the engine's memory snapshot from 0.11.0, outside the
budget).

Where the communicator runs (a multicast address: the catalog's ``nvlink_multicast``, and a TP
group inside one node), ``CustomAllreduce`` takes ``max_size = min(CUSTOM_ALL_REDUCE_MAX_SIZES[
capability][world_size], 8 MiB)`` (custom_all_reduce.py ``symm_mem_enabled``): 512 KiB / 256 KiB
at TP 6 / 8 on 9.0, 2 MiB or 1 MiB on 10.0, its two cudaMalloc buffers then one 2 MiB page each.

Not modelled: the multicast object an NVSwitch host adds (the lent hosts forbid making one),
``TORCH_SYMM_MEM_DISABLE_MULTICAST``, and 10.7.
"""

from __future__ import annotations

from memprof.base.units import MiB
from memprof.core.components import Component, TermContext, Where
from memprof.core.deployment import Deployment
from memprof.core.gpus import GPU
from memprof.core.nodes import spans_nodes
from memprof.core.terms.custom_allreduce import CUSTOM_AR_MAX_SIZE
from memprof.core.versions import Rule, rule_in_force, value_at

_SM90 = {2: 64 * MiB, 4: 32 * MiB, 6: 64 * MiB, 8: 64 * MiB}
_SM100 = {2: 8 * MiB, 4: 32 * MiB, 6: 128 * MiB, 8: 128 * MiB}
_SM103 = {2: 4 * MiB, 4: 32 * MiB, 6: 32 * MiB, 8: 64 * MiB}
# the custom all-reduce's max_size where the symmetric-memory communicator runs
_CA_SM90 = {2: 64 * MiB, 4: 32 * MiB, 6: MiB // 2, 8: MiB // 4}
_CA_SM100 = {2: 2 * MiB, 4: 2 * MiB, 6: 1 * MiB, 8: 1 * MiB}
_CA_SM103 = {2: 4 * MiB, 4: 4 * MiB, 6: 8 * MiB, 8: 4 * MiB}

# (buffer sizes by architecture and TP size, custom all-reduce sizes) per release where the
# communicator exists (VLLM_ALLREDUCE_USE_SYMM_MEM=1 builds it from 0.10.2)
SYMM_MEM_ALL_REDUCE: tuple[Rule, ...] = (
    Rule(name="symm_mem_all_reduce", changes="non-torch: the TP group's symmetric-memory buffer",
         since="0.10.2", until="0.19.0",
         value=({"sm90": _SM90, "sm100": _SM100}, {"sm90": _CA_SM90, "sm100": _CA_SM100}),
         applies_to="nccl",
         introduced_by="SymmMemCommunicator (first released in 0.10.2; no symm_mem.py in "
         "0.10.1.1)",
         removed_by="compute capability 10.3 added (first released in 0.19.0)",
         source="0.10.2 / 0.11.0 / 0.14.0 / 0.17.0 "
         "device_communicators/cuda_communicator.py (TP only), symm_mem.py "
         "SymmMemCommunicator.__init__ (torch_symm_mem.empty, rendezvous, disabled without "
         "multicast), all_reduce_utils.py SYMM_MEM_ALL_REDUCE_MAX_SIZES / "
         "CUSTOM_ALL_REDUCE_MAX_SIZES, custom_all_reduce.py symm_mem_enabled"),
    Rule(name="symm_mem_all_reduce", changes="non-torch: the TP group's symmetric-memory buffer",
         since="0.19.0", until=None,
         value=({"sm90": _SM90, "sm100": _SM100, "sm103": _SM103},
                {"sm90": _CA_SM90, "sm100": _CA_SM100, "sm103": _CA_SM103}),
         applies_to="nccl", introduced_by="10.3 rows (first released in 0.19.0; 0.18.0 has none)",
         source="0.19.0 / 0.20.0 / 0.22.0 / 0.33.0 device_communicators/all_reduce_utils.py "
         "SYMM_MEM_ALL_REDUCE_MAX_SIZES and CUSTOM_ALL_REDUCE_MAX_SIZES with \"10.3\"; "
         "symm_mem.py as in 0.11.0 (a RuntimeError at the rendezvous caught from 0.14.0)"),
)
# whether the communicator is built where VLLM_ALLREDUCE_USE_SYMM_MEM is unset
SYMM_MEM_DEFAULT_ON: tuple[Rule, ...] = (
    Rule(name="symm_mem_default_on", changes="VLLM_ALLREDUCE_USE_SYMM_MEM's default: 1",
         since="0.11.0", until=None, value=True, applies_to="nccl",
         introduced_by="the default flipped to 1 (first released in 0.11.0; 0.10.2: '0')",
         source="0.10.2 envs.py VLLM_ALLREDUCE_USE_SYMM_MEM default '0'; 0.11.0 / 0.14.0 / "
         "0.22.0 / 0.33.0 default '1'"),
)
# torch's signal pad beside each buffer, at the driver's granularity (reports/gpu/symm-mem/)
SIGNAL_PAD_BYTES = 2 * MiB


def _tables(dep: Deployment) -> tuple[dict[str, dict[int, int]], dict[str, dict[int, int]]]:
    got = value_at(SYMM_MEM_ALL_REDUCE, dep.engine_version, None, dep.engine)
    return got if isinstance(got, tuple) else ({}, {})


def symm_mem_buffer(ctx: TermContext, size: int) -> int:
    """Bytes of max_size the TP group's ``SymmMemCommunicator`` allocates on this rank (0: none:
    another engine or release, ROCm, a card or TP size off vLLM's table)."""
    dep = ctx.dep
    switch = dep.vllm_allreduce_use_symm_mem  # vLLM: bool(int(...)): any other integer is on
    if ctx.gpu.is_rocm or switch == 0 or (switch is None and rule_in_force(
            SYMM_MEM_DEFAULT_ON, dep.engine_version, dep.engine) is None):
        return 0
    return _tables(ctx.dep)[0].get(ctx.gpu.arch, {}).get(size, 0)


def unused_switch_note(dep: Deployment, gpu: GPU) -> str:
    """What the output says where ``--vllm-allreduce-use-symm-mem`` turns the buffer on and no
    communicator is made (ROCm, one TP rank, a release before the communicator, a card or TP size
    off vLLM's table); "" otherwise."""
    if not dep.vllm_allreduce_use_symm_mem:
        return ""
    table = _tables(dep)[0]
    if gpu.is_rocm:
        why = f"{gpu.name} is a ROCm GPU"
    elif dep.tp == 1:
        why = "there is no TP group (TP 1)"
    elif not table:
        why = (f"vLLM {dep.engine_version} has no SymmMemCommunicator (from "
               f"{SYMM_MEM_ALL_REDUCE[0].since})")
    elif dep.tp not in table.get(gpu.arch, {}):
        why = f"vLLM's table has no buffer for {gpu.arch} at TP {dep.tp}"
    else:
        return ""
    return (f"--vllm-allreduce-use-symm-mem {dep.vllm_allreduce_use_symm_mem} changes nothing "
            f"here: {why} (vllm/distributed/device_communicators/symm_mem.py)")


def symm_mem_runs(ctx: TermContext, size: int) -> bool:
    """Whether the communicator is enabled, not only allocated: a multicast address, which
    needs the catalog's multicast NVSwitch and a TP group inside one node."""
    dep = ctx.dep
    return (symm_mem_buffer(ctx, size) > 0 and bool(ctx.gpu.nvlink_multicast)
            and not (dep.nnodes > 1 and spans_nodes(dep, "TP")))


def custom_all_reduce_max_size(ctx: TermContext, size: int) -> int:
    """The custom all-reduce's ``max_size`` on this rank: 8 MiB, or vLLM's smaller table row
    where the symmetric-memory communicator runs."""
    if not symm_mem_runs(ctx, size):
        return CUSTOM_AR_MAX_SIZE
    row = _tables(ctx.dep)[1].get(ctx.gpu.arch, {})
    return min(row.get(size, CUSTOM_AR_MAX_SIZE), CUSTOM_AR_MAX_SIZE)


def symm_mem_component(ctx: TermContext, size: int, where: Where, tag: str) -> Component | None:
    """The buffer's row for a TP group of ``size`` ranks, placed with the communicators."""
    buf = symm_mem_buffer(ctx, size)
    if not buf:
        return None
    runs = symm_mem_runs(ctx, size)
    return Component(
        name=f"symmetric-memory all-reduce buffer (TP, {size} ranks)", category="non_torch",
        bytes=buf + SIGNAL_PAD_BYTES, count=1, where=where, profiled=True,
        formula=f"torch_symm_mem.empty({buf // MiB} MiB) for {ctx.gpu.arch} at TP {size} + the "
        f"{SIGNAL_PAD_BYTES // MiB} MiB signal pad (reports/gpu/symm-mem/; vLLM "
        "SymmMemCommunicator, symm_mem.py); "
        + ("enabled: multicast NVSwitch" if runs else "kept but disabled: no multicast "
           "address on this host") + tag)
