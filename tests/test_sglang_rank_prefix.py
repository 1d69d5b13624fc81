"""An SGLang log with no command and no ServerArgs line still shows its TP ranks: each scheduler
process prefixes its lines with its rank (``[2026-04-10 23:19:05 TP3] ...``, SGLang's
run_scheduler_process in managers/scheduler.py). ``memprof explain`` takes the fewest TP ranks
that print them and says so (published row 401)."""

from __future__ import annotations

import json
from pathlib import Path

from memprof.probes.startup_log import parse_log

ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).resolve().parent / "data" / "published.json").read_text(
        encoding="utf-8"))["rows"]}
POOL = "KV Cache is allocated. #tokens: 2206208, K size: 67.33 GB, V size: 67.33 GB"


def _log(*prefixes: str) -> str:
    return "\n".join(f"[2026-04-10 23:19:05{p}] {POOL}" for p in prefixes)


def test_the_highest_tp_rank_gives_the_tp_size() -> None:
    parsed = parse_log(_log(" TP0", " TP3", " TP1"))
    assert parsed.settings["tp"] == 4
    assert any("TP 4 assumed" in n for n in parsed.notes)


def test_row_401_runs_at_tp_4() -> None:
    assert parse_log(ROWS[401]["quote"]).settings["tp"] == 4


def test_one_rank_or_no_prefix_says_nothing() -> None:
    for log in (_log(" TP0"), _log("")):
        parsed = parse_log(log)
        assert "tp" not in parsed.settings
        assert not any("assumed, the fewest" in n for n in parsed.notes)


def test_dp_or_pp_ranks_leave_the_layout_to_the_user() -> None:
    for prefixes in ((" DP0 TP0", " DP1 TP1"), (" PP0 TP0", " PP1 TP1"), (" TP0 EP0", " TP1 EP1")):
        assert "tp" not in parse_log(_log(*prefixes)).settings


def test_the_command_wins_over_the_ranks() -> None:
    log = ("python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 8\n"
           + _log(" TP0", " TP3"))
    assert parse_log(log).settings["tp"] == 8
