"""A log's printed GPU total that is the named card's whole memory (``memprof.probes.
log_deployment.whole_card_total``): torch reports the whole card (nvidia-smi's total,
``configs/gpus.json`` ``smi_total_mib``) under Windows and WSL2, and vLLM prints it rounded
("Free memory on device (22.45/23.99 GiB)"; 0.29's "(14.8/15.9 GiB)" to 0.1 GiB). Explain then
rebuilds ``--gpu``'s card on that exact total, not on the rounded print; a total that is not the
card's whole memory to the printed places stays the printed total (with its note)."""

from __future__ import annotations

import pytest

from memprof.base.units import GiB, MiB
from memprof.core.gpus import find_gpu
from memprof.probes.log_deployment import rebuild, whole_card_total
from memprof.probes.startup_log import parse_log

# vLLM 0.27.1 v1/worker/gpu_worker.py's line (published row 1611: an RTX 4090 under WSL2)
LINE_027 = ("(EngineCore pid=14790) INFO 08-22 20:25:15 [gpu_worker.py:789] Free memory on device "
            "({free}/{total} GiB) on startup. Desired GPU memory utilization is (0.85, 20.39 GiB)."
            "\n")
# vLLM 0.29.0's, one decimal (published row 1601: an RTX 5060 Ti under WSL2)
LINE_029 = ("(EngineCore pid=131) INFO 09-20 22:26:13 [gpu_worker.py:860] Free memory on device "
            "({free}/{total} GiB) on startup. Desired GPU memory utilization is (0.7, 11.13 GiB)."
            "\n")


def test_printed_places_are_kept() -> None:
    two = parse_log(LINE_027.format(free="22.45", total="23.99")).figures["total_gpu_bytes"]
    one = parse_log(LINE_029.format(free="14.8", total="15.9")).figures["total_gpu_bytes"]
    assert two.half_unit == pytest.approx(0.005 * GiB)
    assert one.half_unit == pytest.approx(0.05 * GiB)


@pytest.mark.parametrize(("line", "total", "card"), [
    (LINE_027, "23.99", "RTX-4090"),  # 24,564 MiB = 23.988 GiB
    (LINE_029, "15.9", "RTX-5060-Ti"),  # 16,311 MiB = 15.929 GiB, within 0.05
])
def test_the_whole_card_is_rebuilt_on_its_exact_total(line: str, total: str, card: str) -> None:
    log = parse_log(line.format(free="10.00", total=total))
    g = find_gpu(card)
    assert g.smi_total_mib is not None
    whole = g.smi_total_mib * MiB
    assert whole_card_total(log, g) == whole
    rb = rebuild(log, model="qwen3-8b", gpu=card, gpu_memory=None)
    assert rb.gpu.name == card and rb.gpu.total_bytes == whole and rb.gpu.arch == g.arch
    note = next(n for n in rb.notes if "(--gpu)" in n)
    assert f"{g.smi_total_mib:,} MiB" in note and "WSL2" in note


@pytest.mark.parametrize(("line", "total", "card"), [
    (LINE_027, "23.52", "RTX-4090"),  # a Linux driver's total (published rows 1603-1649)
    (LINE_027, "23.98", "RTX-4090"),  # 0.0083 GiB off the whole card: more than 0.005
    (LINE_029, "15.8", "RTX-5060-Ti"),  # 0.129 GiB off: more than 0.05
])
def test_another_total_stays_the_printed_one(line: str, total: str, card: str) -> None:
    log = parse_log(line.format(free="10.00", total=total))
    g = find_gpu(card)
    assert whole_card_total(log, g) is None
    rb = rebuild(log, model="qwen3-8b", gpu=card, gpu_memory=None)
    assert rb.gpu.total_bytes == round(float(total) * GiB)
    assert any("total the log prints" in n for n in rb.notes)


def test_gpu_memory_still_wins() -> None:
    log = parse_log(LINE_027.format(free="22.45", total="23.99"))
    rb = rebuild(log, model="qwen3-8b", gpu="RTX-4090", gpu_memory="24000MiB")
    assert rb.gpu.total_bytes == 24000 * MiB


def test_a_card_without_an_smi_total_is_untouched() -> None:
    from dataclasses import replace

    log = parse_log(LINE_027.format(free="22.45", total="23.99"))
    g = replace(find_gpu("RTX-4090"), smi_total_mib=None)
    assert whole_card_total(log, g) is None
