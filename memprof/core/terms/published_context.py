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
(memprof's sm86 reading of that sum: ``PUBLISHED_NON_TORCH_GIB``, 0.055 GiB), and the allocator's
holes left after ``empty_cache`` (memprof's replay of this model's V0 load: 18,341,888 B,
``memprof.core.terms.reserved_charge``). With no communicator at TP1 and no other process named in
the issue:

    remainder = 0.35 GiB − 0.055 GiB − 18,341,888 B − 82 × 1536 × 1,024 B
              = 375,809,638 − 59,055,800 − 18,341,888 − 128,974,848 = 169,437,102 B (161.6 MiB)

against the H100's 275,578,880 B (262.8 MiB). The log's two decimals (±0.005 GiB) and the
reading's ±0.01 GiB leave ±16.1 MB. The same log's ``initial_memory_usage=15.34GiB`` (the context,
the 14.9888 GiB load, the holes and the load's modules before the profile run) agrees within that
band. Every sm86 card takes this remainder plus its own stack reservation [assumption: one card,
one driver, torch 2.5.1 (the wheel's pin); the remainder is not measured on another sm86 card].
"""

from __future__ import annotations

from typing import NamedTuple

from memprof.base.units import GiB


class ContextReading(NamedTuple):
    """One published reading of the context's remainder on an architecture."""

    rest_bytes: int
    source: str


_SM86_PRINTED = round(0.35 * GiB)  # non_torch_memory=0.35GiB
_SM86_MODULES = round(0.055 * GiB)  # PUBLISHED_NON_TORCH_GIB["sm86"]
_SM86_HOLES = 18_341_888  # the load's holes after empty_cache, memprof's replay of that model
_SM86_STACK = 82 * 1536 * 1024  # RTX 3090: 82 SMs × 1536 threads × 1 KiB

PUBLISHED_CONTEXT_REST: dict[str, ContextReading] = {
    "sm86": ContextReading(
        rest_bytes=_SM86_PRINTED - _SM86_MODULES - _SM86_HOLES - _SM86_STACK,
        source="published reading: vLLM 0.6.4.post1 'non_torch_memory=0.35GiB' on an RTX 3090 "
        "at TP1 (vllm-project/vllm#10517) less the sm86 profile-run modules (0.055 GiB), the "
        "load's allocator holes and the 3090's stack reservation, ±16 MB; "
        "memprof/core/terms/published_context.py"),
}


def published_context_rest(arch: str) -> ContextReading | None:
    """The context's remainder on ``arch`` as a published log prints it, or None (the H100's
    measured remainder holds there)."""
    return PUBLISHED_CONTEXT_REST.get(arch)
