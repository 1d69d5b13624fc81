"""What a cold ``memprof`` process imports (not how long it takes): the modules kept off the
estimate path stay off it, so that the cold start measured by ``benchmarks/bench_cold_start.py``
does not creep back up. Each command runs in a fresh interpreter; the test reads its
``sys.modules`` afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QWEN = ["estimate", "--model", "qwen3-32b", "--gpu", "H200"]

PROBE = ("import io, json, sys\n"
         "from memprof.cli import run\n"
         "out, sys.stdout = sys.stdout, io.StringIO()\n"
         "code = run(sys.argv[1:])\n"
         "sys.stdout = out\n"
         "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n")

# never on any estimate: the GPU and data libraries, and the other commands' machinery
NEVER = ("torch", "pandas", "numpy", "matplotlib", "yaml", "pydantic", "typer", "pynvml",
         "amdsmi", "hypothesis", "memprof.batch", "memprof.trace", "memprof.validation",
         "memprof.kernels", "memprof.probes", "memprof.alloc.replay", "memprof.core.explain",
         "memprof.core.scenarios", "memprof.report.sweep", "memprof.report.gate",
         "memprof.report.validate", "memprof.report.trace", "memprof.report.listing",
         "memprof.report.plot")
# the estimate command's own modules; no other command's
ESTIMATE_COMMAND = {"memprof.commands", "memprof.commands.common", "memprof.commands.estimate",
                    "memprof.commands.flags", "memprof.commands.options"}


def modules_of(argv: list[str]) -> set[str]:
    """``sys.modules`` after ``memprof ARGV`` in a fresh interpreter (output discarded; the
    command must have run to its verdict)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                          check=True, cwd=ROOT, env=env)
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["code"] in (0, 1), proc.stderr  # fits, or a predicted OOM
    return set(result["modules"])


def _under(modules: set[str], names: tuple[str, ...] | list[str]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.fixture(scope="module")
def table() -> set[str]:
    return modules_of(QWEN)


@pytest.fixture(scope="module")
def as_json() -> set[str]:
    return modules_of([*QWEN, "-f", "json"])


def test_table_estimate_imports_nothing_heavy(table: set[str]) -> None:
    assert _under(table, NEVER) == []


def test_table_estimate_builds_only_the_estimate_command(table: set[str]) -> None:
    commands = {m for m in table if m == "memprof.commands" or m.startswith("memprof.commands.")}
    assert commands == ESTIMATE_COMMAND


def test_piped_table_is_laid_out_without_rich(table: set[str]) -> None:
    # the output is a pipe here: the table reporter lays it out itself (memprof/report/plain.py)
    # and rich is never imported; nor is the comparison, which only --compare needs
    assert {"memprof.report.table", "memprof.report.plain"} <= table
    assert _under(table, ["rich", "memprof.core.compare"]) == []


def test_a_table_plain_cannot_lay_out_still_goes_through_rich() -> None:
    # 40 columns: the component table is wider than the line, rich shrinks it
    code = ("import io, os, sys\n"
            "os.environ['COLUMNS'] = '40'\n"
            "from memprof.cli import run\n"
            "out, sys.stdout = sys.stdout, io.StringIO()\n"
            "run(sys.argv[1:])\n"
            "sys.stdout = out\n"
            "print('rich.table' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code, *QWEN], capture_output=True, text=True,
                          check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stdout.split()[-1] == "True"


def test_json_estimate_imports_no_renderer_and_no_lazy_stdlib(as_json: set[str]) -> None:
    assert _under(as_json, NEVER) == []
    assert _under(as_json, ["rich", "memprof.report.table"]) == []
    # Fraction only where a size is parsed (memprof/base/units.py), difflib only for a
    # misspelt GPU or model (memprof/core/gpus.py, memprof/core/models/load.py)
    assert _under(as_json, ["fractions", "difflib"]) == []


def test_size_flag_still_parses_through_fractions() -> None:
    # the lazy import is reached: a size flag loads fractions and gives the same bytes
    modules = modules_of([*QWEN, "-f", "json", "--gpu-memory", "80GiB"])
    assert "fractions" in modules


def test_top_help_imports_no_command_and_no_core() -> None:
    modules = modules_of(["--help"])
    assert _under(modules, ["memprof.core", "memprof.alloc", "memprof.report", "rich"]) == []
    assert {m for m in modules if m.startswith("memprof.commands.")} == set()


def test_allocator_names_load_on_first_use() -> None:
    code = ("import sys, memprof.alloc.constants\n"
            "before = 'memprof.alloc.allocator' in sys.modules\n"
            "from memprof.alloc import CachingAllocator, parse_conf\n"
            "print(before, CachingAllocator.__module__, parse_conf.__module__)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    assert proc.stdout.split() == ["False", "memprof.alloc.allocator", "memprof.alloc.config"]
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        import memprof.alloc as alloc

        alloc.nothing  # noqa: B018


def test_checkpoint_formats_load_only_for_their_checkpoints(table: set[str]) -> None:
    # a bf16 checkpoint sizes no GGUF block (memprof/core/weights/gguf.py loads on a GGUF one)
    assert _under(table, ["memprof.core.weights.gguf", "memprof.core.models.gguf_types"]) == []


def test_a_rank_without_scratch_loads_no_scratch_catalog(table: set[str]) -> None:
    # FlashAttention has no scratch family: memprof/core/scratch/terms.py answers [] without it
    assert _under(table, ["memprof.core.scratch.catalog", "memprof.core.scratch.evaluate",
                          "memprof.core.scratch.buffer"]) == []
