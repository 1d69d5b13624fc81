"""Whether an NCCL communicator's device memory that is not NCCL's buffers (the "first all_reduce"
step over host shared memory, and init's remainder) is the CUDA driver's per-thread stack
reservation and NCCL's kernel images, which move with the GPU's SM count, rather than NCCL's
allocations, which do not.

The CUDA driver backs every resident thread with local memory of the per-thread stack limit
(``reports/gpu/context/context-stack-h100.json``: SMs × max threads per SM × Δstack, exactly).
NCCL reads every kernel's ``localSizeBytes`` at init (``ncclInitKernelsForDevice``,
src/enqueue.cc) and raises ``cudaLimitStackSize`` to the largest only with
``NCCL_SET_STACK_SIZE=1`` (default 0, src/init.cc, tags v2.21.5-1, v2.26.2-1, v2.28.9-1); by
default the driver grows the reservation when the first NCCL kernel that needs more than the
limit is launched. If that is the first all_reduce's growth, then: the stack limit read after it
is larger than before; with ``NCCL_SET_STACK_SIZE=1`` the growth moves to init; with the limit
raised beforehand past every NCCL kernel's need the all_reduce adds nothing.

Run on a 2-GPU machine from the repository root (torch with CUDA and NCCL)::

    python recorders/gpu_nccl_stack.py --out $OUT

Each case runs its two ranks in fresh processes (``--child CASE --rank R``), each printing one
JSON object: ``mem_get_info`` used, torch's reserved bytes and the stack limit after the context
(a ``torch.empty``), the first fill kernel, torch's stream pool (``torch.cuda.Stream()``), an
optional preset of the stack limit, ``init_process_group("nccl", device_id=…)``
(ncclCommInitRank), the first all_reduce of one element and one of 64 MiB. The parent also dumps
``cuobjdump --dump-resource-usage`` of the NCCL library torch loaded (each architecture's largest
kernel STACK / LOCAL), and writes ``nccl-stack.json`` with the command, versions and topology.
NVLink multicast stays off in every child (NCCL_NVLS_ENABLE=0 and the others).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
SHM = {"NCCL_P2P_DISABLE": "1"}
CUMEM0 = {"NCCL_CUMEM_ENABLE": "0"}
CUMEM1 = {"NCCL_CUMEM_ENABLE": "1"}

# (case, environment, stack limit preset before init or 0)
CASES: tuple[tuple[str, dict[str, str], int], ...] = (
    ("shm-cumem0", {**SHM, **CUMEM0}, 0),
    ("shm-cumem0-setstack", {**SHM, **CUMEM0, "NCCL_SET_STACK_SIZE": "1"}, 0),
    ("shm-cumem0-preset4096", {**SHM, **CUMEM0}, 4096),
    ("shm-cumem0-eager", {**SHM, **CUMEM0, "CUDA_MODULE_LOADING": "EAGER"}, 0),
    ("shm-cumem1", {**SHM, **CUMEM1}, 0),
    ("p2p-cumem0", {**CUMEM0}, 0),
    ("p2p-cumem1", {**CUMEM1}, 0),
    ("p2p-cumem1-setstack", {**CUMEM1, "NCCL_SET_STACK_SIZE": "1"}, 0),
)
STACK = 0x00  # cudaLimitStackSize / CU_LIMIT_STACK_SIZE


def _cudart() -> Any:
    for line in Path("/proc/self/maps").read_text().splitlines():
        if "libcudart.so" in line:
            lib = ctypes.CDLL(line.split()[-1])
            return lib.cudaDeviceGetLimit, lib.cudaDeviceSetLimit
    lib = ctypes.CDLL("libcuda.so.1")
    return lib.cuCtxGetLimit, lib.cuCtxSetLimit


def child(case: str, rank: int) -> dict[str, Any]:
    """One rank of one case, in a fresh process."""
    import torch
    import torch.distributed as dist

    preset = next(p for c, _, p in CASES if c == case)
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)

    steps: list[dict[str, Any]] = []
    get = set_ = None

    def stack() -> int:
        v = ctypes.c_size_t(0)
        assert get is not None
        get(ctypes.byref(v), STACK)
        return int(v.value)

    def snap(step: str) -> None:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        used, res = int(total - free), int(torch.cuda.memory_reserved())
        row = {"step": step, "used_bytes": used, "reserved_bytes": res,
               "non_torch_bytes": used - res, "stack_limit": stack()}
        if steps:
            row["non_torch_growth_bytes"] = row["non_torch_bytes"] - steps[-1]["non_torch_bytes"]
        steps.append(row)

    x = torch.empty(1, device=dev)
    get, set_ = _cudart()
    get.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
    set_.argtypes = [ctypes.c_int, ctypes.c_size_t]
    snap("context (torch.empty)")
    z = torch.zeros(4096, device=dev)
    snap("first fill kernel (torch.zeros)")
    s = torch.cuda.Stream()
    snap("torch.cuda.Stream() (torch's stream pool)")
    if preset:
        rc = set_(STACK, preset)
        snap(f"cudaDeviceSetLimit(stack, {preset}) rc={rc}")
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=dev)
    snap("init_process_group (ncclCommInitRank)")
    a = torch.ones(1, device=dev)
    dist.all_reduce(a)
    snap("first all_reduce, 1 element")
    b = torch.ones(16 * 1024 * 1024, device=dev)
    snap("64 MiB tensor (torch)")
    dist.all_reduce(b)
    snap("all_reduce 64 MiB")
    props = torch.cuda.get_device_properties(dev)
    out = {"case": case, "rank": rank, "sm_count": int(props.multi_processor_count),
           "max_threads_per_sm": int(getattr(props, "max_threads_per_multi_processor", 0)),
           "env": {k: v for k, v in os.environ.items()
                   if k.startswith(("NCCL_", "CUDA_MODULE", "TORCH_SYMM", "NVSHMEM"))},
           "steps": steps}
    dist.barrier()
    dist.destroy_process_group()
    del x, z, s, a, b
    return out


def resource_usage(lib: str) -> dict[str, Any]:
    """Per architecture of the NCCL library's fatbin: the number of kernels and the largest
    STACK and LOCAL bytes any of them declares (``cuobjdump --dump-resource-usage``), with the
    kernels that declare the largest STACK."""
    try:
        text = subprocess.run(["cuobjdump", "--dump-resource-usage", lib], capture_output=True,
                              text=True, timeout=120, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}
    arch, fn = "?", "?"
    per: dict[str, dict[str, Any]] = {}
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
            st = int(m.group(1))
            lo = re.search(r"LOCAL:(\d+)", line)
            loc = int(lo.group(1)) if lo else 0
            d = per.setdefault(arch, {"kernels": 0, "max_stack": 0, "max_local": 0,
                                      "stack_histogram": {}, "max_stack_kernels": []})
            d["kernels"] += 1
            d["stack_histogram"][str(st)] = d["stack_histogram"].get(str(st), 0) + 1
            d["max_local"] = max(d["max_local"], loc)
            if st > d["max_stack"]:
                d["max_stack"], d["max_stack_kernels"] = st, [fn]
            elif st == d["max_stack"] and len(d["max_stack_kernels"]) < 5:
                d["max_stack_kernels"].append(fn)
    return {"lib": lib, "per_arch": per, "lines": len(text.splitlines())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--child", default=None)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=90.0)
    args = ap.parse_args(argv)
    if args.child is not None:
        if args.child not in {c for c, _, _ in CASES}:
            ap.error(f"unknown case {args.child!r}")
        print(json.dumps(child(args.child, args.rank)))
        return 0
    runs: list[Any] = []
    for i, (case, env, _) in enumerate(CASES):
        penv = {**os.environ, **env, **NO_MULTICAST, "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(29611 + i)}
        procs = [subprocess.Popen([sys.executable, __file__, "--child", case, "--rank", str(r)],
                                  env=penv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for r in (0, 1)]
        for r, p in enumerate(procs):
            try:
                so, se = p.communicate(timeout=args.timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                so, se = p.communicate()
            if p.returncode == 0 and so.strip():
                runs.append(json.loads(so.strip().splitlines()[-1]))
            else:
                runs.append({"case": case, "rank": r, "rc": p.returncode, "stderr": se[-3000:]})
            print(json.dumps(runs[-1])[:1500], flush=True)
    import torch

    lib = next((ln.split()[-1] for ln in Path("/proc/self/maps").read_text().splitlines()
                if "libnccl" in ln), None)
    if lib is None:
        import torch.distributed
        lib = next((ln.split()[-1] for ln in Path("/proc/self/maps").read_text().splitlines()
                    if "libnccl" in ln), None)
    if lib is None:
        import glob
        import site
        found = [f for d in site.getsitepackages()
                 for f in glob.glob(d + "/nvidia/**/libnccl.so*", recursive=True)]
        lib = found[0] if found else None
    env_txt = subprocess.run("nvidia-smi; nvidia-smi topo -m", shell=True, capture_output=True,
                             text=True, check=False).stdout
    result = {
        "command": "python recorders/gpu_nccl_stack.py --out $OUT",
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "gpu": torch.cuda.get_device_name(0), "topology": env_txt,
        "nccl_resource_usage": resource_usage(lib) if lib else {"error": "libnccl not mapped"},
        "runs": runs,
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "nccl-stack.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
