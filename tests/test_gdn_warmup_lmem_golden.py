"""reports/gpu/gdn-warmup-lmem/ off the GPU: the golden holds the variants the recorder runs, its
frames parse the way ``cuobjdump -res-usage`` prints them, and what the README states (no GDN
warm-up candidate's frame reaches the default stack, so the stack limit does not move; the same
non-torch growth at both checkpoints' shapes) is what the readings say."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "reports/gpu/gdn-warmup-lmem"
DEFAULT_STACK = 1024  # the context's stack limit (reports/gpu/context/context-stack-h100.json)


def _recorder() -> ModuleType:
    path = ROOT / "recorders/gpu_gdn_warmup_lmem.py"
    spec = importlib.util.spec_from_file_location("gpu_gdn_warmup_lmem", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _golden() -> dict:
    return json.loads((FOLDER / "gdn-warmup-lmem-h200.json").read_text())


def test_the_frame_pattern_reads_cuobjdump_output() -> None:
    text = (" Function chunk_fwd_kernel_o:\n"
            "  REG:255 STACK:752 SHARED:0 LOCAL:0 CONSTANT[0]:456 TEXTURE:0 SURFACE:0\n")
    m = _recorder().RES_RE.search(text)
    assert m is not None and (m[1], int(m[2]), int(m[3])) == ("chunk_fwd_kernel_o", 255, 752)


def test_the_golden_holds_every_variant_in_order() -> None:
    rec = _recorder()
    g = _golden()
    assert [(v["shape"], v["as_sm80"]) for v in g["variants"]] == list(rec.VARIANTS)
    assert (g["gpu"], g["torch"], g["triton"]) == ("NVIDIA H200", "2.11.0+cu130", "3.6.0")


def test_no_candidate_grows_the_stack_at_either_checkpoint() -> None:
    ran = [v for v in _golden()["variants"] if "kernels" in v]
    assert {v["shape"] for v in ran} == {"qwen3.5-0.8b", "qwen3.5-27b"}
    deltas = set()
    for v in ran:
        assert v["error"] is None
        frames = [k[arch]["stack"] for k in v["kernels"] for arch in ("native", "sm80")]
        assert len(v["kernels"]) == 89 and max(frames) < DEFAULT_STACK
        assert v["max_native_frame"] == max(k["native"]["stack"] for k in v["kernels"])
        assert v["max_sm80_frame"] == max(k["sm80"]["stack"] for k in v["kernels"])
        assert v["before"]["stack_limit"] == v["after"]["stack_limit"] == DEFAULT_STACK
        deltas.add(v["delta_used_minus_reserved"])
    assert deltas == {4 * 1024 * 1024}


def test_the_readme_table_is_the_golden() -> None:
    readme = (FOLDER / "README.md").read_text()
    for v in _golden()["variants"]:
        if "kernels" not in v:
            continue
        name = {"qwen3.5-0.8b": "Qwen3.5-0.8B", "qwen3.5-27b": "Qwen3.5-27B"}[v["shape"]]
        row = next(line for line in readme.splitlines() if line.startswith(f"| {name} "))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert int(cells[1]) == len(v["kernels"])
        assert int(cells[2].split()[0].replace(",", "")) == v["max_native_frame"]
        assert int(cells[3].split()[0].replace(",", "")) == v["max_sm80_frame"]
        assert int(cells[5].replace(",", "")) == v["delta_used_minus_reserved"]


def test_the_readme_names_the_script_as_run() -> None:
    readme = (FOLDER / "README.md").read_text()
    for path in (FOLDER / "gpu_gdn_warmup_lmem.as-run.py",
                 ROOT / "recorders/gpu_gdn_warmup_lmem.py"):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert re.search(rf"`{digest}`", readme), path.name


def test_the_shape_dependent_triton_kernels_keep_no_frame() -> None:
    g = json.loads((FOLDER / "sm80-triton-frames.json").read_text())
    assert g["target"] == "sm80"
    kernels = {(r["shape"], r["kernel"]) for r in g["rows"]}
    assert kernels == {(s, k) for s in ("qwen3.5-0.8b", "qwen3.5-27b")
                       for k in ("_triton_mrope_forward", "_bilinear_pos_embed_kernel")}
    assert all(r["stack"] < DEFAULT_STACK for r in g["rows"])
