"""The total torch reports for a GeForce card under WSL2 is the card's whole nvidia-smi total
(``smi_total_mib`` in configs/gpus.json), not the few hundred MiB smaller total of a native Linux
driver that the catalog row holds: every published vLLM log of a WSL host in
tests/data/published.json prints it, and row 1606 (an RTX 3090 under WSL2, a summary table that
prints no total) runs at it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memprof.base.units import GiB, MiB
from memprof.probes.startup_log import parse_log
from tests.test_published_distribution import ROWS, outcome

ROOT = Path(__file__).parent.parent
CARDS: dict[str, dict[str, Any]] = {
    g["name"]: g for g in json.loads((ROOT / "configs" / "gpus.json").read_text())["gpus"]}
BY_ID = {r["id"]: r for r in ROWS}

# row -> the catalog card it ran on; each quote prints torch's total on a WSL host
WSL_LOGS = {1611: "RTX-4090", 1601: "RTX-5060-Ti", 1602: "RTX-5060-Ti", 122: "RTX-4060"}
# vLLM prints the total to 0.01 GiB ("23.99 GiB") or 0.1 GiB ("15.9 GiB")
PRINTED = 0.05 * GiB


@pytest.mark.parametrize("rid", sorted(WSL_LOGS))
def test_a_wsl_log_prints_the_cards_whole_smi_total(rid: int) -> None:
    row = BY_ID[rid]
    assert "WSL" in row["notes"] + row["model"]
    card = CARDS[WSL_LOGS[rid]]
    printed = parse_log(row["quote"]).get("total_gpu_bytes")
    assert printed is not None
    assert abs(printed - card["smi_total_mib"] * MiB) <= PRINTED


@pytest.mark.parametrize("name", ["RTX-4090", "RTX-5060-Ti"])
def test_the_wsl_total_is_not_the_native_linux_total(name: str) -> None:
    """The two readings differ by more than a log's rounding, so the logs above tell them
    apart (where the catalog holds a native Linux total)."""
    card = CARDS[name]
    assert card["smi_total_mib"] * MiB - card["total_bytes"] > 2 * PRINTED


def test_row_1606_runs_at_the_rtx_3090s_wsl2_total() -> None:
    row = BY_ID[1606]
    assert "WSL2" in row["notes"]
    run = row["memprof_run"]
    assert run["gpu"] == "RTX-3090"
    assert run["gpu_mem_gib"] * GiB == CARDS["RTX-3090"]["smi_total_mib"] * MiB
    assert CARDS["RTX-3090"]["total_bytes"] < run["gpu_mem_gib"] * GiB
    out = outcome(row)
    key, logged, got = out.pairs["kv"]
    assert key == "kv_tokens" and logged == 36640
    # the Linux total (24,139 MiB) left it 7.4% below the log
    assert abs(got - logged) / logged < 0.02


def test_row_2471_runs_at_the_rtx_3090s_wsl2_total() -> None:
    """A vLLM 0.19.1 log on an RTX 3090 whose engine line says WSL is detected and which prints
    no total: at the catalog's native total its own figures leave the non-KV terms no room."""
    row = BY_ID[2471]
    assert "as WSL is detected" in row["quote"]
    run = row["memprof_run"]
    assert run["gpu"] == "RTX-3090"
    assert run["gpu_mem_gib"] * GiB == CARDS["RTX-3090"]["smi_total_mib"] * MiB
    key, logged, got = outcome(row).pairs["kv"]
    assert key == "kv_tokens" and logged == 35648
    assert abs(got - logged) / logged < 0.01


def test_explain_takes_the_whole_card_where_vllm_says_wsl() -> None:
    from memprof.core.gpus import find_gpu
    from memprof.probes.log_deployment import _named_card_at_logged_total

    line = ("(EngineCore pid=1) WARNING 04-28 11:13:47 [interface.py:525] Using "
            "'pin_memory=False' as WSL is detected. This may slow down the performance.")
    kv = ("(EngineCore pid=1) INFO 04-28 11:14:04 [kv_cache_utils.py:1319] GPU KV cache size: "
          "35,648 tokens")
    log = parse_log(line + "\n" + kv + "\n")
    assert log.wsl
    notes: list[str] = []
    g = _named_card_at_logged_total(log, find_gpu("RTX-3090"), notes)
    assert g.total_bytes == CARDS["RTX-3090"]["smi_total_mib"] * MiB
    assert "WSL" in notes[0]
    # without the line: the catalog's total, no note
    plain = parse_log(kv + "\n")
    assert not plain.wsl
    notes = []
    assert _named_card_at_logged_total(plain, find_gpu("RTX-3090"), notes).total_bytes == \
        CARDS["RTX-3090"]["total_bytes"]
    assert notes == []
