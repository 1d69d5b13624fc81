"""``memprof validate`` on the GPU of this machine: the acceptance parity grid and the CLI runs.

Run on the GPU machine from the repository root (torch with CUDA; memprof from the tree)::

    PYTHONPATH=. python recorders/gpu_validate.py --out $OUT

1. Parity grid: the MLA and TurboQuant Triton decodes (shared workspace) against their fp32
   references at B ∈ {1, 64, 256}, block sizes 16 and 64, uneven context lengths (1/2 to 1× of
   the longest, the longest 32k; TurboQuant at B=256 uses 8k to keep the host-side K/V that the
   test quantises under a few GB) → ``validate-grid.json``.
2. The CLI, each in a fresh process (``python -m memprof validate … -f json``): the defaults,
   R1 at B=512 and 2048, Qwen3-32B TurboQuant at ``--max-num-seqs 256``, MLA at 16k context →
   ``validate-NAME.json``; command lines, exit codes and versions in ``validate-runs.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CLI_RUNS: dict[str, list[str]] = {
    "defaults": [],
    "mla-r1-b512": ["--kernel", "mla", "--max-num-seqs", "512", "--context", "4096"],
    "mla-r1-b2048": ["--kernel", "mla", "--max-num-seqs", "2048", "--context", "1024"],
    "mla-r1-b64-16k": ["--kernel", "mla", "--max-num-seqs", "64", "--context", "16384"],
    "mla-r1-b128-32k": ["--kernel", "mla", "--max-num-seqs", "128", "--context", "32768"],
    "tq-qwen3-32b-b256": ["--kernel", "turboquant", "--max-num-seqs", "256"],
}


def grid() -> list[dict[str, Any]]:
    from memprof.validation.mla_tq import validate_mla, validate_tq

    rows: list[dict[str, Any]] = []
    for kernel in ("mla", "tq"):
        for batch in (1, 64, 256):
            for block in (16, 64):
                ctx = 8192 if (kernel == "tq" and batch == 256) else 32768
                t = time.time()
                fn = validate_mla if kernel == "mla" else validate_tq
                try:
                    v = fn(batch=batch, context_len=ctx, layers=2, device="cuda",
                           block_size=block, policies=("shared",), reps=3, rounds=1,
                           measure_bandwidth=False)
                    parity = [dataclasses.asdict(p) for r in v.runs for p in r.parity]
                    row = {"kernel": kernel, "B": batch, "block_size": block, "context": ctx,
                           "parity": parity, "passed": v.parity_passed}
                except Exception as e:  # recorded, not hidden: the row fails
                    row = {"kernel": kernel, "B": batch, "block_size": block, "context": ctx,
                           "error": repr(e)[:500], "passed": False}
                row["seconds"] = round(time.time() - t, 1)
                print(json.dumps({k: row[k] for k in row if k != "parity"}), flush=True)
                rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--skip-grid", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU", file=sys.stderr)
        return 3
    meta: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                            "runs": {}}
    if not args.skip_grid:
        rows = grid()
        (out / "validate-grid.json").write_text(json.dumps(
            {**meta, "command": "PYTHONPATH=. python recorders/gpu_validate.py --out $OUT",
             "rows": rows, "passed": all(r["passed"] for r in rows)}, indent=1))
    for name, extra in CLI_RUNS.items():
        cmd = [sys.executable, "-m", "memprof", "validate", *extra, "-f", "json"]
        t = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
        (out / f"validate-{name}.json").write_text(p.stdout)
        meta["runs"][name] = {"command": "PYTHONPATH=. python -m memprof validate "
                              + " ".join([*extra, "-f", "json"]), "exit_code": p.returncode,
                              "stderr": p.stderr[-2000:], "seconds": round(time.time() - t, 1)}
        print(name, p.returncode, p.stderr[-300:], flush=True)
        (out / "validate-runs.json").write_text(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
