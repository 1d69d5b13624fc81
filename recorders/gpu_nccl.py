"""Measure the GPU memory an NCCL communicator takes, as vLLM's ``PyNcclCommunicator`` creates it,
for the NCCL terms of ``memprof.core.terms.non_torch``.

Run on a machine with two or more GPUs, from the repository root (torch with CUDA)::

    PYTHONPATH=. python recorders/gpu_nccl.py --out $OUT

What is run, per configuration, in fresh processes (one per GPU, ``torch.multiprocessing``):
the CUDA context (a first tensor), then ``torch.distributed.init_process_group("nccl",
device_id=...)``, which creates the NCCL communicator at once (``ncclCommInitRank``, as
PyNccl's constructor does), then one small all_reduce (PyNccl's warm-up in its constructor,
vllm/distributed/device_communicators/pynccl.py "A small all_reduce for warmup"), then a
128 MiB all_reduce and a 256 MiB all_gather (what the profile run sends). After each step every
rank reads ``torch.cuda.mem_get_info`` and ``memory_reserved``; NCCL's memory is the growth of
``used − reserved`` (non-torch) from the step before.

Configurations: NCCL's cuMem allocator on and off (vLLM set ``NCCL_CUMEM_ENABLE=0`` from 0.7.x
to 0.10.1.1), and the transport: NVLink peer-to-peer (the default here) or host shared memory
(``NCCL_P2P_DISABLE=1``, the transport NCCL takes between GPUs without peer access, such as
two GeForce RTX 4090s). NVLink multicast (NVLS) stays off (``NCCL_NVLS_ENABLE=0``: the lent
machines forbid it), so NVLS buffers are not measured. The file ``nccl-<gpu>.json`` holds every
rank's bytes per step, the NCCL version, torch's, and ``nvidia-smi topo -m``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CONFIGS: list[dict[str, Any]] = [
    {"name": "p2p-cumem-on", "env": {"NCCL_CUMEM_ENABLE": "1"}},
    {"name": "p2p-cumem-off", "env": {"NCCL_CUMEM_ENABLE": "0"}},
    {"name": "shm-cumem-on", "env": {"NCCL_CUMEM_ENABLE": "1", "NCCL_P2P_DISABLE": "1"}},
    {"name": "shm-cumem-off", "env": {"NCCL_CUMEM_ENABLE": "0", "NCCL_P2P_DISABLE": "1"}},
]

CHILD = r"""
import json, os, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

def used(dev):
    free, total = torch.cuda.mem_get_info(dev)
    return total - free, torch.cuda.memory_reserved(dev)

def worker(rank, world, port, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    torch.zeros(1, device=dev)
    torch.cuda.synchronize()
    steps = [("CUDA context (first tensor)", *used(dev))]
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    torch.cuda.synchronize()
    steps.append(("ncclCommInitRank (init_process_group, device_id)", *used(dev)))
    x = torch.ones(1, device=dev)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    steps.append(("warm-up all_reduce of 1 fp32", *used(dev)))
    big = torch.ones(64 * 1024 * 1024, device=dev, dtype=torch.bfloat16)
    dist.all_reduce(big)
    torch.cuda.synchronize()
    steps.append(("all_reduce 128 MiB bf16", *used(dev)))
    out = torch.empty(world * big.numel(), device=dev, dtype=big.dtype)
    dist.all_gather_into_tensor(out, big)
    torch.cuda.synchronize()
    del out, big
    torch.cuda.empty_cache()
    steps.append(("all_gather 2 x 128 MiB, tensors freed", *used(dev)))
    ok = float(x.item()) == float(world)
    q.put({"rank": rank, "ok": ok, "steps": [
        {"after": s, "used_bytes": u, "reserved_bytes": r} for s, u, r in steps]})
    dist.destroy_process_group()

if __name__ == "__main__":
    world, port = int(sys.argv[1]), int(sys.argv[2])
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, port, q)) for r in range(world)]
    for p in procs:
        p.start()
    ranks = sorted((q.get(timeout=300) for _ in procs), key=lambda d: d["rank"])
    for p in procs:
        p.join()
    print(json.dumps({"ranks": ranks, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                      "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--world", type=int, default=2)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []
    child = Path(tempfile.mkdtemp()) / "nccl_child.py"  # spawn re-imports the child's module
    child.write_text(CHILD)
    for i, cfg in enumerate(CONFIGS):
        env = {**os.environ, "NCCL_NVLS_ENABLE": "0", "NCCL_DEBUG": "INFO",
               "NCCL_DEBUG_SUBSYS": "INIT,GRAPH", **cfg["env"]}
        cmd = [sys.executable, str(child), str(args.world), str(29500 + i)]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
        last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "{}"
        rec = {"config": cfg["name"], "env": {"NCCL_NVLS_ENABLE": "0", **cfg["env"]},
               "command": f"{' '.join(f'{k}={v}' for k, v in cfg['env'].items())} "
                          f"NCCL_NVLS_ENABLE=0 python nccl_child.py {args.world} {29500 + i}",
               "exit_code": p.returncode, **(json.loads(last) if p.returncode == 0 else {}),
               # NCCL's own account of the transports and channels it chose (NCCL_DEBUG
               # writes to stdout)
               "nccl_log": [ln for ln in (p.stdout + p.stderr).splitlines()
                            if any(k in ln for k in ("via", "Channel 00", "nChannels",
                                                     "NCCL version", "comm 0x"))][:40]}
        if p.returncode != 0:
            rec["stderr_tail"] = p.stderr[-3000:]
        for r in rec.get("ranks", []):
            s = r["steps"]
            r["non_torch_growth_bytes"] = {
                s[k]["after"]: (s[k]["used_bytes"] - s[k]["reserved_bytes"])
                - (s[k - 1]["used_bytes"] - s[k - 1]["reserved_bytes"]) for k in range(1, len(s))}
        runs.append(rec)
        print(cfg["name"], p.returncode,
              [r["non_torch_growth_bytes"] for r in rec.get("ranks", [])][:1], flush=True)
    topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout
    name = next((r["gpu"] for r in runs if r.get("gpu")), "")
    gpu = next((g.lower() for g in ("H100", "H200", "B200") if g in name), "gpu")
    doc = {"command": f"PYTHONPATH=. python recorders/gpu_nccl.py --out $OUT --world {args.world}",
           "nvidia_smi_topo": topo, "runs": runs}
    (args.out / f"nccl-{args.world}x-{gpu}.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if all(r["exit_code"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
