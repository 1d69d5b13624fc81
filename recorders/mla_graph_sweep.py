"""MLA decode at B=64 (R1 TP8 rank: 16 heads, uneven contexts), timed as the GPU runs it.

    PYTHONPATH=. python recorders/mla_graph_sweep.py --out $OUT

For each context length, tile config and split count: the decode of
one layer captured ten times in a CUDA graph and replayed (``_graph_time_ms``), next to the same
call launched eagerly from Python, as a fraction of the device-to-device copy bandwidth measured
in the same run; plus the split and combine kernels' own times from the profiler for the default
config → ``mla-graph-sweep.json``. Inputs are made on the GPU (``_seq_lens`` / ``_block_table`` as
``memprof validate`` makes them, lengths in [ctx/2, ctx]).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
from pathlib import Path

import torch

from memprof.kernels._triton import num_sms
from memprof.kernels.mla_decode import (
    D_LATENT,
    D_QK,
    MLAConfig,
    default_num_splits,
    mla_decode,
    mla_decode_reference,
    mla_mid_shapes,
)
from memprof.kernels.workspace import Workspace
from memprof.validation.mla_tq import (
    _block_table,
    _graph_time_ms,
    _seq_lens,
    _time_ms,
    copy_bandwidth_gbps,
)

CONFIGS = (MLAConfig(32, 16, 4, 2), MLAConfig(32, 16, 4, 3), MLAConfig(64, 16, 4, 3),
           MLAConfig(64, 16, 8, 2))
SPLITS = (None, 8, 12, 24)
BATCH, HEADS, PAGE = 64, 16, 64


def _kernel_times(fn: functools.partial[torch.Tensor]) -> dict[str, float]:
    """Microseconds per call of each kernel the call launches (profiler, 20 calls)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
    return {e.key: e.device_time_total / 20 for e in prof.key_averages()
            if e.device_time_total > 0}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    out = Path(ap.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    copy = copy_bandwidth_gbps(dev)
    rows: list[dict[str, object]] = []
    profiles: dict[str, dict[str, float]] = {}
    for ctx in (8192, 16384, 32768):
        gen = torch.Generator().manual_seed(0)
        lens = _seq_lens(BATCH, ctx, gen)
        bt, nblocks = _block_table(lens, PAGE, gen)
        kv = torch.randn((nblocks, PAGE, D_QK), device=dev, dtype=torch.bfloat16)
        q = torch.randn((BATCH, HEADS, D_QK), device=dev, dtype=torch.bfloat16)
        bt, lens = bt.to(dev), lens.to(dev)
        nbytes = (int(lens.sum()) * D_QK * 2 + BATCH * HEADS * D_QK * 2
                  + BATCH * HEADS * D_LATENT * 2)
        ref = mla_decode_reference(q, kv, bt, lens, D_QK ** -0.5)
        for cfg in CONFIGS:
            for splits in SPLITS:
                s = splits or default_num_splits(BATCH, 1, ctx, cfg.block_n, num_sms(dev))
                ws = Workspace(dev, name="mla_mid")
                mo, ml = mla_mid_shapes(BATCH, HEADS, s)
                ws.get_simultaneous((mo, torch.float32), (ml, torch.float32))
                o = torch.empty((BATCH, HEADS, D_LATENT), device=dev, dtype=torch.bfloat16)
                fn = functools.partial(mla_decode, q, kv, bt, lens, D_QK ** -0.5, out=o,
                                       workspace=ws, num_splits=s, config=cfg, max_seq_len=ctx)
                fn()
                rel = float((o.float() - ref).norm() / ref.norm())
                g_ms = _graph_time_ms(fn, dev, 20)
                e_ms = _time_ms(fn, dev, 20)
                row = {"ctx": ctx, "config": dataclasses.asdict(cfg), "splits": s,
                       "default_splits": splits is None, "rel_err": rel, "graph_ms": g_ms,
                       "eager_ms": e_ms, "fraction": nbytes / (g_ms * 1e-3) / 1e9 / copy,
                       "eager_fraction": nbytes / (e_ms * 1e-3) / 1e9 / copy}
                print(json.dumps(row), flush=True)
                rows.append(row)
                if splits is None and cfg == CONFIGS[0]:
                    profiles[str(ctx)] = _kernel_times(fn)
                del ws
        del kv
        torch.cuda.empty_cache()
    (out / "mla-graph-sweep.json").write_text(json.dumps(
        {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
         "command": "PYTHONPATH=. python recorders/mla_graph_sweep.py --out $OUT",
         "copy_gbps": copy, "sms": num_sms(dev), "batch": BATCH, "heads": HEADS,
         "rows": rows, "kernel_us": profiles}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
