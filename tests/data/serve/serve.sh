#!/usr/bin/env bash
# start Qwen3-32B on two H200s
set -euo pipefail
MODEL=Qwen/Qwen3-32B
export MAX_LEN=32768
CUDA_VISIBLE_DEVICES=0,1 exec vllm serve "$MODEL" \
    --tensor-parallel-size 2 \
    --max-model-len ${MAX_LEN} \
    --gpu-memory-utilization 0.90 \
    --kv-cache-dtype fp8 \
    --host 0.0.0.0 --port 8000 \
    --enable-prefix-caching  # no effect on memory
