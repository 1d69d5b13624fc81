"""The SGLang rows of ``tests/data/published.json`` that carry their log (``"log"``), one test per
era: ``memprof explain LOG`` with no flag but ``--model`` and ``--gpu`` (an SGLang log never
shows the card's total), plus the row's ``memprof_run`` settings where it maps the logged
checkpoint onto a bundled model (the reason is in the row). The release is the one explain
places the log at, which must be the row's ``memprof_engine_version``; ``pytest -n0 -s`` prints the
KV figure's error per row and the era's distribution (within 2% / 5%). ``ERA_FLOORS`` are the
counts measured when the rows were added: a change that makes memprof worse on them fails.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from memprof.cli import run

ROOT = Path(__file__).resolve().parents[1]
ROWS: list[dict[str, Any]] = json.loads(
    (ROOT / "tests" / "data" / "published.json").read_text())["rows"]
# the KV-capacity figures explain compares, in the order the distribution test prefers them
KV_KEYS = ("kv_tokens", "max_total_num_tokens")
RUN_FLAGS = {"max_model_len": "--max-model-len", "tp": "-tp", "quantization": "--quantization"}
GPUS = {"H100 80GB": "H100"}  # a row's card as the catalog names it
# rows added before rows carried their log, whose log is bundled (their id -> the file)
EARLIER_LOGS = {33: "tests/data/logs/sglang-qwen3-235b-fp8-tp4-h100.log"}
# era -> (rows, within 2%, within 5%) as measured when the rows were added; row 401 (+0.6%)
# moved from "later" to "0.5" when it ran at 0.5.10 instead of main@d315eb7 (same figure); row
# 33 (+2.2% when added, +0.4% since) moved from "later" to "0.5" when the newest SGLang explain
# places an undated log at became 0.5.23 (releases ordered by date: memprof/core/releases.py).
# Rows 1851-1854, 1856-1858 (docs builds of 0.4.4 - 0.5.1) added 7 logs whose pool the docs CI
# caps with --max-total-tokens 20480: their KV figure is the cap, so it is not counted (as row
# 1456's --max-total-tokens 4096 is not: test_published_distribution.capped_pool); the rows count
ERA_FLOORS = {"0.4": (14, 7, 7), "0.5": (5, 4, 4), "later": (0, 0, 0)}


def era(release: str) -> str:
    """By the release's number (0.4.x, 0.5.x); a source snapshot or a later release: "later"."""
    return "0.4" if release.startswith("0.4.") else "0.5" if release.startswith("0.5.") else (
        "later")


def _rows(which: str) -> list[dict[str, Any]]:
    """The era's rows that carry their log, less those the calibration set refuses (a model
    memprof does not bundle: ``test_published_distribution.outcome``)."""
    from tests.test_published_distribution import outcome

    return [{**r, "log": r.get("log") or EARLIER_LOGS[r["id"]]} for r in ROWS
            if r["engine"] == "sglang" and (r.get("log") or r["id"] in EARLIER_LOGS)
            and era(str(r["memprof_engine_version"])) == which and outcome(r).refused is None]


def _explain(row: dict[str, Any]) -> dict[str, Any]:
    mr = row.get("memprof_run") or {}
    argv = ["explain", str(ROOT / row["log"]), "--model", mr.get("memprof_model") or row["hf_id"],
            "--gpu", mr.get("gpu") or GPUS.get(row["gpu"], row["gpu"]), "-f", "json"]
    for k, flag in RUN_FLAGS.items():
        if k in mr:
            argv += [flag, str(mr[k])]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        run(argv)
    assert out.getvalue(), err.getvalue()
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


@pytest.mark.parametrize("which", sorted(ERA_FLOORS))
def test_explain_reproduces_the_era(which: str) -> None:
    from tests.test_published_distribution import capped_pool

    rows = _rows(which)
    n_rows, floor2, floor5 = ERA_FLOORS[which]
    assert len(rows) >= n_rows
    errors: list[float] = []
    for row in rows:
        d = _explain(row)
        assert d["deployment"]["engine_version"] == row["memprof_engine_version"], row["id"]
        figs = {f["key"]: f for f in d["figures"]}
        if capped_pool(row):  # the run's own --max-total-tokens: not a capacity predicted
            continue
        key = next(k for k in KV_KEYS if k in figs)
        err = abs(float(figs[key]["delta_pct"])) / 100
        errors.append(err)
        print(f"\nrow {row['id']} ({row['memprof_engine_version']}): {key} logged "
              f"{figs[key]['measured']:,.0f}, memprof {figs[key]['estimated']:,.0f}, "
              f"{figs[key]['delta_pct']:+.1f}%")
    within2 = sum(e <= 0.02 for e in errors)
    within5 = sum(e <= 0.05 for e in errors)
    print(f"SGLang {which}: {len(errors)} logs, KV within 2%: {within2}, within 5%: {within5}")
    assert within2 >= floor2 and within5 >= floor5
