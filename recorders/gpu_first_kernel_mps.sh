#!/usr/bin/env bash
# Does the first-kernel reservation (and the stack's) follow the SMs a context may use? Under an
# MPS server, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE limits a client to a share of the SMs; each client
# runs recorders/gpu_first_kernel_lmem.py's child steps and prints one JSON object with the SM
# count it sees. Run on the GPU machine from the repository root:
#     OUT=$OUT bash recorders/gpu_first_kernel_mps.sh
# PCTS (default "100 50 25 12") lists the percentages and STEPS (default "zeros stack:0,zeros") the
# child's step lists; NAME (default first-kernel-mps) names the output file.
set -u
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mprof-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mprof-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY" "$OUT"
nvidia-cuda-mps-control -d || { echo "error: no MPS control daemon"; exit 1; }
sleep 2
for pct in ${PCTS:-100 50 25 12}; do
  for steps in ${STEPS:-zeros stack:0,zeros}; do
    CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$pct python recorders/gpu_first_kernel_lmem.py \
      --child "$steps" | sed "s/^{/{\"mps_active_thread_percentage\": $pct, /"
  done
done | tee "$OUT/${NAME:-first-kernel-mps}.jsonl"
echo quit | nvidia-cuda-mps-control
cat "$CUDA_MPS_LOG_DIRECTORY"/*.log 2>/dev/null | tail -5
