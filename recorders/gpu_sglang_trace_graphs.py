"""``memprof trace --engine sglang`` on the GPU of this machine, before and after the replica
builds SGLang's decode-graph tensors (memprof/trace/sglang_capture.py), for the golden of
reports/gpu/sglang-trace-graphs.

Run on the GPU machine from a checkout holding both trees (torch with CUDA)::

    python recorders/gpu_sglang_trace_graphs.py --out $OUT --before OLD_ROOT --after NEW_ROOT

``--before`` / ``--after``: the folders each side runs from, with ``PYTHONPATH`` set to them
(each holds a ``memprof`` package). Every trace runs in a fresh process (``python -m memprof
trace --device cuda -f json``) so one trace's memory never shows in the next. The after side
also writes ``--snapshot`` (to a scratch folder, not kept), from which this script sums the reserved
segments by memory pool and stream: the graphs' private pool apart from the ordinary pool, a
reading independent of the trace's own rows, and lists block by block the ordinary pool's
segments on the other streams (the capture stream's). Writes ``--name`` (default
``sglang-trace-graphs-h200.json``): per deployment the two sides' graph rows (estimated, traced),
the snapshot's pools and those blocks.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RUNS: dict[str, list[str]] = {
    "qwen3-0.6b-sglang-0.5.9": ["-m", "qwen3-0.6b", "--engine-version", "0.5.9"],
    "qwen3-0.6b-sglang-0.4.10": ["-m", "qwen3-0.6b", "--engine-version", "0.4.10"],
    "llama-3.1-8b-sglang-0.5.9": ["-m", "llama-3.1-8b", "--engine-version", "0.5.9"],
    "llama-3.1-8b-sglang-0.4.10": ["-m", "llama-3.1-8b", "--engine-version", "0.4.10"],
}
COMMON = ["--gpu", "H200", "--engine", "sglang", "--device", "cuda", "-f", "json"]


def _graph_rows(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: c.get(k) for k in ("name", "estimated_bytes", "traced_bytes", "how")}
            for c in trace.get("components", []) if c.get("category") == "cudagraph"]


def _pools(snapshot: Path) -> dict[str, int]:
    """Reserved bytes of the snapshot's segments by (pool id, stream)."""
    data = pickle.loads(snapshot.read_bytes())
    out: dict[str, int] = {}
    for seg in data.get("segments", []):
        key = f"pool {tuple(seg.get('segment_pool_id', ()))} stream {seg.get('stream')}"
        out[key] = out.get(key, 0) + int(seg["total_size"])
    return out


def _side_blocks(snapshot: Path) -> list[dict[str, Any]]:
    """The ordinary pool's segments on streams other than the default one (the capture
    stream's), block by block: what holds them after the window's ``empty_cache``."""
    data = pickle.loads(snapshot.read_bytes())
    out: list[dict[str, Any]] = []
    for seg in data.get("segments", []):
        if tuple(seg.get("segment_pool_id", ())) != (0, 0) or not seg.get("stream"):
            continue
        out.append({"stream": seg.get("stream"), "segment_type": seg.get("segment_type"),
                    "total_size": int(seg["total_size"]),
                    "blocks": [{k: b.get(k) for k in ("size", "requested_size", "state")}
                               for b in seg.get("blocks", [])]})
    return out


def _run(root: str, flags: list[str], snapshot: Path | None, timeout: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=root, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "memprof", "trace", *flags, *COMMON]
    if snapshot is not None:
        cmd += ["--snapshot", str(snapshot)]
    t0 = time.perf_counter()
    # run from ``root``: ``python -m`` puts the working directory first on sys.path, ahead of
    # PYTHONPATH, so another tree's package there would be the one imported
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                       check=False, cwd=root)
    which = subprocess.run([sys.executable, "-c", "import memprof; print(memprof.__file__)"],
                           capture_output=True, text=True, env=env, cwd=root, check=False)
    rec: dict[str, Any] = {"command": " ".join(["cd " + root + " &&", "python", *cmd[1:]]),
                           "memprof_imported": which.stdout.strip(),
                           "rc": p.returncode, "seconds": round(time.perf_counter() - t0, 1),
                           "stderr_tail": p.stderr[-2000:]}
    try:
        trace = json.loads(p.stdout)
    except json.JSONDecodeError:
        return rec
    rec["graph_sizes"] = trace.get("graph_sizes")
    rec["components"] = _graph_rows(trace)
    rec["phases"] = trace.get("phases")
    rec["notes"] = trace.get("notes")
    if snapshot is not None and snapshot.exists():
        rec["snapshot_pools"] = _pools(snapshot)
        rec["side_stream_blocks"] = _side_blocks(snapshot)
        snapshot.unlink()
    return rec


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--name", default="sglang-trace-graphs-h200.json")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # the GPU's name and total from a child process: a CUDA context held here would show in
    # each trace's device use
    probe = subprocess.run([sys.executable, "-c", "import json, torch; print(json.dumps("
                            "[torch.__version__, torch.version.cuda, "
                            "torch.cuda.get_device_name(), torch.cuda.mem_get_info()[1]]))"],
                           capture_output=True, text=True, check=True)
    version, cuda, gpu, total = json.loads(probe.stdout)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, check=False).stdout.strip()
    meta: dict[str, Any] = {"torch": version, "cuda": cuda, "gpu": gpu, "total_bytes": total,
                            "driver": smi, "runs": []}
    scratch = Path(tempfile.mkdtemp())
    for label, flags in RUNS.items():
        if args.only and label not in args.only:
            continue
        run = {"label": label,
               "before": _run(args.before, flags, None, args.timeout),
               "after": _run(args.after, flags, scratch / f"{label}.pickle", args.timeout)}
        meta["runs"].append(run)
        print(label, run["before"]["rc"], run["after"]["rc"], flush=True)
        (out / args.name).write_text(json.dumps(meta, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
