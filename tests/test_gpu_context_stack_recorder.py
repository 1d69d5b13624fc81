"""recorders/gpu_context_stack.py off the GPU: its variants parse, a bad one is a usage error
(exit 2) before any CUDA work, and the golden it wrote holds every variant it runs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _recorder() -> ModuleType:
    path = ROOT / "recorders/gpu_context_stack.py"
    spec = importlib.util.spec_from_file_location("gpu_context_stack", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_variants_parse() -> None:
    rec = _recorder()
    assert rec.parse_variant("stack:2048") == ("stack", 2048)
    assert rec.parse_variant("heap:67108864") == ("heap", 67108864)
    assert rec.parse_variant("gemm") == ("gemm", None)
    for variant, _env in rec.VARIANTS:
        rec.parse_variant(variant)


@pytest.mark.parametrize("bad", ["bogus", "stack", "stack:-1", "gemm:3", "fifo:x"])
def test_a_bad_variant_is_refused(bad: str) -> None:
    rec = _recorder()
    with pytest.raises(ValueError, match="unknown variant"):
        rec.parse_variant(bad)
    with pytest.raises(SystemExit) as exc:
        rec.main(["--child", bad])
    assert exc.value.code == 2


def test_the_golden_holds_every_variant_and_its_versions() -> None:
    rec = _recorder()
    g = json.loads((ROOT / "reports/gpu/context/context-stack-h100.json").read_text())
    assert [r["variant"] for r in g["runs"]] == [v for v, _ in rec.VARIANTS]
    assert all("rc" not in r for r in g["runs"])  # every child exited 0
    assert (g["torch"], g["driver"], g["gpu"]) == (
        "2.11.0+cu130", "580.159.04", "NVIDIA H100 80GB HBM3")
    configs = [r["cublas_workspace_config"] for r in g["runs"] if r["variant"] == "gemm"]
    assert configs == [env.get("CUBLAS_WORKSPACE_CONFIG") for v, env in rec.VARIANTS
                       if v == "gemm"]
