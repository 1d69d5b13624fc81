"""The GPU a pasted log names: the card names of ``nvidia-smi`` output pasted with a start-up log.

A start-up log prints the card's total (``memprof.probes.log_deployment.logged_total``), not its
name; users paste the name beside it in the forms nvidia-smi prints, which vLLM's bug-report
environment (``vllm/collect_env.py`` ``get_gpu_info``: ``nvidia-smi -L`` with the UUIDs cut,
under "GPU models and configuration:") asks for:

- ``nvidia-smi -L``: ``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)``; collect_env's
  ``GPU 0: NVIDIA H100 80GB HBM3`` (the line ends there);
- nvidia-smi's table: ``|   0  NVIDIA L40S                    On  |   00000000:01:00.0 Off |``
  (the name between the index and the persistence mode, On or Off);
- ``nvidia-smi --query-gpu=name,memory.total --format=csv,noheader``: ``NVIDIA L40S, 46068 MiB``.

Only lines of these exact shapes are read (a name in prose is not), and each name keeps the
memory nvidia-smi printed beside it where it did (the table's ``1MiB /  46068MiB``, the CSV's
``46068 MiB``). The names are resolved against the catalog by ``log_deployment``.
"""

from __future__ import annotations

import re

MAX_NAME = 80  # characters of a card name (nvidia-smi's longest are ~45)

# a card name nvidia-smi prints: a vendor word, then letters, digits, spaces, '-' and '.'
_NAME = rf"((?:NVIDIA|Tesla|Quadro|AMD|Instinct)\b[A-Za-z0-9 .\-]{{0,{MAX_NAME}}}?)"
# nvidia-smi -L (the UUID kept) and collect_env's cut form (nothing after the name)
_LIST = re.compile(r"^\s*(?:GPU models and configuration:\s*)?GPU \d+: " + _NAME
                   + r"\s*(?:\(UUID: [^)]*\))?\s*$")
# nvidia-smi's table row: "|   0  NAME   On  |" (Persistence-M On/Off)
_TABLE = re.compile(r"^\|\s*\d+\s+" + _NAME + r"\s+(?:On|Off)\s+\|")
# the table's memory usage cell, on the row after the name: "|  1MiB /  46068MiB |"
_TABLE_MEM = re.compile(r"\|\s*\d+MiB\s*/\s*(\d+)MiB\s*\|")
# --query-gpu=name,memory.total --format=csv,noheader: "NAME, 46068 MiB" (and more columns)
_CSV = re.compile(r"^\s*" + _NAME + r",\s*(\d+)\s*MiB\b")


def named_cards(lines: list[str]) -> tuple[tuple[str, int | None], ...]:
    """The ``(name, MiB)`` of each GPU the lines list in nvidia-smi's forms, in order; ``MiB``
    is nvidia-smi's total where the line (or the table's next row) prints it, else None."""
    found: list[tuple[str, int | None]] = []
    for i, line in enumerate(lines):
        m = _LIST.match(line)
        if m:
            found.append((m.group(1).strip(), None))
            continue
        m = _TABLE.match(line)
        if m:
            nxt = _TABLE_MEM.search(lines[i + 1]) if i + 1 < len(lines) else None
            found.append((m.group(1).strip(), int(nxt.group(1)) if nxt else None))
            continue
        m = _CSV.match(line)
        if m:
            found.append((m.group(1).strip(), int(m.group(2))))
    return tuple(found)
