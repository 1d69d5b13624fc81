"""SGLang's releases and source snapshots ordered by date (memprof/core/releases.py
``SGLANG_DATED``), the default release (the newest by date), and the rule rows whose ranges
touch a snapshot (``versions.around_snapshots``)."""

import re

import pytest

from memprof.core.deployment import Deployment
from memprof.core.engines.sglang import (
    CHUNK_BY_TIER,
    CHUNK_BY_TIER_0520,
    GRAPH_BY_TIER,
    GRAPH_BY_TIER_CAPPED,
    PG_NONE,
    PG_ON,
    SGLANG_CHUNKED_PREFILL,
    SGLANG_GRAPH_MAX_BS,
    SGLANG_PREFILL_GRAPH_OFF,
    SGLANG_PREFILL_GRAPH_RESERVE,
)
from memprof.core.engines.sglang_vlm import SGLANG_VLM_CHUNK_OFF, SGLANG_VLM_FRACTION
from memprof.core.estimate import estimate
from memprof.core.releases import SGLANG_DATED, SGLANG_RELEASES, SGLANG_SNAPSHOTS, VLLM
from memprof.core.version_diff import all_rules
from memprof.core.versions import Rule, around_snapshots, newest, resolve_version, value_at
from memprof.core.weights.mlp import SGLANG_MARLIN_STALE_SCALE_INV

HOPPER, MAIN = "deepseek-v4-hopper@2026-07", "main@d315eb7"
NUMBERED = tuple(r for r in SGLANG_RELEASES if r not in SGLANG_SNAPSHOTS)
_ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def _date(name: str) -> str:
    return next(d for n, d, _ in SGLANG_DATED if n == name)


def test_every_release_has_a_dated_source_and_the_order_is_the_dates() -> None:
    names = [n for n, _, _ in SGLANG_DATED]
    assert len(names) == len(set(names)) == len(SGLANG_RELEASES)
    for _, date, where in SGLANG_DATED:
        assert _ISO.match(date) and where
    dates = [_date(r) for r in SGLANG_RELEASES]
    assert dates == sorted(dates) and len(set(dates)) == len(dates)  # total, no ties


def test_snapshots_stand_between_the_releases_around_their_dates() -> None:
    # SGL@d315eb7: committed 2026-08-22T14:34:57Z; sglang 0.5.18 uploaded 2026-08-21, 0.5.19
    # on 2026-09-04 (PyPI)
    assert SGLANG_SNAPSHOTS == (HOPPER, MAIN)
    at = SGLANG_RELEASES.index(MAIN)
    assert SGLANG_RELEASES[at - 1:at + 2] == ("0.5.18", MAIN, "0.5.19")
    assert _date("0.5.18") < _date(MAIN) == "2026-08-22T14:34:57Z" < _date("0.5.19")
    # the deepseek-v4-hopper image: in use on 2026-07-09 (InferenceX issue #2128)
    at = SGLANG_RELEASES.index(HOPPER)
    assert SGLANG_RELEASES[at - 1:at + 2] == ("0.5.14", HOPPER, "0.5.15")
    # the numbered releases keep their own order among themselves
    from memprof.core.versions import version_key
    assert list(NUMBERED) == sorted(NUMBERED, key=version_key)


def test_the_default_is_the_newest_release_by_date() -> None:
    assert _date("0.5.23") > _date(MAIN)  # PyPI 2026-10-30, two months after the snapshot
    assert newest("sglang") == resolve_version(None, "sglang") == "0.5.23" == SGLANG_RELEASES[-1]
    assert newest("vllm") == VLLM.releases[-1]  # vLLM's default is untouched
    est = estimate("qwen3-8b", Deployment(engine="sglang"), gpu_name="H100")
    assert est.deployment.engine_version == "0.5.23"


def _row(**kw: object) -> Rule:
    base: dict[str, object] = dict(name="x", changes="y", since="0.5.10", until=None,
                                   introduced_by="z", source="s", engine="sglang", value=1)
    base.update(kw)
    return Rule(**base)  # type: ignore[arg-type]


def test_around_snapshots_cuts_a_row_at_each_snapshot_in_its_range() -> None:
    rows = around_snapshots(_row(), _row(value=0, since=None))
    spans = [(r.since, r.until, r.value) for r in rows]
    assert spans == [("0.5.10", HOPPER, 1), (HOPPER, "0.5.15", 0), ("0.5.15", MAIN, 1),
                     (MAIN, "0.5.19", 0), ("0.5.19", None, 1)]
    for v in SGLANG_RELEASES:
        want = (None if SGLANG_RELEASES.index(v) < SGLANG_RELEASES.index("0.5.10")
                else 0 if v in SGLANG_SNAPSHOTS else 1)
        assert value_at(rows, v, None, engine="sglang") == want
    # without a snapshot row no piece holds at a snapshot
    bare = around_snapshots(_row())
    assert value_at(bare, MAIN, None, engine="sglang") is None
    assert value_at(bare, "0.5.18", None, engine="sglang") == 1
    # a range with no snapshot inside, and a vLLM row, are kept whole
    whole = _row(since="0.5.19", until="0.5.22")
    assert around_snapshots(whole) == (whole,)
    vllm = _row(engine="vllm", since="0.8.0")
    assert around_snapshots(vllm) == (vllm,)


@pytest.mark.parametrize(("version", "chunk", "graph"), [
    ("0.5.19", CHUNK_BY_TIER, GRAPH_BY_TIER), (HOPPER, CHUNK_BY_TIER, GRAPH_BY_TIER),
    (MAIN, CHUNK_BY_TIER, GRAPH_BY_TIER),  # both snapshots predate the 0.5.20 / 0.5.22 changes
    ("0.5.21", CHUNK_BY_TIER_0520, None), ("0.5.23", CHUNK_BY_TIER_0520, GRAPH_BY_TIER_CAPPED),
])
def test_the_020_changes_follow_the_dates(version: str, chunk: str, graph: str | None) -> None:
    assert value_at(SGLANG_CHUNKED_PREFILL, version, engine="sglang") == chunk
    if graph is not None:
        assert value_at(SGLANG_GRAPH_MAX_BS, version, engine="sglang") == graph


def test_rows_not_read_at_a_snapshot_leave_it_out() -> None:
    for v in NUMBERED[NUMBERED.index("0.5.10"):]:
        assert value_at(SGLANG_PREFILL_GRAPH_RESERVE, v, engine="sglang") == PG_ON
        assert value_at(SGLANG_PREFILL_GRAPH_OFF, v, engine="sglang") != "none"
    for v in NUMBERED[NUMBERED.index("0.4.9.post5"):]:
        assert value_at(SGLANG_VLM_FRACTION, v, engine="sglang") == ("heuristic", "vit")
        assert value_at(SGLANG_VLM_CHUNK_OFF, v, engine="sglang") is False
    for v in SGLANG_SNAPSHOTS:
        assert value_at(SGLANG_PREFILL_GRAPH_RESERVE, v, PG_NONE, engine="sglang") == PG_NONE
        assert value_at(SGLANG_PREFILL_GRAPH_RESERVE, v, None, engine="sglang") is None
        assert value_at(SGLANG_PREFILL_GRAPH_OFF, v, engine="sglang") == "none"
        assert value_at(SGLANG_VLM_FRACTION, v, None, engine="sglang") is None
        assert value_at(SGLANG_VLM_CHUNK_OFF, v, None, engine="sglang") is None


def test_the_stale_marlin_scales_span_the_releases_between_the_two_prs() -> None:
    # PR #24986 first in the v0.5.12 tag; the delattr of PR #30272 first in v0.5.16
    held = {v: value_at(SGLANG_MARLIN_STALE_SCALE_INV, v, None, engine="sglang")
            for v in SGLANG_RELEASES}
    assert [v for v, kept in held.items() if kept] == [
        "0.5.12", "0.5.13", "0.5.14", HOPPER, "0.5.15"]
    assert held["0.5.11"] is None and held["0.5.16"] is held[MAIN] is held["0.5.23"] is False


def test_every_sglang_row_names_releases_of_the_order() -> None:
    for r in all_rules():
        if r.engine == "sglang":
            for edge in (r.since, r.until):
                assert edge is None or edge in SGLANG_RELEASES, (r.name, edge)


def test_the_pypi_dates_are_the_ones_cited() -> None:
    # the table carries PyPI's upload times, rounded down to the second (a spot check of three)
    table = {n: d for n, d, w in SGLANG_DATED if w.startswith("PyPI")}
    assert table["0.5.19"] == "2026-09-04T23:10:25Z"
    assert table["0.5.23"] == "2026-10-30T01:34:33Z"
    assert table["0.4.3"] == "2025-02-14T01:43:35Z"
