"""Check ``memprof.core.terms.load_rounding`` against PyTorch's real caching allocator.

Run on the GPU machine from the repository root (torch with CUDA; memprof from the tree)::

    PYTHONPATH=. python recorders/gpu_load_rounding.py --out $OUT

For each deployment, the model-load sequence the term replays (``load_ops``: the rank's weights
in construction order with each QKV parameter as one tensor, the RoPE cache built from its fp32
temporaries, which are freed) is allocated on the GPU as ``torch.empty(n, dtype=uint8)``
tensors, in a fresh process, and ``torch.cuda.memory_allocated()`` is read before and after: the
quantity vLLM logs as "Loading model weights took". The file ``load-rounding-<gpu>.json`` holds,
per deployment, the bytes requested, memprof's predicted allocated bytes (requested + the
term's rounding) and the measured delta.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CASES: dict[str, tuple[str, dict[str, object], str]] = {
    # row 48 of tests/data/published.json: "Loading model weights took 13.9476 GB" (vLLM 0.7.2)
    "r1-distill-qwen-14b-tp2-0.7.2": ("deepseek-r1-distill-qwen-14b",
                                      {"tp": 2, "max_model_len": 131072,
                                       "gpu_memory_utilization": 0.98,
                                       "engine_version": "0.7.2"}, "RTX-4090"),
    "qwen3-32b-tp1": ("qwen3-32b", {}, "H200"),
    "llama-3.1-8b-tp1": ("llama-3.1-8b", {}, "H200"),
    "deepseek-r1-tp8-rank0": ("deepseek-r1", {"tp": 8}, "H200"),
    "gpt-oss-120b-tp1": ("gpt-oss-120b", {}, "H100"),
}

CHILD = r"""
import json, sys, torch
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.terms.load_rounding import load_ops, replay_rounding

model, kwargs, gpu = json.loads(sys.argv[1])
e = estimate(model, Deployment(**kwargs), gpu_name=gpu)
ctx = rank_context(e, e.ranks[0])
ops, requested = load_ops(ctx)
rounding = replay_rounding(ops)[0]
torch.cuda.init()
base = torch.cuda.memory_allocated()
held = []
for kind, n in ops:
    if kind == 0:
        held.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
    else:
        held[n] = None
torch.cuda.synchronize()
measured = torch.cuda.memory_allocated() - base
print(json.dumps({"requested": requested, "predicted_rounding": rounding,
                  "predicted_allocated": requested + rounding, "measured_allocated": measured,
                  "allocations": sum(1 for k, _ in ops if k == 0),
                  "frees": sum(1 for k, _ in ops if k == 1)}))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    probe = subprocess.run([sys.executable, "-c", "import json, torch; print(json.dumps("
                            "[torch.__version__, torch.cuda.get_device_name()]))"],
                           capture_output=True, text=True, check=True)
    version, gpu = json.loads(probe.stdout)
    result: dict[str, object] = {
        "command": "PYTHONPATH=. python recorders/gpu_load_rounding.py --out $OUT",
        "torch": version, "gpu": gpu, "cases": {}}
    cases: dict[str, object] = {}
    worst = 0
    for name, (model, kwargs, est_gpu) in CASES.items():
        p = subprocess.run([sys.executable, "-c", CHILD, json.dumps([model, kwargs, est_gpu])],
                           capture_output=True, text=True)
        if p.returncode != 0:
            cases[name] = {"rc": p.returncode, "stderr_tail": p.stderr[-2000:]}
            worst = max(worst, 1)
            continue
        row = json.loads(p.stdout)
        row.update(model=model, deployment=kwargs, estimate_gpu=est_gpu,
                   difference=row["measured_allocated"] - row["predicted_allocated"])
        cases[name] = row
        print(f"{name}: predicted {row['predicted_allocated']:,} B, measured "
              f"{row['measured_allocated']:,} B, difference {row['difference']:,} B "
              f"(rounding {row['predicted_rounding']:,} B)")
    result["cases"] = cases
    tag = "h200" if "H200" in gpu else "h100" if "H100" in gpu else "gpu"
    (out / f"load-rounding-{tag}.json").write_text(json.dumps(result, indent=1) + "\n")
    return worst


if __name__ == "__main__":
    sys.exit(main())
