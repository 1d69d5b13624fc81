"""Is the first-kernel step local memory per resident thread?

reports/gpu/context/first-kernel-syscalls-h100.json showed that the process's first torch kernel
pays 96,468,992 B because its module calls the device-side ``__assertfail`` (67,108,864 B for a
module calling only ``vprintf``, then 29,360,128 B more at the first ``__assertfail`` module),
and that the stack limit does not move it. This recorder asks whether that reservation is the
driver's local memory: kernels whose per-thread local frame is known (a PTX kernel with a
``.local`` array of N bytes indexed by a kernel argument, so the whole array stays in local
memory; its size read back with ``cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)``) are
loaded and launched before and after torch's first kernel. If the reservation is local memory of
L bytes a thread for every thread the device can keep resident (SMs × max threads per SM, as the
stack's is: context-stack-h100.json), a PTX kernel of N ≥ L bytes run first costs about
N × SMs × threads and torch's first kernel after it 0, and one of N bytes after torch's first
kernel costs the growth from L to N.

Run on the GPU machine from the repository root (torch with CUDA)::

    PYTHONPATH=. python recorders/gpu_first_kernel_lmem.py --out $OUT

Each variant runs in a fresh process (``--child STEPS``); steps, comma-separated:

- ``ptx:N``: load (``cuModuleLoadData``) and launch (one block of 32 threads) a PTX kernel with
  N bytes of ``.local`` array (N = 0: none); the load and the launch are measured apart;
- ``zeros``: ``torch.zeros`` (torch's first fill kernel, whose module calls ``__assertfail``);
- ``stack:N``: ``cuCtxSetLimit(CU_LIMIT_STACK_SIZE, N)``;
- ``gemm``: a bf16 1024² GEMM (the cuBLAS handle, its default workspace pool);
- ``stream``: ``torch.cuda.Stream()`` (torch's pool of streams);
- ``graph:N``: capture and instantiate a CUDA graph of N elementwise kernels.

Each step records the change of ``mem_get_info`` used minus ``torch.cuda.memory_reserved()``.
The parent writes ``first-kernel-lmem.json`` with every child's object, the command, the
versions and the device's SM count and max resident threads per SM.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

# CUfunction_attribute (cuda.h): CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, CU_FUNC_ATTRIBUTE_NUM_REGS
ATTR_LOCAL_SIZE, ATTR_NUM_REGS = 3, 4
# CUlimit CU_LIMIT_STACK_SIZE (cuda.h)
LIMIT_STACK = 0

VARIANTS: tuple[str, ...] = (
    "zeros",
    "ptx:0,zeros",
    "ptx:352,zeros",
    "ptx:248,zeros",
    "ptx:1024,zeros",
    "ptx:4096,zeros",
    "zeros,ptx:256",
    "zeros,ptx:352",
    "zeros,ptx:360",
    "zeros,ptx:512",
    "zeros,ptx:1024",
    "ptx:352,ptx:1024,ptx:352",
    "stack:0,ptx:1024,zeros",
    "stack:4096,ptx:1024,zeros",
)


def ptx_source(local_bytes: int, arch: str) -> str:
    """A kernel storing its argument ``i``-th word of a ``local_bytes`` local array (dynamic, so
    ptxas keeps the whole array in local memory) and writing word 0 to ``p``."""
    local = (f"  .local .align 16 .b8 buf[{local_bytes}];\n" if local_bytes else "")
    body = ("  mov.u64 %rd2, buf;\n"
            "  mul.wide.u32 %rd3, %r1, 4;\n"
            "  add.u64 %rd4, %rd2, %rd3;\n"
            "  st.local.u32 [%rd4], %r2;\n"
            "  ld.local.u32 %r3, [%rd2];\n") if local_bytes else "  add.u32 %r3, %r2, %r1;\n"
    return (".version 8.0\n"
            f".target {arch}\n"
            ".address_size 64\n"
            ".visible .entry k(.param .u64 p, .param .u32 i)\n{\n"
            f"{local}"
            "  .reg .b32 %r<4>;\n"
            "  .reg .b64 %rd<6>;\n"
            "  ld.param.u64 %rd1, [p];\n"
            "  ld.param.u32 %r1, [i];\n"
            "  mov.u32 %r2, %tid.x;\n"
            f"{body}"
            "  cvta.to.global.u64 %rd5, %rd1;\n"
            "  st.global.u32 [%rd5], %r3;\n"
            "  ret;\n}\n")


def child(spec: str) -> dict[str, Any]:
    import torch

    def non_torch() -> int:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        return int(total - free - torch.cuda.memory_reserved())

    keep: list[Any] = [torch.empty(1024, device="cuda")]
    out = torch.empty(1, dtype=torch.int32, device="cuda")
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    cu = ctypes.CDLL("libcuda.so.1")
    props = torch.cuda.get_device_properties(0)
    record: dict[str, Any] = {"steps": spec, "context": non_torch(), "d": [],
                              "sms": props.multi_processor_count,
                              "max_threads_per_sm": props.max_threads_per_multi_processor}
    for step in spec.split(","):
        name, _, value = step.partition(":")
        before = non_torch()
        extra: dict[str, Any] = {}
        if name == "zeros":
            keep.append(torch.zeros(1024, device="cuda"))
        elif name == "gemm":  # the cuBLAS handle (its default workspace pool) and a GEMM
            a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
            keep.append(a @ a)
        elif name == "stream":  # torch's stream pool (32 streams per priority)
            keep.append(torch.cuda.Stream())
        elif name == "graph":  # a captured graph of N elementwise kernels, instantiated
            x = torch.zeros(1024, device="cuda")
            graph = torch.cuda.CUDAGraph()
            side = torch.cuda.Stream()
            with torch.cuda.stream(side):
                x.add_(1)  # warm-up off the capture
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(graph):
                for _ in range(int(value)):
                    x.add_(1)
            keep.extend([x, graph, side])
        elif name == "stack":
            extra["rc"] = cu.cuCtxSetLimit(LIMIT_STACK, ctypes.c_size_t(int(value)))
        elif name == "ptx":
            src = ctypes.create_string_buffer(ptx_source(int(value), arch).encode())
            keep.append(src)
            module, func = ctypes.c_void_p(), ctypes.c_void_p()
            extra["load_rc"] = cu.cuModuleLoadData(ctypes.byref(module), src)
            extra["load"] = non_torch() - before
            extra["get_rc"] = cu.cuModuleGetFunction(ctypes.byref(func), module, b"k")
            for key, attr in (("local_size", ATTR_LOCAL_SIZE), ("num_regs", ATTR_NUM_REGS)):
                v = ctypes.c_int()
                cu.cuFuncGetAttribute(ctypes.byref(v), attr, func)
                extra[key] = v.value
            p = ctypes.c_uint64(out.data_ptr())
            i = ctypes.c_uint32(0)
            params = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(p), ctypes.c_void_p),
                                           ctypes.cast(ctypes.byref(i), ctypes.c_void_p))
            extra["launch_rc"] = cu.cuLaunchKernel(func, 1, 1, 1, 32, 1, 1, 0, None, params,
                                                   None)
            extra["sync_rc"] = cu.cuCtxSynchronize()
        else:
            raise SystemExit(f"error: unknown step {step!r}")
        stack = ctypes.c_size_t()
        cu.cuCtxGetLimit(ctypes.byref(stack), LIMIT_STACK)
        record["d"].append({"step": step, "delta": non_torch() - before, **extra,
                            "stack_limit": stack.value})
    return record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--child")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    import torch

    props = torch.cuda.get_device_properties(0)
    rows = []
    for spec in VARIANTS:
        proc = subprocess.run([sys.executable, __file__, "--child", spec], capture_output=True,
                              text=True, timeout=120)
        row = (json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0
               else {"steps": spec, "err": proc.stderr[-1500:]})
        rows.append(row)
        print(json.dumps(row), flush=True)
    doc = {
        "command": "PYTHONPATH=. python recorders/gpu_first_kernel_lmem.py --out $OUT",
        "gpu": props.name, "sms": props.multi_processor_count,
        "max_threads_per_sm": props.max_threads_per_multi_processor,
        "resident_threads": props.multi_processor_count * props.max_threads_per_multi_processor,
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "driver": subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                  "--format=csv,noheader"], capture_output=True,
                                 text=True).stdout.strip(),
        "variants": rows,
    }
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "first-kernel-lmem.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
