"""The engine arguments Unsloth's vLLM loader prints before it starts vLLM.

Unsloth's ``fast_inference`` path (``FastLanguageModel.from_pretrained(..., fast_inference=
True)``) starts vLLM through ``load_vllm`` (``unsloth_zoo/vllm_utils.py``, unslothai/unsloth-zoo;
the Unsloth 2025.2 - 2025.9 logs of published rows 1301-1303 print it). It computes the engine's
memory settings itself, prints them, and builds vLLM's ``LLM`` class from them
(``LLM(**engine_args)``; ``AsyncLLMEngine`` / ``LLMEngine`` only under ``use_async`` /
``use_engine``)::

    Unsloth: vLLM loading M with actual GPU utilization = 59.59%
    Unsloth: Using conservativeness = 1.0. Chunked prefill tokens = 512. Num Sequences = 160.

``gpu_memory_utilization`` is ``actual_gpu_memory_utilization`` (printed as ``round(x * 100,
2)``, so to 0.0001), ``max_num_batched_tokens`` the chunked-prefill tokens, ``max_num_seqs`` the
sequences. The values a caller passed to ``from_pretrained`` (its own ``gpu_memory_utilization
= 0.6``) are Unsloth's inputs, not vLLM's: these lines win over them. A first start that fails
on memory is retried once with ``max_num_seqs`` ``int(x * 0.75)`` and the utilization times
0.85, and the loader says so (``Unsloth: Retrying vLLM to process N sequences ...``)."""

from __future__ import annotations

import re
from typing import Any

_UTILIZATION = re.compile(r"Unsloth: vLLM loading \S+ with actual GPU utilization = "
                          r"([0-9]{1,3}(?:\.[0-9]{1,6})?)%")
_BATCH = re.compile(r"Unsloth: Using conservativeness = [0-9.]+\. Chunked prefill tokens = "
                    r"([0-9]{1,9})\. Num Sequences = ([0-9]{1,9})\.")
_RETRY = re.compile(r"Unsloth: Retrying vLLM to process ([0-9]{1,9}) sequences")
RETRY_UTILIZATION = 0.85  # load_vllm: engine_args["gpu_memory_utilization"] *= 0.85


def unsloth_settings(lines: list[str], settings: dict[str, Any]) -> list[str]:
    """Set the engine arguments Unsloth's loader printed in ``lines`` (over any the log's other
    lines gave) and, where no other line named one, its LLM-class entry point; the notes that
    say so. No loader line: no change."""
    util = batch = None
    retry: int | None = None
    for line in lines:
        util = util or _UTILIZATION.search(line)
        batch = batch or _BATCH.search(line)
        m = _RETRY.search(line)
        if m:
            retry = int(m.group(1))
    if util is None and batch is None:
        return []
    got: dict[str, Any] = {}
    if util is not None:
        got["gpu_memory_utilization"] = round(float(util.group(1)) / 100, 6)
    if batch is not None:
        got["max_num_batched_tokens"] = int(batch.group(1))
        got["max_num_seqs"] = int(batch.group(2))
    notes = ["Unsloth's vLLM loader (unsloth_zoo load_vllm) printed the arguments it started "
             "vLLM's LLM class with: " + ", ".join(f"{k} {v}" for k, v in got.items())
             + (" (printed to 0.01%)" if util is not None else "")]
    if retry is not None:
        got["max_num_seqs"] = retry
        if "gpu_memory_utilization" in got:
            got["gpu_memory_utilization"] = round(
                got["gpu_memory_utilization"] * RETRY_UTILIZATION, 6)
        notes.append(f"its first start failed and it retried with max_num_seqs {retry} and "
                     f"{RETRY_UTILIZATION} of the utilization (unsloth_zoo load_vllm)")
    settings.update(got)
    settings.setdefault("entrypoint", "llm")
    return notes
