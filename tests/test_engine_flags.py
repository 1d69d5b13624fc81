"""An engine's flag spellings live in its module (``Engine.flags``, memprof/core/engines/):
``memprof.core.flags`` reads them from the engine rows, so a new engine's flags need no column
in the settings table (issue 23: a new engine is one file)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import ClassVar

import pytest

from memprof.core import engines, flags
from memprof.core.engines.vllm import VLLM

FLAGS_PY = Path(flags.__file__)


class _Throwaway(VLLM):
    name: ClassVar[str] = "throwaway"
    flags: ClassVar[dict[str, tuple[str, ...]]] = {"tp": ("--gpus-per-replica",),
                                                  "max_model_len": ("--ctx",)}


def test_a_new_engines_flags_come_from_its_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(engines.ENGINES, "throwaway", _Throwaway())
    tp = flags.BY_FIELD["tp"]
    assert tp.flags("throwaway") == ("--gpus-per-replica",)
    assert "--gpus-per-replica" in tp.cli_flags()
    assert flags.BY_FIELD["pp"].flags("throwaway") == ()  # not listed: no such setting
    assert flags.flag_name("max_model_len", "throwaway") == "--ctx"


def test_each_engines_flags_are_its_own() -> None:
    vllm, sglang = (engines.engine_named(n) for n in ("vllm", "sglang"))
    assert flags.BY_FIELD["max_model_len"].flags(vllm.name) == ("--max-model-len",)
    assert flags.BY_FIELD["max_model_len"].flags(sglang.name) == ("--context-length",)
    assert flags.BY_FIELD["gpu_memory_utilization"].flags(sglang.name) == ()
    for engine in engines.ENGINES.values():  # every flag names a settings row
        assert set(engine.flags) <= set(flags.BY_FIELD), engine.name


def test_the_settings_table_has_no_engine_column() -> None:
    """No identifier of flags.py is an engine name (``Setting.vllm``), and no string equal to
    one is compared or used as a key: the engine names appear in help prose only."""
    tree = ast.parse(FLAGS_PY.read_text(encoding="utf-8"))
    names = set(engines.NAMES)
    idents = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    idents |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    idents |= {n.target.id for n in ast.walk(tree)
               if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    assert not idents & names
    code_strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                    and isinstance(n.value, str) and n.value in names}
    assert not code_strings
