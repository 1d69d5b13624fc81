"""The CUDA context's card-independent remainder on an architecture where a published start-up
log prints it, in place of the H100's measured remainder (``CONTEXT_REST_BYTES`` of
``memprof.core.terms.non_torch``).

The context memprof charges is the card's own stack reservation (SMs × max resident threads per
SM × 1 KiB) plus a remainder (driver state, lazily loaded module images) that the H100 golden
measured and nothing derives for another architecture. Where a release of an engine printed a
figure that holds the whole context beside terms memprof already models, that figure less those
terms and less the card's stack reservation is a reading of the remainder on that architecture.
Each row here names the log, the release's formula that makes the figure, the terms taken off and
the uncertainty the log's rounding leaves.

sm86, vLLM 0.6.4.post1 on an RTX 3090 (82 SMs), TP1, Llama-3.1-8B-Instruct bf16
(https://github.com/vllm-project/vllm/issues/10517, published rows 101/102/161):
``Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB
peak_torch_memory=17.06GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB ...``.
0.6.4.x's ``Worker.determine_num_available_blocks`` (worker/worker.py, read in the 0.6.4.post1
wheel) prints ``non_torch_memory`` = (total − free) − ``allocated_bytes.all.current`` after the
profile run and ``torch.cuda.empty_cache()``: everything on the device that torch has not
allocated, i.e. the CUDA context, the modules loaded during the load and the profile run
(memprof's TP1 sum of them on an RTX 3090: cuBLAS's 4 MiB-class pool step, 12,582,912 B, and the
first kernel's step after it, 44,040,192 B for 82 SMs × 1,536 threads,
``memprof.core.terms.first_kernel``: 56,623,104 B), and the allocator's
holes left after ``empty_cache`` (memprof's replay of this model's V0 load: 18,341,888 B,
``memprof.core.terms.reserved_charge``). With no communicator at TP1 and no other process named in
the issue:

    remainder = 0.35 GiB − 56,623,104 B − 18,341,888 B − 82 × 1536 × 1,024 B
              = 375,809,638 − 56,623,104 − 18,341,888 − 128,974,848 = 171,869,798 B (163.9 MiB)

against the H100's 275,578,880 B (262.8 MiB). The log's two decimals leave ±0.005 GiB (±5.4 MB).
The same log's ``initial_memory_usage=15.34GiB`` (the context, the 14.9888 GiB load, the holes and
the load's modules before the profile run) agrees within that band. Every sm86 card takes this
remainder plus its own stack reservation [assumption: one card, one driver, torch 2.5.1 (the wheel's
pin); the remainder is not measured on another sm86 card].
"""

from __future__ import annotations

from typing import NamedTuple

from memprof.base.units import GiB


class ContextReading(NamedTuple):
    """One published reading of the context's remainder on an architecture."""

    rest_bytes: int
    source: str


_SM86_PRINTED = round(0.35 * GiB)  # non_torch_memory=0.35GiB
# the RTX 3090's TP1 profile-run modules: cuBLAS step + first kernel after it
_SM86_MODULES = 12_582_912 + 44_040_192
_SM86_HOLES = 18_341_888  # the load's holes after empty_cache, memprof's replay of that model
_SM86_STACK = 82 * 1536 * 1024  # RTX 3090: 82 SMs × 1536 threads × 1 KiB

PUBLISHED_CONTEXT_REST: dict[str, ContextReading] = {
    "sm86": ContextReading(
        rest_bytes=_SM86_PRINTED - _SM86_MODULES - _SM86_HOLES - _SM86_STACK,
        source="published reading: vLLM 0.6.4.post1 'non_torch_memory=0.35GiB' on an RTX 3090 "
        "at TP1 (vllm-project/vllm#10517) less the 3090's profile-run modules (cuBLAS pool and "
        "first kernel, 54 MiB), the load's allocator holes and its stack reservation, ±5 MB; "
        "memprof/core/terms/published_context.py"),
}


def published_context_rest(arch: str) -> ContextReading | None:
    """The context's remainder on ``arch`` as a published log prints it, or None (the H100's
    measured remainder holds there)."""
    return PUBLISHED_CONTEXT_REST.get(arch)
