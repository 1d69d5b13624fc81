"""vLLM's CUDA-graph capture under --enable-lora (memprof/core/terms/lora.py LORA_GRAPH_CASES):
each descriptor captured once before 0.11.1; with and without LoRA from 0.11.1
(cudagraph_specialize_lora); from 0.16.0 once without LoRA and once per captured active-LoRA
count (``--specialize-active-lora``: powers of 2 up to max_loras, and max_loras + 1). The
study's Qwen3-4B logs at 0.27.1 (tests/data/published.json rows 1640-1649) show 102 PIECEWISE
and 70 FULL graphs plain, 459 and 315 with --specialize-active-lora at 64 adapters."""

from __future__ import annotations

import pytest

import memprof.core.terms.cudagraph as cg
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import resolve_gpu
from memprof.core.terms import graph_window
from memprof.core.terms.lora import captured_lora_counts
from memprof.probes.startup_log import parse_log


def test_captured_counts_as_lora_utils_lists_them() -> None:
    assert captured_lora_counts(64, False) == [65]
    assert captured_lora_counts(64, True) == [1, 2, 4, 8, 16, 32, 64, 65]
    assert captured_lora_counts(1, True) == [1, 2]
    assert captured_lora_counts(8, True) == [1, 2, 4, 8, 9]


def _graphs(monkeypatch: pytest.MonkeyPatch, dep: Deployment) -> cg.GraphModel:
    seen: list[cg.GraphModel] = []
    orig = cg.cudagraph_model

    def keep(ctx, sizes=None):  # type: ignore[no-untyped-def]
        g = orig(ctx, sizes)
        seen.append(g)
        return g

    # Model Runner V2's own estimate (0.29.0 on) reads the model through graph_window
    for module in (cg, graph_window):
        monkeypatch.setattr(module, "cudagraph_model", keep)
    estimate("qwen3-4b", dep, gpu=resolve_gpu("RTX-4090", None))
    return seen[-1]


@pytest.mark.parametrize(("version", "loras", "specialize", "cases"), [
    ("0.11.0", 1, False, 1),
    ("0.11.1", 1, False, 2),
    ("0.15.1", 64, False, 2),
    ("0.27.1", 64, False, 2),
    ("0.27.1", 64, True, 9),  # 0, 1, 2, 4, 8, 16, 32, 64, 65: 459 / 102 = 4.5 in the log
    ("0.33.0", 8, True, 6),
])
def test_graphs_per_lora_case(monkeypatch: pytest.MonkeyPatch, version: str, loras: int,
                              specialize: bool, cases: int) -> None:
    base = Deployment(engine_version=version, max_model_len=8192)
    plain = _graphs(monkeypatch, base)
    lora = _graphs(monkeypatch, base.with_(enable_lora=True, max_loras=loras,
                                           specialize_active_lora=specialize))
    assert lora.graphs == cases * plain.graphs
    assert lora.modes == plain.modes
    if cases > 1:
        # every case pays the graphs' own driver memory; the cases without LoRA lack the
        # LoRA linears' kernel nodes, so the LoRA cases alone carry their cost
        first = cg.GRAPH_DRIVER_FIRST
        assert lora.driver - first > cases * (plain.driver - first)


def test_specialize_is_refused_before_0_16(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["estimate", "-m", "qwen3-4b", "--gpu", "H100", "--enable-lora",
                "--specialize-active-lora", "--engine-version", "0.15.1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("error: --specialize-active-lora: vLLM 0.15.1 has no such")
    assert err[1].startswith("hint: ")


def test_a_log_turns_specialize_on() -> None:
    log = parse_log("INFO 10-05 05:52:44 [api_utils.py:273] non-default args: {'model_tag': "
                    "'Qwen/Qwen3-4B', 'max_model_len': 8192, 'enable_lora': True, "
                    "'max_loras': 64, 'specialize_active_lora': True}\n")
    assert log.settings["specialize_active_lora"] is True
    assert log.settings["max_loras"] == 64
