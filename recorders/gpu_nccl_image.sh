# The first NCCL communicator's device memory by transport and channel count, with NCCL's own
# allocation log (reports/gpu/nccl-image): run on a host with two GPUs, torch with CUDA and
# torchrun, $OUT a writable folder (each rank's NCCL log lands there; the RES lines go to stdout).
# The communicator is PyNccl's shape: ctypes ncclCommInitRank and ncclAllReduce on torch's
# current stream, made after the CUDA context, the first fill kernel and torch.cuda.Stream().
cat > /tmp/r.py <<'P'
import ctypes as C,os,json,torch,torch.distributed as d
r=int(os.environ["RANK"]);torch.cuda.set_device(r);d.init_process_group("gloo")
f=lambda:torch.cuda.mem_get_info()[0];R=torch.cuda.memory_reserved;S=torch.cuda.synchronize
x=torch.zeros(4096,device="cuda");s=torch.cuda.Stream();S()
p=[l.split()[-1] for l in open("/proc/self/maps") if "libnccl.so" in l]+["libnccl.so.2"]
L=C.CDLL(p[0])
class U(C.Structure):_fields_=[("b",C.c_byte*128)]
L.ncclCommInitRank.argtypes=[C.POINTER(C.c_void_p),C.c_int,U,C.c_int]
u=U()
if r==0:L.ncclGetUniqueId(C.byref(u))
o=[bytes(u.b)];d.broadcast_object_list(o,0);C.memmove(C.byref(u),o[0],128)
c=C.c_void_p();m={};a=f();d.barrier()
L.ncclCommInitRank(C.byref(c),2,u,r);S();m["init"]=a-f()
def ar(t):
 y=torch.empty_like(t);L.ncclAllReduce(C.c_void_p(t.data_ptr()),C.c_void_p(y.data_ptr()),C.c_size_t(t.numel()),7,0,c,C.c_void_p(torch.cuda.current_stream().cuda_stream));return y
a=f();ar(x);S();m["first_ar"]=a-f()
def body(n):
 y=x*1
 for _ in range(n):y=ar(y)*1
 return y
gs=[];cs=torch.cuda.Stream()
with torch.cuda.stream(cs):body(2)
S();pl=torch.cuda.graph_pool_handle()
for n in (1,0,8):
 a,b=f(),R()
 for _ in range(50 if n!=1 else 1):
  g=torch.cuda.CUDAGraph()
  with torch.cuda.graph(g,pool=pl,stream=cs):body(n)
  gs.append(g)
 S();m[f"g_n{n}"]=(a-f())-(R()-b)
v=C.c_int();L.ncclGetVersion(C.byref(v));m.update(r=r,v=v.value)
print("RES",os.environ["CASE"],json.dumps(m),flush=True)
P
B="NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALLOC"
run(){ env $B CASE=$1 NCCL_DEBUG_FILE=$OUT/$1.%p.log ${@:2} timeout 60 torchrun --nproc_per_node 2 /tmp/r.py 2>&1|grep -E "^RES|Error"|head -6; }
X="NCCL_MIN_NCHANNELS=2 NCCL_MAX_NCHANNELS=2"
run shm-c2 NCCL_P2P_DISABLE=1 $X
run shm-def NCCL_P2P_DISABLE=1
run shm-c2-noras NCCL_P2P_DISABLE=1 $X NCCL_RAS_ENABLE=0
run p2p-c4 NCCL_MIN_NCHANNELS=4 NCCL_MAX_NCHANNELS=4
nvidia-smi topo -m >$OUT/topo.txt
