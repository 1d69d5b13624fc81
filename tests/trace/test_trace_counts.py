"""``trace --decode-steps`` / ``--graphs``: a count the replica cannot run as given is refused
before the trace (it ran 0 or -5 decode steps as one, and ``--graphs -1`` as every size but the
smallest); ``--graphs 0`` captures no graph (it was an internal error)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from tests.cli_helpers import invoke, one_error

BASE = ["trace", "-m", "qwen2.5-0.5b", "--device", "fake"]


def _no_trace(*_a: object, **_k: object) -> None:
    raise AssertionError("the trace ran before its counts were checked")


@pytest.mark.parametrize(("flags", "needle"), [
    (["--decode-steps", "0"], "--decode-steps 0 is out of range"),
    (["--decode-steps", "-5"], "--decode-steps -5 is out of range"),
    (["--decode-steps", "100000000"], "--decode-steps 100000000 is out of range"),
    (["--graphs", "-1"], "--graphs -1 is out of range"),
])
def test_counts_out_of_range_are_refused_before_the_trace(
        monkeypatch: pytest.MonkeyPatch, flags: list[str], needle: str) -> None:
    import memprof.trace.run

    monkeypatch.setattr(memprof.trace.run, "run_trace", _no_trace)
    code, out, err = invoke([*BASE, *flags])
    assert code == 2 and out == ""
    one_error(err, needle)


def test_graphs_zero_captures_none() -> None:
    import json

    code, out, err = invoke([*BASE, "--graphs", "0", "-f", "json"])
    assert code == 0, err
    assert "internal error" not in err and json.loads(out)
