import json,os,subprocess,sys,tempfile
import torch
sys.path.insert(0,'recorders')
import gpu_compile_peak as g
g.SHAPES['qwen2.5-1.5b']=(151936,1536,8960,12,2,128,True,False,32768)
CASES=[('qwen3-1.7b',1,g.WS_SM89,72),('qwen3-8b',0,g.WS_SM89,72),('qwen3-4b',1,g.WS_SM89,72),
       ('qwen3-4b',1,g.WS_SM90,32),('qwen2.5-1.5b',1,g.WS_SM89,32)]
R=256
def child(spec,out):
    S=getattr(torch._C,'_accelerator_setAllocatorSettings',None) or torch.cuda.memory._set_allocator_settings
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(max_entries=3_000_000,stacks='python')
    S('max_split_size_mb:20')  # vLLM 0.27.1 gpu_worker.py load_model scope
    keep=[];ri=torch.randint
    def randint(*a,**k):
        if not keep:
            S('max_split_size_mb:%d'%((2**64-1)//2**20))  # restored after the load
            V=g.SHAPES[spec['shape']][0];c=-(-V//32);d='cuda';i=torch.int32
            keep.extend([torch.zeros(R,c,dtype=i,device=d),torch.zeros(R,V,dtype=i,device=d),  # penalties.py
                         torch.zeros(R,1024,dtype=i,device=d),torch.zeros(R,1024,dtype=torch.float32,device=d),
                         torch.zeros(R,128,dtype=i,device=d),torch.zeros(R,1024,dtype=i,device=d),
                         torch.zeros(R,129,dtype=i,device=d),torch.zeros(R,dtype=i,device=d),
                         torch.zeros(R,c,dtype=i,device=d)])  # logit_bias, bad_words, structured_outputs
        return ri(*a,**k)
    torch.randint=randint
    oc=g._classify
    def cl(snap,base):
        ev=[[e['action'],e['addr'],e['size'],e['stream']] for e in snap['device_traces'][0]
            if e['action'] in('alloc','free_completed','segment_alloc','segment_free')]
        json.dump({'spec':spec,'ev':ev},open(out,'w'))
        return oc(snap,base)
    g._classify=cl
    return g._child(spec)
if __name__=='__main__':
    if len(sys.argv)>1:
        print(json.dumps(child(json.loads(sys.argv[1]),sys.argv[2])));sys.exit()
    o=os.environ['OUT'];res={'torch':torch.__version__,'gpu':torch.cuda.get_device_name(0),'cases':{}}
    for i,(s,t,ws,l2) in enumerate(CASES):
        n='%s-t%d-ws%s-l2_%d'%(s,t,ws,l2);c=tempfile.mkdtemp()
        sp={'case':s,'shape':s,'tokens':2048,'tp':1,'combo':True,'phase':'cold','layers':4,'mode':'aot',
            'window':True,'atc':True,'tied':t,'ws':ws,'l2':l2<<20}
        p=subprocess.run([sys.executable,__file__,json.dumps(sp),'%s/%s.ops.json'%(o,n)],capture_output=True,
                         text=True,env=g._env(__import__('pathlib').Path(c),'cold'),timeout=100)
        L=[x for x in p.stdout.splitlines() if x.startswith('{')]
        res['cases'][n]=json.loads(L[-1]) if L else {'error':p.returncode,'tail':p.stderr[-2500:]}
        json.dump(res,open(o+'/pin-window-h100.json','w'),indent=1)
