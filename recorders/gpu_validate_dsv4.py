"""``memprof validate`` part 2 on the GPU of this machine: DeepSeek-V4 sparse decode parity grid,
the dsv4 / dp_gather / all CLI runs (graph-clean on a real CUDA graph). At most 7 files.

Run on the GPU machine from the repository root (torch with CUDA; memprof from the tree)::

    PYTHONPATH=. python recorders/gpu_validate_dsv4.py --out $OUT

1. ``dsv4-grid.json``: ``sparse_mla_decode`` (Triton) against the fp32 reference for
   DeepSeek-V4-Flash and -Pro at TP 8 and TP 1 (8/16 and 64/128 query heads), B ∈ {1, 32, 128},
   every scope (SWA window 128, C4 top-k from the config, C128 all entries of a 32k context),
   the fp8_ds_mla cache and its bf16 copy, uneven lens (1/2 to 1× of the longest) with -1 holes
   and padding;
2. the CLI, each in a fresh process: ``validate --kernel dsv4`` (Flash; 100 graph replays),
   ``--kernel dsv4 --model deepseek-v4-pro``, ``--kernel dp_gather`` (NCCL world of one), and
   ``--kernel all`` with ``--markdown`` → ``validate-dsv4-flash.json``,
   ``validate-dsv4-pro.json``, ``validate-dp-gather.json``, ``validate-all.json``,
   ``validate-all.md``; command lines, exit codes and versions in ``validate-part2-runs.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CLI_RUNS: dict[str, list[str]] = {
    "dsv4-flash": ["--kernel", "dsv4"],
    "dsv4-pro": ["--kernel", "dsv4", "--model", "deepseek-v4-pro"],
    "dp-gather": ["--kernel", "dp_gather"],
    "all": ["--kernel", "all"],
}
GRID_CONTEXT = 32768
GRID_BLOCKS = 512  # blocks per pool (64 rows: 32k SWA / C4 slots; C128: 1k)


def grid() -> list[dict[str, Any]]:
    import torch

    from memprof.core.models import load_model
    from memprof.kernels.sparse_mla_decode import (
        dequantize_reference,
        pack_fp8_ds_mla,
        sparse_mla_decode,
        sparse_mla_decode_reference,
    )
    from memprof.validation.dsv4 import EXTRA_ROWS, SWA_ROWS, scope_inputs
    from memprof.validation.mla_tq import _parity, _seq_lens

    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(0)
    rows = {"SWA": SWA_ROWS, **EXTRA_ROWS}
    caches = {k: pack_fp8_ds_mla(torch.randn((GRID_BLOCKS * r, 512), device=dev), r)
              for k, r in rows.items()}
    bf16 = {k: dequantize_reference(c, dtype=torch.bfloat16) for k, c in caches.items()}
    slots = {k: GRID_BLOCKS * r for k, r in rows.items()}
    out: list[dict[str, Any]] = []
    for model in ("deepseek-v4-flash", "deepseek-v4-pro"):
        a = load_model(model).layers[0].attention
        for tp in (8, 1):
            heads = a.num_heads // tp
            for batch in (1, 32, 128):
                ctx = _seq_lens(batch, GRID_CONTEXT, gen)
                inputs = scope_inputs(ctx, a.sliding_window or 128, a.index_topk,
                                      GRID_CONTEXT, slots, gen)
                q = torch.randn((batch, heads, 512), generator=gen).to(torch.bfloat16).to(dev)
                for scope, (idx, lens) in inputs.items():
                    idx, lens = idx.to(dev), lens.to(dev)
                    for layout, cache in (("fp8_ds_mla", caches[scope]), ("bf16", bf16[scope])):
                        t = time.time()
                        row: dict[str, Any] = {"model": model, "tp": tp, "heads": heads,
                                               "B": batch, "scope": scope, "layout": layout,
                                               "topk": int(idx.shape[1])}
                        try:
                            o, lse = sparse_mla_decode(q, cache, idx, lens, a.head_dim ** -0.5)
                            ro, rl = sparse_mla_decode_reference(q, cache, idx, lens,
                                                                 a.head_dim ** -0.5)
                            p = _parity("vs fp32 reference", o, ro, 1e-2)
                            fin = torch.isfinite(rl)
                            lse_err = float((lse[fin] - rl[fin]).abs().max()) if fin.any() \
                                else 0.0
                            lse_ok = bool(torch.equal(fin, torch.isfinite(lse))) and \
                                lse_err <= 1e-3
                            row.update(rel=p.rel, max_abs=p.max_abs, lse_max_abs=lse_err,
                                       passed=p.passed and lse_ok and math.isfinite(p.rel))
                        except Exception as e:  # recorded, not hidden: the row fails
                            row.update(error=repr(e)[:500], passed=False)
                        row["seconds"] = round(time.time() - t, 2)
                        print(json.dumps(row), flush=True)
                        out.append(row)
    return out


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
    import triton

    meta: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                            "triton": triton.__version__, "runs": {}}
    if not args.skip_grid:
        rows = grid()
        (out / "dsv4-grid.json").write_text(json.dumps(
            {**meta, "command": "PYTHONPATH=. python recorders/gpu_validate_dsv4.py --out $OUT",
             "context": GRID_CONTEXT, "blocks": GRID_BLOCKS, "rows": rows,
             "passed": all(r["passed"] for r in rows)}, indent=1))
    for name, extra in CLI_RUNS.items():
        more = ["--markdown", str(out / "validate-all.md")] if name == "all" else []
        cmd = [sys.executable, "-m", "memprof", "validate", *extra, "-f", "json", *more]
        t = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
        (out / f"validate-{name}.json").write_text(p.stdout)
        shown = [*extra, "-f", "json"] + (["--markdown", "validate-all.md"] if more else [])
        meta["runs"][name] = {"command": "PYTHONPATH=. python -m memprof validate "
                              + " ".join(shown), "exit_code": p.returncode,
                              "stderr": p.stderr[-2000:], "seconds": round(time.time() - t, 1)}
        print(name, p.returncode, p.stderr[-300:], flush=True)
        (out / "validate-part2-runs.json").write_text(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
