"""GPU check + timing of the MLA and TurboQuant decode kernels and their scratch policies.

Run on one H100/H200 (about 3-5 minutes)::

    PYTHONPATH=. python recorders/bench_kernels_mla.py --out $OUT

Writes ``$OUT/bench_kernels_mla.json`` (every number) and prints a short table last. Steps:

1. device-to-device copy bandwidth (the ceiling the attention kernels are compared with);
2. MLA correctness on fresh random inputs (several shapes, empty requests, poisoned outputs);
3. MLA tile sweep at R1 TP8 shapes (H=16, B=64, 16k context): parity + time + % of copy;
4. TurboQuant k8v4 correctness and a small tile sweep (Qwen3-32B: Hq=64, Hkv=8, D=128);
5. the validation runner (``memprof.validation.mla_tq``) for R1 CUTLASS MLA at B=64 / 16k
   (bandwidth target), B=512 and B=2048 (per-layer 61 × B × 128 × 512 × 2 B vs one) and for
   Qwen3-32B TurboQuant at --max-num-seqs 256 (60 × 278,986,752 B vs one).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from memprof.kernels.mla_decode import MLAConfig, mla_decode, mla_decode_reference
from memprof.kernels.tq_decode import (
    tq_buffer_specs,
    tq_cache_shape,
    tq_decode,
    tq_decode_reference,
    tq_store_k8v4,
)
from memprof.validation.mla_tq import (
    KernelValidation,
    copy_bandwidth_gbps,
    validate_mla,
    validate_tq,
)

MLA_SCALE = 192 ** -0.5
MLA_SWEEP = [MLAConfig(block_n=bn, block_h=16, num_warps=w, num_stages=s)
             for bn, w, s in [(16, 4, 3), (32, 4, 2), (32, 4, 3), (32, 8, 2), (32, 8, 3),
                              (64, 4, 2), (64, 8, 2), (64, 8, 3)]]
TQ_SWEEP = [(16, 4, 2), (16, 4, 3), (32, 4, 2), (32, 8, 2), (64, 8, 2)]  # block_n, warps, stages


def time_ms(fn: Callable[[], object], reps: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    o, r = out.double(), ref.double()
    if not bool(torch.isfinite(o).all()):
        return float("nan")
    return float((o - r).norm() / r.norm().clamp_min(1e-30))


def mla_inputs(B: int, H: int, lens: list[int], page: int = 64, seed: int = 0
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    per = [math.ceil(n / page) for n in lens]
    nb = max(1, sum(per))
    perm = torch.randperm(nb, device="cuda", generator=g).to(torch.int32)
    bt = torch.zeros((B, max(1, max(per))), dtype=torch.int32, device="cuda")  # (B, W)
    pos = 0
    for b, n in enumerate(per):
        bt[b, :n] = perm[pos:pos + n]
        pos += n
    q = torch.randn((B, H, 576), device="cuda", generator=g).to(torch.bfloat16)  # (B, H, 576)
    kv = torch.randn((nb, page, 576), device="cuda", generator=g).to(torch.bfloat16)
    return q, kv, bt, torch.tensor(lens, dtype=torch.int32, device="cuda")


def mla_correctness() -> list[dict[str, Any]]:
    cases = [  # (B, H, lens, splits, config)
        (4, 16, [1, 63, 64, 1000], None, MLAConfig()),
        (3, 16, [0, 4097, 300], 7, MLAConfig(block_n=64, num_warps=8)),
        (2, 128, [2048, 77], None, MLAConfig(block_h=64, num_warps=8)),
        (2, 20, [513, 129], 3, MLAConfig(block_n=16)),
        (8, 16, [8192] * 8, None, MLAConfig(block_n=32, num_warps=4, num_stages=3)),
    ]
    rows = []
    for i, (B, H, lens, splits, cfg) in enumerate(cases):
        q, kv, bt, sl = mla_inputs(B, H, lens, seed=100 + i)
        out = torch.full((B, H, 512), float("nan"), dtype=torch.bfloat16, device="cuda")
        row: dict[str, Any] = {"B": B, "H": H, "lens": lens, "splits": splits,
                               "config": dataclasses.asdict(cfg)}
        try:
            mla_decode(q, kv, bt, sl, MLA_SCALE, out=out, num_splits=splits, config=cfg)
            torch.cuda.synchronize()
            ref = mla_decode_reference(q, kv, bt, sl, MLA_SCALE)
            nonempty = [b for b, n in enumerate(lens) if n]
            row["rel_err"] = rel_err(out[nonempty], ref[nonempty])
            row["all_written"] = bool(torch.isfinite(out).all())
            row["passed"] = row["all_written"] and row["rel_err"] <= 1e-2
        except Exception as e:
            row.update(passed=False, error=f"{type(e).__name__}: {e}")
        rows.append(row)
    return rows


def mla_sweep(copy_gbps: float, B: int = 64, ctx: int = 16384, H: int = 16
              ) -> list[dict[str, Any]]:
    q, kv, bt, sl = mla_inputs(B, H, [ctx] * B, seed=7)
    ref = mla_decode_reference(q, kv, bt, sl, MLA_SCALE)
    nbytes = B * ctx * 576 * 2 + B * H * 576 * 2 + B * H * 512 * 2
    rows = []
    for cfg in MLA_SWEEP:
        row: dict[str, Any] = {"B": B, "ctx": ctx, "H": H, "config": dataclasses.asdict(cfg)}
        try:
            out = torch.full((B, H, 512), float("nan"), dtype=torch.bfloat16, device="cuda")
            fn = lambda cfg=cfg, out=out: mla_decode(q, kv, bt, sl, MLA_SCALE, out=out,  # noqa: E731
                                                     config=cfg, max_seq_len=ctx)
            fn()
            torch.cuda.synchronize()
            row["rel_err"] = rel_err(out, ref)
            ms = time_ms(fn)
            row.update(ms=ms, gbps=nbytes / ms / 1e6, fraction_of_copy=nbytes / ms / 1e6
                       / copy_gbps,
                       passed=row["rel_err"] <= 1e-2)
        except Exception as e:
            row.update(passed=False, error=f"{type(e).__name__}: {str(e)[:300]}")
        rows.append(row)
    for splits in (4, 8, 16, 32):  # the split count at the default tiles
        row = {"B": B, "ctx": ctx, "H": H, "config": dataclasses.asdict(MLAConfig()),
               "num_splits": splits}
        try:
            ms = time_ms(lambda splits=splits: mla_decode(q, kv, bt, sl, MLA_SCALE,
                                                          num_splits=splits))
            row.update(ms=ms, gbps=nbytes / ms / 1e6, fraction_of_copy=nbytes / ms / 1e6
                       / copy_gbps, splits_only=True)
        except Exception as e:
            row.update(error=f"{type(e).__name__}: {str(e)[:300]}")
        rows.append(row)
    return rows


def mla_scaling(cfg: MLAConfig, copy_gbps: float) -> list[dict[str, Any]]:
    rows = []
    for B, ctx, H, bh in [(64, 8192, 16, 16), (64, 32768, 16, 16), (128, 8192, 16, 16),
                          (256, 4096, 16, 16), (64, 8192, 128, 64)]:
        c = dataclasses.replace(cfg, block_h=bh) if H > 16 else cfg
        if H > 16:
            c = dataclasses.replace(c, num_warps=8)
        q, kv, bt, sl = mla_inputs(B, H, [ctx] * B, seed=B + ctx)
        nbytes = B * ctx * 576 * 2 + B * H * 576 * 2 + B * H * 512 * 2
        row: dict[str, Any] = {"B": B, "ctx": ctx, "H": H, "config": dataclasses.asdict(c)}
        try:
            ms = time_ms(lambda q=q, kv=kv, bt=bt, sl=sl, c=c, ctx=ctx: mla_decode(
                q, kv, bt, sl, MLA_SCALE, config=c, max_seq_len=ctx))
            row.update(ms=ms, gbps=nbytes / ms / 1e6, fraction_of_copy=nbytes / ms / 1e6
                       / copy_gbps)
        except Exception as e:
            row.update(error=f"{type(e).__name__}: {str(e)[:300]}")
        rows.append(row)
        del q, kv, bt, sl
        torch.cuda.empty_cache()
    return rows


def tq_inputs(B: int, ctx: int, hq: int = 64, hkv: int = 8, d: int = 128, page: int = 16,
              seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    nper = math.ceil(ctx / page)
    nb = B * nper
    bt = torch.randperm(nb, device="cuda", generator=g).to(torch.int32).view(B, nper)
    cache = torch.zeros(tq_cache_shape(nb, page, hkv, d), dtype=torch.uint8, device="cuda")
    k = torch.randn((nb * page, hkv, d), device="cuda", generator=g).to(torch.bfloat16)
    v = torch.randn((nb * page, hkv, d), device="cuda", generator=g).to(torch.bfloat16)
    tq_store_k8v4(k, v, cache, torch.arange(nb * page, device="cuda"))
    q = torch.randn((B, hq, d), device="cuda", generator=g).to(torch.bfloat16)
    sl = torch.full((B,), ctx, dtype=torch.int32, device="cuda")
    return q, cache, bt, sl, k, v


def tq_correctness_and_sweep(copy_gbps: float) -> list[dict[str, Any]]:
    rows = []
    B, ctx = 64, 8192
    q, cache, bt, sl, k, v = tq_inputs(B, ctx, seed=3)
    ref, ref_lse = tq_decode_reference(q, cache, bt, sl, 128 ** -0.5)
    # plain attention over the unquantised K/V for request 0
    rows0 = bt[0].long().repeat_interleave(16) * 16 + torch.arange(16, device="cuda").repeat(
        bt.shape[1])
    k0 = k[rows0[:ctx]].float().transpose(0, 1).repeat_interleave(8, 0)  # (Hq, n, D)
    v0 = v[rows0[:ctx]].float().transpose(0, 1).repeat_interleave(8, 0)
    s0 = torch.einsum("hd,hnd->hn", q[0].float(), k0) * 128 ** -0.5
    plain0 = torch.einsum("hn,hnd->hd", torch.softmax(s0, -1), v0)
    nbytes = B * ctx * 8 * 196 + B * 64 * 128 * 2 + B * 64 * 128 * 4
    for bn, w, st in TQ_SWEEP:
        row: dict[str, Any] = {"B": B, "ctx": ctx, "block_n": bn, "num_warps": w,
                               "num_stages": st}
        try:
            bufs = tuple(torch.full(s, float("nan"), dtype=dt, device="cuda")
                         for s, dt in tq_buffer_specs(B, 64, 128))
            fn = lambda bufs=bufs, bn=bn, w=w, st=st: tq_decode(  # noqa: E731
                q, cache, bt, sl, 128 ** -0.5, buffers=bufs, block_n=bn, num_warps=w,
                num_stages=st)
            out, lse = fn()
            torch.cuda.synchronize()
            row["rel_err"] = rel_err(out, ref)
            row["lse_max_abs"] = float((lse - ref_lse).abs().max())
            row["rel_err_vs_unquantised_req0"] = rel_err(out[0], plain0)
            ms = time_ms(fn)
            row.update(ms=ms, gbps=nbytes / ms / 1e6, fraction_of_copy=nbytes / ms / 1e6
                       / copy_gbps,
                       passed=row["rel_err"] <= 1e-2 and row["rel_err_vs_unquantised_req0"] <= 0.3)
        except Exception as e:
            row.update(passed=False, error=f"{type(e).__name__}: {str(e)[:300]}")
        rows.append(row)
    return rows


def summarize(v: KernelValidation) -> dict[str, Any]:
    by = {r.policy: r for r in v.runs}
    pl, sh = by.get("per-layer"), by.get("shared")
    return {
        "kernel": v.kernel, "B": v.batch, "ctx": v.context_len, "passed": v.passed,
        "parity": v.parity_passed, "memory": v.memory_passed,
        "per_layer_scaled": pl.scaled_bytes if pl else None,
        "per_layer_estimate": pl.estimate_bytes if pl else None,
        "shared": sh.scaled_bytes if sh else None,
        "shared_estimate": sh.estimate_bytes if sh else None,
        "alloc_delta_per_layer_run": pl.allocated_delta_bytes if pl else None,
        "alloc_delta_shared_run": sh.allocated_delta_bytes if sh else None,
        "ratio": v.shared_over_per_layer,
        "bw_fraction": v.bandwidth.fraction if v.bandwidth else None,
        "bw_target": v.bandwidth.target if v.bandwidth else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true", help="skip the sweeps")
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU", file=sys.stderr)
        return 3
    import triton

    t0 = time.time()
    res: dict[str, Any] = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "triton": triton.__version__,
        "sms": torch.cuda.get_device_properties(0).multi_processor_count}
    log = out_dir / "bench_kernels_mla.log"

    def step(name: str, fn: Callable[[], Any]) -> Any:
        t = time.time()
        try:
            val = fn()
        except Exception:
            val = {"error": traceback.format_exc()[-2000:]}
        res[name] = val
        res.setdefault("seconds", {})[name] = round(time.time() - t, 1)
        with log.open("a") as f:
            f.write(f"{name}: {time.time() - t:.1f}s\n")
        (out_dir / "bench_kernels_mla.json").write_text(json.dumps(res, indent=1, default=str))
        return val

    copy_gbps = step("copy_gbps", lambda: copy_bandwidth_gbps(torch.device("cuda")))
    step("mla_correctness", mla_correctness)
    best = MLAConfig()
    if not args.quick:
        sweep = step("mla_sweep", lambda: mla_sweep(copy_gbps))
        ok = [r for r in sweep if isinstance(r, dict) and r.get("passed")
              and not r.get("splits_only")]
        if ok:
            best = MLAConfig(**max(ok, key=lambda r: r["fraction_of_copy"])["config"])
        res["mla_best_config"] = dataclasses.asdict(best)
        step("mla_scaling", lambda: mla_scaling(best, copy_gbps))
        step("tq_sweep", lambda: tq_correctness_and_sweep(copy_gbps))
    vals: list[tuple[str, KernelValidation]] = []
    for name, fn in [
        ("validate_mla_B64_16k", lambda: validate_mla(batch=64, context_len=16384, layers=4,
                                                       device="cuda", config=best)),
        ("validate_mla_B512", lambda: validate_mla(batch=512, context_len=512, layers=4,
                                                    device="cuda", config=best,
                                                    measure_bandwidth=False)),
        ("validate_mla_B2048", lambda: validate_mla(batch=2048, context_len=256, layers=4,
                                                     device="cuda", config=best,
                                                     measure_bandwidth=False)),
        ("validate_tq_B256", lambda: validate_tq(batch=256, context_len=1024, layers=4,
                                                  device="cuda")),
    ]:
        v = step(name, fn)
        if isinstance(v, KernelValidation):
            res[name] = {"result": dataclasses.asdict(v), "passed": v.passed,
                         "summary": summarize(v)}
            vals.append((name, v))
            (out_dir / "bench_kernels_mla.json").write_text(json.dumps(res, indent=1,
                                                                       default=str))
    res["total_seconds"] = round(time.time() - t0, 1)
    (out_dir / "bench_kernels_mla.json").write_text(json.dumps(res, indent=1, default=str))

    # --- the table, printed last ---
    print(f"\n{res['device']}  torch {res['torch']}  triton {res['triton']}  "
          f"copy {copy_gbps:.0f} GB/s  ({res['total_seconds']} s)")
    print("MLA correctness:", " ".join(
        f"{r.get('rel_err', float('nan')):.1e}{'' if r.get('passed') else '!FAIL'}"
        for r in res["mla_correctness"]) if isinstance(res["mla_correctness"], list)
        else res["mla_correctness"])
    for key in ("mla_sweep", "mla_scaling", "tq_sweep"):
        rows = res.get(key)
        if not isinstance(rows, list):
            if rows is not None:
                print(key, "ERROR", str(rows)[-300:])
            continue
        print(f"{key}:")
        for r in rows:
            cfg = r.get("config") or {k: r[k] for k in ("block_n", "num_warps", "num_stages")}
            tag = f"B={r['B']} ctx={r['ctx']}" + (f" H={r['H']}" if "H" in r else "")
            if "num_splits" in r:
                tag += f" S={r['num_splits']}"
            if "error" in r:
                print(f"  {tag} {cfg} ERROR {r['error'][:120]}")
                continue
            print(f"  {tag} bn={cfg.get('block_n')} bh={cfg.get('block_h', '-')} "
                  f"w={cfg.get('num_warps')} st={cfg.get('num_stages')}  "
                  f"{r['ms']:.3f} ms {r['gbps']:.0f} GB/s {100 * r['fraction_of_copy']:.1f}% "
                  f"err={r.get('rel_err', float('nan')):.1e}")
    print(f"{'validation':<22} {'pass':<5} {'per-layer→model':>16} {'estimate':>16} "
          f"{'shared':>12} {'estimate':>12} {'sh/pl':>6} {'bw%':>6}")
    for name, v in vals:
        s = summarize(v)
        bw = "-" if s["bw_fraction"] is None else f"{100 * s['bw_fraction']:.1f}"
        ratio = "-" if s["ratio"] is None else f"{s['ratio']:.3f}"
        print(f"{name:<22} {v.passed!s:<5} {s['per_layer_scaled']!s:>16} "
              f"{s['per_layer_estimate']!s:>16} {s['shared']!s:>12} {s['shared_estimate']!s:>12} "
              f"{ratio:>6} {bw:>6}")
    for name in ("validate_mla_B64_16k", "validate_mla_B512", "validate_mla_B2048",
                 "validate_tq_B256"):
        r = res.get(name)
        if isinstance(r, dict) and "error" in r:
            print(name, "ERROR", str(r["error"])[-400:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
