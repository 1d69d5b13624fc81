# The recorder of reports/gpu/nccl-later/ (later NCCL communicators of one process, 4x H100),
# laid out one statement a line: the same program, statement for statement (the same Python AST),
# as the compressed script that ran, kept verbatim with its sha256 in the golden beside it
# (reports/gpu/nccl-later/gpu_nccl_later_comm.as-run.py). Run per case under torchrun with CASE
# and D (the output folder) set; reports/gpu/nccl-later/README.md gives the cases and environment.
# ruff: noqa: E401, I001, E741, SIM115, E731
import ctypes as C, json, os, torch, torch.distributed as d

r = int(os.environ["RANK"])
K = os.environ["CASE"]
torch.cuda.set_device(r)
P = C.c_void_p
N = C.c_size_t
S = []


def st(n):
    torch.cuda.synchronize()
    f, t = torch.cuda.mem_get_info()
    S.append([n, t - f - torch.cuda.memory_reserved()])


torch.empty(1, device="cuda")
st("context")
torch.zeros(1, device="cuda")
st("first kernel")
x = torch.zeros(1 << 22, device="cuda")
d.init_process_group("nccl")
w = d.new_group(backend="gloo")
st("init_process_group")
L = C.CDLL(
    ([l.split()[-1] for l in open("/proc/self/maps") if "libnccl.so" in l] + ["libnccl.so.2"])[0]
)


class U(C.Structure):
    _fields_ = [("b", C.c_byte * 128)]


L.ncclCommInitRank.argtypes = [C.POINTER(P), C.c_int, U, C.c_int]
s_ = lambda: P(torch.cuda.current_stream().cuda_stream)
V = lambda t: P(t.data_ptr())


class G:
    def __init__(s, rl, n):
        for g in rl:
            d.new_group(g, backend="nccl")
            c = d.new_group(g, backend="gloo")
            if r in g:
                s.g, q = g, c
        st(n + " new_group")
        s.i = s.g.index(r)
        u = U()
        if s.i == 0:
            L.ncclGetUniqueId(C.byref(u))
        o = [bytes(u.b)]
        d.broadcast_object_list(o, src=s.g[0], group=q)
        C.memmove(C.byref(u), o[0], 128)
        s.c = P()
        assert L.ncclCommInitRank(C.byref(s.c), len(s.g), u, s.i) == 0
        st(n + " init")
        z = torch.zeros(1, device="cuda")
        s.ar(z)
        st(n + " warm-up")

    def ar(s, t):
        assert L.ncclAllReduce(V(t), V(t), N(t.numel()), 7, 0, s.c, s_()) == 0

    def pp(s, a):
        assert (L.ncclSend if s.i == a else L.ncclRecv)(
            V(x), N(x.numel()), 7, 1 - s.i, s.c, s_()
        ) == 0
        st(f"PP p2p from {a}")


T, X = [[0, 1], [2, 3]], [[0, 2], [1, 3]]
k = K.split("-")[0]


def pp():
    p = G(X, "PP")
    p.pp(0)
    p.pp(1)


if k == "pp":
    G(T, "TP")
    pp()
if k == "ppfirst":
    pp()
    G(T, "TP")
if k == "dp":
    G(T, "TP")
    q = G(X, "DP")
    G([[0, 1, 2, 3]], "EP")
    q.ar(x)
    st("DP all_reduce")
json.dump(
    {
        "case": K,
        "rank": r,
        "torch": torch.__version__,
        "nccl": torch.cuda.nccl.version(),
        "steps": S,
    },
    open(f"{os.environ['D']}/{K}-{r}.json", "w"),
)
d.barrier(group=w)
