import gc,json,subprocess as sp,sys
S={'q15':(28,1536,12,2,8960,'float16'),'q4':(36,2560,32,8,9728,'bfloat16')}
PW=sorted([1,2,4,*range(8,257,8),*range(272,513,16)],reverse=True)
FU=PW[16:]
C=[('q15',k)for k in('v2','nokv','same','smaller','onebyone','bonly')]+[('q4','v2'),('q4','bonly')]
def case(sh,k):
 import torch as T,torch.nn.functional as F
 c=T.cuda;L,H,NH,NK,I,dt=S[sh];dt=getattr(T,dt);d='cuda';D=128;R=[];N={}
 W=[[T.randn(*s,device=d,dtype=dt)*.02 for s in((H,NH*D),(2*I,H),(H,I),((NH+2*NK)*D,H))]for _ in range(L)]
 def rd(t):c.synchronize();R.append([t,c.mem_get_info()[0],c.memory_reserved()])
 def piece(a,r,w,p):
  h=r+F.linear(a,w[0]);x=F.rms_norm(h,(H,));g,u=F.linear(x,w[1]).chunk(2,-1)
  h=h+F.linear(F.silu(g)*u,w[2]);x=F.rms_norm(h,(H,))
  q,kk,v=F.linear(x,w[3]).split([NH*D,NK*D,NK*D],-1);e=p.float()[:,None].cos().to(dt)
  return q*e+kk.repeat(1,NH//NK)*e,h,T.empty(q.shape[0],NH*D,device=d,dtype=dt)
 def fwd(n,gs=None,pool=None):
  a=T.zeros(n,NH*D,device=d,dtype=dt);r=T.zeros(n,H,device=d,dtype=dt);p=T.arange(n,device=d)
  for i in range(L+1):
   w=W[min(i,L-1)]
   if gs is None:q,r,o=piece(a,r,w,p)
   else:g=c.CUDAGraph();g.capture_begin(pool=pool);q,r,o=piece(a,r,w,p);g.capture_end();gs.append(g)
   if i<L:o.copy_(q)
   a=o
 def cap(t,pw,fu):
  gs=[];pool=c.graph_pool_handle();c.empty_cache();rd('pre'+t)
  with c.stream(c.Stream()):
   for n in pw:fwd(n);fwd(n,gs,pool)
   for n in fu:
    fwd(n);g=c.CUDAGraph();g.capture_begin(pool=pool);fwd(n);g.capture_end();gs.append(g)
  rd(t);N[t]=[len(pw)*(L+1),len(fu)];return gs,pool
 for n in PW:fwd(n)
 rd('start')
 if k!='bonly':
  gs,pool=cap('A',PW,FU[:2])
  while k=='onebyone'and gs:
   gs.pop()
   if len(gs)%300==0:gc.collect();rd('pop%d'%len(gs))
  del gs,pool;gc.collect();c.empty_cache();rd('destroyed')
 if k!='nokv':kv=T.empty(int(c.mem_get_info()[0]*.8),dtype=T.uint8,device=d);rd('kv')
 gs,pool=cap('B',*{'same':(PW,FU[:2]),'smaller':(PW[::2],FU[:1])}.get(k,(PW,FU)))
 return dict(shape=sh,case=k,graphs=N,reads=R)
if sys.argv[1]=='-c':print(json.dumps(case(*sys.argv[2:])));sys.exit()
import torch as T
rows=[]
for sh,k in C:
 p=sp.run([sys.executable,__file__,'-c',sh,k],capture_output=1,text=1,timeout=150)
 rows.append(json.loads(p.stdout.splitlines()[-1])if p.returncode==0 else dict(shape=sh,case=k,failed=p.stderr[-1500:]));print(json.dumps(rows[-1]),flush=True)
open(sys.argv[2]+'/graph-reuse-h100.json','w').write(json.dumps(dict(command=' '.join(sys.argv),torch=T.__version__,cuda=T.version.cuda,driver=sp.getoutput('nvidia-smi --query-gpu=driver_version --format=csv,noheader'),gpu=T.cuda.get_device_name(),cases=rows),indent=1))
