"""How much of the CUDA context is the per-thread stack reservation, and what the first GEMM's
cuBLAS workspace costs: the two architecture-dependent parts of memprof's non-torch figures
(``memprof.core.terms.non_torch``).

The CUDA driver backs every thread the device can hold resident with local memory of the
per-thread stack limit (``cudaLimitStackSize``): SMs × max resident threads per SM × stack
bytes. If that holds, raising the limit after the context exists grows the device's used
memory by exactly SMs × max threads × Δstack, and lowering it to 0 frees the reservation.

Run on the GPU machine from the repository root (torch with CUDA)::

    PYTHONPATH=. python recorders/gpu_context_stack.py --out $OUT

Each variant runs in a fresh process (``--child VARIANT``), which prints one JSON object:
``mem_get_info`` used and ``memory_reserved`` after the context (first tensor) and after the
variant's step, the stack / printf-FIFO / malloc-heap limits as the driver reports them, and
the device's SM count and max resident threads per SM. Variants:

- ``stack:N``: set ``cudaLimitStackSize`` to N bytes after the context (N = 0, 2048, 4096);
- ``fifo:N`` / ``heap:N``: the printf FIFO / device malloc heap limit to N bytes (whether the
  driver reserves them eagerly);
- ``gemm`` (optionally with ``CUBLAS_WORKSPACE_CONFIG``): the first bf16 GEMM, then the first
  fill kernel (``torch.zeros``), reading the stack limit after each (whether a library kernel
  grew it) and torch's allocated bytes (the cuBLAS workspace is torch-allocated).

The parent writes ``context-stack.json`` with every child's object, the command, the versions
and the GPU.
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

# cudaLimit / CUlimit enum values (cuda_runtime_api.h / cuda.h): identical in both APIs.
LIMITS = {"stack": 0x00, "fifo": 0x01, "heap": 0x02}
# cudaDeviceAttr cudaDevAttrMaxThreadsPerMultiProcessor (driver_types.h).
ATTR_MAX_THREADS_PER_SM = 39

VARIANTS: tuple[tuple[str, dict[str, str]], ...] = (
    ("none", {}),
    ("stack:0", {}),
    ("stack:2048", {}),
    ("stack:4096", {}),
    ("fifo:8388608", {}),
    ("heap:67108864", {}),
    ("gemm", {}),
    ("gemm", {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}),
    ("gemm", {"CUBLAS_WORKSPACE_CONFIG": ":1024:2"}),
)


def parse_variant(text: str) -> tuple[str, int | None]:
    """``"stack:2048"`` → ("stack", 2048); ``"gemm"`` / ``"none"`` → (name, None). Raises
    ValueError on anything else."""
    name, _, value = text.partition(":")
    if name in ("gemm", "none") and not value:
        return name, None
    if name in LIMITS and value.isdigit():
        return name, int(value)
    raise ValueError(f"unknown variant {text!r}: give none, gemm, stack:N, fifo:N or heap:N")


class Cudart:
    """The CUDA runtime that torch loaded (found in /proc/self/maps), through ctypes; the
    driver API (libcuda.so.1, the current context's limits) where no runtime is mapped."""

    def __init__(self) -> None:
        path = None
        try:
            for line in Path("/proc/self/maps").read_text().splitlines():
                if "libcudart.so" in line:
                    path = line.split()[-1]
                    break
        except OSError:
            pass
        if path is not None:
            self.api = "runtime " + path
            self.lib = ctypes.CDLL(path)
            self._set = self.lib.cudaDeviceSetLimit
            self._get = self.lib.cudaDeviceGetLimit
        else:
            self.api = "driver libcuda.so.1"
            self.lib = ctypes.CDLL("libcuda.so.1")
            self._set = self.lib.cuCtxSetLimit
            self._get = self.lib.cuCtxGetLimit
        self._set.argtypes = [ctypes.c_int, ctypes.c_size_t]
        self._get.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]

    def get(self, limit: str) -> int:
        v = ctypes.c_size_t(0)
        rc = self._get(ctypes.byref(v), LIMITS[limit])
        if rc != 0:
            raise RuntimeError(f"get limit {limit}: error {rc}")
        return int(v.value)

    def set(self, limit: str, value: int) -> int:
        return int(self._set(LIMITS[limit], value))


def child(variant: str) -> dict[str, Any]:
    """One fresh process: the context, then the variant's step."""
    import torch

    name, value = parse_variant(variant)

    def snap() -> dict[str, int]:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        return {"used_bytes": int(total - free),
                "reserved_bytes": int(torch.cuda.memory_reserved()),
                "allocated_bytes": int(torch.cuda.memory_allocated())}

    x = torch.empty(1, device="cuda")  # the context (and the allocator's first 2 MiB segment)
    rt = Cudart()
    props = torch.cuda.get_device_properties(0)
    max_threads = getattr(props, "max_threads_per_multi_processor", None)
    limits0 = {k: rt.get(k) for k in LIMITS}
    out: dict[str, Any] = {
        "variant": variant, "api": rt.api,
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "sm_count": int(props.multi_processor_count),
        "max_threads_per_sm": None if max_threads is None else int(max_threads),
        "limits_after_context": limits0, "after_context": snap()}
    if name in LIMITS and value is not None:
        out["set_rc"] = rt.set(name, value)
        out["after_set"] = snap()
        out["limits_after_set"] = {k: rt.get(k) for k in LIMITS}
        out["used_delta_bytes"] = (out["after_set"]["used_bytes"]
                                   - out["after_context"]["used_bytes"])
    elif name == "gemm":
        a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
        out["after_randn"] = snap()
        c = a @ a
        out["after_first_gemm"] = snap()
        out["stack_after_first_gemm"] = rt.get("stack")
        z = torch.zeros(4096, device="cuda")
        out["after_first_zeros"] = snap()
        out["stack_after_first_zeros"] = rt.get("stack")
        # torch-allocated by the GEMM beyond its output (1024² bf16 = 2 MiB): the workspace
        out["gemm_allocated_beyond_output_bytes"] = (
            out["after_first_gemm"]["allocated_bytes"] - out["after_randn"]["allocated_bytes"]
            - c.numel() * c.element_size())
        g = out["after_first_gemm"]
        r = out["after_randn"]
        out["gemm_non_torch_delta_bytes"] = ((g["used_bytes"] - g["reserved_bytes"])
                                             - (r["used_bytes"] - r["reserved_bytes"]))
        del z, c
    del x
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--out", default=".")
    ap.add_argument("--child", default=None, help="run one variant in this process")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per child")
    args = ap.parse_args(argv)
    if args.child is not None:
        try:
            parse_variant(args.child)  # bad input before any CUDA work
        except ValueError as e:
            ap.error(str(e))
        print(json.dumps(child(args.child)))
        return 0
    runs: list[dict[str, Any]] = []
    for variant, env in VARIANTS:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", variant], env={**os.environ, **env},
            capture_output=True, text=True, timeout=args.timeout, check=False)
        if proc.returncode == 0:
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        else:
            runs.append({"variant": variant, "env": env, "rc": proc.returncode,
                         "stderr": proc.stderr[-2000:]})
        print(json.dumps(runs[-1]), flush=True)
    import torch

    first = next((r for r in runs if "sm_count" in r), {})
    threads = (first.get("sm_count") or 0) * (first.get("max_threads_per_sm") or 0)
    summary = {}
    for r in runs:
        v = str(r.get("variant", ""))
        if v.startswith("stack:") and "used_delta_bytes" in r:
            old = r["limits_after_context"]["stack"]
            new = r["limits_after_set"]["stack"]
            summary[v] = {"used_delta_bytes": r["used_delta_bytes"],
                          "sm_x_threads_x_delta_stack_bytes": threads * (new - old)}
    result = {
        "command": "PYTHONPATH=. python recorders/gpu_context_stack.py --out $OUT",
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(),
        "driver": _driver_version(),
        "resident_threads": threads,
        "summary": summary,
        "runs": runs,
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "context-stack.json").write_text(json.dumps(result, indent=1) + "\n")
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
