"""Per-kernel STACK bytes of NCCL's collective kernels, by SASS image, as ``cuobjdump
--dump-resource-usage`` prints them: for the NCCL library torch loads and for a fatbin of an
older NCCL's images (``recorders/nccl_fatbin_images.py`` cuts one from a wheel's
``libnccl.so.2``). The first all_reduce's stack reservation depends on them
(``memprof/core/terms/nccl_stack.py``).

Run on the GPU machine (which has cuobjdump) from the folder holding the fatbin::

    python3 gpu_nccl_kernel_stack.py nccl-2.21.5-sm80-sm90.fatbin $OUT/kernel-stack.json

The JSON holds, per library and image (``arch = sm_XX``), the STACK of every AllReduce (Sum,
f32/bf16/f16), SendRecv, AllGather, ReduceScatter and Broadcast kernel and device function.
"""

from __future__ import annotations

import glob
import json
import re
import subprocess
import sys
from typing import Any

KERNELS = re.compile(r"AllReduce_Sum_(f32|bf16|f16)|SendRecv|AllGather|ReduceScatter|Broadcast")


def usage(path: str) -> dict[str, Any]:
    """{path, lines, per_arch: {image: {kernel: STACK}}} of one library or fatbin."""
    text = subprocess.run(["cuobjdump", "--dump-resource-usage", path], capture_output=True,
                          text=True, timeout=200, check=False).stdout
    arch, fn = "?", "?"
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        m = re.search(r"arch = (sm_\d+\w*)", line)
        if m:
            arch = m.group(1)
            continue
        m = re.search(r"Function ([^:\s]+)", line)
        if m:
            fn = m.group(1)
            continue
        m = re.search(r"STACK:(\d+)", line)
        if m:
            name = re.sub(r"24ncclDevKernelArgsStorage.*|^_Z\d+", "", fn)
            if KERNELS.search(name):
                out.setdefault(arch, {})[name] = int(m.group(1))
    return {"path": path, "lines": len(text.splitlines()), "per_arch": out}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: gpu_nccl_kernel_stack.py FATBIN OUT_JSON", file=sys.stderr)
        return 2
    lib = glob.glob("/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so*")
    res = {"nccl_2.28.9": usage(lib[0]) if lib else None,
           "nccl_2.21.5_sm80_sm90": usage(argv[0])}
    with open(argv[1], "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
