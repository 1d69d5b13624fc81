"""Split count × tile sweep of the MLA decode at B=64, as ``memprof validate`` measures it.

    PYTHONPATH=. python recorders/mla_split_sweep.py --out $OUT

Each point is ``validate_mla`` (uneven context lengths, R1 TP8 rank: 16 heads) with the shared
policy, a fixed split count and tile config; it records the kernel's fraction of the copy
bandwidth measured in the same run → ``mla-split-sweep.json``. The default split heuristic
(``default_num_splits``) and ``MLAConfig`` are chosen from it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from pathlib import Path

import torch

from memprof.kernels.mla_decode import MLAConfig
from memprof.validation.mla_tq import validate_mla

CONFIGS = (MLAConfig(32, 16, 4, 2), MLAConfig(64, 16, 8, 2), MLAConfig(64, 16, 4, 2))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    out = Path(ap.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for ctx in (8192, 16384):
        for cfg in CONFIGS:
            for splits in (None, 8, 16, 24, 32, 48):
                v = validate_mla(batch=64, context_len=ctx, layers=1, device="cuda",
                                 policies=("shared",), num_splits=splits, config=cfg, reps=20,
                                 rounds=1, check_parity=False)
                assert v.bandwidth is not None
                row = {"ctx": ctx, "config": dataclasses.asdict(cfg), "splits": v.num_splits,
                       "default_splits": splits is None, "fraction": v.bandwidth.fraction,
                       "kernel_ms": v.bandwidth.kernel_ms}
                print(json.dumps(row), flush=True)
                rows.append(row)
    (out / "mla-split-sweep.json").write_text(json.dumps(
        {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
         "command": "PYTHONPATH=. python recorders/mla_split_sweep.py --out $OUT",
         "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
