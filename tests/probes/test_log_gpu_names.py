"""The card nvidia-smi lines pasted with a start-up log name (``memprof/probes/gpu_names.py``,
``memprof.probes.log_deployment.card_named_in_log``): explain rebuilds on it without ``--gpu``,
at the total the log prints where it prints one; lines that name no one catalog card leave the
card to the total (and say so); nothing pasted there crashes explain."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.base.units import GiB
from memprof.cli import run
from memprof.core.gpus import find_gpu
from memprof.probes.gpu_names import named_cards
from memprof.probes.log_deployment import card_named_in_log, rebuild
from memprof.probes.startup_log import parse_log

# vLLM 0.9.2-style figures with no GPU total (the card is not shown by them)
FIGURES = ("INFO 07-20 10:00:00 [gpu_model_runner.py:1770] Model loading took 15.27 GiB and 3.2 "
           "seconds\n"
           "INFO 07-20 10:00:05 [gpu_worker.py:232] Available KV cache memory: 20.00 GiB\n"
           "INFO 07-20 10:00:05 [kv_cache_utils.py:716] GPU KV cache size: 145,000 tokens\n")
# nvidia-smi's table (driver 550), two rows of one card
TABLE = ("| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. "
         "ECC |\n"
         "|   0  NVIDIA L40S                    On  |   00000000:01:00.0 Off |                 "
         "   0 |\n"
         "| N/A   30C    P8             32W /  350W |       1MiB /  46068MiB |      0%      "
         "Default |\n")
# nvidia-smi -L and vLLM's collect_env (vllm/collect_env.py get_gpu_info)
LIST = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5b8e2a4c-0000-0000-0000-000000000000)\n"
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-5b8e2a4c-0000-0000-0000-000000000001)\n")
COLLECT_ENV = "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4080\n"
CSV = "NVIDIA L40S, 46068 MiB, 595.91.07, 8.9\n"


def test_the_forms_nvidia_smi_prints() -> None:
    assert named_cards(TABLE.splitlines()) == (("NVIDIA L40S", 46068),)
    assert named_cards(LIST.splitlines()) == (("NVIDIA H100 80GB HBM3", None),) * 2
    assert named_cards(COLLECT_ENV.splitlines()) == (("NVIDIA GeForce RTX 4080", None),)
    assert named_cards(CSV.splitlines()) == (("NVIDIA L40S", 46068),)
    # a name in prose, or a table-like row of something else, is not read
    assert named_cards(["We ran it on an NVIDIA L40S (46068 MiB), On | fast"]) == ()
    assert named_cards(["| 0  some process  On |"]) == ()


def test_explain_rebuilds_on_the_named_card() -> None:
    for pasted, card in ((TABLE, "L40S"), (LIST, "H100-80GB"), (COLLECT_ENV, "RTX-4080"),
                         (CSV, "L40S")):
        rb = rebuild(parse_log(pasted + FIGURES), model="qwen3-8b", gpu=None, gpu_memory=None)
        assert rb.gpu.name == card and rb.gpu.total_bytes == find_gpu(card).total_bytes
        assert any("nvidia-smi lines name it" in n for n in rb.notes)


def test_the_printed_total_still_wins_on_the_named_card() -> None:
    line = ("INFO 08-22 20:25:15 [gpu_worker.py:789] Free memory on device (40.00/44.40 GiB) on "
            "startup. Desired GPU memory utilization is (0.9, 39.96 GiB).\n")
    rb = rebuild(parse_log(TABLE + FIGURES + line), model="qwen3-8b", gpu=None, gpu_memory=None)
    assert rb.gpu.name == "L40S" and abs(rb.gpu.total_bytes - 44.40 * GiB) <= 1
    # --gpu wins over the name
    rb = rebuild(parse_log(TABLE + FIGURES), model="qwen3-8b", gpu="A40", gpu_memory=None)
    assert rb.gpu.name == "A40"


def test_names_that_are_not_one_card_are_left_with_a_note() -> None:
    mixed = ("GPU 0: NVIDIA GeForce RTX 5070 Ti (UUID: GPU-1)\n"
             "GPU 1: NVIDIA GeForce RTX 5090 (UUID: GPU-2)\n")
    unknown = "GPU 0: NVIDIA Quantum Widget 9000 (UUID: GPU-1)\n"
    other_total = "NVIDIA L40S, 24564 MiB\n"  # not the L40S's 46,068 MiB
    for pasted in (mixed, unknown, other_total):
        log = parse_log(pasted + FIGURES)
        code, _out, err = _explain(pasted + FIGURES)
        assert code == 2 and err.startswith("error: the log does not show the GPU's total"), err
        notes: list[str] = []
        assert card_named_in_log(log, notes) is None
        assert "pass --gpu" in notes[0]


def _explain(text: str) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "pasted.log"
        path.write_text(text, encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run(["explain", str(path), "-m", "qwen3-8b"])
    return code, out.getvalue(), err.getvalue()


_PIECES = st.sampled_from([
    "NVIDIA", "Tesla", "AMD", "Instinct", " H100", " 80GB", " HBM3", "-SXM4-", "RTX", " 4090",
    " A100", "9" * 300, " ", "  On  |", " Off |", "|", "GPU 0: ", "(UUID: GPU-x)", ", ",
    "46068 MiB", "MiB /", "1MiB /  99999999999999999999MiB |", "\t", "é", "\x00", "..."])
_LINE = st.lists(_PIECES, min_size=1, max_size=12).map("".join)


@settings(max_examples=int(os.environ.get("MEMPROF_FUZZ_EXAMPLES", "600")) // 8, deadline=None,
          derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_LINE, min_size=1, max_size=4))
def test_fuzz_pasted_gpu_lines(lines: list[str]) -> None:
    """Pasted nvidia-smi-like lines: explain fits, refuses (error + hint, exit 2), never
    crashes; the reader never returns a name longer than nvidia-smi's."""
    text = "\n".join(lines) + "\n" + FIGURES
    assert all(len(n) <= 90 for n, _ in named_cards(text.splitlines()))
    code, _out, err = _explain(text)
    assert code in (0, 1, 2), err
    if code == 2:
        first, _, rest = err.partition("\n")
        assert first.startswith("error: ") and rest.startswith("hint: "), err


def test_the_note_names_where_the_card_came_from() -> None:
    line = ("INFO 08-22 20:25:15 [gpu_worker.py:789] Free memory on device (40.00/44.40 GiB) on "
            "startup. Desired GPU memory utilization is (0.9, 39.96 GiB).\n")
    rb = rebuild(parse_log(TABLE + FIGURES + line), model="qwen3-8b", gpu=None, gpu_memory=None)
    assert any(n.startswith("GPU: L40S (the log's nvidia-smi lines) at the 44.40 GiB total")
               for n in rb.notes), rb.notes
