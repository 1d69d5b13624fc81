#!/bin/bash
# One device call: world 2 (GPUs 0,1) and world 4, cuMem on/off, three modes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT
mkdir -p $OUT/logs
{ nvidia-smi; nvidia-smi topo -m; python3 -c 'import torch;print("torch",torch.__version__,"cuda",torch.version.cuda,"nccl",torch.cuda.nccl.version())'; uname -r; } > $OUT/env.txt 2>&1
N=$(nvidia-smi -L | wc -l)
P=29400
for W in 2 4; do
  [ $W -gt $N ] && continue
  VIS=$(seq -s, 0 $((W-1)))
  for C in 1 0; do
    for M in stream second first; do
      P=$((P+1)); name=w$W-cumem$C-$M
      CUDA_VISIBLE_DEVICES=$VIS NCCL_CUMEM_ENABLE=$C timeout 60 python3 -m torch.distributed.run --nproc-per-node $W --master-port $P recorders/gpu_nccl_torch_gather.py --out $OUT/$name --mode $M > $OUT/logs/$name.txt 2>&1
      echo "$name rc=$?"
    done
  done
done
python3 - <<'PY'
import json, os, glob
o = os.environ["OUT"]; res = {}
for d in sorted(glob.glob(o + "/w*")):
    res[os.path.basename(d)] = [json.load(open(f)) for f in sorted(glob.glob(d + "/rank*.json"))]
json.dump(res, open(o + "/torch-gather.json", "w"), indent=1)
PY
cd $OUT && tar czf logs.tar.gz logs && rm -rf logs w2-* w4-*
