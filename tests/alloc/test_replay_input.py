"""``memprof alloc replay FILE``: what it reads and what it refuses. Only a regular file, up to
2 GiB (``read_capped``); any malformed op file or snapshot (wrong types, missing keys, negative or
huge sizes) is one ``error:`` + ``hint:`` and exit 2, or a correct answer (a request no device can
hold is an out-of-memory, exit 1) — never exit 70. Hypothesis feeds the reader malformed files."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.alloc import CachingAllocator
from memprof.alloc.replay import MAX_FILE_BYTES, load_ops, replay
from memprof.base.errors import BadInput
from memprof.cli import run

TiB = 1 << 40


def _cli(capsys: pytest.CaptureFixture[str], path: Path, *flags: str) -> tuple[int, str, str]:
    code = run(["alloc", "replay", str(path), *flags])
    out, err = capsys.readouterr()
    return code, out, err


def _one_error(err: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), err


def _snapshot(tmp_path: Path, events: list[Any]) -> Path:
    p = tmp_path / "snap.pickle"
    p.write_bytes(pickle.dumps({"segments": [], "device_traces": [events]}))
    return p


def test_cap_is_two_gib() -> None:
    assert MAX_FILE_BYTES == 2 << 30


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_endless_files_are_refused_before_reading(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        src = tmp_path / "pipe"
        os.mkfifo(src)  # nobody writes to it: a read would block forever
    else:
        src = Path(kind)
    with pytest.raises(BadInput, match="not a regular file"):
        load_ops(src)


def test_missing_and_folder(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="does not exist"):
        load_ops(tmp_path / "nope.json")
    with pytest.raises(BadInput, match="is a folder"):
        load_ops(tmp_path)


@pytest.mark.parametrize(("events", "needle"), [
    ([{"action": "alloc", "addr": 1, "size": "big", "stream": 0}], "integer addr, size"),
    ([{"action": "alloc", "addr": 1, "size": -5, "stream": 0}], "outside [0, 2^50]"),
    ([{"action": "alloc", "addr": 1, "size": 512, "stream": "x"}], "integer addr, size"),
    ([{"action": "alloc", "addr": 1, "stream": 0}], "integer addr, size"),  # no size
    ([{"action": "alloc", "addr": None, "size": 512}], "integer addr, size"),
    ([{"action": "alloc", "addr": [1], "size": 512}], "integer addr, size"),
    ([{"action": "alloc", "addr": 1, "size": 2.5}], "integer addr, size"),
    ([{"action": "alloc", "addr": 1, "size": True}], "integer addr, size"),
    ([{"action": "alloc", "addr": 1, "size": (1 << 50) + 1}], "outside [0, 2^50]"),
    ([{"action": "alloc", "addr": 1, "size": 512}, {"action": "alloc", "addr": 1, "size": 9}],
     "allocated and not freed"),
])
def test_odd_snapshot_fields_are_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                           events: list[Any], needle: str) -> None:
    code, _, err = _cli(capsys, _snapshot(tmp_path, events))
    assert code == 2, err
    _one_error(err)
    assert needle in err


def test_odd_but_readable_snapshots_replay(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    events = [{"action": "alloc", "addr": 1, "size": 512, "stream": None},  # stream None = 0
              {"action": "free_requested", "addr": 1},
              {"action": "free_completed", "addr": [7]},  # unhashable: not one of ours
              {"action": "free_completed", "addr": 99},  # allocated before recording
              {"action": "free_completed", "addr": 1},
              {"action": "segment_free", "addr": None}, "junk", {"action": 5}]
    code, out, err = _cli(capsys, _snapshot(tmp_path, events), "-f", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ops"] == 3  # alloc, free, empty_cache
    two = 2 << 20  # a small segment, split: the rest is inactive until the free merges it
    assert doc["states"] == [[512, two, two - 512, 1], [0, two, 0, 1], [0, 0, 0, 0]]


@pytest.mark.parametrize("conf", ["", "expandable_segments:True"])
def test_a_32_tib_request_is_an_oom(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                    conf: str) -> None:
    """No device holds 32 TiB; with no --total the simulated address space (16 TiB) cannot
    either: the replay stops there, out of memory (exit 1), as torch would."""
    events = [{"action": "alloc", "addr": 1, "size": 4096, "stream": 0},
              {"action": "alloc", "addr": 2, "size": 32 * TiB, "stream": 0}]
    code, out, err = _cli(capsys, _snapshot(tmp_path, events), "--conf", conf)
    assert code == 1, err
    assert "out of memory at op 1" in out
    f = tmp_path / "ops.json"
    f.write_text(json.dumps({"ops": [["a", 1, 32 * TiB]]}))
    code, out, err = _cli(capsys, f, "--conf", conf)
    assert code == 1 and "out of memory at op 0" in out, err


def test_allocator_survives_an_oversize_request() -> None:
    a = CachingAllocator()
    h = a.malloc(3 << 30)
    with pytest.raises(Exception, match="out of memory"):
        a.malloc(32 * TiB)
    a.free(h)  # still consistent: the 3 GiB block is cached and reusable
    assert a.memory_stats()["reserved_bytes.all.current"] == 3 << 30
    a.malloc(3 << 30)
    assert a.memory_stats()["num_device_alloc"] == 1


@pytest.mark.parametrize(("ops", "needle"), [
    ([["a", 1, -1]], "op 0"), ([["a", 1, "9"]], "op 0"), ([["a", 1, 2 ** 51]], "op 0"),
    ([["a", 1, 10, "s"]], "op 0"), ([["e", 1]], "op 0"), ([["f"]], "op 0"),
    ([["a", 1, 10], ["a", 1, 10]], "already allocated"), ([["a", 1, True]], "op 0")])
def test_bad_op_files(capsys: pytest.CaptureFixture[str], tmp_path: Path, ops: list[Any],
                      needle: str) -> None:
    f = tmp_path / "ops.json"
    f.write_text(json.dumps({"ops": ops}))
    code, _, err = _cli(capsys, f)
    assert code == 2, err
    _one_error(err)
    assert needle in err


# --- fuzzing: no malformed file gives exit 70 --------------------------------------------------
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 65), 2 ** 65),
                    st.integers(-3, 4096), st.floats(allow_nan=True), st.text(max_size=4))
values = st.recursive(scalars, lambda kids: st.lists(kids, max_size=3)
                      | st.dictionaries(st.text(max_size=3), kids, max_size=3), max_leaves=6)
events = st.one_of(
    st.fixed_dictionaries({"action": st.sampled_from(
        ["alloc", "free_completed", "free_requested", "segment_free", "segment_unmap", "x"])},
        optional={"addr": st.one_of(st.integers(0, 4), values),
                  "size": st.one_of(st.integers(-10, 2 ** 51), values),
                  "stream": st.one_of(st.integers(-1, 2), values)}),
    values)
snapshots = st.one_of(
    st.fixed_dictionaries({"device_traces": st.lists(st.lists(events, max_size=12),
                                                     max_size=2)},
                          optional={"segments": values}),
    values)
op_items = st.one_of(
    st.builds(lambda kind, args: [kind, *args], st.sampled_from(["a", "f", "e", "x"]),
              st.lists(st.one_of(st.integers(-10, 2 ** 51), st.integers(0, 4),
                                 st.sampled_from([2 ** 44, 2 ** 45, 2 ** 48, 2 ** 50])),
                       max_size=4)),
    values)
op_files = st.one_of(st.fixed_dictionaries({"ops": st.lists(op_items, max_size=12)}), values)


def _never_internal(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    code, _, err = _cli(capsys, path)
    assert code in (0, 1, 2), err
    if code == 2:
        _one_error(err)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(snapshots)
def test_fuzz_snapshots(capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: Any) -> None:
    p = tmp_path / "fuzz.pickle"
    p.write_bytes(pickle.dumps(doc))
    _never_internal(capsys, p)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(op_files)
def test_fuzz_op_files(capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: Any) -> None:
    p = tmp_path / "fuzz.json"
    try:
        p.write_text(json.dumps(doc))
    except ValueError:  # not JSON-able (nan is, as NaN): write the pickle instead
        p.write_bytes(pickle.dumps(doc))
    _never_internal(capsys, p)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64))
def test_fuzz_bytes(data: bytes) -> None:
    """Arbitrary bytes after a pickle's first byte: BadInput or ops that replay, nothing else."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "f.bin"
        p.write_bytes(b"\x80" + data)
        with contextlib.suppress(BadInput):
            replay(load_ops(p))
