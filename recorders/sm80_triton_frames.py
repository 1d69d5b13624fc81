"""Per-thread frames on sm80 of two shape-dependent Triton kernels of a Qwen3.5 start under
vLLM 0.28.0, compiled without a GPU (no run): the text model's MRoPE kernel
(``model_executor/layers/rotary_embedding/mrope.py`` ``_triton_mrope_forward``) and the vision
tower's position-embedding kernel (``model_executor/models/qwen3_vl.py``
``_bilinear_pos_embed_kernel``), at Qwen3.5-0.8B's and Qwen3.5-27B's shapes
(configs/models/qwen3.5-0.8b.json, qwen3.5-27b.json). The driver's local-memory reservation
grows only past the 1,024 B default stack (reports/gpu/context/first-kernel-lmem-h100.json).

``--vllm`` names the unpacked wheel's ``vllm`` folder (vLLM's code is not in this repository);
each kernel's function is taken from its file as written and compiled with Triton for
``GPUTarget('cuda', 80, 32)``; its frame is ``STACK`` of Triton's bundled
``cuobjdump -res-usage``. Run on any machine with Triton::

    python recorders/sm80_triton_frames.py --vllm DIR
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import tempfile
import textwrap
from pathlib import Path
from typing import Any

# (full-attention heads q / kv, head_dim, rotary dim = head_dim x partial_rotary_factor 0.25;
# vision hidden): the text and vision configs' fields.
SHAPES = {"qwen3.5-0.8b": (8, 2, 256, 64, 768), "qwen3.5-27b": (24, 4, 256, 64, 1152)}


def kernel_from(path: Path, name: str, workdir: str) -> Any:
    """The ``@triton.jit`` function ``name`` of ``path``, dedented into a module of its own."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"\s*def {name}\(", line))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end].lstrip().startswith(")")
                                or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    body = textwrap.dedent("\n".join(lines[start:end]))
    mod_path = Path(workdir, f"{name}.py")
    mod_path.write_text("import triton\nimport triton.language as tl\n\n@triton.jit\n"
                        + body + "\n")
    spec = importlib.util.spec_from_file_location(name, mod_path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


def frame(fn: Any, signature: dict[str, str], values: dict[str, Any], num_warps: int) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = dict(signature, **{k: "constexpr" for k in values})
    consts = {(fn.arg_names.index(k),): v for k, v in values.items()}
    k = triton.compile(ASTSource(fn, sig, consts), target=GPUTarget("cuda", 80, 32),
                       options={"num_warps": num_warps})
    cuobjdump = Path(triton.__file__).parent / "backends/nvidia/bin/cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"])
        f.flush()
        text = subprocess.run([str(cuobjdump), "-res-usage", f.name], capture_output=True,
                              text=True, check=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", text)
    assert m is not None, text
    return {"reg": int(m[1]), "stack": int(m[2])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm", required=True, type=Path)
    args = ap.parse_args()
    import triton

    work = tempfile.mkdtemp(prefix="sm80-frames-")
    os.environ.setdefault("TRITON_CACHE_DIR", str(Path(work, "cache")))
    mrope = kernel_from(args.vllm / "model_executor/layers/rotary_embedding/mrope.py",
                        "_triton_mrope_forward", work)
    pos = kernel_from(args.vllm / "model_executor/models/qwen3_vl.py",
                      "_bilinear_pos_embed_kernel", work)
    rows = []
    for shape, (nqh, nkh, hd, rd, vis) in SHAPES.items():
        # triton_mrope: pads heads and rotary dim to powers of two, 4 warps on CUDA; the
        # config's mrope_section [11, 11, 10], mrope_interleaved, neox style.
        values = {"n_qh": nqh, "n_kh": nkh, "hd": hd, "rd": rd,
                  "pad_n_qh": triton.next_power_of_2(nqh), "pad_n_kh": triton.next_power_of_2(nkh),
                  "pad_rd": triton.next_power_of_2(rd), "mrope_section_t": 11,
                  "mrope_section_h": 11, "mrope_section_w": 10, "is_interleaved": True,
                  "is_neox_style": True}
        sig = {"q_ptr": "*bf16", "k_ptr": "*bf16", "cos": "*bf16", "sin": "*bf16",
               "num_tokens": "i32"}
        rows.append({"shape": shape, "kernel": "_triton_mrope_forward", **values,
                     **frame(mrope, sig, values, 4)})
        # triton_pos_embed_interpolate: BLOCK_D = next_power_of_2(hidden), default warps;
        # num_position_embeddings 2304 = 48 x 48, spatial_merge_size 2.
        values = {"NUM_GRID": 48, "M_SIZE": 2, "HIDDEN_DIM": vis,
                  "BLOCK_D": triton.next_power_of_2(vis)}
        sig = {"embed_ptr": "*bf16", "output_ptr": "*bf16", "H": "i32", "W": "i32",
               "h_scale": "fp32", "w_scale": "fp32"}
        rows.append({"shape": shape, "kernel": "_bilinear_pos_embed_kernel", **values,
                     **frame(pos, sig, values, 4)})
    print(json.dumps({"triton": triton.__version__, "target": "sm80", "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
