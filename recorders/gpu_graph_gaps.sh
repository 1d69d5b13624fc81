#!/usr/bin/env bash
# The graph-pool and profile-run non-torch gaps at TP (issue 25), on a host of two GPUs: the
# sections of recorders/gpu_graph_collectives_scaling.py, then memprof trace at TP2 with the
# replica's all-reduce as c10d, PyNccl-style ncclAllReduce, or a local clone. Run from a folder
# holding memprof/, configs/ and recorders/: OUT=<dir> bash recorders/gpu_graph_gaps.sh
# (PARTS picks sections: env steps replica scaling knobs scaling2 retrace); everything ends up in $OUT/gaps.tgz.
set -u
OUT=${OUT:?} PARTS=${PARTS:-"env steps replica scaling knobs"} PY=${PY:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
R=recorders/gpu_graph_collectives_scaling.py
# model:max-num-seqs:impl[:VAR=value]
# model:max-num-seqs[:VAR=value] (deepseek-r1 gets 8 layers, as reports/gpu/ranks)
RETRACES=${RETRACES:-"qwen3-0.6b:64 llama-3.1-8b:256 llama-3.1-8b:256:NCCL_GRAPH_MIXING_SUPPORT=0"}
REPLICAS=${REPLICAS:-"qwen3-0.6b:64:c10d qwen3-0.6b:64:pynccl qwen3-0.6b:64:local
  llama-3.1-8b:256:c10d llama-3.1-8b:256:pynccl qwen3-0.6b:64:c10d:NCCL_GRAPH_MIXING_SUPPORT=0"}
W=$OUT/gaps
mkdir -p "$W"
port=29700
log() { echo "$*" | tee -a "$W/log.txt"; }
run() {  # name limit command...
  local name=$1 limit=$2; shift 2
  log "== $name: $*"
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" > "$W/$name.out" 2> "$W/$name.err"
  log "== $name: rc=$? seconds=$((SECONDS - t0))"
}
TR="$PY -m torch.distributed.run --nproc-per-node 2 --master-port"
for part in $PARTS; do
  case $part in
    env) { date -u; uname -r; nvidia-smi 2>&1 | head -20; nvidia-smi topo -m 2>&1
           $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
           $PY -c 'import triton; print("triton", triton.__version__)' 2>&1 | tail -1
         } > "$W/env.txt" 2>&1 ;;
    steps) run steps-w1 60 env CUDA_VISIBLE_DEVICES=0 $PY $R steps --out "$W/steps"
           run steps-w2 90 $TR $((++port)) $R steps --out "$W/steps" ;;
    replica) for spec in $REPLICAS; do
               IFS=: read -r model seqs impl extra <<< "$spec"
               run "replica-$model-$impl${extra:+-$extra}" 120 env ${extra:+$extra} $TR $((++port)) \
                 $R replica --impl "$impl" -- --model "$model" -tp 2 --max-num-seqs "$seqs" \
                 --gpu H100 -f json
             done ;;
    scaling) run scaling 240 $TR $((++port)) $R scaling --out "$W/scaling" ${SCALING_ARGS:-} ;;
    scaling2) for tokens in 1 256; do  # graphs shaped nearer the model's: PyNccl after an MLP
                run "scaling-t$tokens" 150 $TR $((++port)) $R scaling --out "$W/scaling-t$tokens" \
                  --impls local,pynccl --between mm,mlp --ks 1,2,8,32 --tokens "$tokens"
              done ;;
    retrace) for spec in $RETRACES; do  # memprof trace itself (c10d all-reduces), as gpu_ranks.sh
               IFS=: read -r model seqs extra <<< "$spec"
               hf=(); [ "$model" = deepseek-r1 ] && hf=(--hf-overrides '{"num_hidden_layers": 8}')
               run "trace-$model-tp2${extra:+-$extra}" 150 env ${extra:+$extra} $TR $((++port)) \
                 -m memprof trace --model "$model" -tp 2 --max-num-seqs "$seqs" --gpu H100 \
                 --disable-custom-all-reduce --device cuda -f json ${hf[@]+"${hf[@]}"}
             done ;;
    knobs) for knob in TORCH_NCCL_AVOID_RECORD_STREAMS=0 NCCL_GRAPH_MIXING_SUPPORT=0; do
             run "scaling-$knob" 120 env "$knob" $TR $((++port)) $R scaling \
               --out "$W/scaling-$knob" --impls c10d,pynccl --between mm --ks 1,32
           done ;;
  esac
done
$PY - "$W" <<'PY' 2>&1 | tee "$W/summary.txt"
import json, sys
from pathlib import Path
w = Path(sys.argv[1])
for f in sorted(w.glob("steps/*.json")):
    d = json.loads(f.read_text()); prev = None
    print(f.name)
    for s in d["steps"]:
        nt = s.get("non_torch")
        print(f"  {s['after']:42} non_torch {nt} (+{(nt - prev) / 2**20 if nt is not None and prev is not None else 0:.1f} MiB) stack {s.get('stack_limit')} {s.get('error', '')}")
        prev = nt if nt is not None else prev
for f in sorted([*w.glob("replica-*.out"), *w.glob("trace-*.out")]):
    try:
        d = json.loads(f.read_text())
    except Exception as e:
        print(f.name, "unreadable", e); continue
    for r in d.get("ranks", [])[:2]:
        print(f.name, "rank", r.get("rank"))
        for c in r["components"]:
            if c["category"] in ("cudagraph", "non_torch"):
                print(f"  {c['name'][:46]:46} est {c.get('estimated_bytes')} traced {c.get('traced_bytes')}")
        print("  phases", [(p["name"], p.get("non_torch_bytes")) for p in r["phases"]])
for f in sorted(w.glob("scaling*/scaling-rank0.json")):
    print(f.parent.name)
    for c in json.loads(f.read_text())["cases"]:
        print(f"  {c['impl']:7} {c['between']:4} k={c['k']:4} driver/graph {c.get('driver_per_graph', 0) / 1024:9.1f} KiB tensors {c.get('tensors_bytes', 0) / 2**20:7.1f} MiB capture {c.get('capture_s')} s")
PY
tar czf "$OUT/gaps.tgz" -C "$OUT" gaps && rm -rf "$W"
