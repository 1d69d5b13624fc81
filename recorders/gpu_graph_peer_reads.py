"""Driver memory of CUDA graphs whose all-reduce stand-in reads a peer's buffer through CUDA IPC,
and of registering the graphs' pool segments with the peer, as vLLM's custom all-reduce does in
its capture context (torchrun, 2 ranks). reports/gpu/graph-peer-reads/README.md says why and how
it ran."""
import ctypes as C
import json
import os
import sys

import torch
import torch.distributed as dist
import triton
import triton.language as tl

M = 1 << 20
cu = C.CDLL("libcuda.so.1")
U = C.c_uint64
GRAPHS = int(os.environ.get("GRAPHS", "200"))
ROWS, HID = 64, 4096


class H(C.Structure):
    _fields_ = [("r", C.c_char * 64)]


def ok(code):
    assert code == 0, code


@triton.jit
def ar_like(out_ptr, in_ptr, other_addr, n, BLOCK: tl.constexpr):
    # out = in + other, where other is a raw device address (a peer's IPC-opened buffer or a
    # local one): one kernel node, as the custom all-reduce's reduce kernel is.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    other = other_addr.to(tl.pointer_type(tl.bfloat16))
    a = tl.load(in_ptr + offs, mask=m)
    b = tl.load(other + offs, mask=m)
    tl.store(out_ptr + offs, a + b, mask=m)


def ar(x, addr):
    out = torch.empty_like(x)
    n = x.numel()
    ar_like[(triton.cdiv(n, 1024),)](out, x, addr, n, BLOCK=1024)
    return out


def rd():
    torch.cuda.synchronize()
    f, t = torch.cuda.mem_get_info()
    return [t - f, torch.cuda.memory_reserved()]


def handle_of(ptr):
    base = U()
    ok(cu.cuPointerGetAttribute(C.byref(base), 11, U(ptr)))  # RANGE_START_ADDR
    h = H()
    ok(cu.cuIpcGetMemHandle(C.byref(h), base))
    return C.string_at(C.addressof(h), 64)


def open_peers(raws_by_rank, rank, cache):
    """Open every peer handle not opened before (the C++ side's ipc_handles_ cache)."""
    n = 0
    for peer, raws in enumerate(raws_by_rank):
        if peer == rank:
            continue
        for raw in raws:
            if raw in cache:
                continue
            h, p = H(), U()
            C.memmove(C.addressof(h), raw, 64)
            ok(cu.cuIpcOpenMemHandle_v2(C.byref(p), h, C.c_uint(1)))  # lazy peer access
            cache[raw] = p.value
            n += 1
    return n


def body(x, nodes, addr):
    y = x * 1
    for _ in range(nodes - 1):
        y = y + 1
    return ar(y, addr)


def case(name, nodes, addr, register, rank, world, cache, keep):
    x = torch.ones(ROWS, HID, dtype=torch.bfloat16, device="cuda")
    body(x, nodes, addr)  # eager warm-up (Triton compiled before the window)
    torch.cuda.synchronize()
    dist.barrier()
    r = [rd()]
    pool = torch.cuda.graph_pool_handle()
    graphs, ins = [], []
    for _ in range(GRAPHS):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            y = x * 1
            for _ in range(nodes - 1):
                y = y + 1
            out = ar(y, addr)
        graphs.append(g)
        ins.append(y.data_ptr())
        keep.append(out)
    r.append(rd())
    opened = 0
    if register:
        raws = sorted({handle_of(p) for p in ins})
        g = [None] * world
        dist.all_gather_object(g, raws)
        opened = open_peers(g, rank, cache)
        dist.barrier()
        r.append(rd())
    for g in graphs:
        g.replay()
    r.append(rd())
    keep.append(graphs)
    return {"case": name, "nodes": nodes, "graphs": GRAPHS, "register": register,
            "handles_opened": opened, "readings": r,
            "driver_bytes": (r[-1][0] - r[0][0]) - (r[-1][1] - r[0][1]),
            "pool_bytes": r[-1][1] - r[0][1]}


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    torch.zeros(1, device="cuda")
    dist.init_process_group("gloo")
    s = torch.cuda.Stream()  # torch's stream pool made before every window
    with torch.cuda.stream(s):
        torch.zeros(1, device="cuda")
    g0 = torch.cuda.CUDAGraph()  # the process's first graph, before every window
    z = torch.zeros(8, device="cuda")
    with torch.cuda.graph(g0):
        z + 1
    local = torch.ones(ROWS * HID, dtype=torch.bfloat16, device="cuda")
    keep, cases, cache = [g0], [], {}
    r0 = rd()
    for nodes in (1, 32):
        cases.append(case("local, no peer access yet", nodes, local.data_ptr(), False, rank,
                          world, cache, keep))
    # the custom all-reduce's constructor: a buffer of each rank, opened by the others
    mine = torch.ones(ROWS * HID, dtype=torch.bfloat16, device="cuda")
    torch.cuda.synchronize()
    g = [None] * world
    dist.all_gather_object(g, [handle_of(mine.data_ptr())])
    open_peers(g, rank, cache)
    peer_addr = cache[g[1 - rank][0]]
    dist.barrier()
    r1 = rd()
    for nodes in (1, 32):
        cases.append(case("local, peer access on", nodes, local.data_ptr(), False, rank, world,
                          cache, keep))
        cases.append(case("peer read", nodes, peer_addr, False, rank, world, cache, keep))
        cases.append(case("peer read + register", nodes, peer_addr, True, rank, world, cache,
                          keep))
    rec = {"rank": rank, "torch": torch.__version__, "triton": triton.__version__,
           "cuda": torch.version.cuda, "argv": sys.argv,
           "open_first_buffer": [r0, r1], "cases": cases}
    print(json.dumps({"rank": rank, "summary": [(c["case"], c["nodes"], c["driver_bytes"],
                                                   c["pool_bytes"], c["handles_opened"])
                                                  for c in cases]}), flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), f"graph-peer-reads-rank{rank}.json"),
              "w") as f:
        json.dump(rec, f, indent=1)
    dist.barrier()


main()
