"""Trace the acceptance deployments of ``memprof trace`` on the GPU of this machine.

Run on the GPU machine from the repository root (torch with CUDA; memprof from the tree)::

    PYTHONPATH=. python recorders/gpu_trace.py --out $OUT [--only NAME ...]

Each deployment runs in a fresh process (``python -m memprof trace --device cuda -f json``) so
one trace's memory never shows in the next; each writes ``trace-NAME.json`` (the golden file)
and the command line, torch version and GPU name go into ``trace-runs.json``. The small Qwen3
run also writes a ``_dump_snapshot`` pickle and checks that ``torch.cuda._memory_viz``
renders it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

RUNS: dict[str, list[str]] = {
    "qwen3-0.6b-h200": ["-m", "qwen3-0.6b", "--gpu", "H200", "--max-num-seqs", "256"],
    "llama-3.1-8b-h200": ["-m", "llama-3.1-8b", "--gpu", "H200", "--max-num-seqs", "256"],
    "qwen3-32b-tq-shared-h200": ["-m", "qwen3-32b", "--gpu", "H200", "--kv-cache-dtype",
                                 "turboquant_k8v4", "--gpu-memory-utilization", "0.9",
                                 "--max-num-seqs", "256", "--scratch", "shared"],
    "qwen3-32b-tq-per-layer-h200": ["-m", "qwen3-32b", "--gpu", "H200", "--kv-cache-dtype",
                                    "turboquant_k8v4", "--gpu-memory-utilization", "0.9",
                                    "--max-num-seqs", "256", "--scratch", "per-layer"],
    "deepseek-r1-tp8-rank0-h200": ["-m", "deepseek-r1", "--gpu", "H200", "-tp", "8",
                                   "--rank", "0", "--graphs", "4"],
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--timeout", type=int, default=240)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # The GPU's name and total come from a child process too: a CUDA context held here while the
    # traces run would count in each trace's device use (a first recording showed its ~525 MiB
    # context twice in the CUDA-context row).
    probe = subprocess.run([sys.executable, "-c", "import json, torch; print(json.dumps("
                            "[torch.__version__, torch.cuda.get_device_name(), "
                            "torch.cuda.mem_get_info()[1]]))"],
                           capture_output=True, text=True, check=True)
    version, gpu, total = json.loads(probe.stdout)
    meta = {"torch": version, "gpu": gpu, "total_bytes": total, "runs": {}}
    for name, flags in RUNS.items():
        if args.only and name not in args.only:
            continue
        cmd = [sys.executable, "-m", "memprof", "trace", *flags, "--device", "cuda", "-f",
               "json"]
        if name.startswith("qwen3-0.6b"):
            cmd += ["--snapshot", str(out / "qwen3-0.6b.pickle")]
        t0 = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"}, check=False)
        dt = time.time() - t0
        (out / f"trace-{name}.json").write_text(proc.stdout)
        meta["runs"][name] = {"command": "PYTHONPATH=. " + " ".join(cmd[1:]).replace(
            str(out), "$OUT"), "rc": proc.returncode, "seconds": round(dt, 1),
            "stderr_tail": proc.stderr[-3000:]}
        print(f"{name}: rc {proc.returncode} in {dt:.0f} s", flush=True)
        if proc.returncode not in (0, 1):
            print(proc.stderr[-2000:], flush=True)
    snap = out / "qwen3-0.6b.pickle"
    if snap.exists():
        import pickle

        from torch.cuda import _memory_viz

        with open(snap, "rb") as f:
            data = pickle.load(f)
        html = _memory_viz.trace_plot(data)
        meta["memory_viz_trace_plot_bytes"] = len(html)
    (out / "trace-runs.json").write_text(json.dumps(meta, indent=2))
    for name in meta["runs"]:
        path = out / f"trace-{name}.json"
        try:
            d = json.loads(path.read_text())
        except ValueError:
            continue
        rows = [c for c in d["components"] if c["traced_bytes"] is not None]
        print(f"== {name} ({d['device_name']})")
        for c in rows:
            est, tr = c["estimated_bytes"], c["traced_bytes"]
            pct = f"{100 * (tr - est) / est:+.2f}%" if est else ""
            print(f"  {c['name'][:48]:48s} {est:>16,} {tr:>16,} {pct}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
