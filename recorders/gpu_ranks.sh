#!/usr/bin/env bash
# Every rank under torchrun (issue 25 item 1): the runs of reports/gpu/ranks/, one JSON each, on a
# host of 4 GPUs (the TP2 runs on GPUs 0,1 via CUDA_VISIBLE_DEVICES). Run from a folder holding
# memprof/ and configs/: OUT=<dir> DEVICE=cuda GPU=H100 bash recorders/gpu_ranks.sh
# (DEVICE=fake runs the same commands through the allocator simulator on CPU, gloo.)
set -u
OUT=${OUT:?} DEVICE=${DEVICE:-cuda} GPU=${GPU:-H100} LIMIT=${LIMIT:-170}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
PY=${PY:-python3}
{
  date -u; uname -r
  nvidia-smi 2>&1 | head -20; nvidia-smi topo -m 2>&1
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-")'
} > "$OUT/env.txt" 2>&1
port=29600
one() {  # name gpus nproc args...
  local name=$1 gpus=$2 n=$3; shift 3
  port=$((port + 1))
  local cmd="torchrun --nproc-per-node $n -m memprof trace $* --gpu $GPU --device $DEVICE -f json"
  echo "== $name: CUDA_VISIBLE_DEVICES=$gpus $cmd" >> "$OUT/log.txt"
  local t0=$SECONDS
  CUDA_VISIBLE_DEVICES=$gpus timeout "$LIMIT" $PY -m torch.distributed.run --master-port $port \
    --nproc-per-node "$n" -m memprof trace "$@" --gpu "$GPU" --device "$DEVICE" -f json \
    > "$OUT/$name.json" 2>> "$OUT/log.txt"
  echo "== $name: rc=$? seconds=$((SECONDS - t0))" >> "$OUT/log.txt"
}
one qwen3-0.6b-tp2 0,1 2 --model qwen3-0.6b -tp 2 --max-num-seqs 64
one llama-3.1-8b-tp2 0,1 2 --model llama-3.1-8b -tp 2 --max-num-seqs 256
one qwen3-32b-tp2 0,1 2 --model qwen3-32b -tp 2 --max-num-seqs 256
one qwen3-32b-tp4 0,1,2,3 4 --model qwen3-32b -tp 4 --max-num-seqs 256
one deepseek-r1-l8-tp4 0,1,2,3 4 --model deepseek-r1 -tp 4 --max-num-seqs 256 \
  --hf-overrides '{"num_hidden_layers": 8}'
