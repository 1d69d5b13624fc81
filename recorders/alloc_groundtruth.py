"""Ground truth for ``memprof.alloc``: op sequences replayed through PyTorch's real CUDA caching
allocator, the allocator's state recorded after every op.

Run on the GPU machine from the repository root::

    PYTHONPATH=. python recorders/alloc_groundtruth.py --out $OUT [--confs NAME,NAME]
    PYTHONPATH=. python recorders/alloc_groundtruth.py --roundup-table --out $OUT

For each allocator config of ``CONFS`` (default; ``expandable_segments:True``;
``max_split_size_mb:128,roundup_power2_divisions:4``; three list forms of
``roundup_power2_divisions``, two of them mixed with ``max_split_size_mb``) and each sequence, a
fresh process sets ``PYTORCH_CUDA_ALLOC_CONF`` before importing torch and replays the ops
(``torch.empty(n, dtype=torch.uint8, device="cuda")`` per alloc, ``del`` per free,
``torch.cuda.empty_cache()`` per ``"e"``), recording ``allocated_bytes.all.current``,
``reserved_bytes.all.current``, ``inactive_split_bytes.all.current`` and ``segment.all.current``
after each op. One JSON per config goes to ``$OUT`` (``alloc-golden-<conf>.json``);
``tests/alloc/test_alloc_golden.py`` replays them through the simulator. Sequences: ``random``
(every size class, > 1 GiB included, many frees, some empty_cache), ``rounding`` (one request at a
time in every power-of-two interval of ``roundup_power2_divisions``, 1000 B to 40 GiB, each freed
and the cache emptied: the allocated bytes after each alloc are the rounded size), ``model_run``
(the allocations of a real ``memprof trace`` of Qwen3-0.6B on an H200, from its
``_dump_snapshot``), ``per_layer`` (60 layers of TurboQuant-style registered decode buffers between
weight-sized tensors, seed 001's shape), ``oom_retry`` (``empty_cache`` and the OOM-retry path
under ``set_per_process_memory_fraction``).

``--roundup-table`` compiles a ten-line C++ program against the installed torch's headers and
``libc10.so`` (g++ needed), has torch's own ``AcceleratorAllocatorConfig::parseArgs`` parse each
conf of ``ROUNDUP_TABLE_CONFS`` and writes the 16 divisions it keeps (or its error) to
``roundup-table-<torch version>.json``; ``tests/alloc/test_roundup.py`` checks ``parse_conf``
against every such table. It needs no GPU (a CPU wheel of torch has the same parser).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

MiB, GiB = 1 << 20, 1 << 30
CONFS = {"default": "", "expandable": "expandable_segments:True",
         "mss128-rp4": "max_split_size_mb:128,roundup_power2_divisions:4",
         # the list form: a key names [K MiB, 2K MiB); the first also fills below it; '>' fills
         # above the last key; intervals between keys stay 0 (not rounded)
         "rp-256x8-gt2": "roundup_power2_divisions:[256:8,>:2]",
         "rp-64x8-256x4-gt1": "roundup_power2_divisions:[64:8,256:4,>:1]",
         "rp-gaps-1024": "roundup_power2_divisions:[2:4,32:2,1024:8,4096:2]",
         "mss128-rp-256x8-gt2": "max_split_size_mb:128,roundup_power2_divisions:[256:8,>:2]",
         "mss512-nsr64-rp-64x8-256x4-gt1": "max_split_size_mb:512,max_non_split_rounding_mb:64,"
                                           "roundup_power2_divisions:[64:8,256:4,>:1]"}
ROOT = Path(__file__).resolve().parents[1]


def seq_random(seed: int = 7, n: int = 3000) -> list[list[object]]:
    rng = random.Random(seed)
    sizes = [lambda: rng.randint(1, 511), lambda: rng.randint(512, MiB),
             lambda: rng.randint(MiB + 1, 10 * MiB), lambda: rng.randint(10 * MiB, 512 * MiB),
             lambda: rng.randint(GiB, 3 * GiB)]
    weights = [30, 30, 20, 18, 2]
    ops: list[list[object]] = []
    live: list[int] = []
    ident = 0
    for _ in range(n):
        r = rng.random()
        if live and r < 0.45:
            ops.append(["f", live.pop(rng.randrange(len(live)))])
        elif r < 0.47:
            ops.append(["e"])
        else:
            ident += 1
            ops.append(["a", ident, rng.choices(sizes, weights)[0]()])
            live.append(ident)
        big = sum(int(op[2]) for op in ops if op[0] == "a" and op[1] in live)  # type: ignore[arg-type]
        while big > 40 * GiB and live:
            victim = live.pop(0)
            ops.append(["f", victim])
            big = sum(int(op[2]) for op in ops if op[0] == "a" and op[1] in live)  # type: ignore[arg-type]
    return ops


def seq_model_run() -> list[list[object]]:
    from memprof.alloc.replay import ops_from_snapshot

    path = ROOT / "reports" / "gpu" / "trace" / "qwen3-0.6b.pickle.gz"
    data = pickle.loads(gzip.decompress(path.read_bytes()))
    ops = ops_from_snapshot(data, path)
    out: list[list[object]] = []
    for kind, ident, nbytes, _stream in ops:
        if kind == "a":
            out.append(["a", ident, min(nbytes, GiB)])  # KV tensors capped at 1 GiB each
        elif kind == "f":
            out.append(["f", ident])
        else:
            out.append(["e"])
    return out


def seq_per_layer() -> list[list[object]]:
    b, hq, s, d = 256, 64, 32, 128
    ops: list[list[object]] = []
    ident = 0
    for layer in range(60):
        for nbytes in (5120 * 1024 * 2, 25600 * 5120 * 2, b * hq * s * (d + 1) * 4,
                       b * hq * d * 4, b * hq * 4):
            ident += 1
            ops.append(["a", ident, nbytes])
        if layer % 7 == 6:
            ops.append(["f", ident - 3])  # a transient weight conversion buffer
    return ops


def seq_oom_retry() -> list[list[object]]:
    ops: list[list[object]] = [["a", 1, 3 * GiB], ["a", 2, 3 * GiB], ["f", 1],
                               ["a", 3, 4 * GiB], ["a", 4, 12 * MiB], ["f", 3], ["e"],
                               ["a", 5, 5 * GiB], ["a", 6, 6 * GiB], ["f", 2],
                               ["a", 7, 512 * MiB], ["f", 5], ["a", 8, 7 * GiB]]
    return ops


def seq_rounding() -> list[list[object]]:
    """One request in each power-of-two interval (and at its edges), freed and the cache
    emptied after each, so the allocated bytes after each alloc are ``round_size``'s answer."""
    rng = random.Random(11)
    sizes = [1000, 4097, 100_000, 700_001, MiB - 1]
    for i in range(16):  # interval i: [2^(20+i), 2^(21+i)); the last one is clamped
        lo = 1 << (20 + i)
        if lo > 32 * GiB:
            break
        hi = min(2 * lo, 40 * GiB)
        sizes += [lo, lo + 1, rng.randint(lo, hi - 1), rng.randint(lo, hi - 1), hi - 1]
    sizes += [int(343.7 * MiB), int(275.1 * MiB)]  # the two sizes of the review
    ops: list[list[object]] = []
    for ident, n in enumerate(sizes, 1):
        ops += [["a", ident, n], ["f", ident], ["e"]]
    return ops


SEQUENCES = {"rounding": seq_rounding, "random": seq_random, "model_run": seq_model_run,
             "per_layer": seq_per_layer, "oom_retry": seq_oom_retry}
FRACTION_BYTES = {"oom_retry": 8 * GiB}  # set_per_process_memory_fraction(this / total)


def child(seq: str, ops_path: str, out_path: str) -> None:
    """In a fresh process (PYTORCH_CUDA_ALLOC_CONF already set): replay and record."""
    import torch

    ops = json.loads(Path(ops_path).read_text())
    total = torch.cuda.mem_get_info()[1]
    fraction = None
    if seq in FRACTION_BYTES:
        fraction = FRACTION_BYTES[seq] / total
        torch.cuda.set_per_process_memory_fraction(fraction)
    live: dict[int, torch.Tensor] = {}
    states, ooms = [], []
    for n, op in enumerate(ops):
        if op[0] == "a":
            try:
                live[op[1]] = torch.empty(op[2], dtype=torch.uint8, device="cuda")
            except torch.OutOfMemoryError:
                ooms.append(n)
        elif op[0] == "f":
            live.pop(op[1], None)
        else:
            torch.cuda.empty_cache()
        s = torch.cuda.memory_stats()
        states.append([s["allocated_bytes.all.current"], s["reserved_bytes.all.current"],
                       s["inactive_split_bytes.all.current"], s["segment.all.current"]])
    s = torch.cuda.memory_stats()
    Path(out_path).write_text(json.dumps({
        "ops": ops, "states": states, "ooms": ooms, "total_bytes": total,
        "fraction": fraction, "num_alloc_retries": s["num_alloc_retries"],
        "num_ooms": s["num_ooms"]}))


ROUNDUP_TABLE_CONFS = [
    "roundup_power2_divisions:" + v for v in (
        "4", "1", "2", "16", "0", "3", "[256:8,>:2]", "[64:8,256:4,>:1]", "[1:2]", "[2:2]",
        "[>:2]", "[>:2,256:8]", "[256:8,64:4]", "[256:8,256:2]", "[1:4,>:2,>:8]", "[100:4]",
        "[0:2]", "[4:3]", "[1024:4,2048:2]", "[65536:2]", "[9223372036854775808:2]",
        "[18446744073709551616:2]", "[]", "[256:8,>:2,]", "[ 256 : 8 , > : 2 ]",
        "[2:4,32:2,1024:8,4096:2]", "[64:8,256:4,1024:4,>:1]", "[16:0,>:4]", "[1:2",
        "[,]", "[256:8:4]", "[:2]")] + [
    "roundup_power2_divisions:2,roundup_power2_divisions:[4:4]",
    "max_split_size_mb:128,roundup_power2_divisions:[256:8,>:2]"]
PROBE_CPP = r"""
#include <c10/core/AllocatorConfig.h>
#include <cstdio>
#include <exception>
using c10::CachingAllocator::AcceleratorAllocatorConfig;
int main(int argc, char** argv) {
  for (int a = 1; a < argc; ++a) {
    try {
      AcceleratorAllocatorConfig::instance().parseArgs(argv[a]);
      printf("OK");
      for (auto x : AcceleratorAllocatorConfig::roundup_power2_divisions()) printf(" %zu", x);
      printf("\n");
    } catch (const std::exception& e) {
      printf("ERR\n");
    }
  }
}
"""


def roundup_table(out: Path) -> None:
    """torch's own parser on ``ROUNDUP_TABLE_CONFS`` (see the module docstring)."""
    import torch

    tdir = Path(torch.__file__).parent
    src, exe = out / "probe.cpp", out / "probe"
    src.write_text(PROBE_CPP)
    cxx = shutil.which("g++") or shutil.which("c++") or "g++"
    subprocess.run([cxx, "-std=c++17", f"-I{tdir / 'include'}", str(src), f"-L{tdir / 'lib'}",
                    "-lc10", f"-Wl,-rpath,{tdir / 'lib'}", "-o", str(exe)], check=True)
    rows = {}
    for conf in ROUNDUP_TABLE_CONFS:  # one process each: parseArgs keeps state between calls
        line = subprocess.run([str(exe), conf], capture_output=True, text=True,
                              check=True).stdout.split()
        rows[conf] = [int(x) for x in line[1:]] if line[0] == "OK" else "error"
    src.unlink()
    exe.unlink()
    head = json.dumps({"torch": torch.__version__, "git_version": torch.version.git_version,
                       "command": "PYTHONPATH=. python recorders/alloc_groundtruth.py "
                                  "--roundup-table --out $OUT"})
    body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in rows.items())
    (out / f"roundup-table-torch{torch.__version__.split('+')[0]}.json").write_text(
        head[:-1] + ',\n "divisions": {\n' + body + "\n }\n}\n")


def machine() -> dict[str, object]:
    import torch

    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, check=False).stdout.strip()
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "driver": smi.splitlines()[0] if smi else None,
            "gpu": torch.cuda.get_device_name()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--child", nargs=3)
    ap.add_argument("--confs", default=",".join(CONFS), help="names of CONFS to record")
    ap.add_argument("--roundup-table", action="store_true")
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.roundup_table:
        roundup_table(out)
        return 0
    tmp = out / "tmp"
    tmp.mkdir(exist_ok=True)
    seqs = {name: fn() for name, fn in SEQUENCES.items()}
    for name, ops in seqs.items():
        (tmp / f"{name}.ops.json").write_text(json.dumps(ops))
    names = args.confs.split(",")
    where = machine()
    for cname in names:
        conf = CONFS[cname]
        flag = "" if names == list(CONFS) else f" --confs {args.confs}"
        doc = {"conf": conf, **where,
               "command": f"PYTHONPATH=. python recorders/alloc_groundtruth.py --out $OUT{flag}",
               "sequences": {}}
        for name in seqs:
            res = tmp / f"{cname}-{name}.json"
            t0 = time.time()
            env = {**os.environ, "PYTORCH_CUDA_ALLOC_CONF": conf, "PYTORCH_ALLOC_CONF": conf}
            proc = subprocess.run([sys.executable, __file__, "--child", name,
                                   str(tmp / f"{name}.ops.json"), str(res)],
                                  env=env, capture_output=True, text=True, check=False)
            if proc.returncode:
                print(f"{cname} {name}: FAILED\n{proc.stderr[-2000:]}", flush=True)
                continue
            doc["sequences"][name] = json.loads(res.read_text())
            r = doc["sequences"][name]
            print(f"{cname:10s} {name:10s} ops {len(r['ops']):6d}  final reserved "
                  f"{r['states'][-1][1]:>14,}  ooms {len(r['ooms'])} retries "
                  f"{r['num_alloc_retries']}  {time.time() - t0:.1f}s", flush=True)
        (out / f"alloc-golden-{cname}.json").write_text(json.dumps(doc))
    for p in tmp.iterdir():
        p.unlink()
    tmp.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
