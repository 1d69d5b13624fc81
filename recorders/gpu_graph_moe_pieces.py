# ruff: noqa  (the script as run, compressed into the command that ran it: its sha256 below the docstring is in the golden)
"""What a vLLM-style piecewise capture of a fused-MoE decoder stack costs on this GPU, as the
free-memory delta vLLM logs ("Graph capturing finished ..., took X GiB"), against memprof's
per-graph and per-node driver costs (``memprof.core.terms.cudagraph``).

A Qwen3-30B-A3B-shaped stack (hidden 2048, 32/4 heads of 128 with q/k RMSNorms, 128 experts of
768, top 8, bf16; one layer's weights for every layer), split at the attention op into
``layers + 1`` pieces. A piece (o_proj, add + RMSNorm, the router GEMM, the MoE, add + RMSNorm,
qkv, the q/k norms, the rotary embedding) is compiled by Inductor (``c``, dynamic batch) or run
eagerly (``e``); the MoE is an opaque custom op run eagerly inside the piece, as vLLM's
``torch.ops.vllm.moe_forward`` is, with torch's kernels standing for vLLM's (the fp32 cast,
softmax and top-k, the renormalisation's sum and division, a sort for the block alignment, the
row gather, two GEMMs for the grouped expert GEMMs, SiLU-and-mul, the weighting and the top-k
sum): the kernel count differs from vLLM's, what is measured is what each node costs. The capture
is vLLM 0.8-0.10's (``recorders/gpu_graph_pieces.py``): the 67 sizes from 512 down, one eager
warm-up a size, ``empty_cache`` before a size's first piece, the attention stand-in eager between
the pieces, one private pool. Prints one JSON line: graphs, the profiler's kernels of one piece
at 8 tokens (its 3 input kernels included), the window's ``mem_get_info`` and
``memory_reserved`` deltas.

Run on the GPU machine (torch with CUDA), each case in its own process::

    python recorders/gpu_graph_moe_pieces.py c 16 cuda

The code below this docstring is the file the recorded run executed, byte for byte (its sha256
is in reports/gpu/graph-moe-pieces/graph-moe-pieces-h100.json); it is kept short because the run
command carried it.
"""
import sys,json,torch as T
import torch.nn.functional as F
H,NH,KH,D,E,I,K=2048,32,4,128,128,768,8
M,L,dv=sys.argv[1],int(sys.argv[2]),sys.argv[3];T.set_default_device(dv);T.set_default_dtype(T.bfloat16);b=T.bfloat16
R=lambda *s:T.randn(*s)*.02;O=T.ones;Z=T.zeros
W=(R(H,NH*D),R(E,H),R((NH+2*KH)*D,H),O(H),O(H),O(D),O(D));w1=R(2*I,H);w2=R(H,I);iv=1/(1e6**(T.arange(0,D,2)/D))
@T.library.custom_op('r::moe',mutates_args=())
def moe(x:T.Tensor,g:T.Tensor)->T.Tensor:
 m=x.shape[0];tw,ids=T.topk(T.softmax(g.float(),-1),K,-1);tw=tw/tw.sum(-1,keepdim=True);s=ids.flatten().argsort()
 c=F.linear(x[s//K],w1);c=F.silu(c[:,:I])*c[:,I:];c=F.linear(c,w2)*tw.flatten()[s,None].to(b);return c.view(m,K,H).sum(1)
moe.register_fake(lambda x,g:T.empty_like(x))
def rms(x,g):f=x.float();return (f*T.rsqrt(f.pow(2).mean(-1,keepdim=True)+1e-6)).to(b)*g
def rope(x,p):
 f=p.float()[:,None]*iv[None,:];c,s=f.cos()[:,None,:].to(b),f.sin()[:,None,:].to(b);u,v=x[...,:D//2],x[...,D//2:];return T.cat([u*c-v*s,v*c+u*s],-1)
def pc(at,rs,p,o,ga,qk,n1,n2,qn,kn):
 h=rs+F.linear(at,o);x=rms(h,n2);h=h+moe(x,F.linear(x,ga));x=rms(h,n1);q,k,v=F.linear(x,qk).split([NH*D,KH*D,KH*D],-1)
 return rope(rms(q.reshape(-1,NH,D),qn),p),rope(rms(k.reshape(-1,KH,D),kn),p),v,h,T.empty(x.shape[0],NH*D)
fn=T.compile(pc,dynamic=True,fullgraph=True) if M=='c' else pc
def fw(n,gs=None,pl=None):
 at=Z(n,NH*D);rs=Z(n,H);p=T.arange(n)
 for i in range(L+1):
  if gs is None:q,_,_,rs,at=fn(at,rs,p,*W)
  else:
   if i==0:T.cuda.empty_cache()
   g=T.cuda.CUDAGraph();g.capture_begin(pool=pl);q,_,_,rs,at=fn(at,rs,p,*W);g.capture_end();gs.append(g)
  if i<L:at.copy_(q.reshape(q.shape[0],-1))
sz=sorted([1,2,4,*range(8,513,8)],reverse=True)
st=T.cuda.Stream()
with T.cuda.stream(st):
 fw(8192)
T.cuda.empty_cache()
from torch.profiler import profile,ProfilerActivity as PA
with profile(activities=[PA.CUDA]) as pr,T.cuda.stream(st):
 fn(Z(8,NH*D),Z(8,H),T.arange(8),*W);T.cuda.synchronize()
kn=[e.name for e in pr.events() if str(e.device_type).endswith('CUDA')];T.cuda.synchronize();T.cuda.empty_cache()
f0=T.cuda.mem_get_info()[0];r0=T.cuda.memory_reserved();pl=T.cuda.graph_pool_handle();gs=[]
with T.cuda.stream(st):
 for n in sz:fw(n);fw(n,gs,pl)
T.cuda.synchronize();t=f0-T.cuda.mem_get_info()[0];r=T.cuda.memory_reserved()-r0
print(json.dumps(dict(graphs=len(gs),kernels_per_piece=len(kn),kernel_names=kn,total_bytes=t,reserved_bytes=r,rest_bytes_per_graph=(t-r)/len(gs),torch=T.__version__,cuda=T.version.cuda)))
