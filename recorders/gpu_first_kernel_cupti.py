# The recorder of reports/gpu/context/first-kernel-cupti-h100.json (which modules the process's
# first torch kernel loads, one H100), laid out one statement a line: the same program, statement
# for statement (the same Python AST), as the compressed script that ran, kept verbatim beside the
# golden (reports/gpu/context/gpu_first_kernel_cupti.as-run.py; its sha256 is in the README).
# Run on the GPU machine as `python3 recorders/gpu_first_kernel_cupti.py OUT_DIR`: each variant a
# fresh process; after the context it subscribes to CUPTI's resource callbacks
# (CUPTI_CB_DOMAIN_RESOURCE = 3, CUPTI_CBID_RESOURCE_MODULE_LOADED = 6: cupti_callbacks.h) and
# records, for each step, used - torch reserved and every module the driver loaded (its cubin's
# size, its kernel count, the sha256 prefix of its cubin and its first kernel's name).
# ruff: noqa: E401, I001, E741, SIM115, E402, UP034, RUF059
import ctypes as C, json, os, sys, hashlib, struct, glob, subprocess as S


def ch(spec):
    import torch as T

    def n():
        T.cuda.synchronize()
        f, t = T.cuda.mem_get_info()
        return t - f - T.cuda.memory_reserved()

    k = [T.empty(1024, device="cuda")]
    o = {"steps": spec, "context": n(), "d": []}
    L = []
    G = glob.glob(os.path.dirname(T.__file__) + "/../nvidia/cu*/lib/libcupti.so*") + glob.glob(
        "/usr/local/cuda*/**/libcupti.so*", recursive=True
    )
    o["cupti"] = G[0]
    cu = C.CDLL(G[0])

    def cb(u, d, i, p):
        if d == 3 and i == 6:
            r = C.cast(p, C.POINTER(C.c_void_p * 3))[0][2]
            m, z, q = struct.unpack("<IxxxxQQ", C.string_at(r, 24))
            L.append(C.string_at(q, z))

    F = C.CFUNCTYPE(None, C.c_void_p, C.c_int, C.c_uint, C.c_void_p)(cb)
    s = C.c_void_p()
    b = n()
    o["sub"] = [cu.cuptiSubscribe(C.byref(s), F, None), cu.cuptiEnableCallback(1, s, 3, 6)]
    o["d"].append(["cupti", n() - b, []])
    for x in spec.split(","):
        b = n()
        L.clear()
        if x == "zeros":
            k.append(T.zeros(1024, device="cuda"))
        if x == "add":
            a = T.empty(1024, device="cuda")
            k.append(a + a)
        if x == "blas":
            T.cuda.current_blas_handle()
        if x == "mm":
            a = T.empty(256, 256, device="cuda", dtype=T.bfloat16)
            k.append(a @ a)
        M = []
        for c in L:
            nm = [w for w in c.split(b"\x00") if w.startswith(b".text.")]
            M.append(
                [
                    len(c),
                    len(nm),
                    hashlib.sha256(c).hexdigest()[:16],
                    nm[0][6:90].decode() if nm else "",
                ]
            )
        o["d"].append([x, n() - b, M])
    return o


if sys.argv[1] == "-c":
    print(json.dumps(ch(sys.argv[2])))
    sys.exit()
O = sys.argv[1]
R = []
for v in ["zeros,add", "add,zeros", "blas,mm,zeros"]:
    p = S.run([sys.executable, __file__, "-c", v], capture_output=True, text=True)
    R.append(
        json.loads(p.stdout.split("\n")[-2])
        if p.returncode == 0
        else {"steps": v, "err": p.stderr[-1500:]}
    )
    print(
        json.dumps([[d[0], d[1], len(d[2]), sum((m[0] for m in d[2]))] for d in R[-1].get("d", [])])
        if "d" in R[-1]
        else R[-1],
        flush=True,
    )
import torch as T

json.dump(
    {
        "torch": T.__version__,
        "gpu": T.cuda.get_device_name(),
        "driver": S.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        ).stdout.strip(),
        "runs": R,
    },
    open(O + "/cupti-modules.json", "w"),
    indent=1,
)
