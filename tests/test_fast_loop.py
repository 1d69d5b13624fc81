"""The fast loop's list of slow tests (``tests/conftest.py`` ``SLOW``) names tests that exist, so
a renamed or moved test cannot drop out of it unseen, and the matching is by node id prefix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import SLOW, is_slow

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("prefix", sorted(SLOW))
def test_each_slow_entry_names_a_test(prefix: str) -> None:
    path, _, function = prefix.partition("::")
    target = ROOT / path
    assert target.exists(), prefix
    if function:
        assert re.search(rf"^def {re.escape(function)}\(", target.read_text(encoding="utf-8"),
                         flags=re.M), prefix
    elif target.is_dir():
        assert any(target.rglob("test_*.py")), prefix


def test_matching_is_by_node_id_prefix() -> None:
    assert is_slow("tests/test_fuzz.py::test_fuzz_cli_flags", "test_fuzz_cli_flags")
    assert is_slow("tests/kernels/test_kernels_mla.py::test_x[1]", "test_x")
    assert is_slow("tests/test_sweep.py::test_plan_cli", "test_plan_cli")
    assert is_slow("tests/test_versions.py::test_fuzz_engine_version_never_crashes",
                   "test_fuzz_engine_version_never_crashes")  # every test_fuzz* is a fuzzer
    assert not is_slow("tests/test_sweep.py::test_plan_cli_other", "test_plan_cli_other")
    assert not is_slow("tests/test_fuzz_commands_x.py::test_a", "test_a")
    assert not is_slow("tests/test_units.py::test_parse", "test_parse")
