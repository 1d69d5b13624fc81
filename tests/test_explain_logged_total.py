"""The GPU total a log prints (``memprof/probes/log_deployment.py``): what
``torch.cuda.mem_get_info`` gave the engine on that machine, which explain rebuilds on.

- without ``--gpu``, a total that is a catalog card's (to the 0.01 GiB it is printed to) shows
  the card; one that is no card's is run as the nearest card at that total, and the note says
  the card is assumed;
- with ``--gpu``, that card is run at the total the log prints where it differs from the
  catalog's (driver and ECC reserves differ between machines), with a note; ``--gpu-memory``
  still wins;
- the calibration rows run on the same total (``tests/test_published_distribution.py``
  ``printed_total``), so explain and the row's estimate are on one card.
"""

from __future__ import annotations

from memprof.base.units import GiB
from memprof.core.gpus import find_gpu
from memprof.probes.log_deployment import logged_total, rebuild, shows_card
from memprof.probes.startup_log import parse_log
from tests.test_published_distribution import ROWS, printed_total

# published row 904's line (vLLM 0.27.1 gpu_worker.py: torch's free / total on startup)
FREE_ON_DEVICE = ("(Worker_TP1 pid=771) INFO 08-21 18:22:06 [gpu_worker.py:789] Free memory on "
                  "device (94.05/95.01 GiB) on startup. Desired GPU memory utilization is (0.9, "
                  "85.51 GiB).\n"
                  "(EngineCore pid=558) INFO 08-21 18:21:55 [kv_cache_utils.py:2235] GPU KV "
                  "cache size: 621,392 tokens\n")
# published row 1103's OOM line (torch's c10/cuda/CUDACachingAllocator.cpp message)
OOM = ("(EngineCore_DP0 pid=44265) ERROR 07-26 10:24:28 [core.py:1100] torch.OutOfMemoryError: "
       "CUDA out of memory. Tried to allocate 126.00 MiB. GPU 0 has a total capacity of 23.54 "
       "GiB of which 139.75 MiB is free. Including non-PyTorch memory, this process has 21.72 "
       "GiB memory in use.\n")
# an H100 80GB's total as vLLM V0 prints it (the catalog's H100-80GB: 79.18 GiB)
H100_V0 = ("INFO 01-01 00:00:00 worker.py:241] Memory profiling results: total_gpu_memory=79.18GiB "
           "initial_memory_usage=15.34GiB peak_torch_memory=17.06GiB kv_cache_size=50.00GiB "
           "gpu_memory_utilization=0.90\n")


def _near(value: float, gib: float) -> bool:
    return abs(value - gib * GiB) < 0.0051 * GiB


def test_a_catalog_cards_total_shows_the_card() -> None:
    log = parse_log(H100_V0)
    assert shows_card(log)
    rb = rebuild(log, model="qwen3-8b", gpu=None, gpu_memory=None)
    assert rb.gpu.name == "H100-80GB" and rb.gpu.total_bytes == find_gpu("H100-80GB").total_bytes
    assert not any("assumed" in n for n in rb.notes)
    # --gpu of that card: the catalog's exact total, no note about the total
    rb = rebuild(log, model="qwen3-8b", gpu="H100", gpu_memory=None)
    assert rb.gpu.total_bytes == find_gpu("H100-80GB").total_bytes
    assert not any("(--gpu)" in n for n in rb.notes)


def test_a_total_of_no_card_is_an_assumption_the_output_states() -> None:
    log = parse_log(FREE_ON_DEVICE)
    total = logged_total(log)
    assert total is not None and _near(total, 95.01)
    assert not shows_card(log)  # RTX-PRO-6000 94.97, H20 95.00: neither prints as 95.01
    rb = rebuild(log, model="qwen3-8b", gpu=None, gpu_memory=None)
    assert rb.gpu.total_bytes == int(total)
    note = next(n for n in rb.notes if n.startswith("GPU:"))
    assert "assumed" in note and "no catalog card's" in note and "--gpu" in note


def test_the_named_card_runs_at_the_total_the_log_prints() -> None:
    log = parse_log(FREE_ON_DEVICE)
    rb = rebuild(log, model="qwen3-8b", gpu="RTX-PRO-6000", gpu_memory=None)
    assert rb.gpu.name == "RTX-PRO-6000" and rb.gpu.arch == find_gpu("RTX-PRO-6000").arch
    assert _near(rb.gpu.total_bytes, 95.01)
    note = next(n for n in rb.notes if "(--gpu)" in n)
    assert "95.01 GiB total the log prints" in note and "94.97 GiB" in note
    assert "check --gpu" not in note  # 0.04% off the catalog's: the same card
    # the OOM line's total too
    rb = rebuild(parse_log(OOM), model="qwen3-8b", gpu="RTX-3090", gpu_memory=None)
    assert _near(rb.gpu.total_bytes, 23.54)


def test_a_total_far_from_the_named_cards_is_taken_with_a_warning() -> None:
    rb = rebuild(parse_log(OOM), model="qwen3-8b", gpu="H100", gpu_memory=None)
    assert _near(rb.gpu.total_bytes, 23.54)
    assert any("check --gpu" in n for n in rb.notes), rb.notes


def test_gpu_memory_wins_over_the_logged_total() -> None:
    rb = rebuild(parse_log(FREE_ON_DEVICE), model="qwen3-8b", gpu="RTX-PRO-6000",
                 gpu_memory="90GiB")
    assert rb.gpu.total_bytes == 90 * GiB


def test_the_calibration_rows_run_on_the_printed_total() -> None:
    rows = {r["id"]: r for r in ROWS}
    # 904: the RTX PRO 6000's 95.01 GiB, not the catalog's 94.97
    got = printed_total(rows[904], "RTX-PRO-6000")
    assert got is not None and _near(got, 95.01)
    # 1603: the RTX 4090 the README names, at the log's 23.52 GiB (catalog: 23.64)
    got = printed_total(rows[1603], "RTX-4090")
    assert got is not None and _near(got, 23.52)
    # a row whose quote prints its catalog card's total keeps the catalog's exact total
    assert printed_total({"quote": H100_V0}, "H100") is None
    # a quote with no total: the catalog card
    assert printed_total({"quote": "GPU KV cache size: 1,000 tokens"}, "H100") is None
