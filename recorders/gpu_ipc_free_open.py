"""Does an allocation a peer holds open through CUDA IPC give its memory back when its owner
frees it? reports/gpu/ipc-free-open/README.md says why and how it ran (torchrun, 2 ranks)."""
import ctypes as C
import json
import os

import torch
import torch.distributed as dist

M = 1 << 20
cu = C.CDLL("libcuda.so.1")
U = C.c_uint64


class H(C.Structure):
    _fields_ = [("r", C.c_char * 64)]


def ok(code):
    assert code == 0, code


def rd():
    torch.cuda.synchronize()
    f, t = torch.cuda.mem_get_info()
    return [t - f, torch.cuda.memory_reserved()]


def share(ptrs, rank, world):
    hs = []
    for p in ptrs:
        h = H()
        ok(cu.cuIpcGetMemHandle(C.byref(h), U(p)))
        hs.append(C.string_at(C.addressof(h), 64))
    g = [None] * world
    dist.all_gather_object(g, hs)
    out = []
    for peer, raws in enumerate(g):
        for raw in raws if peer != rank else []:
            h, p = H(), U()
            C.memmove(C.addressof(h), raw, 64)
            ok(cu.cuIpcOpenMemHandle_v2(C.byref(p), h, C.c_uint(1)))  # lazy peer access
            out.append(p.value)
    dist.barrier()
    return out


def close(opened):
    codes = [cu.cuIpcCloseMemHandle(U(p)) for p in opened]
    dist.barrier()
    return codes


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    torch.zeros(1, device="cuda")
    dist.init_process_group("gloo")
    cases = []
    r = [rd()]
    mine = []
    for _ in range(4):
        p = U()
        ok(cu.cuMemAlloc_v2(C.byref(p), C.c_size_t(20 * M)))
        mine.append(p.value)
    r.append(rd())
    opened = share(mine, rank, world)
    r.append(rd())
    freed = [cu.cuMemFree_v2(U(p)) for p in mine]
    dist.barrier()
    r.append(rd())
    shut = close(opened)
    r.append(rd())
    cases.append({"kind": "driver 4 x 20 MiB", "readings": r, "codes": freed + shut})
    x = torch.ones(32 * M, dtype=torch.bfloat16, device="cuda")
    x * 2
    torch.cuda.empty_cache()
    r = [rd()]
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=torch.cuda.graph_pool_handle()):
        y = x * 2
    r.append(rd())
    base = U()
    ok(cu.cuPointerGetAttribute(C.byref(base), 11, U(y.data_ptr())))  # RANGE_START_ADDR
    opened = share([base.value], rank, world)
    r.append(rd())
    del g, y
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    dist.barrier()
    r.append(rd())
    shut = close(opened)
    r.append(rd())
    cases.append({"kind": "graph pool 64 MiB", "readings": r, "codes": shut})
    rec = {"rank": rank, "cases": cases, "torch": torch.__version__}
    print(json.dumps(rec), flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), f"ipc-free-open-rank{rank}.json"),
              "w") as f:
        json.dump(rec, f, indent=1)


main()
