"""A vLLM log whose lines carry no ``[file.py:LINE]`` tag is placed by a message format only
some releases print (``memprof/probes/release_lines.py`` ``FORMATS``, the ``formats`` of
``configs/vllm_log_lines.json``, written by ``tools/vllm_log_lines.py``).

The one-line V0 budget report "Memory profiling results: total_gpu_memory=%.2fGiB
initial_memory_usage=%.2fGiB ..." is the logger.info call of vllm/worker/worker.py
``Worker.determine_num_available_blocks`` in the 0.6.4 and 0.6.4.post1 wheels; 0.6.3.post1's
worker logs no budget report and 0.6.5's logs the multi-line "Memory profiling takes ... the
current vLLM instance can use ..." message (https://github.com/vllm-project/vllm/pull/10511).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from memprof.probes.log_deployment import rebuild
from memprof.probes.release_lines import FORMATS, MESSAGES, consistent, formats, printing
from memprof.probes.startup_log import parse_log

ROOT = Path(__file__).resolve().parents[2]
TABLE = json.loads((ROOT / "configs/vllm_log_lines.json").read_text(encoding="utf-8"))
ROWS = {r["id"]: r for r in json.loads(
    (ROOT / "tests/data/published.json").read_text(encoding="utf-8"))["rows"]}
ONE_LINE = "one-line memory profiling results with initial_memory_usage"
GiB = 1 << 30


def _tool() -> ModuleType:
    path = ROOT / "tools/vllm_log_lines.py"
    spec = importlib.util.spec_from_file_location("_vllm_log_lines", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_table_lists_each_format_and_its_releases() -> None:
    assert set(TABLE["formats"]) == set(FORMATS)
    assert all(f.message in MESSAGES for f in FORMATS.values())
    assert TABLE["formats"][ONE_LINE] == ["0.6.4", "0.6.4.post1"]
    for name, releases in TABLE["formats"].items():  # each a release of the table, in order
        assert releases == [r for r in TABLE["releases"] if r in releases], name


def test_the_one_line_report_is_read_and_other_budget_formats_are_not() -> None:
    assert formats(ROWS[101]["quote"].splitlines()) == (ONE_LINE,)
    assert formats(ROWS[161]["quote"].splitlines()) == (ONE_LINE,)  # cut after its fourth field
    # a build between 0.6.4.post1 and 0.6.5 (published row 8): "duration=" first, commas
    assert formats(ROWS[8]["quote"].splitlines()) == ()
    # 0.6.5's multi-line report, and the branch of PR #10511 (row 115)
    assert formats(["INFO 12-20 01:02:03 worker.py:241] Memory profiling takes 1.02 seconds",
                    "the current vLLM instance can use total_gpu_memory (79.22GiB) x "
                    "gpu_memory_utilization (0.90) = 71.29GiB"]) == ()
    assert formats(ROWS[115]["quote"].splitlines()) == ()


def test_printing() -> None:
    assert printing("vllm", (ONE_LINE,)) == ["0.6.4", "0.6.4.post1"]
    assert printing("vllm", ()) is None  # the log shows no such format
    assert printing("sglang", (ONE_LINE,)) is None  # no table


def test_an_untagged_log_is_placed_by_its_format() -> None:
    """Row 101's quote: no tag, no release named; the format places it at 0.6.4 (0.6.4.post1
    re-ships it) and the GPU total is the one the line prints."""
    log = parse_log(ROWS[101]["quote"])
    assert log.version is None and log.tags == ()
    rb = rebuild(log, model="llama-3.1-8b", gpu=None, gpu_memory=None)
    assert rb.deployment.engine_version == "0.6.4"
    assert abs(rb.gpu.total_bytes - 23.58 * GiB) <= GiB // 200
    assert any("fit the logging lines of 0.6.4 and 0.6.4.post1: rebuilt at 0.6.4" in n
               and "patch re-release 0.6.4.post1" in n for n in rb.notes), rb.notes


LINE = ("Memory profiling results: total_gpu_memory=79.15GiB initial_memory_usage=15.34GiB "
        "peak_torch_memory=17.06GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB "
        "kv_cache_size=3.81GiB gpu_memory_utilization=0.90")


@pytest.mark.parametrize(("tag", "placed"), [
    # 0.6.4's and 0.6.4.post1's call opens there; the stamp's 12-02 (2024-12-02) is after both
    # were published, so the date takes the newer (memprof/probes/log_dates.py among)
    ("worker.py:232", "0.6.4.post1"),
    ("worker.py:300", None),  # no release's call: the format does not override the tags
])
def test_tags_and_format_together(tag: str, placed: str | None) -> None:
    log = parse_log(f"INFO 12-02 10:00:00 {tag}] {LINE}")
    assert log.formats == (ONE_LINE,)
    rb = rebuild(log, model="llama-3.1-8b", gpu=None, gpu_memory=None)
    if placed is None:
        assert consistent("vllm", log.tags) == []
        assert any("match no release" in n for n in rb.notes), rb.notes
        assert rb.deployment.engine_version != "0.6.4"  # V0's default, not the format's
    else:
        assert rb.deployment.engine_version == placed


def test_the_tool_reads_a_format_from_the_logging_call(tmp_path: Path) -> None:
    tool = _tool()
    one_line = ('        logger.info(\n'
                '            "Memory profiling results: total_gpu_memory=%.2fGiB"\n'
                '            " initial_memory_usage=%.2fGiB peak_torch_memory=%.2fGiB",\n'
                '            a, b, c)\n')
    multi = ('        msg = (f"Memory profiling takes {t:.2f} seconds\\n"\n'
             '               "the current vLLM instance can use "\n'
             '               f"total_gpu_memory ({total:.2f}GiB)")\n'
             '        logger.info(msg)\n')
    # a release whose call holds the literals, one whose call logs another format of the
    # message, and one that logs the message in another format altogether
    other = ('        logger.info("Memory profiling results: duration=%.2f seconds, "\n'
             '                    "total_gpu_memory=%.2fGiB", d, t)\n')
    for release, body in (("0.6.4", one_line), ("0.6.5", multi), ("0.6.9", other)):
        worker = tmp_path / release / "vllm" / "worker"
        worker.mkdir(parents=True)
        (worker / "worker.py").write_text("def f():\n" + body, encoding="utf-8")
    lines = {"0.6.4": {"Memory profiling results": {"worker.py": [[2, 5]]}},
             "0.6.5": {}, "0.6.9": {"Memory profiling results": {"worker.py": [[2, 3]]}},
             "0.7.0": {}}
    table = tool.formats_table(tmp_path, list(lines), lines)
    assert table[ONE_LINE] == ["0.6.4"]  # 0.7.0 is not read: it logs no such message
    lines["0.7.1"] = {"Memory profiling results": {"worker.py": [[1, 1]]}}
    with pytest.raises(SystemExit, match=r"release 0\.7\.1 logs"):
        tool.formats_table(tmp_path, list(lines), lines)


def test_a_format_no_release_prints_places_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table whose format no release prints (as a fork's would be): the log keeps V0's
    default release and the note says the line matches none."""
    import memprof.probes.release_lines as rl

    monkeypatch.setattr(rl, "printing", lambda engine, shown: [])
    log = parse_log(ROWS[101]["quote"])
    rb = rebuild(log, model="llama-3.1-8b", gpu=None, gpu_memory=None)
    assert rb.deployment.engine_version not in ("0.6.4", "0.6.4.post1")
    assert any(f"'{ONE_LINE}' line matches no release" in n for n in rb.notes), rb.notes
