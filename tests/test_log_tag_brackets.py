"""A log's ``file.py:LINE]`` tags are placed only at releases whose log format writes them in that
form (``memprof/probes/release_lines.py`` ``TAG_BRACKETS``): vLLM's ``vllm/logger.py``
``_FORMAT`` is ``"... %(filename)s:%(lineno)d] %(message)s"`` in the 0.6.3.post1 to 0.7.3 wheels
and ``"... [%(filename)s:%(lineno)d] %(message)s"`` from 0.8.0 (0.8.0, 0.8.4; ``fileinfo`` in
0.13.0, 0.17.1, 0.27.1). Published row 1304 (vLLM 0.7.3 on 8 H200, by its page's version table)
prints ``worker.py:267]`` and ``executor_base.py:111]``, lines 0.8.0-0.8.2 also log from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.probes.log_deployment import rebuild
from memprof.probes.release_lines import TAG_BRACKETS, between, consistent, tags
from memprof.probes.startup_log import parse_log

ROW_1304 = next(r for r in json.loads(
    (Path(__file__).parent / "data" / "published.json").read_text())["rows"] if r["id"] == 1304)
BARE = [ln for ln in ROW_1304["quote"].splitlines()
        if "worker.py:267]" in ln or "executor_base.py:11" in ln]


def _bracketed(lines: list[str]) -> list[str]:
    out = []
    for ln in lines:
        for f in ("worker.py:", "executor_base.py:"):
            if f in ln:
                head, tail = ln.split(f, 1)
                ln = head + "[" + f + tail
                break
        out.append(ln)
    return out


@pytest.mark.parametrize(("release", "bracketed"), [
    ("0.6.3.post1", False), ("0.6.5", False), ("0.7.1", False), ("0.7.3", False),
    ("0.8.0", True), ("0.8.2+v0", True), ("0.13.0", True), ("0.27.1", True),
])
def test_rows_by_release(release: str, bracketed: bool) -> None:
    row = next(r for r in TAG_BRACKETS if r.holds(release))
    assert row.value is bracketed


def test_each_tag_carries_its_form() -> None:
    lines = ["INFO 03-15 20:36:48 worker.py:267] Memory profiling takes 7.63 seconds",
             "INFO 04-05 05:51:44 [worker.py:267] Memory profiling takes 7.63 seconds",
             "\x1b[90m[gpu_worker.py:356]\x1b[0m Available KV cache memory: 19.28 GiB"]
    assert tags(lines) == (("worker.py", 267, "Memory profiling takes", False),
                           ("worker.py", 267, "Memory profiling takes", True),
                           ("gpu_worker.py", 356, "Available KV cache memory", True))


def test_bare_tags_of_row_1304_are_0_7_only() -> None:
    found = tags(BARE)
    assert found and not any(t[3] for t in found)
    assert consistent("vllm", found) == ["0.7.2", "0.7.3"]  # 0.8.0-0.8.2 log there too


def test_the_same_lines_bracketed_are_0_8_only() -> None:
    found = tags(_bracketed(BARE))
    assert found and all(t[3] for t in found)
    assert consistent("vllm", found) == ["0.8.0", "0.8.1", "0.8.2"]


def test_row_1304_is_rebuilt_at_0_7_3() -> None:
    """Before: the newest of 0.7.2-0.8.2, 0.8.2 (run as V0)."""
    rb = rebuild(parse_log(ROW_1304["quote"]), model="deepseek-r1", gpu="H200",
                 gpu_memory=None)
    assert rb.deployment.engine_version == "0.7.3"


def test_a_build_between_takes_the_form_of_either_release() -> None:
    """'Graph capturing finished' from model_runner.py: 0.7.3 logs it at 1562, 0.8.0 at 1570,
    0.8.2 at 1570 and 0.8.3 at 1598; 'Memory profiling takes' from worker.py:267 in 0.7.2-0.8.2
    (the pair pins the era). A line between two releases' is a build between them, in the form
    of either (a 0.7.4 development build brackets its tags, as 0.8.0 does), never between two
    releases neither of which writes the tag's form."""
    def found(opening: str, line: int) -> tuple[tuple[str, int, str, bool], ...]:
        return tags([f"INFO 03-20 10:00:00 {opening}worker.py:267] Memory profiling takes 5 s",
                     f"INFO 03-20 10:00:00 {opening}model_runner.py:{line}] Graph capturing "
                     "finished in 9 secs"])

    for opening in ("[", ""):
        assert consistent("vllm", found(opening, 1566)) == []
        assert between("vllm", found(opening, 1566)) == ("0.7.3", "0.8.0")
    # 0.8.2 and 0.8.3 both bracket their tags: a bare tag between them fits neither
    assert between("vllm", found("[", 1580)) == ("0.8.2", "0.8.3")
    assert between("vllm", found("", 1580)) is None
