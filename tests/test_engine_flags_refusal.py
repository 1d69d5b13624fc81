"""``check_engine_flags`` refuses every setting the chosen engine has no flag for once it differs
from its default, naming the other engine's flag, and the first such setting in ``SETTINGS``
order when several are set; an engine row replaced under its name is read afresh (the settings
it lacks are kept per engine object)."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import pytest

from memprof.base.errors import BadInput
from memprof.core import engines
from memprof.core.deployment import Deployment, check_engine_flags
from memprof.core.engines.sglang import SGLang
from memprof.core.flags import SETTINGS


class _Other:
    """A value equal to no default."""


def _foreign(engine: str) -> list[str]:
    return [s.field for s in SETTINGS if not s.flags(engine)]


def test_each_foreign_setting_is_refused_with_the_other_engines_flag() -> None:
    refused = 0
    for engine in engines.NAMES:
        base = Deployment(engine=engine)
        check_engine_flags(base)  # every default passes
        for name in _foreign(engine):
            with pytest.raises(BadInput) as err:
                check_engine_flags(replace(base, **{name: _Other()}))
            setting = next(s for s in SETTINGS if s.field == name)
            other = next(n for n in engines.NAMES if n != engine and setting.flags(n))
            assert max(setting.flags(other), key=len) in str(err.value)
            assert f"--engine {engine}" in str(err.value)
            refused += 1
    assert refused >= 10


def test_the_first_foreign_setting_is_named() -> None:
    first, second = _foreign("sglang")[:2]
    dep = replace(Deployment(engine="sglang"), **{first: _Other(), second: _Other()})
    flag = max(next(s for s in SETTINGS if s.field == first).flags("vllm"), key=len)
    with pytest.raises(BadInput, match=flag):
        check_engine_flags(dep)


def test_a_replaced_engine_row_is_read_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    name = _foreign("sglang")[0]
    dep = replace(Deployment(engine="sglang"), **{name: _Other()})
    with pytest.raises(BadInput):
        check_engine_flags(dep)

    class _WithFlag(SGLang):
        flags: ClassVar[dict[str, tuple[str, ...]]] = {**SGLang.flags, name: ("--it",)}

    monkeypatch.setitem(engines.ENGINES, "sglang", _WithFlag())
    check_engine_flags(dep)  # the new row has the flag: nothing refused
