#!/usr/bin/env bash
# Issue 27 on one host of 8 GPUs: every measurement it asks for, from a folder holding memprof/,
# configs/ and recorders/:
#
#   OUT=<dir> GPU=H100 PARTS="env traces gather" bash recorders/gpu_world8.sh    # call 1
#   OUT=<dir> GPU=H100 PARTS="env nccl graphs" bash recorders/gpu_world8.sh      # call 2
#
# The LIMITs add up to 3 x 150 + 75 = 525 s in call 1 and 400 + 170 = 570 s in call 2, each under
# the 600 s a call may run (the default PARTS runs both halves, up to ~1,100 s, in one go).
# Sections:
#   env     nvidia-smi, nvidia-smi topo -m, driver, torch/CUDA/NCCL versions -> env-8x-<gpu>.txt
#   traces  torchrun --nproc-per-node 8 -m memprof trace, one JSON each:
#           qwen3-32b-tp8-8x-<gpu>.json, deepseek-r1-l8-tp8-8x-<gpu>.json (DeepSeek-R1's shape,
#           8 of its 61 layers: 3 dense, 5 MoE, as the 2- and 4-rank goldens) and
#           deepseek-v4-flash-l8-dp8-ep8-8x-<gpu>.json (DeepSeek-V4-Flash's shape at DP8 EP8,
#           8 of its 43 layers: sliding-window, C4 and C128 attention, hash and learned routers)
#   gather  SGLang's DP-attention gather (seed 002) at dp 8: recorders/gpu_dp_gather_ranks.py,
#           per-forward vs persistent buffer and the graph pool each way
#           -> dp-gather-dp8-8x-<gpu>.json
#   nccl    recorders/gpu_nccl.py --world 8: the 13 configurations of the 2- and 4-rank matrices
#           (P2P, SHM, sockets x cuMem, buffer size, channels; every collective the engines
#           issue; 30 s each) -> nccl-matrix-8x-<gpu>.json, rewritten after each configuration
#           (a configuration cut short is kept with exit code 124: rerun it with --only NAME)
#   graphs  recorders/gpu_graph_collectives.py --world 8 (alone, local, pynccl; cuMem on; 250
#           graphs a case, as at 4 ranks; 50 s a kind) -> graph-collectives-8x-<gpu>.json
# Every command, its exit code and seconds go to log-8x-<gpu>.txt; each has its own LIMIT
# (timeout -k 5), so a hang costs that command alone. NVLink multicast stays off everywhere.
#
# DEVICE=fake runs the traces through the allocator simulator on CPU over gloo, and the gather
# with --device cpu (the rehearsal of reports/cpu/world8-rehearsal/): no GPU is touched and the
# names end in 8x-fake.
set -u
OUT=${OUT:?} DEVICE=${DEVICE:-cuda} GPU=${GPU:-H100} PY=${PY:-python3}
PARTS=${PARTS:-"env traces gather nccl graphs"}
DSV4_LAYERS=${DSV4_LAYERS:-8}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
if [ "$DEVICE" = fake ]; then TAG=8x-fake; else TAG=8x-$(echo "$GPU" | tr '[:upper:]' '[:lower:]'); fi
LOG=$OUT/log-$TAG.txt
mkdir -p "$OUT"
port=29880
run() {  # name limit command...: one command under its LIMIT, logged with exit code and seconds
  local name=$1 limit=$2; shift 2
  echo "== $name: LIMIT=$limit $(printf '%q ' "$@")" >> "$LOG"
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@"
  echo "== $name: rc=$? seconds=$((SECONDS - t0))" >> "$LOG"
}
trace() {  # name limit args...: every rank of an 8-rank deployment traced, the gathered JSON
  local name=$1 limit=$2; shift 2
  port=$((port + 1))
  run "$name" "$limit" $PY -m torch.distributed.run --master-port $port --nproc-per-node 8 \
    -m memprof trace "$@" --gpu "$GPU" --disable-custom-all-reduce --device "$DEVICE" -f json \
    > "$OUT/$name-$TAG.json" 2> "$OUT/$name-$TAG.err"
  [ -s "$OUT/$name-$TAG.err" ] || rm -f "$OUT/$name-$TAG.err"
}
for part in $PARTS; do
  case $part in
    env) {
      date -u; uname -r; nproc; free -g
      nvidia-smi 2>&1 | head -40; nvidia-smi topo -m 2>&1
      nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv 2>&1
      $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-", "gpus", torch.cuda.device_count())'
      env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE)' | sort
    } > "$OUT/env-$TAG.txt" 2>&1 ;;
    traces)
      trace qwen3-32b-tp8 150 --model qwen3-32b -tp 8 --max-num-seqs 256
      trace deepseek-r1-l8-tp8 150 --model deepseek-r1 -tp 8 --max-num-seqs 256 \
        --hf-overrides '{"num_hidden_layers": 8}'
      trace "deepseek-v4-flash-l$DSV4_LAYERS-dp8-ep8" 150 --model deepseek-v4-flash --dp 8 \
        --enable-expert-parallel --max-num-seqs 256 \
        --hf-overrides "{\"num_hidden_layers\": $DSV4_LAYERS}" ;;
    gather)
      dev=cuda; [ "$DEVICE" = fake ] && dev=cpu
      port=$((port + 1))
      run dp-gather-dp8 75 $PY -m torch.distributed.run --master-port $port --nproc-per-node 8 \
        recorders/gpu_dp_gather_ranks.py --dp 8 --tp 8 --device "$dev" \
        --out "$OUT/dp-gather-dp8-$TAG.json" > "$OUT/dp-gather-dp8-$TAG.err" 2>&1
      [ -s "$OUT/dp-gather-dp8-$TAG.err" ] || rm -f "$OUT/dp-gather-dp8-$TAG.err" ;;
    nccl)  # 13 configurations, each in fresh processes with its own 30 s limit; the file is
           # rewritten after each, so a cut run keeps what it measured
      run nccl-matrix 400 $PY recorders/gpu_nccl.py --out "$OUT" --world 8 --timeout 30 \
        > "$OUT/nccl-matrix-$TAG.out" 2>&1 ;;
    graphs)
      run graph-collectives 170 $PY recorders/gpu_graph_collectives.py --out "$OUT" --world 8 \
        --kinds alone,local,pynccl --cumem 1 --graphs 250 --timeout 50 \
        > "$OUT/graph-collectives-$TAG.out" 2>&1 ;;
    *) echo "unknown part $part" >> "$LOG" ;;
  esac
done
