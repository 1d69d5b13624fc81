"""``rule_in_force`` keeps its answer for a tuple of rows (by the tuple's identity, release and
engine): every rule table of the rulebook, at every release of each engine, answers as the rows
read one by one do, on the first call and on the cached one; a list and an equal tuple that is
another object answer the same."""

from __future__ import annotations

from memprof.core.releases import RELEASES
from memprof.core.version_diff import RULEBOOK
from memprof.core.versions import Rule, rule_in_force


def _scan(rows: tuple[Rule, ...], version: str, engine: str) -> Rule | None:
    return next((r for r in rows if r.holds(version, engine)), None)


def test_every_table_at_every_release_answers_as_its_rows() -> None:
    checked = held = 0
    for engine, releases in RELEASES.items():
        for rows in RULEBOOK:
            for version in releases:
                want = _scan(rows, version, engine)
                assert rule_in_force(rows, version, engine) is want  # computed
                assert rule_in_force(rows, version, engine) is want  # kept
                assert rule_in_force(list(rows), version, engine) is want  # a list: read through
                assert rule_in_force(tuple(list(rows)), version, engine) is want  # another tuple
                checked += 1
                held += want is not None
    assert checked > 1000 and 0 < held < checked  # both answers occur


def test_none_is_the_newest_release() -> None:
    for rows in RULEBOOK[:20]:
        newest = RELEASES["vllm"][-1]
        assert rule_in_force(rows, None) is _scan(rows, newest, "vllm")
