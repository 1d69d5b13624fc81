"""Does the GDN prefill warm-up of vLLM's profile run grow the driver's local-memory reservation,
and by how much for a Qwen3.5 checkpoint's shapes?

The driver backs every thread the device can keep resident with local memory of the stack
limit, and a launch whose per-thread frame exceeds the limit raises the limit to the frame and
keeps it (reports/gpu/context/first-kernel-lmem-h100.json: a 4,096 B frame after the 1,024 B
default costs 132 x 2048 x 3,072 B, and the limit stays 4,096 B). vLLM's profile run warms up the
Triton/FLA kernels of chunk_gated_delta_rule once per GDN layer at T = 64
(model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py _warmup_prefill_kernels, vLLM 0.28.0),
which autotunes every candidate config: a candidate that spills would raise the limit for the
whole process. This recorder runs that warm-up (fused_post_conv_prep, then
chunk_gated_delta_rule with an initial state, cu_seqlens [0, 64]) with the FLA sources of the
vLLM wheel under test (not part of this repository: ``--fla`` names a folder holding a
``vllm`` package with ``third_party/flash_linear_attention`` and minimal stand-ins for the
few vllm helpers it imports), for the key/value head counts of a checkpoint, in a fresh
process with a fresh Triton cache, and records:

- the stack limit (``cuCtxGetLimit(CU_LIMIT_STACK_SIZE)``) and ``mem_get_info`` used minus
  ``torch.cuda.memory_reserved()`` before and after the warm-up (after ``empty_cache``);
- every kernel Triton compiled (name, constexprs, num_warps, num_stages) with its per-thread
  local frame (``STACK`` / ``LOCAL`` of ``cuobjdump -res-usage``, Triton's bundled cuobjdump) for
  the device's architecture and, compiled again for ``GPUTarget('cuda', 80, 32)`` without
  running, for sm80.

``--as-sm80`` makes FLA's import-time platform checks see an sm80 device (its candidate lists:
``utils.is_nvidia_hopper`` picks chunk_o's warp counts), so the candidates are the A100's.

Run on the GPU machine from the repository root (torch with CUDA, Triton)::

    PYTHONPATH=. python recorders/gpu_gdn_warmup_lmem.py --fla DIR --out $OUT

The parent writes ``gdn-warmup-lmem.json`` with every child's object, the command, the
versions and the device.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

LIMIT_STACK = 0  # CUlimit CU_LIMIT_STACK_SIZE (cuda.h)

# (name, GDN key heads, GDN value heads, head_k_dim, head_v_dim): the text configs' linear_*
# fields (configs/models/qwen3.5-0.8b.json, configs/models/qwen3.5-27b.json).
SHAPES: dict[str, tuple[int, int, int, int]] = {
    "qwen3.5-0.8b": (16, 16, 128, 128),
    "qwen3.5-27b": (16, 48, 128, 128),
}
VARIANTS: tuple[tuple[str, bool], ...] = (
    ("qwen3.5-0.8b", True),
    ("qwen3.5-27b", True),
    ("qwen3.5-0.8b", False),
    ("qwen3.5-27b", False),
)
RES_RE = re.compile(r"Function ([^:\s]+):\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")


def res_usage(cubin: bytes, cuobjdump: str) -> dict[str, int]:
    """STACK / LOCAL / REG of the cubin's kernel from ``cuobjdump -res-usage``."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True,
                              text=True, check=False).stdout
    m = RES_RE.search(text)
    if not m:
        return {"raw": text[-400:]}  # type: ignore[dict-item]
    return {"reg": int(m[2]), "stack": int(m[3]), "shared": int(m[4]), "local": int(m[5])}


def used_minus_reserved(torch: Any) -> int:
    free, total = torch.cuda.mem_get_info()
    return int(total - free - torch.cuda.memory_reserved())


def stack_limit(cuda: Any) -> int:
    v = ctypes.c_size_t()
    cuda.cuCtxGetLimit(ctypes.byref(v), LIMIT_STACK)
    return int(v.value)


def child(shape: str, as_sm80: bool, fla: str) -> dict[str, Any]:
    import torch

    sys.path.insert(0, fla)
    if as_sm80:
        real_cap, real_name = torch.cuda.get_device_capability, torch.cuda.get_device_name
        torch.cuda.get_device_capability = lambda *a: (8, 0)  # type: ignore[assignment]
        torch.cuda.get_device_name = lambda *a: "NVIDIA A100 80GB PCIe"  # type: ignore[assignment]
    import triton
    import triton.runtime.jit as jit
    from triton.backends.compiler import GPUTarget

    cuobjdump = str(Path(triton.__file__).parent / "backends/nvidia/bin/cuobjdump")
    import triton.compiler as tcomp
    import triton.compiler.compiler as tcc

    orig_compile = tcc.compile
    kernels: list[dict[str, Any]] = []

    def hooked(src: Any, target: Any = None, options: Any = None, **kw: Any) -> Any:
        k = orig_compile(src, target=target, options=options, **kw)
        rec: dict[str, Any] = {"name": getattr(src, "name", "?"),
                               "constexprs": {str(a): repr(b) for a, b in
                                              getattr(src, "constants", {}).items()},
                               "signature": {str(a): str(b) for a, b in
                                             getattr(src, "signature", {}).items()},
                               "num_warps": (options or {}).get("num_warps"),
                               "num_stages": (options or {}).get("num_stages")}
        try:
            rec["native"] = res_usage(k.asm["cubin"], cuobjdump)
        except Exception as e:  # noqa: BLE001 - recorded, not fatal
            rec["native"] = {"error": repr(e)}
        try:
            opts = {o: (options or {})[o] for o in ("num_warps", "num_stages", "num_ctas")
                    if o in (options or {})}
            k80 = orig_compile(src, target=GPUTarget("cuda", 80, 32), options=opts)
            rec["sm80"] = res_usage(k80.asm["cubin"], cuobjdump)
        except Exception as e:  # noqa: BLE001 - recorded, not fatal
            rec["sm80"] = {"error": repr(e)[:300]}
        kernels.append(rec)
        return k

    # Triton 3.6 imports compile inside the launch path, 3.9 binds it at JITFunction
    # construction: hook every place it is read from, before the FLA import.
    tcc.compile = hooked
    tcomp.compile = hooked  # type: ignore[attr-defined]
    if hasattr(jit, "compile"):
        jit.compile = hooked
    from vllm.third_party.flash_linear_attention.ops.chunk import chunk_gated_delta_rule
    from vllm.third_party.flash_linear_attention.ops.fused_gdn_prefill_post_conv import (
        fused_post_conv_prep,
    )
    from vllm.third_party.flash_linear_attention.ops import utils as fla_utils

    import gc

    for obj in gc.get_objects():
        if isinstance(obj, jit.JITFunction) and hasattr(obj, "compile"):
            obj.compile = hooked
    if as_sm80:
        torch.cuda.get_device_capability, torch.cuda.get_device_name = real_cap, real_name
    cuda = ctypes.CDLL("libcuda.so.1")
    h, hv, dk, dv = SHAPES[shape]
    t = 64
    dev, dt = "cuda", torch.bfloat16
    torch.zeros(1, device=dev)
    torch.cuda.synchronize()
    before = {"used_minus_reserved": used_minus_reserved(torch), "stack_limit": stack_limit(cuda)}
    mixed = torch.randn(t, 2 * h * dk + hv * dv, device=dev, dtype=dt)
    a = torch.randn(t, hv, device=dev, dtype=dt)
    b = torch.randn(t, hv, device=dev, dtype=dt)
    a_log = torch.randn(hv, device=dev, dtype=torch.float32)
    dt_bias = torch.randn(hv, device=dev, dtype=torch.float32)
    q, k, v, g, beta = fused_post_conv_prep(conv_output=mixed, a=a, b=b, A_log=a_log,
                                            dt_bias=dt_bias, num_k_heads=h, head_k_dim=dk,
                                            head_v_dim=dv, apply_l2norm=True,
                                            output_g_exp=False)
    state = torch.zeros(1, hv, dv, dk, device=dev, dtype=torch.float32)
    cu = torch.tensor([0, t], device=dev, dtype=torch.int32)
    err = None
    try:
        chunk_gated_delta_rule(q=q.unsqueeze(0), k=k.unsqueeze(0), v=v.unsqueeze(0),
                               g=g.unsqueeze(0), beta=beta.unsqueeze(0), initial_state=state,
                               output_final_state=True, cu_seqlens=cu,
                               use_qk_l2norm_in_kernel=False)
    except Exception as e:  # noqa: BLE001 - recorded
        err = repr(e)[:500]
    torch.cuda.synchronize()
    del mixed, a, b, q, k, v, g, beta, state, cu
    torch.cuda.empty_cache()
    after = {"used_minus_reserved": used_minus_reserved(torch), "stack_limit": stack_limit(cuda)}
    props = torch.cuda.get_device_properties(0)
    return {"shape": shape, "heads": SHAPES[shape], "as_sm80": as_sm80,
            "is_nvidia_hopper": fla_utils.is_nvidia_hopper, "error": err,
            "before": before, "after": after,
            "delta_used_minus_reserved": after["used_minus_reserved"]
            - before["used_minus_reserved"],
            "sms": props.multi_processor_count,
            "max_native_frame": max((kk.get("native", {}).get("stack", 0) for kk in kernels),
                                    default=0),
            "max_sm80_frame": max((kk.get("sm80", {}).get("stack", 0) for kk in kernels),
                                  default=0),
            "kernels": kernels}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--fla", required=True)
    ap.add_argument("--child")
    ap.add_argument("--as-sm80", action="store_true")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.as_sm80, args.fla)))
        return
    import torch
    import triton

    out: dict[str, Any] = {
        "command": "PYTHONPATH=. python recorders/gpu_gdn_warmup_lmem.py --fla DIR --out $OUT",
        "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "cuda": torch.version.cuda, "triton": triton.__version__, "variants": []}
    for shape, as_sm80 in VARIANTS:
        env = dict(os.environ)
        env["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="tc-")  # cold: every candidate
        cmd = [sys.executable, __file__, "--fla", args.fla, "--child", shape]
        if as_sm80:
            cmd.append("--as-sm80")
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        try:
            out["variants"].append(json.loads(r.stdout.strip().splitlines()[-1]))
        except Exception:  # noqa: BLE001 - the child's failure is the record
            out["variants"].append({"shape": shape, "as_sm80": as_sm80, "rc": r.returncode,
                                    "stderr": r.stderr[-3000:]})
        v = out["variants"][-1]
        print(shape, as_sm80, {x: v.get(x) for x in ("delta_used_minus_reserved", "before",
                                                      "after", "max_native_frame",
                                                      "max_sm80_frame", "error", "stderr")},
              flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, "gdn-warmup-lmem.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
