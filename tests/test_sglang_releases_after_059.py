"""SGLang 0.5.10 – 0.5.19 as modelled releases (memprof/core/releases.py): where they stand
among the snapshots, the one rule row that changes among them (the NSA cell, SGLang PR #27354,
first in the 0.5.17 wheel), the ServerArgs field sets explain places a log by
(configs/sglang_server_args.json) and ``memprof versions`` listing them."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang_nsa import SGLANG_NSA_CELL
from memprof.core.estimate import estimate
from memprof.core.releases import SGLANG_RELEASES
from memprof.core.versions import newest, resolve_version, value_at
from memprof.core.weights.mlp import SGLANG_MARLIN_STALE_SCALE_INV
from memprof.probes.sglang_log import modelled_release, place_by_date, release_fields

NEW = ("0.5.10", "0.5.11", "0.5.12", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.17",
       "0.5.18", "0.5.19")


def test_the_releases_stand_after_0_5_9_among_the_snapshots() -> None:
    at = SGLANG_RELEASES.index("0.5.9")
    numbered = tuple(r for r in SGLANG_RELEASES[at + 1:] if r[0].isdigit())
    assert numbered[:len(NEW)] == NEW
    # the snapshots stand among them by date (tests/test_sglang_release_dates.py)
    assert SGLANG_RELEASES.index("deepseek-v4-hopper@2026-07") < SGLANG_RELEASES.index("0.5.15")
    assert SGLANG_RELEASES.index("main@d315eb7") < SGLANG_RELEASES.index("0.5.19")
    assert newest("sglang") == "0.5.23"  # the default --engine-version: the newest by date
    for v in NEW:
        assert resolve_version(v, "sglang") == v


def test_a_post_release_or_a_later_release_is_not_a_modelled_one() -> None:
    with pytest.raises(BadInput):
        resolve_version("0.5.13.post1", "sglang")
    # a log naming it is estimated at the newest release published before its wheel was built
    # (2026-06-15, after 0.5.13 and before 0.5.14), and says so
    assert modelled_release("0.5.13.post1") == (
        "0.5.13", "SGLang 0.5.13.post1: a post release of 0.5.13, not modelled: modelled at "
        "0.5.13, the newest release published by the time its wheel was built (2026-06-15)")
    assert modelled_release("0.5.24")[0] == "0.5.23"  # the newest numbered release read


@pytest.mark.parametrize(("version", "cell"), [
    ("0.5.9", "latent+indexer"), ("0.5.16", "latent+indexer"), ("0.5.17", "pool"),
    ("0.5.19", "pool"), ("main@d315eb7", "pool"),
    # the deepseek-v4-hopper image (2026-07-09) stands before 0.5.17 by date
    ("deepseek-v4-hopper@2026-07", "latent+indexer"),
])
def test_the_nsa_cell_changes_at_0_5_17(version: str, cell: str) -> None:
    assert value_at(SGLANG_NSA_CELL, version, engine="sglang") == cell


def test_the_stale_marlin_scales_hold_from_0_5_12_to_the_hopper_image_and_0_5_15() -> None:
    held = [v for v in SGLANG_RELEASES
            if value_at(SGLANG_MARLIN_STALE_SCALE_INV, v, False, engine="sglang")]
    assert held == ["0.5.12", "0.5.13", "0.5.14", "deepseek-v4-hopper@2026-07", "0.5.15"]


def test_nsa_pool_at_0_5_16_and_0_5_17() -> None:
    """DeepSeek-V3.2 on B200 (TP8, DP attention): 0.5.17 sizes by the stored slot (656 + 132 B a
    layer), so fewer tokens than 0.5.16's latent + indexer cell (576 + 132 B) for one budget."""
    def tokens(v: str) -> tuple[int, int]:
        dep = Deployment(engine="sglang", engine_version=v, tp=8, dp=8,
                         enable_dp_attention=True)
        e = estimate("deepseek-v3.2", dep, gpu_name="B200")
        return e.kv_cache_tokens, e.ranks[0].available_kv_bytes

    (old, budget_old), (new, budget_new) = tokens("0.5.16"), tokens("0.5.17")
    # the budgets differ by the prefill CUDA-graph reserve (SGLANG_PREFILL_GRAPH_RESERVE): off
    # with DP attention and MLA at 0.5.16, 1.5 GiB for DSA MLA with DP attention at 0.5.17
    assert budget_old > budget_new
    assert budget_new / new > budget_old / old  # more bytes a token: the stored slot
    main, budget_main = tokens("main@d315eb7")
    # the same cell as main's (whole pages: a budget's last page part apart)
    assert abs(budget_new / new - budget_main / main) < 1e-3 * (budget_main / main)


def test_server_args_fields_per_release() -> None:
    sets = release_fields()
    assert list(sets)[-1] == "0.5.23"
    # the 0.5.10 wheel renamed the opt-in flag: piecewise CUDA graphs became opt-out
    assert "enable_piecewise_cuda_graph" in sets["0.5.9"]
    assert "disable_piecewise_cuda_graph" not in sets["0.5.9"]
    assert "disable_piecewise_cuda_graph" in sets["0.5.10"]
    assert "enable_piecewise_cuda_graph" not in sets["0.5.10"]
    assert len(sets["0.5.19"]) == 488  # ServerArgs' annotated fields in the 0.5.19 wheel
    assert place_by_date("2026-08-27")[0] == "0.5.18"


def test_versions_lists_the_releases_and_the_change(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["versions", "-f", "json"]) == 0  # lists both engines
    listed = json.dumps(json.loads(capsys.readouterr().out))
    for v in NEW:
        assert f'"{v}"' in listed
    assert run(["versions", "--from", "0.5.9", "--to", "0.5.19", "--engine", "sglang",
                "-f", "json"]) == 0
    diff = json.loads(capsys.readouterr().out)
    assert "sglang_nsa_cell_size" in json.dumps(diff)
    assert run(["versions", "--from", "0.5.17", "--to", "0.5.19", "--engine", "sglang",
                "-f", "json"]) == 0
    assert "sglang_nsa_cell_size" not in capsys.readouterr().out


@pytest.mark.parametrize(("version", "want"), [
    ("0.4.3", "sglang-0.4"), ("0.4.9.post5", "sglang-0.4"), ("0.5.1", "sglang-0.5"),
    ("0.5.10", "sglang-0.5"), ("0.5.19", "sglang-0.5"), ("0.6.0", "sglang-later"),
    ("main@d315eb7", "sglang-later"), ("deepseek-v4-hopper@2026-07", "sglang-later"),
])
def test_an_sglang_row_s_era_is_its_release_number(version: str, want: str) -> None:
    """``tests/test_explain_calibration.py`` ``era``: by the release a row runs at."""
    row = {"id": 0, "engine": "sglang", "memprof_engine_version": version}
    assert _calibration_module().era(row) == want


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_row_at_no_release_has_no_era(engine: str) -> None:
    """A refused row whose log states no release is in no era: before, an SGLang one fell
    through to the snapshot branch and counted as ``sglang-later`` (builds after 0.5.23)."""
    row = {"id": 0, "engine": engine, "memprof_engine_version": None}
    with pytest.raises(ValueError, match="no release"):
        _calibration_module().era(row)
    run_ = {**row, "memprof_run": {"memprof_engine_version": "0.5.23" if engine == "sglang"
                                   else "0.11.0"}}
    assert _calibration_module().era(run_) in ("sglang-0.5", "vllm-0.11-0.14")


@functools.cache
def _calibration_module() -> Any:
    """``tests/test_explain_calibration.py``, loaded once (it reads the calibration set)."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).with_name("test_explain_calibration.py")
    spec = importlib.util.spec_from_file_location("_calib_explain_era", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod
