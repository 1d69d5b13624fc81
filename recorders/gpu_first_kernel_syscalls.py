# The recorder of reports/gpu/context/first-kernel-syscalls-h100.json (which module load pays the
# first-kernel step, one H100), laid out one statement a line: the same program, statement for
# statement (the same Python AST), as the compressed script that ran, kept verbatim beside the
# golden (reports/gpu/context/gpu_first_kernel_syscalls.as-run.py; its sha256 is in the README).
# Run on the GPU machine as `python3 recorders/gpu_first_kernel_syscalls.py OUT_DIR`: each variant
# a fresh process; f:K loads the K-th fatbin of torch 2.11.0+cu130's libtorch_cuda.so (F: its file
# offset and length, read from the PyPI wheel, whose libtorch_cuda.so is the machine's byte for
# byte) through cuModuleLoadData, then loads every function of it (cuModuleEnumerateFunctions,
# cuFuncLoad); fifo:N / heap:N set CU_LIMIT_PRINTF_FIFO_SIZE / CU_LIMIT_MALLOC_HEAP_SIZE
# (cuCtxSetLimit); each step records used - torch reserved and the stack, FIFO and heap limits.
# Modules: 293 (14.6 MB sm_90 image, no __assertfail or vprintf), 246 (15 KB, __assertfail),
# 134 (19 KB, vprintf), 443 (4.5 KB, neither), 223 (the fill kernel's, 2.2 MB, __assertfail).
# ruff: noqa: E401, I001, E741, SIM115, UP034
import ctypes as C, json, os, sys, subprocess as S

F = {
    293: (277682560, 4435176),
    246: (228989392, 16392),
    134: (159080712, 20248),
    443: (370630472, 8304),
    223: (211692296, 320832),
}


def ch(spec):
    import torch as T

    def n():
        T.cuda.synchronize()
        f, t = T.cuda.mem_get_info()
        return t - f - T.cuda.memory_reserved()

    k = [T.empty(1024, device="cuda")]
    o = {"steps": spec, "context": n(), "d": []}
    cu = C.CDLL("libcuda.so.1")
    D = open(os.path.dirname(T.__file__) + "/lib/libtorch_cuda.so", "rb").read()

    def lim():
        r = []
        for i in (0, 1, 2):
            v = C.c_size_t()
            cu.cuCtxGetLimit(C.byref(v), i)
            r.append(v.value)
        return r

    for x in spec.split(","):
        a, _, v = x.partition(":")
        b = n()
        e = []
        if a == "zeros":
            k.append(T.zeros(1024, device="cuda"))
        if a in ("fifo", "heap"):
            e.append(cu.cuCtxSetLimit(1 if a == "fifo" else 2, C.c_size_t(int(v))))
        if a == "f":
            p, l = F[int(v)]
            B = C.create_string_buffer(D[p : p + l], l)
            k.append(B)
            m = C.c_void_p()
            e.append(cu.cuModuleLoadData(C.byref(m), B))
            e.append(n() - b)
            c = C.c_uint()
            cu.cuModuleGetFunctionCount(C.byref(c), m)
            A = (C.c_void_p * c.value)()
            cu.cuModuleEnumerateFunctions(A, c, m)
            e.append(c.value)
            e.append(sum((cu.cuFuncLoad(A[i]) != 0 for i in range(c.value))))
        o["d"].append([x, n() - b, e, lim()])
    return o


if sys.argv[1] == "-c":
    print(json.dumps(ch(sys.argv[2])))
    sys.exit()
R = []
for v in [
    "f:293,zeros",
    "f:246,zeros",
    "f:134,zeros",
    "f:443,zeros",
    "f:223,zeros",
    "fifo:67108864,zeros",
    "fifo:1048576,f:246,zeros",
    "heap:67108864,zeros",
    "zeros,f:293,f:246",
]:
    p = S.run([sys.executable, __file__, "-c", v], capture_output=True, text=True)
    R.append(
        json.loads(p.stdout.split("\n")[-2])
        if p.returncode == 0
        else {"steps": v, "err": p.stderr[-1500:]}
    )
    print(json.dumps(R[-1]), flush=True)
json.dump(R, open(sys.argv[1] + "/assert-modules.json", "w"), indent=1)
