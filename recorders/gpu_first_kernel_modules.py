# The recorder of reports/gpu/context/first-kernel-modules-h100.json (what the process's first
# torch kernel pays, one H100), laid out one statement a line: the same program, statement for
# statement (the same Python AST), as the compressed script that ran, kept verbatim beside the
# golden (reports/gpu/context/gpu_first_kernel_modules.as-run.py; its sha256 is in the README).
# Run on the GPU machine as `python3 recorders/gpu_first_kernel_modules.py OUT_DIR`: each variant a
# fresh process (context = torch.empty, no kernel), then its steps, reading used - torch reserved:
# zeros / add (torch kernels), ptxload / ptxrun (a one-store PTX kernel through cuModuleLoadData
# and cuLaunchKernel), tv (import torchvision), linalg (dlopen libtorch_cuda_linalg.so); then a
# CUDA C++ program with no torch (nvcc, -cudart static and shared): context, first and second
# kernel.
# ruff: noqa: E401, I001, E741, SIM115, E402, F401
import ctypes as C, json, os, subprocess as S, sys, hashlib

K = dict(capture_output=True, text=True)
P = (
    b'.version 7.0\n.target sm_80\n.address_size 64\n'
    b'.visible .entry k(.param .u64 p){.reg .b64 %rd<3>;.reg .b32 %r<2>;'
    b'ld.param.u64 %rd1,[p];cvta.to.global.u64 %rd2,%rd1;mov.u32 %r1,7;'
    b'st.global.u32 [%rd2],%r1;ret;}\x00'
)
Q = (
    '#include <cstdio>\n__global__ void k1(int*p){p[0]=1;}__global__ void k2(int*p){p[1]=2;'
    '}\nsize_t u(){size_t f,t;cudaMemGetInfo(&f,&t);return t-f;}\nint main(){int*p;'
    'cudaMalloc(&p,64);size_t a=u();k1<<<1,1>>>(p);cudaDeviceSynchronize();size_t b=u();'
    'k2<<<1,1>>>(p);cudaDeviceSynchronize();printf("[%zu,%zu,%zu]\\n",a,b-a,u()-b);}'
)
D = "cuda"


def ch(spec):
    import torch as T

    def n():
        T.cuda.synchronize()
        f, t = T.cuda.mem_get_info()
        return t - f - T.cuda.memory_reserved()

    k = [T.empty(1024, device=D)]
    o = {"steps": spec, "context": n(), "d": []}
    cu = C.CDLL("libcuda.so.1")
    m, f = (C.c_void_p(), C.c_void_p())
    for s in spec.split(","):
        b = n()
        r = 0
        if s == "zeros":
            k.append(T.zeros(1024, device=D))
        if s == "add":
            a = T.empty(1024, device=D)
            k.append(a + a)
        if s == "ptxload":
            r = cu.cuModuleLoadData(C.byref(m), C.c_char_p(P))
        if s == "ptxrun":
            r = cu.cuModuleGetFunction(C.byref(f), m, b"k")
            x = C.c_uint64(k[0].data_ptr())
            q = (C.c_void_p * 1)(C.cast(C.byref(x), C.c_void_p))
            r = r or cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, None, q, None)
        if s == "tv":
            import torchvision
        if s == "linalg":
            C.CDLL(os.path.dirname(T.__file__) + "/lib/libtorch_cuda_linalg.so")
        o["d"].append([s, n() - b, r])
    return o


if sys.argv[1] == "-c":
    print(json.dumps(ch(sys.argv[2])))
    sys.exit()
O = sys.argv[1]
R = []
for v, e in [
    ("zeros,add", {}),
    ("ptxload,ptxrun,zeros,add", {}),
    ("tv,zeros", {}),
    ("linalg,zeros", {}),
    ("zeros", {"CUDA_MODULE_DATA_LOADING": "EAGER"}),
]:
    p = S.run([sys.executable, __file__, "-c", v], env={**os.environ, **e}, **K)
    R.append(
        json.loads(p.stdout.split("\n")[-2])
        if p.returncode == 0
        else {"steps": v, "err": p.stderr[-800:]}
    )
    R[-1]["env"] = e
    print(R[-1], flush=True)
G = []
open(O + "/p.cu", "w").write(Q)
for c in ["static", "shared"]:
    S.run(["nvcc", "-arch=sm_90", "-cudart=" + c, "-o", O + "/p" + c, O + "/p.cu"])
    G.append([c, json.loads(S.run([O + "/p" + c], **K).stdout)])
    os.remove(O + "/p" + c)
print(G)
import torch as T

L = os.path.dirname(T.__file__) + "/lib/libtorch_cuda.so"
json.dump(
    {
        "torch": T.__version__,
        "gpu": T.cuda.get_device_name(),
        "driver": S.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], **K
        ).stdout.strip(),
        "sha256": hashlib.sha256(open(L, "rb").read()).hexdigest(),
        "runs": R,
        "programs": G,
    },
    open(O + "/first-kernel-modules.json", "w"),
    indent=1,
)
