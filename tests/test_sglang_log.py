"""SGLang start-up logs (``memprof/probes/sglang_log.py``): ServerArgs as the deployment, the
scheduler and capture lines, the release the log names or is placed at, SGLang's long flags in
a pasted command, and ``memprof explain`` rebuilding at that release."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from pathlib import Path

import pytest

from memprof.base.units import GiB
from memprof.cli import run
from memprof.probes.serve_command import parse_tokens
from memprof.probes.sglang_log import (
    modelled_release,
    place_by_date,
    place_by_fields,
    release_fields,
    server_args_settings,
    split_fields,
)
from memprof.probes.startup_log import parse_log, read_log

LOGS = Path(__file__).resolve().parent / "data" / "logs"
QWQ = LOGS / "sglang-qwq-32b-tp4-l4-0.4.3.post4.log"


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


def test_server_args_line_is_the_deployment() -> None:
    log = read_log(str(QWQ))
    assert log.engine == "sglang"
    s = log.settings
    # the values after 0.4.3's heuristics ran: mfs by tp 4, the < 25,000 MiB chunk and graph bs
    assert (s["tp"], s["mem_fraction_static"], s["chunked_prefill_size"],
            s["cuda_graph_max_bs"]) == (4, 0.85, 2048, 80)
    assert s["enforce_eager"] is False and s["dp"] == 1
    # ServerArgs left context_length None: the scheduler line's context_len fills it
    assert s["max_model_len"] == 131072
    # named by nothing; its fields are 0.4.4's, its date (2025-03-08) before 0.4.4 was built
    assert s["engine_version"] == "0.4.3"
    assert any("a build between the two" in n for n in log.notes)
    assert log.get("weights_bytes") == round(15.54 * GiB)
    # "Load weight begin. avail mem": the free memory SGLang's budget line starts from
    assert log.get("avail_before_load_bytes") == round(21.63 * GiB)
    assert log.get("kv_tokens") == 46611 and log.get("max_total_num_tokens") == 46611
    assert log.get("k_bytes") == round(1.42 * GiB)
    assert log.get("cudagraph_pool_bytes") == round(0.93 * GiB)


def test_split_fields_keeps_nested_values_whole() -> None:
    got = split_fields("a=1, b='x, y', c=[1, 2], d=Cfg(e=3, f=(4,)), g=None) tail=9")
    assert got == {"a": "1", "b": "'x, y'", "c": "[1, 2]", "d": "Cfg(e=3, f=(4,))", "g": "None"}


def test_expert_parallel_from_ep_moe_or_ep_size() -> None:
    assert server_args_settings({"enable_ep_moe": "True"})["enable_expert_parallel"] is True
    assert server_args_settings({"ep_size": "8", "tp_size": "8"}) == {
        "tp": 8, "enable_expert_parallel": True}
    assert "enable_expert_parallel" not in server_args_settings({"ep_size": "1"})
    # a value of the wrong kind is not a setting
    assert server_args_settings({"tp_size": "'x'", "mem_fraction_static": "1.5"}) == {}


@pytest.mark.parametrize(("named", "release", "says"), [
    ("0.4.8", "0.4.8", ""),
    ("0.4.6.post1", "0.4.6", "a post release of 0.4.6, not modelled: modelled at 0.4.6"),
    ("v0.5.3rc0", "0.5.3", "a release candidate of 0.5.3: modelled at 0.5.3"),
    ("0.5.15", "0.5.15", ""),
    ("0.5.13.post1", "0.5.13", "a post release of 0.5.13, not modelled: modelled at 0.5.13"),
    ("0.5.20", "0.5.20", ""),
    ("0.5.24", "0.5.23", "newer than the releases memprof models (0.4.3 to 0.5.23)"),
    ("0.5.23.post1", "0.5.23", "a post release of 0.5.23, not modelled"),
    ("0.4.1", "0.4.3", "older than the releases memprof models (0.4.3 to"),
])
def test_a_named_release_maps_onto_a_modelled_one(named: str, release: str, says: str) -> None:
    got, note = modelled_release(named)
    assert got == release
    assert says in note if says else note == ""


def test_a_log_naming_its_release_is_rebuilt_there() -> None:
    text = ("pip list: sglang==0.4.6.post1\n"
            "[2025-05-02 16:14:33] KV Cache is allocated. #tokens: 15387, K size: 0.82 GB, "
            "V size: 0.82 GB\n")
    log = parse_log(text)
    assert log.settings["engine_version"] == "0.4.6"
    assert any("0.4.6.post1" in n for n in log.notes)


def test_placing_by_the_server_args_fields() -> None:
    sets = release_fields()
    for r in ("0.4.8", "0.5.3", "0.5.9", "0.5.13", "0.5.19"):
        assert place_by_fields(set(sets[r]))[0] == r  # type: ignore[index]
    newer = set(sets["0.5.23"]) | {"a_new_flag", "another", "third", "fourth"}
    placed = place_by_fields(newer)
    assert placed is not None and placed[0] == "0.5.23"  # a newer build: the newest read
    assert place_by_fields({"tp_size", "model_path"}) is None  # a fragment places nothing



def test_a_post_release_s_fields_are_its_base_s_and_the_date_chooses() -> None:
    """0.4.8's ServerArgs fields are 0.4.8.post1's (the table keeps numbered releases), so a
    full line of them is placed at 0.4.8.post1 once the log's date is after its upload
    (2025-06-26T09:21Z, published row 1855's docs build of 2025-06-27), at 0.4.8 before it."""
    fields = ", ".join(f"{name}=None" for name in sorted(release_fields()["0.4.8"]))
    line = f"server_args=ServerArgs({fields})\n"
    kv = "KV Cache is allocated. #tokens: 20480, K size: 0.06 GB, V size: 0.06 GB\n"
    after = parse_log(f"[2025-06-27 08:16:16] {line}[2025-06-27 08:16:30] {kv}")
    assert after.settings["engine_version"] == "0.4.8.post1"
    assert any("the fields of its post release 0.4.8.post1 too" in n for n in after.notes)
    before = parse_log(f"[2025-06-25 08:16:16] {line}[2025-06-25 08:16:30] {kv}")
    assert before.settings["engine_version"] == "0.4.8"
    undated = parse_log(line + kv)
    assert undated.settings["engine_version"] == "0.4.8"

def test_placing_by_date() -> None:
    assert place_by_date("2025-08-08")[0] == "0.4.10"
    # uploaded 2025-06-24T06:14Z: a log of that day is not after it in every zone
    assert place_by_date("2025-06-24")[0] == "0.4.7"
    assert place_by_date("2025-01-01")[0] == "0.4.3"
    assert place_by_date("2026-05-01")[0] == "0.5.10"
    assert place_by_date("2026-09-04")[0] == "0.5.18"  # 0.5.19 uploaded 2026-09-04T23:10Z
    assert place_by_date("2026-09-20")[0] == "0.5.20"  # built 2026-09-18
    assert place_by_date("2026-11-20")[0] == "0.5.23"  # after the newest release read


def test_max_total_tokens_is_read() -> None:
    text = ("[2025-07-01 10:00:00] server_args=ServerArgs(model_path='m', tp_size=1, "
            "max_total_tokens=20000, mem_fraction_static=0.8)\n"
            "[2025-07-01 10:00:09] KV Cache is allocated. #tokens: 20000, K size: 1.00 GB, "
            "V size: 1.00 GB\n")
    log = parse_log(text)
    assert log.settings["max_total_tokens"] == 20000
    # by the date: 0.4.8.post1, uploaded 2025-06-26, is modelled on its own
    assert log.settings["engine_version"] == "0.4.8.post1"


@pytest.mark.parametrize("cmd", [
    "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tensor-parallel-size 2 "
    "--data-parallel-size 2 --mem-fraction-static 0.8",
    "python3 -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp-size 2 --dp-size 2 "
    "--mem-fraction-static=0.8 --host 0.0.0.0 --port 30000 --trust-remote-code",
])
def test_sglang_long_flags(cmd: str) -> None:
    c = parse_tokens(shlex.split(cmd))
    assert c.engine == "sglang"
    assert (c.settings["tp"], c.settings["dp"], c.settings["mem_fraction_static"]) == (2, 2, 0.8)


def test_memory_neutral_flags_are_ignored_not_refused() -> None:
    c = parse_tokens(shlex.split(
        "python -m sglang.launch_server --model-path m --pipeline-parallel-size 2 --host 0.0.0.0 "
        "--log-level info --enable-metrics --enable-p2p-check --trust-remote-code"))
    assert c.settings["pp"] == 2
    assert set(c.ignored) >= {"--host", "--log-level", "--enable-metrics",
                              "--enable-p2p-check", "--trust-remote-code"}


def test_explain_rebuilds_at_the_release_the_log_is_placed_at() -> None:
    """Row 12's log (SGLang main, 2025-10-07) names no release: rebuilt at 0.5.3, the newest
    published before its first timestamp, and the note says so."""
    _, out, err = invoke(["explain", str(LOGS / "sglang-deepseek-v3.2-tp8-dp8-b200.log"),
                             "--gpu", "B200", "-m", "deepseek-v3", "-f", "json"])
    d = json.loads(out)
    assert d["deployment"]["engine_version"] == "0.5.3", err
    assert any("the newest SGLang release published before 2025-10-07, the log's date" in n
               for n in d["log"]["notes"])
    # an --engine-version given wins over the placement
    _, out, err = invoke(["explain", str(LOGS / "sglang-deepseek-v3.2-tp8-dp8-b200.log"),
                             "--gpu", "B200", "-m", "deepseek-v3", "--engine", "sglang",
                             "--engine-version", "0.4.8", "-f", "json"])
    assert json.loads(out)["deployment"]["engine_version"] == "0.4.8", err
