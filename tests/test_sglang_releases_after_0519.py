"""SGLang 0.5.20 – 0.5.23 as modelled releases (memprof/core/releases.py), read from their PyPI
wheels against 0.5.19: where they stand, the rows that change among them (the 20 – 35 GiB tier of
the chunked-prefill and decode-graph defaults at 0.5.20, the default graph batch capped at a given
``--max-running-requests`` at 0.5.22, the prefill-graph off-conditions at 0.5.20 / 0.5.22 /
0.5.23), the snapshots keeping the older rules, the ServerArgs field sets and ``memprof
versions`` listing the changes. The figures are hand counts of
``arg_groups/memory_hook.py handle_gpu_memory_settings`` in those wheels."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang import (
    ENGINE,
    PrefillGraphModel,
    _prefill_graphs_off,
    prefill_graph_off_row,
    sglang_defaults,
)
from memprof.core.gpus import find_gpu
from memprof.core.models import load_model
from memprof.core.releases import SGLANG_RELEASES
from memprof.core.versions import newest, resolve_version
from memprof.probes.sglang_log import modelled_release, place_by_date, release_fields

NEW = ("0.5.20", "0.5.21", "0.5.22", "0.5.23")


def _mfs(model: str, gpu: str, version: str, **kw: Any) -> float:
    dep = Deployment(engine="sglang", engine_version=version, **kw)
    return ENGINE.mem_fraction(dep, find_gpu(gpu), None, spec=load_model(model))


def _defaults(gpu: str, version: str, **kw: Any) -> tuple[int, int]:
    chunk, max_bs, _ = sglang_defaults(find_gpu(gpu),
                                       Deployment(engine="sglang", engine_version=version, **kw))
    return chunk, max_bs


def test_the_releases_stand_after_0_5_19_and_the_snapshots() -> None:
    at = SGLANG_RELEASES.index("0.5.19")
    assert SGLANG_RELEASES[at + 1:] == NEW  # the snapshots predate 0.5.19 (by date)
    assert newest("sglang") == "0.5.23"  # the default --engine-version: the newest by date
    for v in NEW:
        assert resolve_version(v, "sglang") == v
        assert modelled_release(v) == (v, "")


@pytest.mark.parametrize(("version", "want"), [
    ("0.5.19", (2048, 24)), ("0.5.20", (4096, 48)), ("0.5.21", (4096, 48)),
    ("0.5.22", (4096, 48)), ("0.5.23", (4096, 48)),
    ("deepseek-v4-hopper@2026-07", (2048, 24)), ("main@d315eb7", (2048, 24)),
])
def test_the_20_to_35_gib_tier_by_release(version: str, want: tuple[int, int]) -> None:
    """RTX 5090 (nvidia-smi 32,607 MiB): 2048 / 24 to 0.5.19, 4096 / 48 from 0.5.20; the
    snapshots predate the change."""
    assert _defaults("RTX-5090", version) == want


def test_the_tier_at_tp4_and_on_other_tiers() -> None:
    assert _defaults("RTX-5090", "0.5.19", tp=4) == (2048, 80)
    assert _defaults("RTX-5090", "0.5.20", tp=4) == (4096, 160)
    # an H100 (80 GiB tier) is not touched: 8192 / 256 on both sides
    assert _defaults("H100", "0.5.19") == _defaults("H100", "0.5.23") == (8192, 256)


def test_rtx_5090_mem_fraction_at_0_5_19_and_0_5_20_by_hand() -> None:
    """Qwen3-8B TP1 on an RTX 5090 (32,607 MiB), prefill graphs on (non-MLA, 8 MiB a size).
    0.5.19: 512 + 1.5*2048 + 1/8*1024 + 2*24 + 42*8 = 4,096 MiB;
    0.5.20: 512 + 1.5*4096 + 1/8*1024 + 2*48 + 50*8 = 7,280 MiB (no 10 GiB floor below 60)."""
    mib = 32607
    assert _mfs("qwen3-8b", "RTX-5090", "0.5.19") == round((mib - 4096) / mib, 3) == 0.874
    assert _mfs("qwen3-8b", "RTX-5090", "0.5.20") == round((mib - 7280) / mib, 3) == 0.777
    # main@d315eb7: 2048 / 24 and no prefill-graph reserve: 512 + 3,072 + 128 + 48 = 3,760 MiB
    assert _mfs("qwen3-8b", "RTX-5090", "main@d315eb7") == round((mib - 3760) / mib, 3)


def test_the_graph_batch_is_capped_at_max_running_requests_from_0_5_22() -> None:
    # H100 TP1: the default decode max_bs 256; --max-running-requests 64 caps it from 0.5.22
    assert _defaults("H100", "0.5.21", max_num_seqs=64)[1] == 256
    assert _defaults("H100", "0.5.22", max_num_seqs=64)[1] == 64
    assert _defaults("H100", "0.5.23", max_num_seqs=64)[1] == 64
    assert _defaults("H100", "main@d315eb7", max_num_seqs=64)[1] == 256
    # a larger cap, or a given --cuda-graph-max-bs, leaves it
    assert _defaults("H100", "0.5.22", max_num_seqs=1000)[1] == 256
    assert _defaults("H100", "0.5.22", max_num_seqs=64, cuda_graph_max_bs=128)[1] == 128


def test_the_cap_moves_the_reserve_below_the_floor() -> None:
    """RTX 5090 TP1, Qwen3-8B at 0.5.22 with --max-running-requests 16: max_bs 16, so the
    graph reserve is 2*16 instead of 2*48 (7,280 - 64 = 7,216 MiB)."""
    mib = 32607
    assert _mfs("qwen3-8b", "RTX-5090", "0.5.22", max_num_seqs=16) == round(
        (mib - 7216) / mib, 3)
    assert _mfs("qwen3-8b", "RTX-5090", "0.5.21", max_num_seqs=16) == round(
        (mib - 7280) / mib, 3)


@pytest.mark.parametrize(("version", "row"), [
    ("0.5.19", "0.5.19"), ("0.5.20", "0.5.20"), ("0.5.21", "0.5.20"), ("0.5.22", "0.5.22"),
    ("0.5.23", "0.5.23"),
])
def test_the_prefill_graph_off_row_by_release(version: str, row: str) -> None:
    got = prefill_graph_off_row(version)
    assert got is not None and got["since"] == row


def _off(version: str, architecture: str, multimodal: bool) -> bool:
    row = prefill_graph_off_row(version)
    assert row is not None
    model = PrefillGraphModel(architecture=architecture, mla=False, multimodal=multimodal,
                              nsa=False, capped_4096=False)
    return _prefill_graphs_off(row, Deployment(engine="sglang", engine_version=version),
                               find_gpu("H100"), model)


def test_the_off_conditions_that_change() -> None:
    # 0.5.20: a KDA-attention config (linear_attn_config) turns the breakable graphs off
    assert not _off("0.5.19", "KimiLinearForCausalLM", False)
    assert _off("0.5.20", "KimiLinearForCausalLM", False)
    # 0.5.22: a multimodal model keeps them only on the breakable allowlist
    assert _off("0.5.21", "Qwen4ExpForConditionalGeneration", True)
    assert not _off("0.5.22", "Qwen4ExpForConditionalGeneration", True)
    # 0.5.23: one more architecture there
    assert _off("0.5.22", "MuseSparkForConditionalGeneration", True)
    assert not _off("0.5.23", "MuseSparkForConditionalGeneration", True)
    # a text model keeps them throughout
    assert not any(_off(v, "Qwen3ForCausalLM", False) for v in ("0.5.19", *NEW))


def test_server_args_fields_of_the_new_releases() -> None:
    sets = release_fields()
    assert list(sets)[-len(NEW):] == list(NEW)
    # the fields of the classes ServerArgs is assembled from (arg_groups/fields/*.py)
    assert [len(sets[v]) for v in NEW] == [499, 519, 536, 546]
    assert "attn_dp_size" in sets["0.5.22"] and "attn_dp_size" not in sets["0.5.21"]
    assert "enable_dsa_prefill_context_parallel" in sets["0.5.19"]
    assert "enable_dsa_prefill_context_parallel" not in sets["0.5.20"]
    assert place_by_date("2026-10-20")[0] == "0.5.22"
    assert place_by_date("2026-11-15")[0] == "0.5.23"  # none published after it when read


def test_versions_lists_the_changes(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["versions", "-f", "json"]) == 0  # lists both engines
    listed = json.dumps(json.loads(capsys.readouterr().out))
    for v in NEW:
        assert f'"{v}"' in listed
    assert run(["versions", "--from", "0.5.19", "--to", "0.5.23", "--engine", "sglang",
                "--model", "qwen3-8b", "-f", "json"]) == 0
    diff = json.dumps(json.loads(capsys.readouterr().out))
    for rule in ("sglang_chunked_prefill_size", "sglang_cuda_graph_max_bs",
                 "sglang_prefill_graph_off"):
        assert rule in diff
    assert run(["versions", "--from", "0.5.20", "--to", "0.5.21", "--engine", "sglang",
                "-f", "json"]) == 0
    out = capsys.readouterr().out
    assert "sglang_cuda_graph_max_bs" not in out and "sglang_chunked_prefill_size" not in out
