"""Does the place NCCL gives its graph-mixing event nodes in a captured graph change their driver
memory? One GPU, no NCCL: the nodes NCCL's strong stream adds under capture, made with CUDA's own
event API, in the two shapes NCCL's releases build.

What NCCL adds under capture with ``NCCL_GRAPH_MIXING_SUPPORT`` on (its default; vLLM leaves it):
for each new graph, an event-wait node on ``serialEvent`` (recorded outside the graph) at the head
of its device stream, and for each collective an event-record node on ``serialEvent`` after the
collective's kernel (src/misc/strongstream.cc ``ncclStrongStreamAcquire`` /
``ncclStrongStreamRelease``). Where that record node sits differs by release:

- ``inline``: the next collective's kernel depends on it. v2.21.5-1 (torch 2.5.1 / 2.6.0): the
  record node becomes the strong stream's only tip (``g->tipNodes``), which the user stream
  waits on before the next launch (src/enqueue.cc ``ncclStrongStreamWaitStream(launchStream,
  deviceStream)``). v2.27.5-1 … v2.28.9-1 (torch 2.9 …): ``ncclStrongStreamRelease`` sets the
  device stream's capture dependencies to the record node
  (``cudaStreamUpdateCaptureDependencies``).
- ``leaf``: nothing waits on it. v2.26.2-1 … v2.27.3-1 (torch 2.7.x and 2.8.0): the record node is
  added with ``cudaGraphAddEventRecordNode`` after the previous record (``cap->lastRecord``) and
  the device stream's current nodes, and the device stream's capture dependencies are left as they
  were, so the records form a side chain that ends the graph.

The cases, each G graphs of k "collectives" (an in-place add as the work before the collective
and an in-place add as the collective's kernel, on the capture stream), every graph kept alive in
one private pool per case:

- ``plain``: the kernels alone;
- ``forkjoin``: the same, with the device stream forked from and joined to the capture stream
  around each collective as NCCL does (edges only: events recorded inside the capture make no
  nodes);
- ``wait``: ``forkjoin`` and, per graph, the external event-wait node at the device stream's head;
- ``inline`` / ``leaf``: ``wait`` and, per collective, the external event-record node, placed as
  above.

Each case runs in a fresh process (the driver keeps the memory of a process's destroyed graphs
for its later graphs, so cases that share a process read each other's leftovers:
reports/gpu/graph-mixing-topology/README.md). Per case the ``mem_get_info`` delta, the
``memory_reserved`` delta (0: the kernels work in place on a tensor made before) and their
difference, the driver's part; and the node types of one graph of the case, read from the kept
CUDA graph (``cudaGraphGetNodes`` / ``cudaGraphNodeGetType``), so that the file shows which
nodes each case built. Run on the GPU machine from the repository root::

    PYTHONPATH=. python recorders/gpu_graph_mixing_topology.py --out $OUT

Writes ``graph-mixing-topology.json`` with the torch version, the GPU, the driver and this command.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CASES = ("plain", "forkjoin", "wait", "inline", "leaf")
KS = (1, 2, 8)
GRAPHS = 200
# cudaGraphNodeType (driver_types.h)
NODE_TYPES = {0: "kernel", 1: "memcpy", 2: "memset", 3: "host", 4: "graph", 5: "empty",
              6: "wait_event", 7: "event_record", 8: "ext_semas_signal", 9: "ext_semas_wait",
              10: "mem_alloc", 11: "mem_free", 12: "batch_mem_op", 13: "conditional"}


def _cudart() -> Any:
    """The libcudart torch loaded (read from this process's maps)."""
    with open("/proc/self/maps") as f:
        paths = sorted({line.split()[-1] for line in f if "libcudart.so" in line})
    if not paths:
        raise RuntimeError("no libcudart in the process")
    return ctypes.CDLL(paths[0])


class Rig:
    """The streams and events the cases share: the capture stream, NCCL's device stream, the
    stream its leaf records are chained on, and ``serialEvent``, recorded once outside any
    capture as NCCL's first capture does (``cudaEventRecord(ss->serialEvent, ss->liveStream)``)."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.x = torch.zeros(1 << 16, device="cuda")
        self.main = torch.cuda.Stream()
        self.side = torch.cuda.Stream()
        self.rec = torch.cuda.Stream()
        live = torch.cuda.Stream()
        self.serial = torch.cuda.Event(external=True)
        self.serial.record(live)
        torch.cuda.synchronize()

    def _wait(self, waiter: Any, on: Any) -> None:
        e = self.torch.cuda.Event()
        e.record(on)
        waiter.wait_event(e)

    def body(self, case: str, k: int) -> None:
        """One graph's work, issued on the capture stream (current) inside the capture."""
        x, main, side = self.x, self.main, self.side
        if case != "plain":
            self._wait(side, main)  # the device stream joins the capture with no dependency
            if case in ("wait", "inline", "leaf"):
                side.wait_event(self.serial)  # external: recorded outside this graph
        for _ in range(k):
            x.add_(1)  # work before the collective
            if case != "plain":
                self._wait(main, side)  # the launch stream waits on the device stream
            x.add_(1)  # the collective's kernel
            if case != "plain":
                self._wait(side, main)  # the device stream catches up with the launch
            if case == "inline":
                self.serial.record(side)  # the device stream's new tip
            elif case == "leaf":
                self._wait(self.rec, side)  # after the device stream's nodes ...
                self.serial.record(self.rec)  # ... and the previous record; nothing waits on it
        if case != "plain":
            self._wait(main, side)
        if case == "leaf":
            self._wait(main, self.rec)  # a capture must end with every stream joined

    def capture(self, case: str, k: int, pool: Any, keep_graph: bool = False) -> Any:
        torch = self.torch
        g = torch.cuda.CUDAGraph(keep_graph=keep_graph) if keep_graph else torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool, stream=self.main):
            self.body(case, k)
        return g


def census(rig: Rig, case: str, k: int) -> dict[str, int] | str:
    """Node types of one graph of the case, or the error that prevented reading them."""
    try:
        rt = _cudart()
        g = rig.capture(case, k, rig.torch.cuda.graph_pool_handle(), keep_graph=True)
        handle = ctypes.c_void_p(g.raw_cuda_graph())
        n = ctypes.c_size_t(0)
        assert rt.cudaGraphGetNodes(handle, None, ctypes.byref(n)) == 0
        nodes = (ctypes.c_void_p * n.value)()
        assert rt.cudaGraphGetNodes(handle, nodes, ctypes.byref(n)) == 0
        counts: dict[str, int] = {}
        for node in nodes:
            t = ctypes.c_int(-1)
            assert rt.cudaGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(t)) == 0
            name = NODE_TYPES.get(t.value, str(t.value))
            counts[name] = counts.get(name, 0) + 1
        del g
        return counts
    except Exception as exc:  # the census is a check; the file keeps the reason
        return f"{type(exc).__name__}: {exc}"


def one(rig: Rig, case: str, k: int, graphs: int) -> dict[str, Any]:
    torch = rig.torch
    # kernels loaded, events made; the graph is kept, so that its driver memory is not freed
    # into the pool the measured graphs then draw from
    warm = rig.capture(case, k, torch.cuda.graph_pool_handle())
    warm.replay()
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()
    pool = torch.cuda.graph_pool_handle()
    free0, res0 = torch.cuda.mem_get_info()[0], torch.cuda.memory_reserved()
    t0 = time.perf_counter()
    kept = [rig.capture(case, k, pool) for _ in range(graphs)]
    for g in kept:
        g.replay()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    free1, res1 = torch.cuda.mem_get_info()[0], torch.cuda.memory_reserved()
    delta, reserved = free0 - free1, res1 - res0
    del kept, warm
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return {"case": case, "k": k, "graphs": graphs, "free_delta_bytes": delta,
            "reserved_delta_bytes": reserved, "driver_bytes": delta - reserved,
            "driver_bytes_per_graph": (delta - reserved) / graphs,
            "returned_bytes": torch.cuda.mem_get_info()[0] - free1, "seconds": round(seconds, 2),
            "nodes_one_graph": census(rig, case, k)}


def _env() -> dict[str, Any]:
    import torch

    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        smi = f"nvidia-smi failed: {exc}"
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name(), "nvidia_smi": smi,
            "command": "PYTHONPATH=. python recorders/gpu_graph_mixing_topology.py --out $OUT"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--graphs", type=int, default=GRAPHS)
    ap.add_argument("--one", nargs=2, metavar=("CASE", "K"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:  # a child: one case, its record on stdout
        print(json.dumps(one(Rig(), args.one[0], int(args.one[1]), args.graphs)), flush=True)
        return 0
    if args.out is None:
        ap.error("--out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"about": __doc__, "machine": _env(), "runs": []}
    path = args.out / "graph-mixing-topology.json"
    for k in KS:
        for case in CASES:
            proc = subprocess.run([sys.executable, __file__, "--one", case, str(k),
                                   "--graphs", str(args.graphs)],
                                  capture_output=True, text=True, timeout=120)
            lines = proc.stdout.strip().splitlines()
            run: dict[str, Any] = (json.loads(lines[-1]) if proc.returncode == 0 and lines
                                   else {"case": case, "k": k, "returncode": proc.returncode,
                                         "error": proc.stderr[-2000:]})
            doc["runs"].append(run)
            print(json.dumps(run), flush=True)
            path.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
