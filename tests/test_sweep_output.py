"""``memprof sweep`` output: None is refused where a setting has no default; an invalid point
keeps its own inputs (integer columns stay integral) and shows its error; ``-o`` and ``--plot``
are checked before any work and written whole; the terminal table keeps every column readable at
80 columns (a compact layout, said so, where even that does not fit)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from memprof.batch.sweep import parse_axis, sweep
from memprof.core.deployment import Deployment
from memprof.report.sweep import SHOWN, dataframe, render_table
from tests.cli_helpers import invoke, one_error

BASE = ["sweep", "--model", "qwen3-32b", "--gpu", "H200"]


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    import memprof.batch.sweep as core

    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("the sweep ran before the bad input was refused")

    monkeypatch.setattr(core, "sweep", refuse)


@pytest.mark.parametrize("axis", ["tp=None", "pp=1,none", "dp=default", "kv_cache_dtype=None",
                                  "enable_expert_parallel=None"])
def test_none_without_a_default_is_refused(no_work: None, axis: str) -> None:
    code, out, err = invoke([*BASE, "--set", axis])
    assert code == 2 and out == ""
    one_error(err, "")
    assert "None" in err or "bad value" in err


def test_none_with_an_engine_default_is_that_default() -> None:
    axes = [parse_axis("max_model_len=None,8K"), parse_axis("max_num_seqs=default,64")]
    recs = sweep("qwen3-32b", Deployment(), "H200", None, axes)
    assert [r["verdict"] for r in recs] == ["fits"] * 4
    assert recs[0]["max_model_len"] == 40960 and recs[0]["max_num_seqs"] == 1024  # resolved
    assert recs[3]["max_model_len"] == 8192 and recs[3]["max_num_seqs"] == 64


def test_invalid_point_keeps_its_inputs_and_integers_stay_integral(tmp_path: Path) -> None:
    axes = [parse_axis("tp=1,3"), parse_axis("max_model_len=8K,32K"),
            parse_axis("max_num_seqs=64")]
    recs = sweep("qwen3-32b", Deployment(), "H200", None, axes)
    bad = [r for r in recs if r["verdict"] == "invalid"]
    assert [(r["tp"], r["max_model_len"], r["max_num_seqs"]) for r in bad] == [
        (3, 8192, 64), (3, 32768, 64)]
    assert all("does not divide" in r["error"] for r in bad)
    df = dataframe(recs)
    for col in ("tp", "max_model_len", "max_num_seqs", "gpus", "kv_cache_tokens",
                "headroom_bytes", "weights_bytes"):
        assert pd.api.types.is_integer_dtype(df[col].dtype), (col, df[col].dtype)
    assert df["gpus"].isna().sum() == 2 and df["max_model_len"].isna().sum() == 0
    path = tmp_path / "s.csv"
    code, _, err = invoke([*BASE, "--set", "tp=1,3", "--set", "max_model_len=8K,32K", "-o",
                           str(path)])
    assert code == 0, err
    text = path.read_text()
    assert ".0," not in text  # no integer written as a float
    assert "\n3,8192,,invalid," in text and "\n1,8192,1,fits," in text


def test_table_shows_each_invalid_points_error() -> None:
    code, out, _ = invoke([*BASE, "--set", "tp=1,3,6"])
    assert code == 0
    lines = out.splitlines()
    row3 = next(x for x in lines if x.lstrip().startswith("3 "))
    assert "invalid¹" in row3
    assert any(x.strip().startswith("¹ tensor parallel size 3 does not divide") for x in lines)
    assert any(x.strip().startswith("² tensor parallel size 6 does not divide") for x in lines)


@pytest.mark.parametrize("flag", ["-o", "--plot"])
@pytest.mark.parametrize("where", ["nodir/x", "{tmp}/file.txt/x", "{tmp}"])
def test_output_paths_are_checked_before_work(no_work: None, tmp_path: Path, flag: str,
                                              where: str) -> None:
    (tmp_path / "file.txt").write_text("x")
    suffix = ".png" if flag == "--plot" else ".csv"
    path = where.format(tmp=tmp_path) + (suffix if where != "{tmp}" else "")
    code, out, err = invoke([*BASE, "--set", "tp=1", flag, path])
    assert code == 2 and out == ""
    one_error(err, path if where != "{tmp}" else "")
    assert not Path("nodir").exists()


def test_output_is_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("old\n")
    os.chmod(path, 0o640)
    code, _, err = invoke([*BASE, "--set", "tp=1,2", "-o", str(path)])
    assert code == 0, err
    df = pd.read_json(path, lines=True)
    assert list(df["tp"]) == [1, 2]
    assert os.stat(path).st_mode & 0o777 == 0o640  # replaced in place, mode kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]  # no temp file left


def table_of(sets: list[str], width: int = 80) -> tuple[str, list[str]]:
    axes = [parse_axis(s) for s in sets]
    df = dataframe(sweep("qwen3-32b", Deployment(), "H200", None, axes))
    cols = [a.name for a in axes] + [c for c in SHOWN if c not in {a.name for a in axes}]
    return render_table(df, cols, title="t", width=width), cols


def test_six_axes_at_80_columns_keep_every_column_readable() -> None:
    sets = ["tp=1,2", "pp=1,2", "max_model_len=8K,32K", "max_num_seqs=64,1024",
            "kv_cache_dtype=auto,fp8", "gpu_memory_utilization=0.85,0.95"]
    out, _ = table_of(sets)
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80
    head = lines[1].split()
    assert head == ["tp", "pp", "max", "len", "seqs", "kv", "util", "GPUs", "verdict", "KV",
                    "tokens", "conc.", "headroom"]
    rows = lines[3:]
    assert len(rows) == 64
    # every value is whole: e.g. the first row's cells
    assert rows[0].split()[:7] == ["1", "1", "8,192", "64", "auto", "0.85", "1"]
    assert {r.split()[4] for r in rows} == {"auto", "fp8"}
    assert {r.split()[2] for r in rows} == {"8,192", "32,768"}


def test_too_many_columns_switch_to_a_compact_layout_and_say_so() -> None:
    sets = ["tensor_parallel_size=1,2", "pipeline_parallel_size=1,2", "max_model_len=8K",
            "max_num_batched_tokens=2048", "kv_cache_dtype=auto", "gpu_memory_utilization=0.9",
            "max_num_seqs=8", "block_size=16,32"]
    out, _ = table_of(sets, width=60)
    lines = out.splitlines()
    assert max(map(len, lines)) <= 60
    assert lines[1].startswith("(13 columns do not fit in 60: one row per line")
    blocks = [x for x in lines[3:] if not x.startswith("    ")]
    assert len(blocks) == 8
    text = " ".join(lines[3:7])
    for item in ("tp=1", "pp=1", "batched tokens=2,048", "block=16", "verdict=fits", "GPUs=1"):
        assert item in text
    wide, _ = table_of(sets, width=200)
    assert "do not fit" not in wide and max(map(len, wide.splitlines())) <= 200


def test_ten_thousand_rows_render_every_row() -> None:
    n = 10_000
    df = pd.DataFrame({"max_num_seqs": range(1, n + 1), "gpus": [1] * n,
                       "verdict": ["fits"] * n, "kv_cache_tokens": range(n),
                       "max_concurrency": [1.25] * n, "headroom_bytes": [1 << 30] * n})
    out = render_table(df, list(df.columns), width=80)
    lines = out.splitlines()
    assert len(lines) == 2 + n  # header, rule, one line a row
    assert lines[-1].split() == ["10,000", "1", "fits", "9,999", "1.2", "1.0", "GiB"]
