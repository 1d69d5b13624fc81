"""Why the traced CUDA-graph pool at tensor parallelism is 2-3.7x memprof's graph model, and why
the profile run adds less non-torch memory on a rank that holds an NCCL communicator: three
sections, each a separate launch (issue 25, reports/gpu/ranks/README.md).

``steps`` (one process, or one per GPU under torchrun): non-torch memory (``used − reserved``)
and the CUDA runtime's per-thread stack limit (``cudaDeviceGetLimit(cudaLimitStackSize)``,
which sizes the local-memory reservation the driver makes for every resident thread) after
each step: the CUDA context, then (under torchrun) ``init_process_group`` bound to the GPU and
a one-element all_reduce, then the first bf16 GEMM and each op the trace's profile run issues
(``memprof/trace/replica.py``), then a Triton kernel if Triton is installed::

    python recorders/gpu_graph_collectives_scaling.py steps --out DIR
    torchrun --nproc-per-node 2 recorders/gpu_graph_collectives_scaling.py steps --out DIR

``scaling`` (torchrun, two or more GPUs): G graphs of k nodes each (k = 1, 8, 32, 128), every
case in its own private pool on one side stream, every graph kept alive; per case the
``mem_get_info`` delta, the ``memory_reserved`` delta (the pool's tensors) and the difference
(the driver's part). A node is ``y = x.clone(); all_reduce(y)`` as the trace issues it
(``impl`` c10d: ``dist.all_reduce``, ProcessGroupNCCL on its own stream), an out-of-place
``ncclAllReduce`` on the capture stream through ctypes as vLLM's PyNccl issues it (pynccl), or
the clone alone (local); before each node nothing (none), an elementwise op (add), a bf16
GEMM with a square weight (mm) or GEMM, SiLU, GEMM (mlp)::

    torchrun --nproc-per-node 2 recorders/gpu_graph_collectives_scaling.py scaling --out DIR

``replica`` (torchrun): ``memprof trace`` of a TP deployment with the replica's all-reduce
swapped for ``--impl`` (c10d: unchanged; pynccl; local: the clone, no collective), so the
model's own graphs say which part of the node costs the driver memory::

    torchrun --nproc-per-node 2 recorders/gpu_graph_collectives_scaling.py replica \
        --impl pynccl -- --model qwen3-0.6b -tp 2 --max-num-seqs 64 --gpu H100 -f json

``--cpu`` runs ``steps`` and ``scaling`` eagerly over gloo without capturing (a check of the
control flow on a machine without GPUs). Each rank writes ``<section>-rank<r>.json`` under
``--out`` as it goes; NVLink multicast must be off in the environment (``NCCL_NVLS_ENABLE=0``).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

KS = (1, 8, 32, 128)
IMPLS = ("local", "c10d", "pynccl")
BETWEEN = ("none", "add", "mm")  # also "mlp" (GEMM, SiLU, GEMM), asked for by --between


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def _nccl_lib() -> Any:
    """The libnccl torch loaded (vLLM's ``find_nccl_library`` gives libnccl.so.2 likewise)."""
    with open("/proc/self/maps") as f:
        paths = [ln.split()[-1] for ln in f if "libnccl.so" in ln]
    lib = ctypes.CDLL(paths[0] if paths else "libnccl.so.2")
    lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(NcclUniqueId)]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                                     NcclUniqueId, ctypes.c_int]
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    return lib


def _pynccl() -> Callable[[Any], Any]:
    """A communicator of its own over the default group's ranks (the unique id through the
    default store), warmed up with a one-element all_reduce as PyNccl's constructor does; returns
    an out-of-place all-reduce on the current stream."""
    import torch
    import torch.distributed as dist

    lib = _nccl_lib()
    rank, world = dist.get_rank(), dist.get_world_size()
    holder: list[Any] = []
    if rank == 0:
        uid = NcclUniqueId()
        assert lib.ncclGetUniqueId(ctypes.byref(uid)) == 0
        holder = [bytes(uid)]
    else:
        holder = [None]
    dist.broadcast_object_list(holder, src=0)
    uid = NcclUniqueId.from_buffer_copy(holder[0])
    comm = ctypes.c_void_p()
    assert lib.ncclCommInitRank(ctypes.byref(comm), world, uid, rank) == 0

    def all_reduce(x: Any) -> Any:
        out = torch.empty_like(x)
        dt = {torch.float32: 7, torch.float16: 6, torch.bfloat16: 9}[x.dtype]  # nccl.h
        rc = lib.ncclAllReduce(x.data_ptr(), out.data_ptr(), x.numel(), dt, 0, comm,
                               torch.cuda.current_stream().cuda_stream)
        assert rc == 0, rc
        return out

    all_reduce(torch.ones(1, device="cuda"))
    torch.cuda.synchronize()
    return all_reduce


def _cudart() -> Any:
    """libcudart as torch loaded it (for cudaDeviceGetLimit), or None."""
    with open("/proc/self/maps") as f:
        paths = sorted({ln.split()[-1] for ln in f if "libcudart.so" in ln})
    try:
        return ctypes.CDLL(paths[0] if paths else "libcudart.so")
    except OSError:
        return None


class Meter:
    """Non-torch bytes, reserved bytes and the stack limit of this process's GPU."""

    def __init__(self, cpu: bool) -> None:
        self.cpu = cpu
        self.rt = None if cpu else _cudart()

    def read(self) -> dict[str, int | None]:
        if self.cpu:
            return {"used": None, "reserved": None, "non_torch": None, "stack_limit": None}
        import torch

        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        res = torch.cuda.memory_reserved()
        stack = None
        if self.rt is not None:
            v = ctypes.c_size_t()
            if self.rt.cudaDeviceGetLimit(ctypes.byref(v), 0) == 0:  # cudaLimitStackSize
                stack = int(v.value)
        return {"used": total - free, "reserved": res, "non_torch": total - free - res,
                "stack_limit": stack}


def _write(out: Path, name: str, doc: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(json.dumps(doc, indent=1) + "\n")


def _env() -> dict[str, Any]:
    import torch

    nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "nccl": nccl,
            "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
            "env": {k: v for k, v in os.environ.items()
                    if k.startswith(("NCCL_", "TORCH_NCCL", "CUDA_", "WORLD_SIZE"))},
            "argv": sys.argv}


def _init(cpu: bool) -> tuple[int, int]:
    """(rank, world) from torchrun's environment; the default group started when world > 1."""
    import torch
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if not cpu:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if world > 1 and not dist.is_initialized():
        if cpu:
            dist.init_process_group("gloo")
        else:
            dev = torch.device("cuda", torch.cuda.current_device())
            dist.init_process_group("nccl", device_id=dev)
    return rank, world


# --- steps ---------------------------------------------------------------------------------
def steps(args: argparse.Namespace) -> None:
    import torch
    import torch.nn.functional as F

    dev = "cpu" if args.cpu else "cuda"
    m = Meter(args.cpu)
    rows: list[dict[str, Any]] = []
    rank = int(os.environ.get("RANK", "0"))

    def step(name: str) -> None:
        rows.append({"after": name, **m.read()})
        _write(args.out, f"steps-w{os.environ.get('WORLD_SIZE', '1')}-rank{rank}.json",
               {**_env(), "steps": rows})

    if not args.cpu:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    keep = [torch.empty(1, device=dev)]
    step("context (first tensor)")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import torch.distributed as dist

        _init(args.cpu)
        step("init_process_group (bound to the GPU)")
        w = torch.zeros(1, device=dev)
        dist.all_reduce(w)
        step("first all_reduce (1 element)")
    h, v, t = 1024, 151936 // 2, 64
    x = torch.randn(t, h, device=dev, dtype=torch.bfloat16)
    wt = torch.randn(3 * h, h, device=dev, dtype=torch.bfloat16)
    keep += [x, wt]
    emb = torch.randn(v // 8, h, device=dev, dtype=torch.bfloat16)
    ops: list[tuple[str, Callable[[], Any]]] = [
        ("first bf16 GEMM (F.linear)", lambda: F.linear(x, wt)),
        ("torch.zeros int64", lambda: torch.zeros(t, dtype=torch.int64, device=dev)),
        ("F.embedding", lambda: F.embedding(torch.zeros(t, dtype=torch.int64, device=dev), emb)),
        ("torch.zeros bf16 (fill)", lambda: torch.zeros(t, h, dtype=torch.bfloat16, device=dev)),
        ("clone (copy kernel)", lambda: x.clone()),
        ("add (elementwise)", lambda: torch.add(x, 1.0)),
        ("narrow().contiguous()", lambda: x.narrow(0, 1, t - 1).contiguous()),
        ("float() (bf16 → fp32)", lambda: x.float()),
        ("softmax fp32 (vocab rows)",
         lambda: torch.softmax(torch.randn(t, v, device=dev), dim=-1)),
        ("exponential_", lambda: torch.empty(t, v, device=dev).exponential_()),
        ("topk", lambda: torch.topk(torch.randn(t, v, device=dev), 20, dim=-1)),
        ("argmax", lambda: torch.randn(t, v, device=dev).argmax(dim=-1)),
    ]
    for name, fn in ops:
        r = fn()
        del r
        step(name)
    try:
        import triton
        import triton.language as tl

        @triton.jit  # type: ignore[untyped-decorator,misc]
        def add_one(p, n, block: tl.constexpr):  # type: ignore[no-untyped-def]
            i = tl.program_id(0) * block + tl.arange(0, block)
            tl.store(p + i, tl.load(p + i, mask=i < n) + 1, mask=i < n)

        if not args.cpu:
            y = torch.empty(4096, device=dev)  # no fill kernel: only Triton's launch is new
            add_one[(4,)](y, 4096, block=1024)
            step("first Triton kernel (torch.empty input)")
    except Exception as exc:  # no Triton, or its compiler missing: recorded, not fatal
        rows.append({"after": "first Triton kernel", "error": f"{type(exc).__name__}: {exc}"[:300]})
        step("(after the Triton attempt)")
    del keep


# --- scaling -------------------------------------------------------------------------------
def scaling(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    rank, world = _init(args.cpu)
    dev = "cpu" if args.cpu else "cuda"
    m = Meter(args.cpu)
    w0 = torch.ones(1, device=dev)
    dist.all_reduce(w0)
    impls = [i for i in args.impls.split(",") if not (args.cpu and i == "pynccl")]
    pyn = _pynccl() if "pynccl" in impls else None
    h = args.hidden
    dt = torch.float32 if args.cpu else torch.bfloat16
    weight = torch.randn(h, h, device=dev, dtype=dt) / h
    stream = None if args.cpu else torch.cuda.Stream()
    rows: list[dict[str, Any]] = []
    keep: list[Any] = []

    def node(impl: str, between: str, x: Any) -> Any:
        if between == "mm":
            x = F.linear(x, weight)
        elif between == "add":
            x = torch.add(x, 1.0)
        elif between == "mlp":  # a dense MLP's kernels: GEMM, activation, GEMM
            x = F.linear(torch.nn.functional.silu(F.linear(x, weight)), weight)
        if impl == "pynccl":
            assert pyn is not None
            return pyn(x)
        y = x.clone()
        if impl == "c10d":
            dist.all_reduce(y)
        return y

    for impl in impls:
        for between in args.between.split(","):
            for k in (int(s) for s in args.ks.split(",")):
                row: dict[str, Any] = {"impl": impl, "between": between, "k": k,
                                       "graphs": args.graphs, "tokens": args.tokens, "hidden": h}
                x = torch.ones(args.tokens, h, device=dev, dtype=dt)
                y = x
                for _ in range(k):  # eager warm-up of the same chain
                    y = node(impl, between, y)
                del y
                if args.cpu:
                    rows.append(row)
                    continue
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
                a = m.read()
                pool = torch.cuda.graph_pool_handle()
                graphs = []
                t0 = time.perf_counter()
                with torch.cuda.stream(stream):
                    for _ in range(args.graphs):
                        g = torch.cuda.CUDAGraph()
                        g.capture_begin(pool=pool)
                        y = x
                        for _ in range(k):
                            y = node(impl, between, y)
                        g.capture_end()
                        graphs.append(g)
                        del y
                torch.cuda.synchronize()
                b = m.read()
                assert a["used"] is not None and b["used"] is not None
                assert a["reserved"] is not None and b["reserved"] is not None
                total = b["used"] - a["used"]
                tensors = b["reserved"] - a["reserved"]
                row.update(capture_s=round(time.perf_counter() - t0, 3), total_bytes=total,
                           tensors_bytes=tensors, driver_bytes=total - tensors,
                           driver_per_graph=(total - tensors) / args.graphs)
                keep.append((graphs, x))
                rows.append(row)
                _write(args.out, f"scaling{args.tag}-rank{rank}.json", {**_env(), "cases": rows})
                if rank == 0:
                    print(f"{impl:7} {between:4} k={k:4} driver/graph "
                          f"{row['driver_per_graph'] / 1024:9.1f} KiB tensors "
                          f"{tensors / 2**20:7.1f} MiB", flush=True)
    _write(args.out, f"scaling{args.tag}-rank{rank}.json", {**_env(), "cases": rows})
    if world > 1:
        dist.barrier()


# --- replica -------------------------------------------------------------------------------
def replica(args: argparse.Namespace, trace_args: list[str]) -> int:
    from memprof.cli import run as cli
    from memprof.trace.replica import Replica

    impl = args.impl
    state: dict[str, Any] = {}
    original = Replica.all_reduce

    def all_reduce(self: Replica, x: Any) -> Any:
        if impl == "c10d" or self.group is None:
            return original(self, x)
        if impl == "local":
            return x.clone()
        if "pynccl" not in state:  # first call: the profile run, outside any capture
            state["pynccl"] = _pynccl()
        return state["pynccl"](x)

    Replica.all_reduce = all_reduce  # type: ignore[method-assign]
    return cli(["trace", *trace_args,
                *([] if "--device" in trace_args else ["--device", "cuda"])])


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("section", choices=("steps", "scaling", "replica"))
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--cpu", action="store_true", help="gloo, no capture (control-flow check)")
    ap.add_argument("--graphs", type=int, default=64, help="graphs per scaling case")
    ap.add_argument("--ks", default=",".join(map(str, KS)))
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--between", default=",".join(BETWEEN))
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--tag", default="", help="scaling: a suffix of the file name")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--impl", choices=IMPLS, default="c10d", help="replica: the all-reduce")
    argv = sys.argv[1:]
    rest: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1:]
    args = ap.parse_args(argv)
    if args.section == "steps":
        steps(args)
    elif args.section == "scaling":
        scaling(args)
    else:
        return replica(args, rest)
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
