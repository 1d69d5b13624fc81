"""What the process's first kernel and torch's stream pool cost outside torch's allocator, and
whether either moves with the per-thread stack limit (i.e. with SMs × resident threads).

memprof charges two one-time non-torch steps measured on an H100 to every CUDA card: the first
fill kernel after the first GEMM (+94,371,840 B, ``memprof.core.terms.non_torch``
``TRITON_NON_TORCH_BYTES``) and torch's stream pool (+73,400,320 B,
``memprof.core.terms.nccl.TORCH_STREAM_POOL_BYTES``). This recorder takes each apart in fresh
processes, one sequence of steps per process, reading ``torch.cuda.mem_get_info`` used bytes and
``torch.cuda.memory_reserved`` after the context (``torch.empty``: no kernel) and after each step.

Run on the GPU machine from the repository root (torch with CUDA)::

    PYTHONPATH=. python recorders/gpu_context_first_kernel.py --out $OUT

Steps (``--child "step,step,..."``):

- ``zeros`` / ``fill`` / ``add`` / ``copy``: torch's first fill kernel (``torch.zeros``), an
  ``empty().fill_``, an elementwise add of two ``empty`` tensors, a host-to-device copy (no
  kernel);
- ``triton``: a one-line Triton kernel (its own small module, loaded with
  ``cuModuleLoadData``);
- ``gemm``: a bf16 1024² GEMM (cuBLAS handle);
- ``stream``: ``torch.cuda.Stream()`` (torch's pool: ``kStreamsPerPool`` (32) streams for each
  of ``max_stream_priorities`` priorities, c10/cuda/CUDAStream.cpp ``initDeviceStreamState``);
- ``raw:N``: N more streams made with ``cudaStreamCreateWithPriority`` through the runtime
  torch loaded (kept alive);
- ``stack:N``: set ``cudaLimitStackSize`` to N bytes.

Each child prints one JSON object; the parent writes ``context-first-kernel.json`` with every
child's object, the command, the versions, the GPU and the stream-priority range.
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

STEPS = ("zeros", "fill", "add", "copy", "triton", "gemm", "stream")
PARAM_STEPS = ("raw", "stack")
CUDA_LIMIT_STACK_SIZE = 0x00  # cudaLimitStackSize (cuda_runtime_api.h)

# (steps, environment): each row one fresh process
VARIANTS: tuple[tuple[str, dict[str, str]], ...] = (
    ("zeros,add,gemm,zeros", {}),
    ("gemm,zeros", {}),
    ("fill,zeros", {}),
    ("add,zeros", {}),
    ("copy,zeros", {}),
    ("triton,zeros", {}),
    ("triton,gemm,zeros", {}),
    ("zeros", {"CUDA_MODULE_LOADING": "EAGER"}),
    ("gemm,zeros,stream", {"CUDA_MODULE_LOADING": "EAGER"}),
    ("stack:0,zeros", {}),
    ("stack:2048,zeros", {}),
    ("stack:0,gemm,zeros", {}),
    ("stream,zeros", {}),
    ("zeros,stream", {}),
    ("gemm,zeros,stream", {}),
    ("stack:0,stream", {}),
    ("stack:2048,stream", {}),
    ("raw:1,raw:1,raw:6,raw:24,raw:32,raw:64,stream", {}),
    ("zeros,raw:1,raw:7,raw:56,raw:64", {}),
    ("zeros,stream", {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}),
    ("zeros,stream", {"CUDA_DEVICE_MAX_CONNECTIONS": "32"}),
)


def parse_steps(text: str) -> list[tuple[str, int | None]]:
    """``"stack:0,zeros"`` → [("stack", 0), ("zeros", None)]. Raises ValueError on an unknown
    step or a missing / non-numeric value."""
    out: list[tuple[str, int | None]] = []
    for part in text.split(","):
        name, sep, value = part.strip().partition(":")
        if name in STEPS and not sep:
            out.append((name, None))
        elif name in PARAM_STEPS and value.isdigit():
            out.append((name, int(value)))
        else:
            raise ValueError(f"unknown step {part!r}: give {', '.join(STEPS)}, raw:N or stack:N")
    if not out:
        raise ValueError("no steps")
    return out


def _cudart() -> ctypes.CDLL | None:
    """The CUDA runtime torch loaded (found in /proc/self/maps), or None."""
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            if "libcudart.so" in line:
                return ctypes.CDLL(line.split()[-1])
    except OSError:
        pass
    return None


def child(spec: str) -> dict[str, Any]:
    """One fresh process: the context, then each step in order."""
    import torch

    steps = parse_steps(spec)

    def snap() -> dict[str, int]:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        return {"used_bytes": int(total - free),
                "reserved_bytes": int(torch.cuda.memory_reserved()),
                "allocated_bytes": int(torch.cuda.memory_allocated())}

    x = torch.empty(1, device="cuda")  # the context; an empty tensor launches no kernel
    rt = _cudart()
    keep: list[Any] = [x]
    raw: list[ctypes.c_void_p] = []
    prio = (ctypes.c_int(0), ctypes.c_int(0))
    if rt is not None:
        rt.cudaDeviceGetStreamPriorityRange(ctypes.byref(prio[0]), ctypes.byref(prio[1]))
    out: dict[str, Any] = {
        "steps": spec, "loading": os.environ.get("CUDA_MODULE_LOADING"),
        "max_connections": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS"),
        "runtime": None if rt is None else rt._name,
        "stream_priority_range": [prio[0].value, prio[1].value],
        "after_context": snap(), "deltas": []}
    prev = out["after_context"]
    for name, value in steps:
        info: dict[str, Any] = {"step": name if value is None else f"{name}:{value}"}
        if name == "zeros":
            keep.append(torch.zeros(4096, device="cuda"))
        elif name == "fill":
            keep.append(torch.empty(4096, device="cuda").fill_(1.0))
        elif name == "add":
            a = torch.empty(4096, device="cuda")
            keep.append(a + a)
        elif name == "copy":
            keep.append(torch.arange(4096, dtype=torch.float32).to("cuda"))
        elif name == "triton":
            keep.append(_triton_fill(torch))
        elif name == "gemm":
            a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
            keep.append(a @ a)
        elif name == "stream":
            keep.append(torch.cuda.Stream())
        elif name == "raw" and rt is not None and value is not None:
            fn = rt.cudaStreamCreateWithPriority
            fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_int]
            for i in range(value):
                s = ctypes.c_void_p()
                info.setdefault("rc", []).append(int(fn(ctypes.byref(s), 1, -(i % 2))))
                raw.append(s)
        elif name == "stack" and rt is not None and value is not None:
            rt.cudaDeviceSetLimit.argtypes = [ctypes.c_int, ctypes.c_size_t]
            info["rc"] = int(rt.cudaDeviceSetLimit(CUDA_LIMIT_STACK_SIZE, value))
        now = snap()
        if rt is not None:
            limit = ctypes.c_size_t(0)
            rt.cudaDeviceGetLimit(ctypes.byref(limit), CUDA_LIMIT_STACK_SIZE)
            info["stack_limit_after"] = int(limit.value)
        info["used_delta_bytes"] = now["used_bytes"] - prev["used_bytes"]
        info["non_torch_delta_bytes"] = ((now["used_bytes"] - now["reserved_bytes"])
                                         - (prev["used_bytes"] - prev["reserved_bytes"]))
        info["after"] = now
        out["deltas"].append(info)
        prev = now
    out["raw_streams"] = len(raw)
    return out


def _triton_fill(torch: Any) -> Any:
    """A one-line Triton kernel (fill a 4096-float tensor with 1.0) on an ``empty`` tensor."""
    import triton
    import triton.language as tl

    # no annotations on the kernel's arguments: Triton reads them as globals (the 2026-11-27
    # golden's two Triton rows failed on ``Any`` here)
    @triton.jit  # type: ignore[untyped-decorator,unused-ignore]
    def fill(ptr, n, block: tl.constexpr):  # type: ignore[no-untyped-def]
        offs = tl.program_id(0) * block + tl.arange(0, block)
        tl.store(ptr + offs, 1.0, mask=offs < n)

    y = torch.empty(4096, device="cuda")
    fill[(4,)](y, 4096, block=1024)
    return y


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--out", default=".")
    ap.add_argument("--child", default=None, help="run one comma-separated step list here")
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
        try:
            proc = subprocess.run(
                [sys.executable, __file__, "--child", spec], env={**os.environ, **env},
                capture_output=True, text=True, timeout=args.timeout, check=False)
            ok = proc.returncode == 0
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]) if ok else
                        {"steps": spec, "env": env, "rc": proc.returncode,
                         "stderr": proc.stderr[-2000:]})
        except subprocess.TimeoutExpired:
            runs.append({"steps": spec, "env": env, "rc": "timeout"})
        runs[-1]["env"] = env
        brief = [(d["step"], d["non_torch_delta_bytes"]) for d in runs[-1].get("deltas", [])]
        print(json.dumps({"steps": spec, "env": env, "non_torch": brief,
                          "context": runs[-1].get("after_context"),
                          "rc": runs[-1].get("rc", 0)}), flush=True)
    import torch

    props = torch.cuda.get_device_properties(0)
    result = {
        "command": "PYTHONPATH=. python recorders/gpu_context_first_kernel.py --out $OUT",
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "triton": _version("triton"), "gpu": torch.cuda.get_device_name(),
        "driver": _driver_version(), "sm_count": int(props.multi_processor_count),
        "max_threads_per_sm": getattr(props, "max_threads_per_multi_processor", None),
        "runs": runs,
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "context-first-kernel.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


def _version(module: str) -> str | None:
    try:
        return str(__import__(module).__version__)
    except Exception:  # optional
        return None


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
