"""What the first GEMM's non-torch memory is: cuBLAS's own default workspace pool, told apart
from module images, per GEMM path, per stream and per workspace setting (the cuBLAS step of
``memprof.core.terms.non_torch``).

cuBLAS allocates a default workspace pool "during the cuBLAS context creation"
(``cublasCreate``); PyTorch then hands each (handle, stream) its own workspace from the caching
allocator (aten/src/ATen/cuda/CublasHandlePool.cpp ``setWorkspaceForHandle``), so the pool is
memory torch does not hold. Its size is what ``CUBLAS_WORKSPACE_CONFIG`` says (a cuBLAS
variable, which torch also reads for its own workspace), else cuBLAS's default by architecture.
If that holds, the GEMM's ``used − reserved`` increase moves with the variable byte for byte and
appears when the handle is created, before any GEMM runs.

Run on the GPU machine from the repository root (torch with CUDA)::

    PYTHONPATH=. python recorders/gpu_cublas_pool.py --out $OUT

Each variant runs in a fresh process (``--child STEPS``), which prints one JSON object: after
the context (first tensor) and after each step, ``mem_get_info`` used, torch's reserved and
allocated bytes, and the device's default ``cudaMallocAsync`` pool (reserved / used current,
``cudaMemPoolGetAttribute``), with the cuBLAS version torch loaded. Steps (comma-separated):

- ``handle``: ``torch.cuda.current_blas_handle()`` (cublasCreate + torch's workspace, no GEMM);
- ``mm``: a bf16 1024×1024 ``torch.mm``; ``linear``: ``F.linear`` with a bias (the cuBLASLt
  ``gemm_and_bias`` path); ``fp8``: ``torch._scaled_mm`` on e4m3 operands (cuBLASLt);
- ``mm_s2`` / ``mm_s3``: the same ``torch.mm`` on a second / third stream;
- ``zeros``: the first fill kernel.

The parent writes ``cublas-pool.json`` with every child's object (and its environment), the
command, the versions and the GPU.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

STEPS = ("handle", "mm", "linear", "fp8", "mm_s2", "mm_s3", "zeros")
# cudaMemPoolAttr (driver_types.h): cudaMemPoolAttrReservedMemCurrent / UsedMemCurrent.
POOL_RESERVED, POOL_USED = 5, 7

VARIANTS: tuple[tuple[str, dict[str, str]], ...] = (
    ("mm,zeros", {}),
    ("handle,mm,zeros", {}),
    ("mm,zeros", {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}),
    ("mm,zeros", {"CUBLAS_WORKSPACE_CONFIG": ":4096:16"}),
    ("mm,zeros", {"CUBLAS_WORKSPACE_CONFIG": ":32768:2"}),
    ("mm,zeros", {"CUBLAS_WORKSPACE_CONFIG": ":4096:2:16:8"}),
    ("mm,zeros", {"CUBLAS_WORKSPACE_CONFIG": ":4096:2"}),
    ("mm,zeros", {"CUBLAS_WORKSPACE_CONFIG": ":1024:2"}),
    ("mm,zeros", {"CUBLAS_WORKSPACE_CONFIG": ":16:8"}),
    ("linear,mm,zeros", {}),
    ("linear,mm,zeros", {"CUBLASLT_WORKSPACE_SIZE": "65536"}),
    ("linear,mm,zeros", {"TORCH_CUBLASLT_UNIFIED_WORKSPACE": "1"}),
    ("linear,mm,zeros", {"TORCH_CUBLASLT_UNIFIED_WORKSPACE": "0"}),
    ("fp8,mm,zeros", {}),
    ("mm,mm_s2,mm_s3,zeros", {}),
    ("mm,mm_s2,mm_s3,zeros", {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}),
)


def parse_steps(text: str) -> list[str]:
    """``"handle,mm"`` → ["handle", "mm"]. Raises ValueError on an unknown step."""
    steps = [s for s in text.split(",") if s]
    bad = [s for s in steps if s not in STEPS]
    if bad or not steps:
        raise ValueError(f"unknown step(s) {bad or text!r}: give a comma list of {STEPS}")
    return steps


def _mapped(name: str) -> str | None:
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            if name in line:
                return line.split()[-1]
    except OSError:
        pass
    return None


class Pool:
    """The device's default stream-ordered (cudaMallocAsync) pool, through the libcudart torch
    loaded; ``None`` figures where no runtime is mapped."""

    def __init__(self) -> None:
        path = _mapped("libcudart.so")
        self.lib = ctypes.CDLL(path) if path else None
        self.handle = ctypes.c_void_p()
        if self.lib is not None:
            rc = self.lib.cudaDeviceGetDefaultMemPool(ctypes.byref(self.handle), 0)
            if rc != 0:
                self.lib = None

    def attr(self, which: int) -> int | None:
        if self.lib is None:
            return None
        v = ctypes.c_uint64(0)
        rc = self.lib.cudaMemPoolGetAttribute(self.handle, which, ctypes.byref(v))
        return int(v.value) if rc == 0 else None


def cublas_version() -> int | None:
    """cublasGetVersion of the libcublas mapped into this process (NULL handle is allowed)."""
    path = _mapped("libcublas.so")
    if path is None:
        return None
    lib = ctypes.CDLL(path)
    v = ctypes.c_int(0)
    rc = lib.cublasGetVersion_v2(None, ctypes.byref(v))
    return int(v.value) if rc == 0 else None


def child(spec: str) -> dict[str, Any]:
    """One fresh process: the context, then each step of ``spec``."""
    import torch
    import torch.nn.functional as F

    steps = parse_steps(spec)
    x = torch.empty(1, device="cuda")  # the context (and the allocator's first 2 MiB segment)
    pool = Pool()

    def snap() -> dict[str, int | None]:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        used, reserved = int(total - free), int(torch.cuda.memory_reserved())
        return {"used_bytes": used, "reserved_bytes": reserved,
                "allocated_bytes": int(torch.cuda.memory_allocated()),
                "non_torch_bytes": used - reserved,
                "async_pool_reserved_bytes": pool.attr(POOL_RESERVED),
                "async_pool_used_bytes": pool.attr(POOL_USED)}

    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
    # fp8 operands only where a step uses them (the cast is an elementwise kernel of its own)
    a8 = a.to(torch.float8_e4m3fn) if "fp8" in steps else a
    one = torch.tensor(1.0, device="cuda")  # a host-to-device copy, no fill kernel
    s2, s3 = torch.cuda.Stream(), torch.cuda.Stream()  # type: ignore[no-untyped-call]
    out: dict[str, Any] = {"steps": spec, "env": {k: os.environ.get(k) for k in (
        "CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE", "TORCH_CUBLASLT_UNIFIED_WORKSPACE",
        "CUDA_MODULE_LOADING")}, "after_inputs": snap(), "after": []}
    keep = []
    for step in steps:
        if step == "handle":
            torch.cuda.current_blas_handle()  # type: ignore[no-untyped-call]
        elif step == "mm":
            keep.append(a @ a)
        elif step == "linear":
            keep.append(F.linear(a, a, bias))
        elif step == "fp8":
            keep.append(torch._scaled_mm(a8, a8.t(), scale_a=one, scale_b=one,
                                         out_dtype=torch.bfloat16))
        elif step in ("mm_s2", "mm_s3"):
            s = s2 if step == "mm_s2" else s3
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                keep.append(a @ a)
            torch.cuda.current_stream().wait_stream(s)
        elif step == "zeros":
            keep.append(torch.zeros(4096, device="cuda"))
        after = snap()
        prev = out["after"][-1]["mem"] if out["after"] else out["after_inputs"]
        delta = {k: (after[k] - prev[k]) if after[k] is not None and prev[k] is not None
                 else None for k in after}
        out["after"].append({"step": step, "mem": after, "delta": delta})
    out["cublas_version"] = cublas_version()
    del x, keep
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--out", default=".")
    ap.add_argument("--child", default=None, help="run one variant (comma-separated steps)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per child")
    args = ap.parse_args(argv)
    if args.child is not None:
        try:
            parse_steps(args.child)  # bad input before any CUDA work
        except ValueError as e:
            ap.error(str(e))
        print(json.dumps(child(args.child)))
        return 0
    runs: list[dict[str, Any]] = []
    for spec, env in VARIANTS:
        clean = {k: v for k, v in os.environ.items() if k not in (
            "CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE",
            "TORCH_CUBLASLT_UNIFIED_WORKSPACE")}
        try:
            proc = subprocess.run(
                [sys.executable, __file__, "--child", spec], env={**clean, **env},
                capture_output=True, text=True, timeout=args.timeout, check=False)
            if proc.returncode == 0:
                runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            else:
                runs.append({"steps": spec, "env": env, "rc": proc.returncode,
                             "stderr": proc.stderr[-2000:]})
        except subprocess.TimeoutExpired:
            runs.append({"steps": spec, "env": env, "rc": "timeout"})
        print(json.dumps(runs[-1]), flush=True)
    import torch

    summary = []
    for r in runs:
        row = {"steps": r.get("steps"), "env": {k: v for k, v in (r.get("env") or {}).items()
                                                 if v is not None}}
        for s in r.get("after", []):
            row[s["step"]] = {k: s["delta"][k] for k in (
                "non_torch_bytes", "allocated_bytes", "async_pool_reserved_bytes")}
        summary.append(row)
    result = {
        "command": "PYTHONPATH=. python recorders/gpu_cublas_pool.py --out $OUT",
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cublas": next((r["cublas_version"] for r in runs if r.get("cublas_version")), None),
        "gpu": torch.cuda.get_device_name(),
        "capability": list(torch.cuda.get_device_capability()),
        "driver": _driver_version(),
        "summary": summary,
        "runs": runs,
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "cublas-pool.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


def _driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # optional: nvidia-ml-py may be absent
        return None


if __name__ == "__main__":
    raise SystemExit(main())
