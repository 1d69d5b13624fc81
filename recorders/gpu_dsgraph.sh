#!/usr/bin/env bash
# The DeepSeek-shaped all-rank traces after the replica launches vLLM's kernels (issue 25), a
# dense control run, and what the EP group costs, on a host of 4 GPUs. Run from a folder holding
# memprof/, configs/ and recorders/: OUT=<dir> bash recorders/gpu_dsgraph.sh
# Each command, exit code and time goes to $OUT/log.txt; each trace's JSON to $OUT/<name>.json;
# the EP recorder's files are gathered into $OUT/ep-group.json. PARTS picks the sections
# (default all): traces nomixing ep on 4 GPUs; nomixing2 ep2 are the same on a host of 2 (one
# after the other on GPUs 0,1; ep2 at 2 ranks only).
set -u
OUT=${OUT:?} PY=${PY:-python3} LIMIT=${LIMIT:-200} PARTS=${PARTS:-"traces nomixing ep"}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
{
  date -u; uname -r
  nvidia-smi 2>&1 | head -20; nvidia-smi topo -m 2>&1
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
} > "$OUT/env.txt" 2>&1
trace() {  # name port gpus nproc [VAR=value] -- args...  (runs side by side need their own port)
  local name=$1 port=$2 gpus=$3 n=$4 extra=$5; shift 6
  echo "== $name: ${extra:+$extra }CUDA_VISIBLE_DEVICES=$gpus torchrun --nproc-per-node $n -m memprof trace $* --gpu H100 --disable-custom-all-reduce --device cuda -f json" >> "$OUT/log.txt"
  local t0=$SECONDS
  env ${extra:+$extra} CUDA_VISIBLE_DEVICES=$gpus timeout -k 5 "$LIMIT" $PY -m torch.distributed.run \
    --master-port $port --nproc-per-node "$n" -m memprof trace "$@" --gpu H100 \
    --disable-custom-all-reduce --device cuda -f json > "$OUT/$name.json" 2> "$OUT/$name.err"
  echo "== $name: rc=$? seconds=$((SECONDS - t0))" >> "$OUT/log.txt"
}
ep() {  # case port gpus nproc
  local case=$1 port=$2 gpus=$3 n=$4
  echo "== ep-$case-w$n: CUDA_VISIBLE_DEVICES=$gpus torchrun --nproc-per-node $n recorders/gpu_ep_group.py --case $case --out \$OUT/ep" >> "$OUT/log.txt"
  local t0=$SECONDS
  CUDA_VISIBLE_DEVICES=$gpus timeout -k 5 90 $PY -m torch.distributed.run --master-port "$port" \
    --nproc-per-node "$n" recorders/gpu_ep_group.py --case "$case" --out "$OUT/ep" \
    > "$OUT/ep-$case-w$n.out" 2>&1
  echo "== ep-$case-w$n: rc=$? seconds=$((SECONDS - t0))" >> "$OUT/log.txt"
}
DS=(--model deepseek-r1 --max-num-seqs 256 --hf-overrides '{"num_hidden_layers": 8}')
for part in $PARTS; do
  case $part in
    # two TP2 runs side by side (GPUs 0,1 and 2,3), then TP4 on all four
    traces) trace deepseek-r1-l8-tp2 29801 0,1 2 "" -- "${DS[@]}" -tp 2 &
            trace qwen3-0.6b-tp2 29802 2,3 2 "" -- --model qwen3-0.6b -tp 2 --max-num-seqs 64 &
            wait
            trace deepseek-r1-l8-tp4 29803 0,1,2,3 4 "" -- "${DS[@]}" -tp 4 ;;
    # the TP2 shape with NCCL's graph mixing off (the driver bytes of the kernels alone), and the
    # dense control run, side by side
    nomixing) trace deepseek-r1-l8-tp2-nomixing 29804 0,1 2 NCCL_GRAPH_MIXING_SUPPORT=0 -- \
                "${DS[@]}" -tp 2 &
              trace qwen3-0.6b-tp2 29805 2,3 2 "" -- --model qwen3-0.6b -tp 2 --max-num-seqs 64 &
              wait ;;
    nomixing2) trace deepseek-r1-l8-tp2-nomixing 29804 0,1 2 NCCL_GRAPH_MIXING_SUPPORT=0 -- \
                 "${DS[@]}" -tp 2
               trace qwen3-0.6b-tp2 29805 0,1 2 "" -- --model qwen3-0.6b -tp 2 --max-num-seqs 64 ;;
    ep|ep2) ep pynccl 29806 0,1 2; ep group 29807 0,1 2
        [ "$part" = ep ] && { ep pynccl 29808 0,1,2,3 4; ep group 29809 0,1,2,3 4; }
        $PY - "$OUT/ep" "$OUT/ep-group.json" <<'PY'
import json, sys
from pathlib import Path
runs = [json.loads(f.read_text()) for f in sorted(Path(sys.argv[1]).glob("*.json"))]
Path(sys.argv[2]).write_text(json.dumps({"runs": runs}, indent=1) + "\n")
PY
        rm -rf "$OUT/ep" ;;
  esac
done
