"""What a captured CUDA graph with NCCL all-reduces in it costs, against the same graph with a
local op in their place: the graph pool's tensors and the driver's memory per graph and per node,
for the graph rows of ``memprof.core.terms.cudagraph`` at tensor parallelism.

Run on a machine with two or more GPUs, from the repository root (torch with CUDA)::

    PYTHONPATH=. python recorders/gpu_graph_collectives.py --out $OUT

One run per (node kind, ``NCCL_CUMEM_ENABLE`` 1 or 0), in fresh processes, one per GPU. Kinds:

- ``pynccl``: an all-reduce as vLLM captures it when custom all-reduce is off, through
  ``PyNcclCommunicator.all_reduce`` (vllm/distributed/device_communicators/pynccl.py): a
  communicator of its own (``ncclCommInitRank`` through ctypes, the unique id passed through a
  TCPStore), a warm-up all_reduce of one element as its constructor does, then per node
  ``out = torch.empty_like(x)`` and ``ncclAllReduce(x, out, …, current stream)``.
- ``pynccl_add``: ``pynccl``'s all-reduce with ``torch.add(x, 1.0)`` before it in each node, so
  every ``ncclAllReduce`` follows a kernel in its graph, as in a model's graphs (where NCCL's
  graph mixing support adds its stream and event: ``graph-mixing-2x-h100.json``); read against
  ``local``.
- ``c10d``: ``torch.distributed.all_reduce`` in place (ProcessGroupNCCL, eager init with
  ``device_id``), what a torch program without vLLM's wrapper captures.
- ``alone``: ``torch.add`` as ``local`` below, in a process with no communicator at all: the
  conditions of the one-GPU measurement, for its first-graph cost.
- ``local``: the baseline with no collective, ``torch.add(x, 1.0)`` out of place, one elementwise
  kernel of the same size per node; the process holds a c10d communicator (warmed up) as the
  others do, so only the node differs. This is the node the one-GPU graph model
  (``recorders/gpu_graph_costs.py``) was measured on.

Each run captures, after an eager warm-up of the op at that size, first one graph of one node
(the first graph a process instantiates), then ``--graphs`` graphs of N ∈ {1, 8, 64} nodes for
each decode-sized bf16 tensor (batch × hidden: 1×4096, 64×4096, 256×5120), each case into its own
private pool on a side stream (``capture_begin(pool=…)`` as ``gpu_graph_costs.py`` does;
capture_error_mode "thread_local"), every graph kept alive to the end so each case is a clean
delta; outputs of all but the last graph are dropped, as vLLM keeps only weak references. Per
case: the ``mem_get_info`` delta (total), the ``memory_reserved`` delta (the pool's tensors), and
their difference (the driver's part), after capture and again after every graph is replayed
once; then the last graph is replayed on fresh input and its output checked. The side stream's
own cost (``Δ(used − reserved)`` around ``torch.cuda.Stream()``) is recorded apart. NVLink multicast
stays off in every child (``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``,
``NVSHMEM_DISABLE_NVLS=1``). ``--transport shm`` adds ``NCCL_P2P_DISABLE=1`` in every child, as
``recorders/gpu_nccl.py``'s shm rows do: NCCL then joins the GPUs over host shared memory, the
transport it takes between GPUs without peer access (the file's name gets ``-shm``). Writes
``graph-collectives-<world>x-<gpu>.json`` with the versions,
``nvidia-smi topo -m``, NCCL's log lines and this command.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
KINDS = ("pynccl", "c10d", "local", "alone", "pynccl_add")
TRANSPORTS = {"p2p": {}, "shm": {"NCCL_P2P_DISABLE": "1"}}
CUMEM = ("1", "0")

CHILD = r"""
import ctypes, datetime, json, os, sys, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SHAPES = [(1, 4096), (64, 4096), (256, 5120)]
NODES = [1, 8, 64]
BF16 = torch.bfloat16

class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]

def nccl_lib():
    # the libnccl torch loaded (PyNccl's find_nccl_library gives "libnccl.so.2" likewise)
    with open("/proc/self/maps") as f:
        paths = [ln.split()[-1] for ln in f if "libnccl.so" in ln]
    lib = ctypes.CDLL(paths[0] if paths else "libnccl.so.2")
    lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(NcclUniqueId)]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                                     NcclUniqueId, ctypes.c_int]
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                  ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    for fn in (lib.ncclGetUniqueId, lib.ncclCommInitRank, lib.ncclAllReduce):
        fn.restype = ctypes.c_int
    return lib, (paths[0] if paths else "libnccl.so.2")

def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} returned ncclResult {rc}")

def used(dev):
    free, total = torch.cuda.mem_get_info(dev)
    return total - free, torch.cuda.memory_reserved(dev)

def worker(rank, world, port, kind, graphs, q):
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    torch.zeros(1, device=dev)
    torch.cuda.synchronize()
    info = {"rank": rank, "kind": kind}
    if kind in ("pynccl", "pynccl_add"):
        store = dist.TCPStore("127.0.0.1", port, world, rank == 0,
                              timeout=datetime.timedelta(seconds=60))
        lib, info["libnccl"] = nccl_lib()
        if rank == 0:
            uid = NcclUniqueId()
            check(lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
            store.set("ncclid", bytes(uid))
        uid = NcclUniqueId.from_buffer_copy(store.get("ncclid"))
        comm = ctypes.c_void_p()
        check(lib.ncclCommInitRank(ctypes.byref(comm), world, uid, rank), "ncclCommInitRank")

        def allreduce(x):
            out = torch.empty_like(x)
            dt = 7 if x.dtype == torch.float32 else 9  # ncclFloat32, ncclBfloat16 (nccl.h)
            check(lib.ncclAllReduce(x.data_ptr(), out.data_ptr(), x.numel(), dt, 0, comm,
                                    torch.cuda.current_stream().cuda_stream), "ncclAllReduce")
            return out

        if kind == "pynccl":
            op = allreduce
        else:
            def op(x):
                return allreduce(torch.add(x, 1.0))
    elif kind == "alone":
        def op(x):
            return torch.add(x, 1.0)
    else:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
        if kind == "c10d":
            def op(x):
                dist.all_reduce(x)
                return x
        else:
            def op(x):
                return torch.add(x, 1.0)
    # the communicator's warm-up (PyNccl's constructor: an all_reduce of one element)
    w = torch.ones(1, device=dev)
    if kind in ("pynccl", "pynccl_add"):
        w = allreduce(w)
    elif kind != "alone":
        dist.all_reduce(w)
    torch.cuda.synchronize()
    info["warm_up_ok"] = kind == "alone" or float(w.item()) == float(world)
    want = {"pynccl": lambda n: float(world), "pynccl_add": lambda n: 2.0 * world,
            "c10d": lambda n: float(world) ** n,
            "local": lambda n: 2.0, "alone": lambda n: 2.0}[kind]
    cases = [("first graph of the process", SHAPES[0], 1, 1)] + [
        (f"{b}x{h}, {n} nodes", (b, h), n, graphs) for b, h in SHAPES for n in NODES]
    keep = []
    rows = []
    torch.cuda.synchronize()
    before = used(dev)
    stream = torch.cuda.Stream()  # the capture stream (vLLM's graph_capture makes one too)
    torch.cuda.synchronize()
    after = used(dev)
    info["side_stream_non_torch_bytes"] = (after[0] - after[1]) - (before[0] - before[1])
    for name, shape, n, g_count in cases:
        row = {"case": name, "shape": list(shape), "nodes": n, "graphs": g_count}
        try:
            x = torch.ones(shape, device=dev, dtype=BF16)
            op(x)  # eager warm-up at this size (vLLM runs each size eagerly before capture)
            torch.cuda.synchronize()
            x.fill_(1.0)
            torch.cuda.empty_cache()
            torch.cuda.synchronize()
            u0, r0 = used(dev)
            pool = torch.cuda.graph_pool_handle()
            t0 = time.perf_counter()
            mine = []
            out = None
            with torch.cuda.stream(stream):
                for _ in range(g_count):
                    g = torch.cuda.CUDAGraph()
                    g.capture_begin(pool=pool, capture_error_mode="thread_local")
                    out = None
                    for _ in range(n):
                        out = op(x)
                    g.capture_end()
                    mine.append(g)
            torch.cuda.synchronize()
            row["capture_s"] = round(time.perf_counter() - t0, 3)
            u1, r1 = used(dev)
            for g in mine:
                g.replay()
            torch.cuda.synchronize()
            u2, r2 = used(dev)
            x.fill_(1.0)
            mine[-1].replay()
            torch.cuda.synchronize()
            row["ok"] = bool((out == want(n)).all())
            row.update(total_bytes=u1 - u0, tensors_bytes=r1 - r0,
                       driver_bytes=(u1 - u0) - (r1 - r0),
                       after_replay_total_bytes=u2 - u0, after_replay_tensors_bytes=r2 - r0,
                       after_replay_driver_bytes=(u2 - u0) - (r2 - r0))
            keep.append((mine, out, x))
        except Exception as e:  # recorded; the next case still runs
            row["error"] = f"{type(e).__name__}: {e}"[:500]
        rows.append(row)
    info["cases"] = rows
    q.put(info)
    q.close()
    q.join_thread()  # the record is in the pipe before this process ends
    torch.cuda.synchronize()
    if kind in ("pynccl", "pynccl_add"):  # both ranks done with their collectives first
        store.add("done", 1)
        while store.add("done", 0) < world:
            time.sleep(0.05)
        time.sleep(1.0)
    elif kind != "alone":
        dist.barrier()
    os._exit(0)  # no teardown of graphs that hold NCCL work

if __name__ == "__main__":
    world, port, kind, graphs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, port, kind, graphs, q))
             for r in range(world)]
    for p in procs:
        p.start()
    ranks = sorted((q.get(timeout=240) for _ in procs), key=lambda d: d["rank"])
    for p in procs:
        p.join(timeout=60)
    print(json.dumps({"ranks": ranks, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                      "torch": torch.__version__, "cuda": torch.version.cuda,
                      "gpu": torch.cuda.get_device_name(0)}))
"""

LOG_KEYS = ("via", "NCCL version", "Init COMPLETE", "set by environment", "cuMem", "egist")


def run(child: Path, kind: str, cumem: str, world: int, port: int, graphs: int,
        timeout: int, transport: str = "p2p") -> dict[str, Any]:
    """One (kind, cuMem) run in fresh processes; its process group is killed if it hangs."""
    extra = {**NO_MULTICAST, **TRANSPORTS[transport]}
    env = {**os.environ, **extra, "NCCL_CUMEM_ENABLE": cumem, "NCCL_DEBUG": "INFO",
           "NCCL_DEBUG_SUBSYS": "INIT,ENV,REG"}
    cmd = [sys.executable, str(child), str(world), str(port), kind, str(graphs)]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        code = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        code = 124
    last = out.strip().splitlines()[-1] if out.strip() else "{}"
    try:
        body = json.loads(last)
    except json.JSONDecodeError:
        body = {}
    lines = (out + err).splitlines()
    rec: dict[str, Any] = {
        "kind": kind, "transport": transport, "env": {**extra, "NCCL_CUMEM_ENABLE": cumem},
        "command": f"NCCL_CUMEM_ENABLE={cumem} "
                   f"{' '.join(f'{k}={v}' for k, v in extra.items())} "
                   f"python graph_child.py {world} {port} {kind} {graphs}",
        "exit_code": code, **body,
        "nccl_log": [ln for ln in lines if any(k in ln for k in LOG_KEYS)][:60]}
    if code != 0 or not body:
        rec["stderr_tail"] = err[-3000:]
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--graphs", type=int, default=250, help="graphs per case (after the first)")
    ap.add_argument("--timeout", type=int, default=150, help="seconds per run")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--cumem", default=",".join(CUMEM), help="NCCL_CUMEM_ENABLE values to run")
    ap.add_argument("--tag", default="", help="a suffix of the file name")
    ap.add_argument("--transport", choices=sorted(TRANSPORTS), default="p2p",
                    help="shm: NCCL_P2P_DISABLE=1 in the children (host shared memory)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    child = Path(tempfile.mkdtemp()) / "graph_child.py"  # spawn re-imports the child's module
    child.write_text(CHILD)
    topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip().splitlines()[:1]
    runs = []
    port = 29600
    for cumem in args.cumem.split(","):
        for kind in args.kinds.split(","):
            port += 1
            rec = run(child, kind, cumem, args.world, port, args.graphs, args.timeout,
                      args.transport)
            runs.append(rec)
            for r in rec.get("ranks", [])[:1]:
                print(f"cumem={cumem} {kind:6} side stream "
                      f"{r.get('side_stream_non_torch_bytes', 0) / 2**20:.2f} MiB", flush=True)
                for c in r["cases"]:
                    print(f"cumem={cumem} {kind:6} {c['case']:28} "
                          + (f"total {c['total_bytes'] / 2**20:8.2f} MiB tensors "
                             f"{c['tensors_bytes'] / 2**20:7.2f} driver "
                             f"{c['driver_bytes'] / 2**20:8.2f} ok {c['ok']}"
                             if "error" not in c else c["error"][:120]), flush=True)
            if not rec.get("ranks"):
                print(f"cumem={cumem} {kind}: exit {rec['exit_code']}",
                      rec.get("stderr_tail", "")[-800:], flush=True)
            name = next((r["gpu"] for r in runs if r.get("gpu")), "")
            gpu = next((g.lower() for g in ("H100", "H200", "B200") if g in name), "gpu")
            doc = {"command": f"PYTHONPATH=. python recorders/gpu_graph_collectives.py --out $OUT "
                              f"--world {args.world} --graphs {args.graphs} --kinds {args.kinds} "
                              f"--cumem {args.cumem}" + (f" --tag {args.tag}" if args.tag else "")
                              + (f" --transport {args.transport}"
                                 if args.transport != "p2p" else ""),
                   "transport": args.transport,
                   "driver": driver[0] if driver else "", "nvidia_smi_topo": topo, "runs": runs}
            # written after every run, so a call cut short still leaves what it measured
            tag = ("-shm" if args.transport == "shm" else "") + (f"-{args.tag}" if args.tag else "")
            (args.out / f"graph-collectives-{args.world}x-{gpu}{tag}.json").write_text(
                json.dumps(doc, indent=1) + "\n")
    return 0 if all(r["exit_code"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
