#!/bin/bash
# One device call: torch's lazily made communicator (recorders/gpu_nccl_torch_gather.py) over
# host shared memory (NCCL_P2P_DISABLE=1, the transport of GPUs without peer access), for the
# SHM rows of memprof/core/terms/nccl_torch.py. World 2 (GPUs 0,1): cuMem on/off, modes first,
# stream and second; world 4: cuMem on/off, mode second (cuMem off first; runs
# that would start past 230 s are skipped). Writes $OUT/torch-gather-shm.json
# (key w<world>-cumem<0|1>-<mode>, one record per rank), $OUT/env.txt and $OUT/logs.tar.gz.
# Run from the directory holding recorders/: OUT=<out> bash recorders/gpu_nccl_torch_gather_shm.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT
mkdir -p $OUT/logs
{ nvidia-smi; nvidia-smi topo -m; python3 -c 'import torch;print("torch",torch.__version__,"cuda",torch.version.cuda,"nccl",torch.cuda.nccl.version())'; uname -r; } > $OUT/env.txt 2>&1
N=$(nvidia-smi -L | wc -l)
P=29500
run() {  # world cumem mode
  local W=$1 C=$2 M=$3 name=w$1-cumem$2-$3
  [ $W -gt $N ] && return
  [ $SECONDS -gt 230 ] && { echo "$name skipped (time)"; return; }
  P=$((P+1))
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((W-1))) NCCL_CUMEM_ENABLE=$C timeout 40 python3 -m torch.distributed.run --nproc-per-node $W --master-port $P recorders/gpu_nccl_torch_gather.py --out $OUT/$name --mode $M > $OUT/logs/$name.txt 2>&1
  echo "$name rc=$?"
}
for C in 0 1; do
  for M in second first stream; do run 2 $C $M; done
  run 4 $C second
done
python3 - <<'PY'
import json, os, glob
o = os.environ["OUT"]; res = {}
for d in sorted(glob.glob(o + "/w*")):
    res[os.path.basename(d)] = [json.load(open(f)) for f in sorted(glob.glob(d + "/rank*.json"))]
json.dump(res, open(o + "/torch-gather-shm.json", "w"), indent=1)
PY
cd $OUT && tar czf logs.tar.gz logs && rm -rf logs w2-* w4-*
