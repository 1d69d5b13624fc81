"""The driver memory of a captured NCCL all-reduce by transport (NVLink P2P, host shared memory,
sockets), with and without kernels between the collectives, each case in a process of its own:
the per-node figure behind ``cudagraph.GRAPH_DRIVER_PER_NCCL_NODE`` and
``cudagraph.GRAPH_DRIVER_NCCL_MIXING`` for each transport NCCL can join two ranks by.

Run on a machine with two or more GPUs, from the folder that holds this file or the repository
root (torch with CUDA)::

    python recorders/gpu_graph_collectives_transport.py --out $OUT

Transports, set in every rank's environment as ``recorders/gpu_nccl.py`` sets them:
``p2p`` (NCCL's default between GPUs with peer access), ``shm`` (``NCCL_P2P_DISABLE=1``: host shared
memory, what NCCL takes between GPUs of one host without peer access) and ``net``
(``NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo``: the socket
transport on loopback, standing in for ranks on different hosts); each with
``NCCL_CUMEM_ENABLE`` 0 and 1. NVLink multicast stays off in every rank (``NCCL_NVLS_ENABLE=0``,
``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``, ``NVSHMEM_DISABLE_NVLS=1``).

The all-reduce is PyNccl's (vllm/distributed/device_communicators/pynccl.py, what vLLM captures
when custom all-reduce is off): a communicator of its own through ctypes ``ncclCommInitRank``
(the unique id passed through a TCPStore), a warm-up all-reduce of one element, then per call
``out = torch.empty_like(x)`` and ``ncclAllReduce(x, out, …, sum, current stream)``. The kernel is
``torch.div(y, world)``, out of place. Graph bodies on a 1×4096 bf16 tensor, N all-reduces:

- ``between``: a kernel, then N × (all-reduce, kernel): every collective sits between two kernels,
  as in the pieces of vLLM's piecewise capture (o_proj before, the residual add and norm after);
- ``back``: a kernel, N all-reduces back to back, a kernel;
- ``kernels``: a kernel, then N kernels: ``between`` without its collectives, its reference.

Each case (transport, cuMem, body, N) runs in fresh processes, one per GPU, since the driver
reuses the memory of a process's destroyed graphs for its later ones
(reports/gpu/graph-mixing-topology/README.md). In each: the communicator and its warm-up, the
body run eagerly (kernels loaded), the capture stream made, one graph of ``between`` N = 1
captured and kept (the process's first graph, recorded apart as ``first_graph_*``), then
``--graphs`` graphs of the case's body captured into one private pool on the capture stream and
kept. Per case and rank: the ``mem_get_info`` delta (total), the ``memory_reserved`` delta (the
pool's tensors) and their difference (the driver's part), after capture and after every graph is
replayed once; the last graph's output is checked against the arithmetic. NCCL's ``via`` lines
show the transport it took. Writes ``graph-collectives-transport-<world>x-<gpu>.json`` after every
case (a run cut short keeps what it measured), with the versions, the driver,
``nvidia-smi topo -m`` and this command.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
TRANSPORTS: dict[str, dict[str, str]] = {
    "p2p": {},
    "shm": {"NCCL_P2P_DISABLE": "1"},
    "net": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1",
            "NCCL_SOCKET_IFNAME": "lo"},
}
# The order cases run in: the bodies the published logs' captures have first.
CASES = (("between", 0), ("between", 1), ("between", 8), ("between", 64), ("kernels", 64),
         ("back", 1), ("back", 8), ("back", 64), ("kernels", 1))
MARK = "RESULT "


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def expected(body: str, n: int, world: int) -> float:
    """The value every element of the body's output holds for an input of ones."""
    v = 1.0 / world
    for _ in range(n):
        v = v * world if body == "back" else (v if body == "between" else v / world)
    return v / world if body == "back" else v


def child(rank: int, world: int, port: int, body: str, n: int, graphs: int) -> dict[str, Any]:
    """One rank of one case; returns its record."""
    import torch
    import torch.distributed as dist

    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    torch.zeros(1, device=dev)
    torch.cuda.synchronize()
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0,
                          timeout=datetime.timedelta(seconds=60))
    with open("/proc/self/maps") as f:
        paths = sorted({ln.split()[-1] for ln in f if "libnccl.so" in ln})
    lib = ctypes.CDLL(paths[0] if paths else "libnccl.so.2")
    lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(NcclUniqueId)]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                                     NcclUniqueId, ctypes.c_int]
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.ncclGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
    ver = ctypes.c_int(0)
    lib.ncclGetVersion(ctypes.byref(ver))
    if rank == 0:
        uid = NcclUniqueId()
        assert lib.ncclGetUniqueId(ctypes.byref(uid)) == 0
        store.set("ncclid", bytes(uid))
    uid = NcclUniqueId.from_buffer_copy(store.get("ncclid"))
    comm = ctypes.c_void_p()
    assert lib.ncclCommInitRank(ctypes.byref(comm), world, uid, rank) == 0

    def allreduce(x: Any) -> Any:
        out = torch.empty_like(x)
        dt = 7 if x.dtype == torch.float32 else 9  # ncclFloat32, ncclBfloat16 (nccl.h)
        rc = lib.ncclAllReduce(x.data_ptr(), out.data_ptr(), x.numel(), dt, 0, comm,
                               torch.cuda.current_stream().cuda_stream)
        if rc != 0:
            raise RuntimeError(f"ncclAllReduce returned {rc}")
        return out

    def kern(y: Any) -> Any:
        return torch.div(y, world)

    def run(x: Any, what: str, k: int) -> Any:
        y = kern(x)
        for _ in range(k):
            if what == "between":
                y = kern(allreduce(y))
            elif what == "back":
                y = allreduce(y)
            else:
                y = kern(y)
        return kern(y) if what == "back" else y

    def used() -> tuple[int, int]:
        free, total = torch.cuda.mem_get_info(dev)
        return total - free, torch.cuda.memory_reserved(dev)

    rec: dict[str, Any] = {"rank": rank, "body": body, "n": n, "graphs": graphs,
                           "libnccl": paths[0] if paths else "libnccl.so.2",
                           "nccl_loaded": ver.value,
                           "nccl_torch": ".".join(map(str, torch.cuda.nccl.version())),
                           "torch": torch.__version__, "cuda": torch.version.cuda,
                           "gpu": torch.cuda.get_device_name(dev)}
    w = allreduce(torch.ones(1, device=dev))  # PyNccl's constructor warms up likewise
    torch.cuda.synchronize()
    rec["warm_up_ok"] = float(w.item()) == float(world)
    x = torch.ones((1, 4096), device=dev, dtype=torch.bfloat16)
    run(x, body, n)  # eager: every kernel loaded before the window
    run(x, "between", 1)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()  # the capture stream, made before every read
    torch.cuda.synchronize()
    keep: list[Any] = []
    torch.cuda.empty_cache()
    u0, r0 = used()
    first = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        first.capture_begin(pool=torch.cuda.graph_pool_handle(), capture_error_mode="thread_local")
        keep.append(run(x, "between", 1))
        first.capture_end()
    torch.cuda.synchronize()
    u1, r1 = used()
    keep.append(first)
    rec.update(first_graph_total_bytes=u1 - u0, first_graph_tensors_bytes=r1 - r0,
               first_graph_driver_bytes=(u1 - u0) - (r1 - r0))
    torch.cuda.empty_cache()
    u0, r0 = used()
    pool = torch.cuda.graph_pool_handle()
    mine = []
    out = None
    t0 = time.perf_counter()
    with torch.cuda.stream(stream):
        for _ in range(graphs):
            g = torch.cuda.CUDAGraph()
            g.capture_begin(pool=pool, capture_error_mode="thread_local")
            out = run(x, body, n)
            g.capture_end()
            mine.append(g)
    torch.cuda.synchronize()
    rec["capture_s"] = round(time.perf_counter() - t0, 3)
    u1, r1 = used()
    for g in mine:
        g.replay()
    torch.cuda.synchronize()
    u2, r2 = used()
    assert out is not None
    rec["ok"] = bool((out.float() == expected(body, n, world)).all())
    rec.update(total_bytes=u1 - u0, tensors_bytes=r1 - r0, driver_bytes=(u1 - u0) - (r1 - r0),
               after_replay_total_bytes=u2 - u0, after_replay_tensors_bytes=r2 - r0,
               after_replay_driver_bytes=(u2 - u0) - (r2 - r0))
    keep.append((mine, out))
    # the record goes out before the barrier: rank 0 holds the store, and a rank still polling
    # it when rank 0 leaves loses its connection (the first run lost rank 1's record so in 19
    # of its 41 cases)
    print(MARK + json.dumps(rec), flush=True)
    # both ranks done with their collectives before either leaves; no teardown of graphs
    try:
        store.add("done", 1)
        deadline = time.time() + 30
        while store.add("done", 0) < world and time.time() < deadline:
            time.sleep(0.05)
        if rank == 0:
            time.sleep(1.0)  # the others read the count before the store goes
    except (RuntimeError, OSError) as exc:  # DistNetworkError is a RuntimeError
        print(f"barrier: {type(exc).__name__}: {exc}", flush=True)
    return rec


LOG_KEYS = ("via", "NCCL version", "set by environment", "cuMem", "Init COMPLETE")


def one_case(world: int, port: int, transport: str, cumem: str, body: str, n: int,
             graphs: int, timeout: int) -> dict[str, Any]:
    """One case in fresh processes, one per rank; the group is killed if it hangs."""
    extra = {**NO_MULTICAST, **TRANSPORTS[transport], "NCCL_CUMEM_ENABLE": cumem}
    env = {**os.environ, **extra, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV"}
    # each rank writes to a file of its own: a full pipe would stall one rank inside NCCL
    files = [tempfile.TemporaryFile(mode="w+") for _ in range(world)]  # noqa: SIM115
    procs = [subprocess.Popen([sys.executable, __file__, "--child", str(r), str(world), str(port),
                               body, str(n), str(graphs)], env=env, stdout=files[r],
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
             for r in range(world)]
    t0 = time.perf_counter()
    ranks: list[dict[str, Any]] = []
    log: list[str] = []
    codes = []
    for p, fh in zip(procs, files, strict=True):
        try:
            p.wait(timeout=max(1.0, timeout - (time.perf_counter() - t0)))
            codes.append(p.returncode)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            codes.append(124)
        fh.seek(0)
        lines = fh.read().splitlines()
        fh.close()
        for ln in lines:
            if ln.startswith(MARK):
                ranks.append(json.loads(ln[len(MARK):]))
        if not log:  # rank 0's: the channels' transport first, then the settings
            log = ([ln for ln in lines if " via " in ln][:6]
                   + [ln for ln in lines if any(k in ln for k in LOG_KEYS[1:])][:8])
        if codes[-1] != 0 or not any(ln.startswith(MARK) for ln in lines):
            log += ["-- tail --", *lines[-25:]]
    return {"transport": transport, "cumem": cumem, "body": body, "n": n, "graphs": graphs,
            "env": extra, "exit_codes": codes, "seconds": round(time.perf_counter() - t0, 1),
            "ranks": sorted(ranks, key=lambda d: d["rank"]), "nccl_log": log}


def _smi(*args: str) -> str:
    try:
        return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi failed: {exc}"


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--graphs", type=int, default=100, help="graphs per case")
    ap.add_argument("--transports", default="shm,net,p2p")
    ap.add_argument("--cumem", default="0,1", help="NCCL_CUMEM_ENABLE values, in order")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per case")
    ap.add_argument("--budget", type=float, default=1e9,
                    help="seconds after which no further case is started")
    ap.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        rank, world, port, body, n, graphs = args.child
        child(int(rank), int(world), int(port), body, int(n), int(graphs))  # prints its record
        os._exit(0)  # no teardown of graphs that hold NCCL work
    if args.out is None:
        ap.error("--out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    smi = _smi("--query-gpu=name,driver_version,memory.total", "--format=csv,noheader")
    topo = _smi("topo", "-m")
    gpu = next((g.lower() for g in ("H100", "H200", "B200", "A100") if g in smi), "gpu")
    path = args.out / f"graph-collectives-transport-{args.world}x-{gpu}.json"
    doc: dict[str, Any] = {
        "command": "python recorders/gpu_graph_collectives_transport.py --out $OUT "
                   f"--world {args.world} --graphs {args.graphs} --transports {args.transports} "
                   f"--cumem {args.cumem} --timeout {args.timeout} --budget {args.budget:g}",
        "nvidia_smi": smi.strip(), "nvidia_smi_topo": topo, "cases": []}
    t0 = time.perf_counter()
    port = 29700
    for cumem in args.cumem.split(","):
        for transport in args.transports.split(","):
            for body, n in CASES:
                if any(c["transport"] == transport and c["cumem"] == cumem and not c["ranks"]
                       for c in doc["cases"]):
                    break  # a case of this setting failed: the next setting
                if time.perf_counter() - t0 > args.budget:
                    doc["cut_short"] = f"budget {args.budget:g} s reached"
                    path.write_text(json.dumps(doc, indent=1) + "\n")
                    return 1
                port += 1
                rec = one_case(args.world, port, transport, cumem, body, n, args.graphs,
                               args.timeout)
                doc["cases"].append(rec)
                path.write_text(json.dumps(doc, indent=1) + "\n")
                r0 = rec["ranks"][0] if rec["ranks"] else {}
                print(f"{transport} cumem={cumem} {body:8} n={n:3} {rec['seconds']:5.1f}s "
                      + (f"driver {r0['driver_bytes']:>11,} tensors {r0['tensors_bytes']:>10,} "
                         f"first {r0['first_graph_driver_bytes']:>9,} ok {r0['ok']}"
                         if r0 else f"exit {rec['exit_codes']}"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
