"""The validation registry (``memprof/validation/registry.py``): every validation ``memprof
validate`` runs is a row declared beside its code, the command and the reporter name none of
them, and a new validation is one module with its rows plus one entry in ``MODULES``: the test
below plants one and runs it through the CLI, the JSON contract and the table."""

from __future__ import annotations

import dataclasses
import importlib
import json
import subprocess
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from memprof.cli import run
from memprof.validation import registry
from memprof.validation.registry import Block, Request, ValidationRow

ROOT = Path(__file__).resolve().parents[1]


def test_the_rows_and_a_recorded_run_need_no_torch() -> None:
    """The rows are pure data: listing them (the --kernel choices), rebuilding a recorded GPU
    run from its JSON and rendering it import no torch; only a row's run does."""
    code = ("import json, sys\n"
            "from memprof.validation import registry, results\n"
            "from memprof.report.validate import render_table\n"
            "assert len(registry.KERNELS) == len(registry.rows()) + 1\n"
            "doc = json.load(open('reports/gpu/validate-h100/validate-all.json'))\n"
            "assert 'verdict:' in render_table(results.run_from_dict(doc), 120)\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=False, env={"PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]


torch = pytest.importorskip("torch")


def _module_path(module: str) -> str:
    return module.replace(".", "/") + ".py"


def test_every_row_is_declared_beside_its_code_and_is_consistent() -> None:
    from memprof.commands.validate import OWNABLE
    from memprof.core import attention_backends
    from memprof.core.attention import KINDS
    from memprof.core.gpus import find_gpu
    from memprof.core.models import load_model
    from memprof.validation.results import DERIVED

    rows = registry.rows()
    assert len({r.name for r in rows}) == len(rows) == len({r.flag for r in rows})
    assert registry.ALL not in {r.flag for r in rows}
    fields = {f.name for f in dataclasses.fields(Request)}
    declared = {m: importlib.import_module(m).VALIDATIONS for m in registry.MODULES}
    for r in rows:
        home = next(m for m, v in declared.items() if r in v)  # declared beside its result
        assert r.result.__module__ == home, r.name
        runner, _, fn = r.runner.partition(":")
        assert callable(getattr(importlib.import_module(runner), fn)), r.runner
        assert home == runner + "_result", (home, runner)  # and beside its run
        assert dataclasses.is_dataclass(r.result) and r.result.VERDICTS[-1] == "passed"
        assert set(r.result.VERDICTS) <= set(DERIVED), r.name
        assert set(r.own) <= fields and set(r.own) <= set(OWNABLE), r.name
        find_gpu(r.gpu)  # the seed deployment's GPU is in the catalog
        assert r.model == r.models[0]
        for name in r.models:  # the models its errors name are bundled, of its kind
            spec = load_model(name)
            if r.attention is not None:
                assert r.attention in KINDS, r.name
                assert any(lay.attention.kind == r.attention for lay in spec.layers), name
        for b in r.backends:  # a backend's row declares the validation as its own
            assert _module_path(home) in attention_backends.backend(b).modules, (r.name, b)
    for field in OWNABLE:  # a flag only one validation takes has exactly one owner
        assert sum(field in r.own for r in rows) == 1, field


def test_the_command_page_lists_every_row_with_its_seed_deployment() -> None:
    page = (ROOT / "docs" / "commands" / "validate.md").read_text(encoding="utf-8")
    lines = {line.split("|")[1].strip(" `"): line for line in page.splitlines()
             if line.startswith("| `") and "--kernel" not in line}
    assert set(lines) == {r.flag for r in registry.rows()}
    for r in registry.rows():
        line = lines[r.flag]
        assert f"| {r.model}, TP {r.tp}, " in line and f" {r.batch} sequences, {r.gpu}" in line
        assert all(f"`{b}`" in line for b in r.backends), r.flag
        assert r.context_cuda is None or f"context {r.context_cuda}" in line, r.flag


def test_the_choices_are_the_rows() -> None:
    kernels, backends = registry.KERNELS, registry.BACKENDS  # read from the rows
    assert kernels == (*(r.flag for r in registry.rows()), registry.ALL)
    assert backends == tuple(b for r in registry.rows() for b in r.backends)
    assert len(set(backends)) == len(backends)  # one row runs each backend
    with pytest.raises(AttributeError):
        getattr(registry, "NOTHING")  # noqa: B009


# --- a planted validation ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlantedValidation:
    kernel: str
    model: str
    device: str
    held_bytes: int
    speed_passed: bool | None

    VERDICTS: ClassVar[tuple[str, ...]] = ("parity_passed", "memory_passed", "passed")

    @property
    def parity_passed(self) -> bool:
        return True

    @property
    def memory_passed(self) -> bool:
        return self.held_bytes == 4096

    @property
    def graph_passed(self) -> bool | None:
        return None

    @property
    def passed(self) -> bool:
        return self.parity_passed and self.memory_passed

    @property
    def path(self) -> str:
        return "planted path"

    def block(self) -> Block:
        return Block(f"planted decode — {self.model}", ("policy", "held"),
                     (("shared", f"{self.held_bytes} B"),),
                     (f"  memory: {registry.ok(self.memory_passed)}",
                      registry.verdict_line(self)))


def _planted_run(req: Request) -> PlantedValidation:
    p = registry.prepare(PLANTED, req)
    return PlantedValidation(kernel=PLANTED.name, model=p.model, device=req.device,
                             held_bytes=4096 if req.dp is None else req.dp,
                             speed_passed=None)


PLANTED = ValidationRow(name="planted", flag="planted-decode", title="planted decode",
                        runner=f"{__name__}:_planted_run", result=PlantedValidation,
                        models=("qwen3-0.6b",), tp=1, batch=1, gpu="H100",
                        what="planted decode")


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    module = types.ModuleType("planted_validation")
    module.VALIDATIONS = (PLANTED,)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "planted_validation", module)
    monkeypatch.setattr(registry, "MODULES", (*registry.MODULES, "planted_validation"))
    registry.rows.cache_clear()
    yield
    registry.rows.cache_clear()


def _call(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = run(["validate", "--device", "cpu", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_planted_row_runs_through_the_cli_json_and_table(
        planted: None, capsys: pytest.CaptureFixture[str]) -> None:
    from memprof.report.validate import render_table
    from memprof.validation.results import run_from_dict

    code, out, err = _call(capsys, "--kernel", "planted-decode", "-f", "json")
    assert code == 0, err
    doc = json.loads(out)
    (k,) = doc["kernels"]
    assert k == {"kernel": "planted", "model": "qwen3-0.6b", "device": "cpu", "held_bytes": 4096,
                 "speed_passed": None, "parity_passed": True, "memory_passed": True,
                 "passed": True}
    table = render_table(run_from_dict(doc), 80)  # rebuilt from its JSON by the registry
    assert table.splitlines()[0] == "planted decode — qwen3-0.6b"
    assert "  planted: PASS" in table and "verdict: all checks hold" in table
    code, out, err = _call(capsys, "--kernel", "planted-decode")
    assert code == 0 and "4096 B" in out and "memory: pass" in out, err


def test_a_planted_row_gets_the_generic_checks(planted: None,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # a flag another row owns is refused for it, naming the owner
    code, out, err = _call(capsys, "--kernel", "planted-decode", "--dp", "2")
    assert code == 2 and out == "" and err.startswith("error: --dp applies to the ")
    owner = next(r for r in registry.rows() if "dp" in r.own)
    assert f"hint: add --kernel {owner.flag}" in err
    # a backend it does not run is refused
    backend = next(b for r in registry.rows() for b in r.backends)
    code, out, err = _call(capsys, "--kernel", "planted-decode", "--attention-backend", backend)
    assert code == 2 and "--attention-backend" in err
    # and --kernel all runs it last, in MODULES order
    assert registry.rows()[-1] is PLANTED


def test_an_unknown_kernel_lists_the_rows(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _call(capsys, "--kernel", "nope")
    assert code == 2 and out == ""
    assert err.splitlines()[1] == "hint: one of: " + ", ".join(registry.KERNELS)
